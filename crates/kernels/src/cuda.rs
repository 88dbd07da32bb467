//! Shared snippets of generated CUDA C++.
//!
//! The snippets are plain `&'static str` constants so that every generator
//! emits the same, reviewed helper definitions. All helpers are prefixed
//! `fm_` to stay out of the way of user code when a generated header is
//! pasted into a larger translation unit.

/// Helper definitions every generated probe starts with.
///
/// - `fm_bf16`: a bf16 value as its raw 16-bit pattern (`unsigned short`);
///   NVRTC has no `cuda_bf16.h` without include paths, and the probes only
///   need bit patterns.
/// - `fm_bf16_from_exact(float)`: the bf16 bit pattern of a float that is
///   exactly representable in bf16 (the low 16 bits of the float are zero, so
///   truncation is exact). Every probe input is chosen to satisfy this.
/// - `fm_pack_bf16x2(lo, hi)`: two bf16 patterns in one 32-bit register, the
///   lower-indexed element in the low half (the convention of the PTX matrix
///   fragments).
/// - `fm_smem_u32(ptr)`: the 32-bit shared-state-space address of a generic
///   pointer into shared memory (what wgmma descriptors and `ld.shared` want).
/// - `fm_fence_operand(float&)`: an empty asm statement that pins a register
///   value in place, so the compiler cannot move reads or writes of an
///   accumulator across asynchronous wgmma instructions (CUTLASS calls this
///   `warpgroup_fence_operand`).
pub const PRELUDE: &str = concat!(
    r#"// ---- fragmask prelude (header-free: no include directives, NVRTC-friendly) ----
typedef unsigned short fm_bf16;   // bf16 as its raw bit pattern

// bf16 bit pattern of a float that is exactly representable in bf16.
// The low 16 bits of such a float are zero, so dropping them is exact.
__device__ __forceinline__ fm_bf16 fm_bf16_from_exact(float x) {
    unsigned bits;
    asm("mov.b32 %0, %1;" : "=r"(bits) : "f"(x));
    return (fm_bf16)(bits >> 16);
}

// Two bf16 values in one 32-bit register: `lo` in bits 0..15, `hi` in 16..31.
__device__ __forceinline__ unsigned fm_pack_bf16x2(fm_bf16 lo, fm_bf16 hi) {
    return (unsigned)lo | ((unsigned)hi << 16);
}

"#,
    crate::family::ptx::smem_u32_text!("fm_smem_u32"),
    r#"// Keep the compiler from moving accesses of `reg` across async wgmma code.
__device__ __forceinline__ void fm_fence_operand(float& reg) {
    asm volatile("" : "+f"(reg) :: "memory");
}
// ---- end of prelude ----
"#
);

#[cfg(test)]
mod tests {
    use super::PRELUDE;

    #[test]
    fn prelude_is_header_free() {
        assert!(!PRELUDE
            .lines()
            .any(|l| l.trim_start().starts_with("#include")));
        assert!(PRELUDE.contains("typedef unsigned short fm_bf16"));
    }
}
