//! Hardware probe kernels for the tensor-core fragment layouts.
//!
//! A probe multiplies crafted matrices whose products *encode coordinates*,
//! then every thread writes its raw result registers to global memory in
//! register order. Decoding those values on the host tells, for every thread
//! and register, which matrix element the hardware put there: the truth that
//! the layout crates are checked against.
//!
//! - [`wgmma_accumulator_probe`] / [`WgmmaProbe`]: SM90
//!   `wgmma.mma_async m64nNk16 .f32.bf16.bf16` accumulator (needs `sm_90a`).
//! - [`mma_sync_probe`] / [`MmaSyncProbe`]: SM80
//!   `mma.sync m16n8k16 .row.col .f32.bf16.bf16.f32` C, A and B fragments
//!   (runs on sm_80 and later, including sm_90a).
//!
//! All input values are small integers or powers of two, exactly
//! representable in bf16, and every product and sum stays below 2^24, so the
//! f32 results are exact and decode without rounding questions.

mod mma_sync;
mod wgmma;

pub use mma_sync::{
    mma_sync_probe, MmaSyncProbe, MmaSyncSection, MMA_SYNC_PROBE_KERNEL, MMA_SYNC_PROBE_OUT_LEN,
    MMA_SYNC_PROBE_THREADS,
};
pub use wgmma::{
    wgmma_accumulator_probe, WgmmaCoord, WgmmaProbe, WGMMA_K_LBO_BYTES, WGMMA_MAX_WARPGROUPS,
    WGMMA_MN_SBO_BYTES, WGMMA_PROBE_KERNEL, WGMMA_ROW_SCALE, WGMMA_WARPGROUP_SCALE,
};

/// Decodes an f32 that must hold an exact non-negative integer below 2^24.
///
/// Returns `None` for NaN, infinities, negatives, fractions and values too
/// large to be exact; probe results that are not such integers are garbage
/// by construction.
pub fn exact_u32(value: f32) -> Option<u32> {
    if !(0.0..16_777_216.0).contains(&value) || value.fract() != 0.0 {
        return None;
    }
    // The checks above make the conversion exact and in range.
    Some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::exact_u32;

    #[test]
    fn exact_u32_accepts_only_exact_integers() {
        assert_eq!(exact_u32(0.0), Some(0));
        assert_eq!(exact_u32(16383.0), Some(16383));
        assert_eq!(exact_u32(1.5), None);
        assert_eq!(exact_u32(-1.0), None);
        assert_eq!(exact_u32(f32::NAN), None);
        assert_eq!(exact_u32(f32::INFINITY), None);
        assert_eq!(exact_u32(16_777_216.0), None);
    }
}
