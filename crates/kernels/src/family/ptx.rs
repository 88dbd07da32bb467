//! PTX helpers of the family, defined once and used by every kernel that needs them
//! (docs/architecture.md §3, "PTX helpers"): mbarriers, TMA tile loads, wgmma fences,
//! descriptors and calls, named barriers, and the fast exp2/log2; cp.async, clusters,
//! bulk reductions and mma.sync for the kernels that use them. Each constant or
//! emitter is pasted into a kernel's source at most once; unused `__forceinline__`
//! functions cost nothing in the compiled kernel.

use std::fmt::Write as _;

/// `fm_tensor_map`, cuTensorMapEncodeTiled's opaque 128-byte `CUtensorMap` as a
/// `__grid_constant__` kernel parameter, and `fm_prefetch_tensormap` (PTX ISA 9.7.9.26
/// `prefetch.tensormap`): what [`TMA_WGMMA`]'s loads take.
pub const TENSOR_MAP: &str = r#"// cuTensorMapEncodeTiled's opaque 128-byte CUtensorMap, passed as a __grid_constant__ kernel parameter.
struct __align__(64) fm_tensor_map { unsigned long long opaque[16]; };
// Fetches a tensor map into the cache before its first TMA load (PTX ISA prefetch.tensormap).
__device__ __forceinline__ void fm_prefetch_tensormap(const fm_tensor_map* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(map) : "memory");
}
"#;

/// mbarrier (PTX ISA 9.7.12.15), TMA tile loads (9.7.9.25 cp.async.bulk.tensor), wgmma
/// fences and the shared-memory descriptor (9.7.15): the helpers of the TMA + wgmma
/// kernels (the forward and the backward). Needs [`TENSOR_MAP`] first.
pub const TMA_WGMMA: &str = r#"// ---- PTX helpers: mbarrier, TMA, wgmma (PTX ISA 9.7.12.15 mbarrier, 9.7.9.25 cp.async.bulk.tensor, 9.7.15 wgmma) ----
__device__ __forceinline__ void fm_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fm_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void fm_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Releases stage `stage` of STAGES barriers 8 bytes apart from `bar0` by one predicated `release` per
// stage at its constant address. With the address computed from `stage`, a step loop's back-edge
// waited until the arrive, queued behind the step's shared-memory traffic, had read that register,
// which the next step rewrites (docs/backward.md, "The stage release").
template <unsigned STAGES, typename Release>
__device__ __forceinline__ void fm_release_stage(Release release, unsigned bar0, unsigned stage) {
#pragma unroll
    for (unsigned s = 0; s < STAGES; ++s)
        if (stage == s) release(bar0 + 8u * s);
}
// Blocks until the phase with parity `parity` of the barrier has completed. The suspend-time
// hint (ns; CUTLASS's ClusterBarrier::wait uses the same) lets try_wait suspend the thread until
// the phase completes instead of returning at once: a waiting producer warp then stops taking
// issue slots from the consumer warps of its SM sub-partition (without it, Nsight Compute counted
// about 100 try_wait iterations per producer wait on an H100).
__device__ __forceinline__ void fm_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "FM_WAIT_LOOP:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n"
        "@!done bra FM_WAIT_LOOP;\n"
        "}\n" :: "r"(bar), "r"(parity), "r"(0x989680u) : "memory");
}
// This thread's warpgroup, broadcast from lane 0 so the compiler knows it is warp-uniform:
// addresses derived from it (per-warpgroup operand bases, wgmma descriptors) then live in
// uniform registers instead of being moved there (R2UR) before every wgmma (CUTLASS's
// canonical_warp_group_idx).
__device__ __forceinline__ unsigned fm_warpgroup_index() {
    return __shfl_sync(0xffffffffu, threadIdx.x / 128u, 0);
}
// 4-D tiled TMA load (coordinates innermost first: d, row, head, batch) completing on `bar`.
__device__ __forceinline__ void fm_tma_load_4d(unsigned dst, const fm_tensor_map* map, unsigned bar,
                                               int c0, int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6}], [%2];"
        :: "r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void fm_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void fm_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void fm_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void fm_fence_array(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N> __device__ __forceinline__ void fm_fence_array(unsigned (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}

// wgmma shared-memory descriptor (PTX ISA 9.7.15.5.1 "Matrix Descriptor Format"): the constant
// bits (LBO, SBO, swizzle; from gmma-frag's GmmaDescriptor, below) plus the start address >> 4 in
// bits 0-13. fm_desc_start computes an operand's start field once; fm_desc_at(start, offset16, bits)
// is the descriptor of the slice offset16 * 16 bytes further: shared-memory addresses stay below
// 2^18, so start + offset16 fits bits 0-13, where the constant bits are zero: the descriptor is
// (constant bits | start), computed once per operand, plus offset16 as one 64-bit add (UIADD3.64
// with a warp-uniform start, fm_warpgroup_index; FlashAttention-4's SASS does the same).
__device__ __forceinline__ unsigned fm_desc_start(unsigned addr) {
    return (addr & 0x3FFFFu) >> 4;
}
__device__ __forceinline__ unsigned long long fm_desc_at(unsigned start, unsigned offset16, unsigned long long bits) {
    return (bits | (unsigned long long)start) + (unsigned long long)offset16;
}
// The whole descriptor of the operand at addr (constant bits | start field): a kernel that computes it once,
// outside its loop, adds a slice's offset16 with one 64-bit add per wgmma.
__device__ __forceinline__ unsigned long long fm_desc(unsigned addr, unsigned long long bits) {
    return bits | (unsigned long long)fm_desc_start(addr);
}
"#;

/// `fm_exp2` / `fm_log2`: base-2 exponential and logarithm on the SFU
/// (PTX ISA 9.7.4.x `ex2.approx.ftz.f32`, `lg2.approx.ftz.f32`), what every online
/// softmax of the family uses.
pub const MATH: &str = r#"// ---- fast base-2 exp and log (PTX ISA ex2.approx.ftz.f32, lg2.approx.ftz.f32) ----
__device__ __forceinline__ float fm_exp2(float x) {
    float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
__device__ __forceinline__ float fm_log2(float x) {
    float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
"#;

/// Programmatic dependent launch (PTX ISA 9.7.13.11 `griddepcontrol`):
/// `fm_launch_dependents()` lets the next grid of the stream launch now,
/// `fm_wait_prior_grids()` waits until the previous grid has completed and its writes are
/// visible (both no-ops without the launch attribute). Every kernel of the family and the
/// combine kernels use them.
pub const GRID_DEPENDENCY: &str = r#"// ---- programmatic dependent launch (PTX ISA 9.7.13.11 griddepcontrol) ----
__device__ __forceinline__ void fm_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void fm_wait_prior_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
"#;

/// `FM_NEG_INF`: the float −∞ (bits `0xff800000`), what a masked score becomes and the
/// max of an empty row.
pub const NEG_INF: &str = "#define FM_NEG_INF (__int_as_float(0xff800000u))";

/// Named barriers (PTX ISA 9.7.13.1 `bar.sync` / `bar.arrive`) over a compile-time
/// thread count: `fm_named_sync<THREADS>(id)`, `fm_named_arrive<THREADS>(id)`. The count
/// is an immediate, as the instruction wants it. `bar.sync` is `barrier.sync.aligned`:
/// every thread reaching the barrier must execute the same instruction, so a barrier that
/// warps reach from different branches (the paired backward's own and skipped steps) is
/// `fm_named_sync_divergent<THREADS>(id)`, `barrier.sync` without `.aligned`
/// (compute-sanitizer synccheck reports the aligned form there).
pub const NAMED_BARRIERS: &str = r#"// ---- named barriers (PTX ISA 9.7.13.1 bar.sync / bar.arrive), THREADS an immediate ----
template <int THREADS> __device__ __forceinline__ void fm_named_sync(int id) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "n"(THREADS) : "memory");
}
// barrier.sync without .aligned: the threads may reach barrier `id` from different instructions.
template <int THREADS> __device__ __forceinline__ void fm_named_sync_divergent(int id) {
    asm volatile("barrier.sync %0, %1;" :: "r"(id), "n"(THREADS) : "memory");
}
template <int THREADS> __device__ __forceinline__ void fm_named_arrive(int id) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "n"(THREADS) : "memory");
}
"#;

/// `fm_smem_u32(ptr)`: the 32-bit shared-state-space address of a generic pointer into
/// shared memory (PTX ISA 9.7.8.6 `cvta`), what `ld.shared`, `cp.async` and wgmma
/// descriptors take. A macro so that [`crate::cuda::PRELUDE`] and the apply prelude
/// (`fm_apply_smem_u32`) hold the same text.
macro_rules! smem_u32_text {
    ($name:literal) => {
        concat!(
            "// 32-bit shared-memory address of a generic pointer that points into shared memory.\n",
            "__device__ __forceinline__ unsigned ",
            $name,
            r#"(const void* ptr) {
    unsigned addr;
    asm("{ .reg .u64 a64;\n\t"
        "cvta.to.shared.u64 a64, %1;\n\t"
        "cvt.u32.u64 %0, a64; }"
        : "=r"(addr) : "l"(ptr));
    return addr;
}
"#
        )
    };
}
pub(crate) use smem_u32_text;

/// `fm_smem_u32(ptr)`: the 32-bit shared-memory address of a generic pointer (the text
/// `cuda::PRELUDE` holds too).
pub const SMEM_U32: &str = smem_u32_text!("fm_smem_u32");

/// cp.async (PTX ISA 9.7.9.25): 16-byte copies with zero-fill, 4-byte copies, and the
/// group commit / wait, for kernels that stream K/V without TMA (decode).
pub const CP_ASYNC: &str = r#"// cp.async (PTX ISA 9.7.9.25): 16 bytes global -> shared, zero-filled past `bytes`, L1 bypassed.
__device__ __forceinline__ void fm_cp_async16(unsigned dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
// cp.async of one 4-byte mask word (cp.async.ca: .cg takes only 16 bytes).
__device__ __forceinline__ void fm_cp_async4(unsigned dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void fm_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void fm_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
"#;

/// Distributed shared memory (PTX ISA 9.7.9.13 `mapa`, `ld.shared::cluster`) and the
/// cluster barrier (9.7.13.4), for merges across the CTAs of a cluster (decode).
pub const CLUSTER: &str = r#"// Distributed shared memory (PTX ISA 9.7.9.13 mapa, 9.7.9.8 ld.shared::cluster): the
// address of a shared variable in CTA `rank` of the cluster, and loads from it.
__device__ __forceinline__ unsigned fm_mapa(unsigned addr, int rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ float fm_ld_cluster_f32(unsigned addr) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ float4 fm_ld_cluster_f32x4(unsigned addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
    return v;
}
// Every thread of every CTA of the cluster (PTX ISA 9.7.13.4 barrier.cluster): writes to
// shared memory before it are visible to the cluster's reads after it.
__device__ __forceinline__ void fm_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
"#;

/// `fm_sw128(b)` (the 128-byte swizzle of a byte offset inside a 1024-byte-aligned tile,
/// gmma-frag `SmemSwizzle::B128`) and `fm_stmatrix_x4` (PTX ISA 9.7.14.5.16 `stmatrix`):
/// register-fragment stores into swizzled tiles (the backward's dSᵀ, the forward's O).
/// Each caller checks its fragment with `FragmentMap::check_stmatrix` and its tile's bytes
/// against the layout.
pub const STMATRIX_SW128: &str = r#"// 128-byte swizzle of a byte offset inside a 1024-byte-aligned tile (gmma-frag SmemSwizzle::B128, Sw<3,4,3>
// on bytes; each kernel's generator checks it against the tile's layout).
__device__ __forceinline__ unsigned fm_sw128(unsigned b) { return b ^ (((b >> 7) & 7u) << 4); }
// Four 8x8 b16 matrices (one register each) of a warp into shared memory: lane 8j + r gives the address of
// row r of matrix j (PTX ISA 9.7.14.5.16 stmatrix.sync.aligned.m8n8.x4).
__device__ __forceinline__ void fm_stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
"#;

/// `fm_lds128(addr)`: one 16-byte shared-memory load (PTX ISA 9.7.9.8 `ld.shared.v4`).
pub const LDS128: &str = r#"__device__ __forceinline__ uint4 fm_lds128(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
"#;

/// `fm_lds64_f2`: one 8-byte shared-memory load of two floats (`ld.shared.v2.f32`), so that
/// a pair of adjacent columns is one `LDS.64` (plain `float2` reads are split into two scalar
/// loads when only their components are used). Volatile: it stays after the waits before it.
pub const LDS64: &str = r#"__device__ __forceinline__ float2 fm_lds64_f2(unsigned addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}
"#;

/// `fm_ldmatrix_x4`: four 8x8 b16 matrices from shared memory (PTX ISA 9.7.14.5.15
/// `ldmatrix.sync.aligned.m8n8.x4`): lane `8j + r` gives the address of row r of matrix j,
/// and register j of thread t receives matrix j's row t / 4, columns 2 (t % 4) and + 1.
pub const LDMATRIX_X4: &str = r#"__device__ __forceinline__ void fm_ldmatrix_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
"#;

/// Reductions into global memory: `red.global.add.v2.f32` and `.v4.f32` (PTX ISA 9.7.13.6), the TMA bulk
/// reduction `cp.reduce.async.bulk` (9.7.9.25.4) with its group commit and waits, and an
/// acquire load (9.7.9.8 `ld.acquire`) for semaphores (the backward's dQ).
pub const GLOBAL_REDUCE: &str = r#"// f32x2 reduction into global memory (PTX ISA 9.7.13.6 red, vector form, sm_90).
__device__ __forceinline__ void fm_red_add2(float* dst, float a, float b) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" :: "l"(dst), "f"(a), "f"(b) : "memory");
}
// f32x4 reduction into global memory (the same instruction's .v4 form; 16-byte aligned).
__device__ __forceinline__ void fm_red_add4(float* dst, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(dst), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
// TMA bulk reduction shared -> global (PTX ISA 9.7.9.25.4 cp.reduce.async.bulk), its group commit and waits.
__device__ __forceinline__ void fm_bulk_reduce_add(float* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void fm_bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void fm_bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ int fm_ld_acquire(const int* p) {
    int v; asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ int fm_ld_relaxed(const int* p) {
    int v; asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
// Release add: the writes this thread has seen (its own, and through a barrier every other thread's) are visible
// at GPU scope to whoever acquires the new value (PTX ISA 8.10 memory model; CUTLASS's GenericBarrier::arrive_inc).
__device__ __forceinline__ void fm_red_release_add(int* p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
"#;

/// `fm_mma_16816(c, a0..a3, b0, b1)`: `mma.sync.m16n8k16` with f32 accumulate in place and
/// 16-bit operands of PTX type `ty` (`bf16` or `f16`).
pub fn mma_sync_16816(ty: &str) -> String {
    format!(
        "// mma.sync.m16n8k16 (PTX ISA 9.7.14.5.8), fp32 accumulate in place: A 16x16 row-major,\n\
         // B 16x8 column-major, fragments of docs/architecture.md fact 4.\n\
         __device__ __forceinline__ void fm_mma_16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {{\n\
         \x20   asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\\n\"\n\
         \x20                : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n\
         \x20                : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n\
         }}\n"
    )
}

/// `fm_act2(lo, hi)`: two floats rounded to one register of two 16-bit values of PTX
/// type `ty` (`bf16` or `f16`), `lo` in bits 0-15 (`cvt.rn.{ty}x2.f32 d, a, b` puts `a`
/// in the upper half; PTX ISA 9.7.9.21).
pub fn act2(ty: &str) -> String {
    format!(
        "// {ty}x2 of two floats, `lo` in bits 0-15 (cvt.rn.{ty}x2.f32 d, a, b puts a in the upper half;\n\
         // PTX ISA 9.7.9.21).\n\
         __device__ __forceinline__ unsigned fm_act2(float lo, float hi) {{\n\
         \x20   unsigned r; asm(\"cvt.rn.{ty}x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r;\n\
         }}\n"
    )
}

/// `fm_wgmma_m64n{n}k16_ss`: D (+)= A(smem) * B(smem), both K-major.
pub fn wgmma_ss(n: u32, ty: &str) -> String {
    wgmma_ss_trans(n, ty, false, false)
}

/// The name of [`wgmma_ss_trans`]'s function: `fm_wgmma_m64n{n}k16_ss`, with `_ta`/`_tb`
/// where A or B is MN-major.
pub fn wgmma_ss_name(n: u32, trans_a: bool, trans_b: bool) -> String {
    format!(
        "fm_wgmma_m64n{n}k16_ss{}{}",
        if trans_a { "_ta" } else { "" },
        if trans_b { "_tb" } else { "" }
    )
}

/// D (+)= A(smem) * B(smem); `trans_a` / `trans_b` read that operand MN-major
/// (imm-trans 1, 16-bit types only).
pub fn wgmma_ss_trans(n: u32, ty: &str, trans_a: bool, trans_b: bool) -> String {
    let regs = n / 2;
    let name = wgmma_ss_name(n, trans_a, trans_b);
    let (ta, tb) = (u32::from(trans_a), u32::from(trans_b));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// D[64x{n}] (+)= A[64x16] * B[16x{n}], A and B from shared memory (imm-trans-a {ta}, imm-trans-b {tb}).\n\
         // scale_d = 0 overwrites D. PTX ISA 9.7.15.5 wgmma.mma_async.\n\
         __device__ __forceinline__ void {name}(float (&d)[{regs}], unsigned long long desc_a,\n\
         \x20                                                    unsigned long long desc_b, int scale_d) {{\n\
         \x20   asm volatile(\n\
         \x20       \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{sd}, 0;\\n\"\n\
         \x20       \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} \"",
        sd = regs + 2
    );
    push_reg_list(&mut s, regs);
    let _ = writeln!(
        s,
        "        \" %{a}, %{b}, p, 1, 1, {ta}, {tb};\\n}}\\n\"",
        a = regs,
        b = regs + 1
    );
    push_operands(&mut s, regs);
    s.push_str("\n        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n}\n");
    s
}

/// The four A registers of k-step `j` of an RS wgmma whose A fragment is the array `name`
/// (registers `4j .. 4j + 3`, docs/architecture.md fact 5): `name[4j], .., name[4j+3]`.
pub fn rs_a_registers(name: &str, j: u32) -> String {
    (0..4)
        .map(|r| format!("{name}[{}]", 4 * j + r))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `fm_wgmma_m64n{n}k16_rs`: D += A(registers) * B(smem), B MN-major (imm-trans-b 1).
pub fn wgmma_rs(n: u32, ty: &str) -> String {
    wgmma_rs_with(n, ty, true)
}

/// `fm_wgmma_m64n{n}k16_rs_kb`: D (+)= A(registers) * B(smem), B K-major (imm-trans-b 0),
/// with a `scale_d` argument (0 overwrites D), for a GEMM whose every k-step takes A from
/// registers.
pub fn wgmma_rs_k_major(n: u32, ty: &str) -> String {
    wgmma_rs_with(n, ty, false)
}

fn wgmma_rs_with(n: u32, ty: &str, trans_b: bool) -> String {
    let regs = n / 2;
    let mut s = String::new();
    // The K-major form's `scale_d` is operand regs + 5 (after D, a0..a3 and desc_b).
    let (name, b_major, scale_arg, pred, scale_d) = if trans_b {
        ("rs", "MN-major (imm-trans-b = 1)", "", String::new(), "1")
    } else {
        (
            "rs_kb",
            "K-major (imm-trans-b = 0); scale_d = 0 overwrites D",
            ", int scale_d",
            format!("\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;", regs + 5),
            "p",
        )
    };
    let _ = writeln!(
        s,
        "// D[64x{n}] += A[64x16] * B[16x{n}], A from registers (four {ty}x2 per thread),\n\
         // B from shared memory {b_major}. PTX ISA 9.7.15.5 wgmma.mma_async.\n\
         __device__ __forceinline__ void fm_wgmma_m64n{n}k16_{name}(float (&d)[{regs}], unsigned a0, unsigned a1,\n\
         \x20                                                    unsigned a2, unsigned a3, unsigned long long desc_b{scale_arg}) {{\n\
         \x20   asm volatile(\n\
         \x20       \"{{{pred}\\n\"\n\
         \x20       \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} \""
    );
    push_reg_list(&mut s, regs);
    let _ = writeln!(
        s,
        "        \" {{%{a0}, %{a1}, %{a2}, %{a3}}}, %{b}, {scale_d}, 1, 1, {tb};\\n}}\\n\"",
        a0 = regs,
        a1 = regs + 1,
        a2 = regs + 2,
        a3 = regs + 3,
        b = regs + 4,
        tb = u32::from(trans_b)
    );
    push_operands(&mut s, regs);
    if trans_b {
        s.push_str("\n        : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(desc_b));\n}\n");
    } else {
        s.push_str(
            "\n        : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(desc_b), \"r\"(scale_d));\n}\n",
        );
    }
    s
}

fn push_reg_list(s: &mut String, regs: u32) {
    s.push_str("\n        \"{");
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
            if i % 16 == 0 {
                s.push_str("\"\n        \"");
            }
        }
        let _ = write!(s, "%{i}");
    }
    s.push_str("},\"\n");
}

fn push_operands(s: &mut String, regs: u32) {
    s.push_str("        : ");
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
            if i % 8 == 0 {
                s.push_str("\n          ");
            }
        }
        let _ = write!(s, "\"+f\"(d[{i}])");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The K-major RS wgmma's `scale_d` predicate reads operand `regs + 5`: the `scale_d`
    /// input after D's `n / 2` registers, a0..a3 and `desc_b`.
    #[test]
    fn rs_k_major_predicate_names_the_scale_d_operand() {
        for n in [64u32, 128, 256] {
            let text = wgmma_rs_k_major(n, "bf16");
            let operand = n / 2 + 5;
            assert!(
                text.contains(&format!("setp.ne.b32 p, %{operand}, 0;")),
                "n={n}"
            );
            assert!(text.contains("\"r\"(scale_d)"), "n={n}");
            assert!(!text.contains("%SD"), "n={n}");
            // The MN-major form takes no predicate and always accumulates.
            let rs = wgmma_rs(n, "bf16");
            assert!(!rs.contains("setp.ne.b32"), "n={n}");
        }
    }
}
