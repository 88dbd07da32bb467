//! Kernels built around the generated apply functions: SASS cost kernels, the GPU
//! check kernel and the benchmark kernels.
//!
//! Every kernel here is `extern "C"`, header-free, and compiles for `sm_90a`.

use std::fmt::Write as _;

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_masks::Encoding;

use super::cuda::{emit_functions, function_names, ident, APPLY_PRELUDE};
use super::program::{ApplyProgram, Space};
use super::CodegenError;

/// What the loop body of a cost kernel does per tile, besides keeping the accumulator
/// live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostVariant {
    /// Nothing: the baseline for FragmentNative (tile pointer only).
    None,
    /// Stage the encoding's tile words into shared memory (cp.async + barrier), apply
    /// nothing: the baseline for the shared-memory encodings.
    Staged(Encoding),
    /// Stage if the encoding reads shared memory, then apply it.
    Apply(Encoding),
}

impl CostVariant {
    /// The kernel's name, e.g. `fragmask_cost_apply_fragment_native`.
    pub fn kernel_name(self) -> String {
        match self {
            CostVariant::None => "fragmask_cost_none".to_string(),
            CostVariant::Staged(e) => format!("fragmask_cost_staged_{}", ident(e)),
            CostVariant::Apply(e) => format!("fragmask_cost_apply_{}", ident(e)),
        }
    }

    /// The variant to subtract to isolate the apply function's cost.
    pub fn baseline(self) -> CostVariant {
        match self {
            CostVariant::Apply(e) if e != Encoding::FragmentNative => CostVariant::Staged(e),
            _ => CostVariant::None,
        }
    }
}

fn programs(acc: &TiledAccumulator) -> Result<Vec<ApplyProgram>, CodegenError> {
    Encoding::ALL
        .iter()
        .map(|&e| ApplyProgram::new(acc, e))
        .collect()
}

/// Helpers of the measurement kernels.
const KERNEL_HELPERS: &str = r#"// Keep the compiler from moving or merging accesses of `reg` across this point.
__device__ __forceinline__ void fm_keep(float& reg) { asm volatile("" : "+f"(reg) :: "memory"); }
// Asynchronous 16-byte (or 4-byte) global -> shared copy (cp.async, sm_80+).
__device__ __forceinline__ void fm_cp_async16(unsigned smem_addr, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_addr), "l"(gmem) : "memory");
}
__device__ __forceinline__ void fm_cp_async4(unsigned smem_addr, const void* gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(smem_addr), "l"(gmem) : "memory");
}
__device__ __forceinline__ void fm_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void fm_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
"#;

/// The copy of one tile's words into shared memory by all threads (cp.async), as a
/// statement block. `smem` is a 32-bit shared address, `src` a `const unsigned*`.
/// Unrolled: `ceil(chunks / threads)` copies per thread, the last one guarded when the
/// threads do not divide the chunks.
fn stage_statement(words_per_tile: usize, threads: u32, smem: &str, src: &str) -> String {
    stage_statement_by(words_per_tile, threads, "thread", smem, src)
}

/// [`stage_statement`] with the copying thread's index named `thread_var`.
fn stage_statement_by(
    words_per_tile: usize,
    threads: u32,
    thread_var: &str,
    smem: &str,
    src: &str,
) -> String {
    let (chunks, bytes, words, copy) = if words_per_tile % 4 == 0 {
        (words_per_tile as u32 / 4, 16, 4, "fm_cp_async16")
    } else {
        (words_per_tile as u32, 4, 1, "fm_cp_async4")
    };
    let mut s = String::new();
    for k in 0..chunks.div_ceil(threads) {
        let c = if k == 0 {
            thread_var.to_string()
        } else {
            format!("{thread_var} + {}u", k * threads)
        };
        let stmt = format!("{copy}({smem} + ({c}) * {bytes}u, {src} + ({c}) * {words}u);");
        if (k + 1) * threads > chunks {
            let _ = write!(s, "if ({c} < {chunks}u) {{ {stmt} }} ");
        } else {
            let _ = write!(s, "{stmt} ");
        }
    }
    s
}

/// One translation unit holding a cost kernel per variant in `variants`.
///
/// Each kernel, `(const float* acc_in, const unsigned* words, const int* tiles,
/// int num_tiles, float* out)`, keeps the thread's accumulator live in registers and,
/// in a loop (`#pragma unroll 1`) over `num_tiles` tiles, does its variant's work then
/// pins every accumulator value with an empty `asm volatile`. The apply function's cost
/// is the SASS loop body of `Apply(e)` minus that of `e`'s [`CostVariant::baseline`].
pub fn cost_source(
    acc: &TiledAccumulator,
    variants: &[CostVariant],
) -> Result<String, CodegenError> {
    let programs = programs(acc)?;
    let threads = acc.threads();
    let values = acc.values_per_thread();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// fragmask apply cost kernels: {}x{} tile, {} warpgroup(s). Generated; compile for sm_90a.",
        acc.block_m(),
        acc.block_n(),
        acc.warpgroups()
    );
    s.push_str(APPLY_PRELUDE);
    s.push_str(KERNEL_HELPERS);
    for p in &programs {
        s.push_str(&emit_functions(p));
    }
    for &variant in variants {
        let (staged, apply) = match variant {
            CostVariant::None => (None, None),
            CostVariant::Staged(e) => (Some(e), None),
            CostVariant::Apply(e) => {
                let p = &programs[Encoding::ALL.iter().position(|&x| x == e).unwrap_or(0)];
                ((p.space() == Space::Shared).then_some(e), Some(p))
            }
        };
        let smem_words = staged.map_or(0, |e| e.words_per_tile(acc));
        let _ = writeln!(
            s,
            "\nextern \"C\" __global__ void __launch_bounds__({threads}, 1) {name}(\n    \
             const float* __restrict__ acc_in, const unsigned* __restrict__ words,\n    \
             const int* __restrict__ tiles, int num_tiles, float* __restrict__ out)\n{{",
            name = variant.kernel_name()
        );
        if smem_words > 0 {
            let _ = writeln!(
                s,
                "    __shared__ __align__(16) unsigned smem_words[{smem_words}];\n    \
                 const unsigned smem_tile = fm_apply_smem_u32(smem_words);"
            );
        }
        let _ = writeln!(
            s,
            "    const unsigned thread = threadIdx.x;\n    float acc[{values}];\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ acc[v] = acc_in[thread * {values}u + v]; }}\n    \
             unsigned checksum = 0;\n\
             #pragma unroll 1\n    for (int i = 0; i < num_tiles; ++i) {{\n        \
             const int tile = tiles[i];\n        checksum += (unsigned)tile;  // every variant reads the tile index (kv_tile_offsets)"
        );
        if smem_words > 0 {
            let _ = writeln!(
                s,
                "        const unsigned* tile_words = words + (unsigned long long)tile * {smem_words}u;\n        \
                 {}\n        fm_cp_async_commit();\n        fm_cp_async_wait<0>();\n        __syncthreads();",
                stage_statement(smem_words, threads, "smem_tile", "tile_words")
            );
        }
        if let Some(p) = apply {
            let names = function_names(p.encoding());
            match p.space() {
                Space::Global => {
                    let _ = writeln!(s, "        {}(acc, words, tile, thread);", names.apply_tile);
                }
                Space::Shared => {
                    let _ = writeln!(s, "        {}(acc, smem_tile, thread);", names.apply);
                }
            }
        }
        if smem_words > 0 {
            s.push_str("        __syncthreads();\n");
        }
        let _ = writeln!(
            s,
            "#pragma unroll\n        for (int v = 0; v < {values}; ++v) {{ fm_keep(acc[v]); }}\n    }}\n\
             acc[0] += (float)checksum;\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ out[thread * {values}u + v] = acc[v]; }}\n}}"
        );
    }
    Ok(s)
}

/// Every cost variant: the two kinds of baseline and the three encodings.
pub fn all_cost_variants() -> Vec<CostVariant> {
    let mut v = vec![CostVariant::None];
    for e in Encoding::ALL {
        if e != Encoding::FragmentNative {
            v.push(CostVariant::Staged(e));
        }
        v.push(CostVariant::Apply(e));
    }
    v
}

/// Name of the check kernel of `encoding`.
pub fn check_kernel_name(encoding: Encoding) -> String {
    format!("fragmask_check_{}", ident(encoding))
}

/// One translation unit with a check kernel per encoding:
/// `(const unsigned* words, float* out)`, one block of `threads` threads per tile.
/// Block `b` applies tile `b`'s words to an accumulator holding `v + 1` at value `v`
/// and writes it to `out[(b * threads + thread) * values + v]`; a masked value reads
/// -inf. Shared-memory encodings first copy the tile into shared memory.
pub fn check_source(acc: &TiledAccumulator) -> Result<String, CodegenError> {
    let programs = programs(acc)?;
    let threads = acc.threads();
    let values = acc.values_per_thread();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// fragmask apply check kernels: {}x{} tile, {} warpgroup(s). Generated; compile for sm_90a.",
        acc.block_m(),
        acc.block_n(),
        acc.warpgroups()
    );
    s.push_str(APPLY_PRELUDE);
    for p in &programs {
        s.push_str(&emit_functions(p));
        let wpt = p.words_per_tile();
        let names = function_names(p.encoding());
        let _ = writeln!(
            s,
            "\nextern \"C\" __global__ void __launch_bounds__({threads}) {name}(\n    \
             const unsigned* __restrict__ words, float* __restrict__ out)\n{{\n    \
             const unsigned thread = threadIdx.x;\n    \
             const unsigned* tile_words = words + (unsigned long long)blockIdx.x * {wpt}u;\n    \
             float acc[{values}];\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ acc[v] = (float)(v + 1); }}",
            name = check_kernel_name(p.encoding())
        );
        match p.space() {
            Space::Global => {
                let _ = writeln!(s, "    {}(acc, tile_words, thread);", names.apply);
            }
            Space::Shared => {
                let _ = writeln!(
                    s,
                    "    __shared__ __align__(16) unsigned smem_words[{wpt}];\n    \
                     for (unsigned i = thread; i < {wpt}u; i += {threads}u) {{ smem_words[i] = tile_words[i]; }}\n    \
                     __syncthreads();\n    {}(acc, fm_apply_smem_u32(smem_words), thread);",
                    names.apply
                );
            }
        }
        let _ = writeln!(
            s,
            "    float* dst = out + ((unsigned long long)blockIdx.x * {threads}u + thread) * {values}u;\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ dst[v] = acc[v]; }}\n}}"
        );
    }
    Ok(s)
}

/// A benchmark kernel: optionally a 128-deep QK^T wgmma per tile, optionally a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BenchVariant {
    /// The mask applied per tile, if any.
    pub encoding: Option<Encoding>,
    /// Whether each tile first computes `S += Q Kᵀ` (K = 128) with wgmma.
    pub wgmma: bool,
}

impl BenchVariant {
    /// The kernel's name, e.g. `fragmask_bench_wgmma_fragment_native`.
    pub fn kernel_name(self) -> String {
        format!(
            "fragmask_bench_{}_{}",
            if self.wgmma { "wgmma" } else { "apply" },
            self.encoding.map_or("none", ident)
        )
    }

    /// Every variant: {apply only, wgmma} × {no mask, each encoding}.
    pub fn all() -> Vec<BenchVariant> {
        let mut v = Vec::new();
        for wgmma in [false, true] {
            v.push(BenchVariant {
                encoding: None,
                wgmma,
            });
            for e in Encoding::ALL {
                v.push(BenchVariant {
                    encoding: Some(e),
                    wgmma,
                });
            }
        }
        v
    }
}

/// Head dimension (the K of `Q Kᵀ`) of the benchmark's wgmma tile.
pub const BENCH_HEAD_DIM: u32 = 128;
/// Shared-memory stages of the benchmark's staged encodings (prefetch distance 2).
pub const BENCH_STAGES: u32 = 3;

/// The `wgmma.mma_async m64nNk16` statement accumulating into `acc[0..N/2]` (scale-d 1).
fn wgmma_statement(n: u32, desc_a: &str, desc_b: &str) -> String {
    let regs = n / 2;
    let mut s = String::new();
    let _ = write!(
        s,
        "        asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n\"\n            \
         \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{",
        scale = regs + 2
    );
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "%{i}");
    }
    let _ = write!(
        s,
        "}}, %{}, %{}, p, 1, 1, 0, 0;\\n}}\\n\"\n            : ",
        regs,
        regs + 1
    );
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "\"+f\"(acc[{i}])");
    }
    let _ = writeln!(
        s,
        "\n            : \"l\"({desc_a}), \"l\"({desc_b}), \"r\"(1));"
    );
    s
}

/// One translation unit with every benchmark kernel of `variants`.
///
/// Each kernel, `(const unsigned* words, const int* tiles, int tiles_per_cta,
/// float* out)`, runs as one block of `threads` threads per SM and walks
/// `tiles_per_cta` tiles `tiles[blockIdx.x * tiles_per_cta + i]` with the thread's
/// accumulator live in registers. Per tile: the wgmma `S += Q Kᵀ` over K = 128 (8
/// `m64nNk16` per warpgroup, operands in shared memory) if asked, then the mask:
/// FragmentNative loaded from global two tiles ahead into registers; QuadLane and
/// RowMajor copied (cp.async) into one of three shared-memory stages two tiles ahead,
/// one barrier per tile. Each thread writes the sum of its accumulator to
/// `out[blockIdx.x * threads + thread]`.
///
/// The wgmma variants need MMA_M = MMA_N = 1 and no SwapAB (FlashAttention-3's
/// 128 × 128 with 2 warpgroups qualifies).
pub fn bench_source(
    acc: &TiledAccumulator,
    variants: &[BenchVariant],
) -> Result<String, CodegenError> {
    if variants.iter().any(|v| v.wgmma) && (acc.mma_m() != 1 || acc.mma_n() != 1 || acc.swap_ab()) {
        return Err(CodegenError::Unsupported(format!(
            "the wgmma benchmark needs one 64 x {} atom per warpgroup without SwapAB",
            acc.block_n()
        )));
    }
    let programs = programs(acc)?;
    let threads = acc.threads();
    let values = acc.values_per_thread();
    let n = acc.block_n();
    let k_rows = n; // rows of the K operand (keys)
    let slab_bytes = k_rows * 16 * 2; // one K-major 16-wide slab of K
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// fragmask apply benchmark kernels: {}x{} tile, {} warpgroup(s). Generated; compile for sm_90a.",
        acc.block_m(),
        n,
        acc.warpgroups()
    );
    s.push_str(APPLY_PRELUDE);
    s.push_str(KERNEL_HELPERS);
    for p in &programs {
        s.push_str(&emit_functions(p));
    }
    let _ = writeln!(
        s,
        r#"
// wgmma operands: K-major, no swizzle (LBO 128 B between the two K core matrices, SBO 256 B
// between 8-row core-matrix groups); one {slab_bytes}-byte slab per 16 of K. Q is the first 64
// rows of each slab (its content does not matter for timing).
__device__ __forceinline__ unsigned long long fm_bench_desc(unsigned smem_addr) {{
    return (unsigned long long)((smem_addr >> 4) & 0x3FFFu)
         | ((unsigned long long)(128u >> 4) << 16)
         | ((unsigned long long)(256u >> 4) << 32);
}}
"#
    );
    for &variant in variants {
        let program = variant
            .encoding
            .map(|e| &programs[Encoding::ALL.iter().position(|&x| x == e).unwrap_or(0)]);
        let wpt = program.map_or(0, |p| p.words_per_tile());
        let staged = program.is_some_and(|p| p.space() == Space::Shared);
        let global = program.is_some_and(|p| p.space() == Space::Global);
        let _ = writeln!(
            s,
            "\nextern \"C\" __global__ void __launch_bounds__({threads}, 1) {name}(\n    \
             const unsigned* __restrict__ words, const int* __restrict__ tiles, int tiles_per_cta,\n    \
             float* __restrict__ out)\n{{\n    const unsigned thread = threadIdx.x;\n    \
             const int* my_tiles = tiles + (unsigned long long)blockIdx.x * tiles_per_cta;\n    \
             const int last = tiles_per_cta - 1;\n    (void)my_tiles; (void)last;\n    \
             float acc[{values}];\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ acc[v] = (float)thread * 1e-3f + (float)v; }}",
            name = variant.kernel_name()
        );
        if variant.wgmma {
            let elems = k_rows * BENCH_HEAD_DIM;
            let _ = writeln!(
                s,
                "    __shared__ __align__(128) unsigned short smem_k[{elems}];\n    \
                 for (unsigned i = thread; i < {elems}u; i += {threads}u) {{\n        \
                 unsigned h = i * 2654435761u; h ^= h >> 15;\n        \
                 smem_k[i] = (unsigned short)(__float_as_uint((float)(int)(h & 255u) * (1.0f / 256.0f) - 0.5f) >> 16);\n    }}\n    \
                 asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n    __syncthreads();\n    \
                 const unsigned long long desc0 = fm_bench_desc(fm_apply_smem_u32(smem_k));"
            );
        }
        // Staging: each warpgroup copies the share of the tile its threads read and waits on
        // a named barrier of its own (ids 1..=W), so the warpgroups never wait for each
        // other, as with FlashAttention-3's per-stage barriers; a CTA-wide barrier when the
        // shares are not contiguous.
        let group = program.and_then(|p| p.group_words(128));
        let (stage_stmt, barrier) = match group {
            Some(size) => (
                format!(
                    "{{ const unsigned wg_thread = thread % 128u; const unsigned share = (thread / 128u) * {size}u;\n          {} }}",
                    stage_statement_by(size as usize, 128, "wg_thread", "(smem_tile + share * 4u)", "(src + share)")
                ),
                "asm volatile(\"bar.sync %0, 128;\" :: \"r\"(thread / 128u + 1u) : \"memory\");",
            ),
            None => (
                stage_statement(wpt, threads, "smem_tile", "src"),
                "__syncthreads();",
            ),
        };
        if staged {
            let p = program.map(|p| p.words_per_tile()).unwrap_or(0);
            let _ = writeln!(
                s,
                "    __shared__ __align__(16) unsigned smem_words[{stages}][{p}];\n    \
                 const unsigned smem_base = fm_apply_smem_u32(smem_words);\n    \
                 {{ const unsigned* src = words + (unsigned long long)my_tiles[0] * {wpt}u; const unsigned smem_tile = smem_base;\n      \
                 {stage_stmt} fm_cp_async_commit(); }}\n    \
                 {{ const unsigned* src = words + (unsigned long long)my_tiles[last > 0 ? 1 : 0] * {wpt}u; const unsigned smem_tile = smem_base + {bytes}u;\n      \
                 {stage_stmt} fm_cp_async_commit(); }}\n    \
                 unsigned read_stage = 0, write_stage = 2;",
                stages = BENCH_STAGES,
                bytes = wpt * 4,
            );
        }
        if global {
            let p = program.map(|p| p.loaded_words()).unwrap_or(0);
            let names = function_names(variant.encoding.unwrap_or_default());
            let _ = writeln!(
                s,
                "    unsigned bits_a[{p}], bits_b[{p}];\n    \
                 {load}(bits_a, words + (unsigned long long)my_tiles[0] * {wpt}u, thread);\n    \
                 {load}(bits_b, words + (unsigned long long)my_tiles[last > 0 ? 1 : 0] * {wpt}u, thread);",
                load = names.load
            );
        }
        s.push_str(
            "    unsigned checksum = 0;\n#pragma unroll 1\n    for (int i = 0; i < tiles_per_cta; ++i) {\n        \
             checksum += (unsigned)my_tiles[i];  // every variant reads its tile index (kv_tile_offsets)\n",
        );
        if staged {
            let _ = writeln!(
                s,
                "        fm_cp_async_wait<1>();\n        {barrier}  // tile i landed; stage i-1 is free\n        \
                 {{ const unsigned* src = words + (unsigned long long)my_tiles[i + 2 < last ? i + 2 : last] * {wpt}u;\n          \
                 const unsigned smem_tile = smem_base + write_stage * {bytes}u;\n          {stage_stmt} fm_cp_async_commit(); }}",
                bytes = wpt * 4,
            );
        }
        if global {
            let p = program.map(|p| p.loaded_words()).unwrap_or(0);
            let names = function_names(variant.encoding.unwrap_or_default());
            let _ = writeln!(
                s,
                "        unsigned bits_c[{p}];\n        \
                 {}(bits_c, words + (unsigned long long)my_tiles[i + 2 < last ? i + 2 : last] * {wpt}u, thread);",
                names.load
            );
        }
        if variant.wgmma {
            s.push_str("        asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n");
            for kk in 0..BENCH_HEAD_DIM / 16 {
                let off = (kk * slab_bytes) >> 4;
                let d = format!("desc0 + {off}ull");
                s.push_str(&wgmma_statement(n, &d, &d));
            }
            let _ = writeln!(
                s,
                "        asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n        \
                 asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n\
                 #pragma unroll\n        for (int v = 0; v < {values}; ++v) {{ fm_keep(acc[v]); }}"
            );
        }
        if let Some(p) = program {
            let names = function_names(p.encoding());
            match p.space() {
                Space::Global => {
                    let words = p.loaded_words();
                    let _ = writeln!(
                        s,
                        "        {}(acc, bits_a, thread);\n\
                         #pragma unroll\n        for (int w = 0; w < {words}; ++w) {{ bits_a[w] = bits_b[w]; bits_b[w] = bits_c[w]; }}",
                        names.apply_loaded
                    );
                }
                Space::Shared => {
                    let _ = writeln!(
                        s,
                        "        {}(acc, smem_base + read_stage * {bytes}u, thread);\n        \
                         read_stage = read_stage == {last_stage}u ? 0u : read_stage + 1u;\n        \
                         write_stage = write_stage == {last_stage}u ? 0u : write_stage + 1u;",
                        names.apply,
                        bytes = wpt * 4,
                        last_stage = BENCH_STAGES - 1
                    );
                }
            }
        }
        let _ = writeln!(
            s,
            "#pragma unroll\n        for (int v = 0; v < {values}; ++v) {{ fm_keep(acc[v]); }}\n    }}\n    \
             float sum = (float)checksum;\n\
             #pragma unroll\n    for (int v = 0; v < {values}; ++v) {{ sum += acc[v]; }}\n    \
             out[(unsigned long long)blockIdx.x * {threads}u + thread] = sum;\n}}"
        );
    }
    Ok(s)
}
