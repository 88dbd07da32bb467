//! The combine component: the LSE merge of partial attention results, in CUDA.
//!
//! A partial result over a subset of the keys is `(o_s, lse_s)`: `o_s` normalised by its
//! own softmax sum, `lse_s = log Σ exp(score)` over the subset (natural log). The merge
//! of `n` of them is
//!
//! ```text
//! M = max_s lse_s,   w_s = exp(lse_s − M),   o = Σ w_s o_s / Σ w_s,   lse = M + log Σ w_s
//! ```
//!
//! An empty subset has `lse_s = −∞` and weighs 0; if every subset is empty, `o = 0` and
//! `lse = −∞`. This is the math of `fragmask_check::decode::merge::merge_states` (its CPU
//! f64 reference), of split-KV decode's combine, and of a context-parallel merge.
//!
//! [`HELPERS`] is the device code; [`kernel`] emits a combine kernel that merges the
//! `num_splits` fp32 partials of one output row per group of threads, 4 columns per
//! thread, around caller-provided index and store code.

/// Device helpers of the merge: a running state over 4 columns.
pub const HELPERS: &str = r#"// ---- combine (fragmask_kernels::family::combine): LSE merge of partial results ----
// M = max lse_s; w_s = exp(lse_s - M); o = sum w_s o_s / sum w_s; lse = M + log sum w_s.
// Partials with lse = -inf weigh 0; when all do, o = 0 and lse = -inf.
struct FmLseMerge { float max_lse; float sum; float4 acc; };
__device__ __forceinline__ void fm_lse_merge_init(FmLseMerge& m, float max_lse) {
    m.max_lse = max_lse; m.sum = 0.f; m.acc = make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ void fm_lse_merge_add(FmLseMerge& m, float lse, float4 o) {
    if (m.max_lse == -__int_as_float(0x7f800000) || lse == -__int_as_float(0x7f800000)) return;
    const float w = expf(lse - m.max_lse);
    m.sum += w;
    m.acc.x = fmaf(w, o.x, m.acc.x); m.acc.y = fmaf(w, o.y, m.acc.y);
    m.acc.z = fmaf(w, o.z, m.acc.z); m.acc.w = fmaf(w, o.w, m.acc.w);
}
// The merged o (through `o`) and lse.
__device__ __forceinline__ float fm_lse_merge_finish(const FmLseMerge& m, float4& o) {
    if (!(m.sum > 0.f)) { o = make_float4(0.f, 0.f, 0.f, 0.f); return -__int_as_float(0x7f800000); }
    const float inv = 1.f / m.sum;
    o = make_float4(m.acc.x * inv, m.acc.y * inv, m.acc.z * inv, m.acc.w * inv);
    return m.max_lse + logf(m.sum);
}
// ---- end of combine helpers ----
"#;

/// What a combine kernel needs from the kernel family member that uses it.
#[derive(Clone, Debug)]
pub struct CombineSpec<'a> {
    /// The kernel's entry point.
    pub kernel_name: &'a str,
    /// The CUDA type of the parameter struct (passed as `const __grid_constant__`).
    pub params_type: &'a str,
    /// Threads per CTA.
    pub threads: u32,
    /// Columns of one row (a multiple of 4).
    pub columns: u32,
    /// Code that, from `row_id` (a `long long`, the output row of this thread) and the
    /// parameters `p`, returns early when the row is past the end and otherwise defines
    /// `long long ws_row0` (the row's index among a split's partial rows) and
    /// `long long split_stride` (rows between splits) and `int num_splits`.
    pub locate: &'a str,
    /// The partial o (`const float*`, rows of `columns` floats) and lse (`const float*`)
    /// arrays, as expressions of `p`.
    pub partial_o: &'a str,
    /// See `partial_o`.
    pub partial_lse: &'a str,
    /// Code that writes `float4 out` (columns `col .. col + 4`) and, when `col == 0`,
    /// `float lse` of the row.
    pub store: &'a str,
}

/// The combine kernel of `spec`: `columns / 4` threads per row, each merging the
/// `num_splits` partials of 4 columns with [`HELPERS`] (which must precede it, with
/// `family::ptx::GRID_DEPENDENCY`).
pub fn kernel(spec: &CombineSpec<'_>) -> String {
    let vecs = spec.columns / 4;
    let rows_per_cta = (spec.threads / vecs).max(1);
    format!(
        "extern \"C\" __global__ void __launch_bounds__({threads}) {name}(const __grid_constant__ {params} p) {{\n\
         \x20   // Programmatic dependent launch: the partials are complete and visible after this.\n\
         \x20   fm_wait_prior_grids();\n\
         \x20   const unsigned tid = threadIdx.x;\n\
         \x20   if (tid >= {rows_per_cta}u * {vecs}u) return;\n\
         \x20   const long long row_id = (long long)blockIdx.x * {rows_per_cta} + tid / {vecs}u;\n\
         \x20   const int col = (int)(tid % {vecs}u) * 4;\n\
         {locate}\n\
         \x20   const float* partial_o = {partial_o};\n\
         \x20   const float* partial_lse = {partial_lse};\n\
         \x20   // {batch} splits' loads are issued before any is used (independent loads in\n\
         \x20   // flight: one serial latency per {batch} splits, not per split).\n\
         \x20   float max_lse = -__int_as_float(0x7f800000);\n\
         \x20   for (int s0 = 0; s0 < num_splits; s0 += {batch}) {{\n\
         \x20       float l[{batch}];\n\
         \x20       #pragma unroll\n\
         \x20       for (int i = 0; i < {batch}; ++i) l[i] = s0 + i < num_splits ? partial_lse[(s0 + i) * split_stride + ws_row0] : -__int_as_float(0x7f800000);\n\
         \x20       #pragma unroll\n\
         \x20       for (int i = 0; i < {batch}; ++i) max_lse = fmaxf(max_lse, l[i]);\n\
         \x20   }}\n\
         \x20   FmLseMerge merge;\n\
         \x20   fm_lse_merge_init(merge, max_lse);\n\
         \x20   for (int s0 = 0; s0 < num_splits; s0 += {batch}) {{\n\
         \x20       float l[{batch}];\n\
         \x20       float4 v[{batch}];\n\
         \x20       #pragma unroll\n\
         \x20       for (int i = 0; i < {batch}; ++i) {{\n\
         \x20           const bool in = s0 + i < num_splits;\n\
         \x20           const long long r = (long long)(in ? s0 + i : 0) * split_stride + ws_row0;\n\
         \x20           l[i] = in ? partial_lse[r] : -__int_as_float(0x7f800000);\n\
         \x20           v[i] = *reinterpret_cast<const float4*>(partial_o + r * {columns} + col);\n\
         \x20       }}\n\
         \x20       #pragma unroll\n\
         \x20       for (int i = 0; i < {batch}; ++i) fm_lse_merge_add(merge, l[i], v[i]);\n\
         \x20   }}\n\\
         \x20   float4 out;\n\
         \x20   const float lse = fm_lse_merge_finish(merge, out);\n\
         {store}\n\
         }}\n",
        threads = spec.threads,
        name = spec.kernel_name,
        params = spec.params_type,
        columns = spec.columns,
        locate = spec.locate,
        partial_o = spec.partial_o,
        partial_lse = spec.partial_lse,
        store = spec.store,
        batch = LOAD_BATCH,
    )
}

/// Partials whose loads [`kernel`] issues together.
pub const LOAD_BATCH: u32 = 8;

/// Rows one CTA of [`kernel`] merges.
pub const fn rows_per_cta(threads: u32, columns: u32) -> u32 {
    let r = threads / (columns / 4);
    if r == 0 {
        1
    } else {
        r
    }
}

/// Entry point of [`merge_into_source`]'s kernel.
pub const MERGE_INTO_KERNEL: &str = "fragmask_merge_into";

/// Threads per CTA of [`merge_into_source`]'s kernel.
pub const MERGE_INTO_THREADS: u32 = 256;

/// A complete, header-free CUDA module with one kernel, [`MERGE_INTO_KERNEL`], that merges
/// one partial state `(o_p, lse_p)` into a running state `(o, lse)` in place with
/// [`HELPERS`] (fp32 math, `o` rounded once to `dtype`): a context-parallel merge.
///
/// ```text
/// fragmask_merge_into(fm_act* o, long long o_b, long long o_h, long long o_s,
///                     float* lse, long long l_b, long long l_h, long long l_s,
///                     const fm_act* po, long long po_b, long long po_h, long long po_s,
///                     const float* plse, long long pl_b, long long pl_h, long long pl_s,
///                     const long long* row_index, long long row_offset,
///                     int batch, int heads, long long rows, int dim)
/// ```
///
/// Strides are in elements (the head dimension is contiguous). Partial row `r` of
/// `(b, h)` merges into running row `row_index[r]` (or `row_offset + r` when `row_index`
/// is null). `dim` is a multiple of 4, at most `4 * MERGE_INTO_THREADS`; a CTA holds
/// whole rows (`MERGE_INTO_THREADS / (dim / 4)` of them, launched with that many
/// threads per row group), and every thread reads its row's `lse` before any writes it
/// (a CTA barrier).
pub fn merge_into_source(dtype: super::dtype::ActDtype) -> String {
    format!(
        "// fragmask_kernels::family::combine::merge_into_source: merge one partial state.\n\
         {act}\
         {helpers}\
         extern \"C\" __global__ void __launch_bounds__({threads}) {name}(\n\
         \x20   fm_act* o, long long o_b, long long o_h, long long o_s,\n\
         \x20   float* lse, long long l_b, long long l_h, long long l_s,\n\
         \x20   const fm_act* po, long long po_b, long long po_h, long long po_s,\n\
         \x20   const float* plse, long long pl_b, long long pl_h, long long pl_s,\n\
         \x20   const long long* row_index, long long row_offset,\n\
         \x20   int batch, int heads, long long rows, int dim) {{\n\
         \x20   const int vecs = dim / 4;\n\
         \x20   const int rows_per_cta = {threads} / vecs;\n\
         \x20   const int tid = (int)threadIdx.x;\n\
         \x20   const long long row_id = (long long)blockIdx.x * rows_per_cta + tid / vecs;\n\
         \x20   const int col = (tid % vecs) * 4;\n\
         \x20   const bool active = tid < rows_per_cta * vecs\n\
         \x20       && row_id < (long long)batch * heads * rows;\n\
         \x20   long long r = 0, b = 0, h = 0, dst = 0;\n\
         \x20   float4 out = make_float4(0.f, 0.f, 0.f, 0.f);\n\
         \x20   float merged = 0.f;\n\
         \x20   if (active) {{\n\
         \x20       r = row_id % rows;\n\
         \x20       const long long bh = row_id / rows;\n\
         \x20       h = bh % heads;\n\
         \x20       b = bh / heads;\n\
         \x20       dst = row_index ? row_index[r] : row_offset + r;\n\
         \x20       const float la = lse[b * l_b + h * l_h + dst * l_s];\n\
         \x20       const float lb = plse[b * pl_b + h * pl_h + r * pl_s];\n\
         \x20       const fm_act* pa = o + b * o_b + h * o_h + dst * o_s + col;\n\
         \x20       const fm_act* pb = po + b * po_b + h * po_h + r * po_s + col;\n\
         \x20       const float4 va = make_float4(fm_act_load(pa), fm_act_load(pa + 1),\n\
         \x20                                     fm_act_load(pa + 2), fm_act_load(pa + 3));\n\
         \x20       const float4 vb = make_float4(fm_act_load(pb), fm_act_load(pb + 1),\n\
         \x20                                     fm_act_load(pb + 2), fm_act_load(pb + 3));\n\
         \x20       FmLseMerge m;\n\
         \x20       fm_lse_merge_init(m, fmaxf(la, lb));\n\
         \x20       fm_lse_merge_add(m, la, va);\n\
         \x20       fm_lse_merge_add(m, lb, vb);\n\
         \x20       merged = fm_lse_merge_finish(m, out);\n\
         \x20   }}\n\
         \x20   // A row's threads may span warps: all of them have read lse before one writes.\n\
         \x20   __syncthreads();\n\
         \x20   if (!active) return;\n\
         \x20   fm_act* pa = o + b * o_b + h * o_h + dst * o_s + col;\n\
         \x20   fm_act_store(pa, out.x); fm_act_store(pa + 1, out.y);\n\
         \x20   fm_act_store(pa + 2, out.z); fm_act_store(pa + 3, out.w);\n\
         \x20   if (col == 0) lse[b * l_b + h * l_h + dst * l_s] = merged;\n\
         }}\n",
        act = dtype.cuda_helpers(),
        helpers = HELPERS,
        threads = MERGE_INTO_THREADS,
        name = MERGE_INTO_KERNEL,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_are_header_free_and_the_kernel_waits_before_reading() {
        assert!(!HELPERS.contains("#include"));
        let k = kernel(&CombineSpec {
            kernel_name: "k",
            params_type: "P",
            threads: 128,
            columns: 128,
            locate:
                "    const long long ws_row0 = row_id, split_stride = 1; const int num_splits = 2;",
            partial_o: "p.o",
            partial_lse: "p.lse",
            store: "    (void)out; (void)lse;",
        });
        let wait = k.find("fm_wait_prior_grids();").unwrap();
        assert!(wait < k.find("partial_lse[").unwrap());
        assert!(k.contains("blockIdx.x * 4 + tid / 32u"));
        assert_eq!(rows_per_cta(128, 256), 2);
    }

    #[test]
    fn the_merge_into_module_is_header_free_and_reads_lse_before_the_barrier() {
        for dtype in [
            crate::family::dtype::ActDtype::Bf16,
            crate::family::dtype::ActDtype::F16,
        ] {
            let src = merge_into_source(dtype);
            assert!(!src.contains("#include"));
            assert_eq!(src.matches(MERGE_INTO_KERNEL).count(), 1);
            let barrier = src.find("__syncthreads();").unwrap();
            assert!(src.find("const float la = lse[").unwrap() < barrier);
            assert!(
                barrier
                    < src
                        .find("lse[b * l_b + h * l_h + dst * l_s] = merged")
                        .unwrap()
            );
            assert!(
                src.contains(if dtype == crate::family::dtype::ActDtype::F16 {
                    "cvt.rn.f16.f32"
                } else {
                    "cvt.rn.bf16.f32"
                })
            );
        }
    }
}
