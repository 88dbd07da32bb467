//! CUDA source of the lightning decode kernel, assembled from components:
//! the ABI ([`LightningParams`]), the geometry ([`LightningConfig`]), the state tiling
//! ([`StateTiling`]) and the activation dtype helpers ([`crate::family::dtype::ActDtype::cuda_helpers`]).
//!
//! Grid: `(splits, heads, batch)`; CTA `(s, h, b)` owns columns
//! `split(s) .. split(s) + cols_per_cta` of state `(b, h)`.
//!
//! - dependent launch: the next kernel may launch at once, and this one waits for the
//!   previous kernel (`griddepcontrol`) only before its first global read;
//! - producer: every thread issues all its `rows_per_thread` 16-byte state loads
//!   before the first use (bytes in flight hide DRAM latency);
//! - consumer, per token: `kv = ratio·kv + k[row]·v[col..col+4]`, and the thread's
//!   partial of `o[col..col+4] = Σ_row q[row]·kv`;
//! - epilogue: the partials are summed over the rows of a warp with `shfl.xor`, then
//!   over the warps through shared memory, and written as `o`; the state is stored with
//!   the same 16-byte accesses it was loaded with.

use std::fmt::Write as _;

use super::config::{ConfigError, LightningConfig};
use super::tiling::StateTiling;

/// The kernel's entry point.
pub const KERNEL_NAME: &str = "fm_lightning_decode";

crate::abi_struct! {
    /// Parameters of the lightning decode kernel (strides in elements; the last
    /// dimension of every tensor is contiguous, the state is contiguous `[B, H, D, E]`).
    pub struct LightningParams as "FmLightningParams" {
        /// q `[B, H, n, D]`.
        q: Ptr("const fm_act*"),
        /// k `[B, H, n, D]`.
        k: Ptr("const fm_act*"),
        /// v `[B, H, n, E]`.
        v: Ptr("const fm_act*"),
        /// o `[B, H, n, E]`, written.
        o: Ptr("fm_act*"),
        /// The state read, `[B, H, D, E]` fp32.
        state_in: Ptr("const float*"),
        /// The state written (may equal state_in: each element is read, then written, by one thread).
        state_out: Ptr("float*"),
        /// Decay slopes `[H]`; the decay is exp(-slope).
        slope: Ptr("const float*"),
        /// q stride between batches.
        q_stride_batch: I64("long long"),
        /// q stride between heads.
        q_stride_head: I64("long long"),
        /// q stride between tokens.
        q_stride_token: I64("long long"),
        /// k stride between batches.
        k_stride_batch: I64("long long"),
        /// k stride between heads.
        k_stride_head: I64("long long"),
        /// k stride between tokens.
        k_stride_token: I64("long long"),
        /// v stride between batches.
        v_stride_batch: I64("long long"),
        /// v stride between heads.
        v_stride_head: I64("long long"),
        /// v stride between tokens.
        v_stride_token: I64("long long"),
        /// o stride between batches.
        o_stride_batch: I64("long long"),
        /// o stride between heads.
        o_stride_head: I64("long long"),
        /// o stride between tokens.
        o_stride_token: I64("long long"),
        /// H.
        heads: I32("int"),
        /// n, tokens processed in order.
        tokens: I32("int"),
    }
}

/// The full translation unit for `config`.
pub fn source(config: LightningConfig) -> Result<String, ConfigError> {
    let tiling = StateTiling::new(config)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// fragmask lightning decode (fragmask_kernels::lightning), generated; do not edit.\n\
         // Geometry (LightningConfig): D = {d}, E = {e}, {t} threads = {cv} column vectors x {rt} row\n\
         // threads, {rpt} rows per thread, {cols} columns per CTA, {splits} CTAs per state,\n\
         // {tpp} tokens per reduction pass.\n",
        d = config.dim_k,
        e = config.dim_v,
        t = config.threads,
        cv = config.col_vectors,
        rt = config.row_threads(),
        rpt = config.rows_per_thread(),
        cols = config.cols_per_cta(),
        splits = config.splits(),
        tpp = config.tokens_per_pass,
    );
    s.push_str(&config.dtype.cuda_helpers());
    s.push_str(crate::family::ptx::GRID_DEPENDENCY);
    s.push('\n');
    s.push_str(&LightningParams::ABI.cuda());
    s.push('\n');
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({t}, {m}) {KERNEL_NAME}(const __grid_constant__ FmLightningParams p) {{",
        t = config.threads,
        m = config.min_ctas_per_sm
    );
    s.push_str(&prologue(&config, &tiling)?);
    s.push_str(&producer(&config, &tiling));
    s.push_str(&token_loop(&config, &tiling));
    s.push_str("}\n");
    Ok(s)
}

/// Indices of the CTA and the thread, all from the tiling's layouts.
fn prologue(config: &LightningConfig, tiling: &StateTiling) -> Result<String, ConfigError> {
    let (row, col) = tiling.thread_row_col()?;
    let (d, e) = (config.dim_k, config.dim_v);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "    __shared__ float partial[{tpp}][{warps}][{cols}];  // o partials: [token in pass][warp][column of the CTA]\n\
         \x20   const unsigned thread = threadIdx.x;\n\
         \x20   const unsigned lane = thread % 32u;\n\
         \x20   const unsigned warp = thread / 32u;\n\
         \x20   const unsigned head = blockIdx.y;\n\
         \x20   const unsigned batch = blockIdx.z;\n\
         \x20   // first column of this CTA: split layout {split}\n\
         \x20   const unsigned cta_col = blockIdx.x * {cols}u;\n\
         \x20   // the thread's first (row, col) in the tile: thread layout {thread} (offset row*{e} + col)\n\
         \x20   const unsigned thread_row = {row};\n\
         \x20   const unsigned thread_col = cta_col + {col};\n\
         \x20   // state (batch, head): contiguous [B, H, D, E] = ({{B}},{{H}},{d},{e}):(H*{de},{de},{e},1)\n\
         \x20   const long long state_base = ((long long)batch * p.heads + head) * {de}ll;\n\
         \x20   const float* state_in = p.state_in + state_base;\n\
         \x20   float* state_out = p.state_out + state_base;\n\
         \x20   // activations: [B, H, n, *] with the strides of FmLightningParams\n\
         \x20   const fm_act* q = p.q + batch * p.q_stride_batch + head * p.q_stride_head;\n\
         \x20   const fm_act* k = p.k + batch * p.k_stride_batch + head * p.k_stride_head;\n\
         \x20   const fm_act* v = p.v + batch * p.v_stride_batch + head * p.v_stride_head + thread_col;\n\
         \x20   fm_act* o = p.o + batch * p.o_stride_batch + head * p.o_stride_head + cta_col;\n\
         \x20   // Programmatic dependent launch (PTX ISA §9.7.13.11 griddepcontrol): let the next\n\
         \x20   // kernel of the stream launch now, and wait for the previous one to complete and\n\
         \x20   // flush before the first global read (no-ops without the launch attribute).\n\
         \x20   fm_launch_dependents();\n\
         \x20   fm_wait_prior_grids();\n\
         \x20   const float ratio = expf(-p.slope[head]);\n",
        tpp = config.tokens_per_pass,
        warps = config.warps(),
        cols = config.cols_per_cta(),
        split = tiling.split_layout(),
        thread = tiling.thread_layout(),
        row = row.cuda(&[]),
        col = col.cuda(&[]),
        de = d * e,
    );
    Ok(s)
}

/// The producer: all of the thread's state rows in flight at once.
fn producer(config: &LightningConfig, tiling: &StateTiling) -> String {
    let mut s = format!(
        "    // producer: value layout {} — one float4 per row, rows {} apart\n",
        tiling.value_layout(),
        config.row_threads()
    );
    for (i, r) in tiling.value_rows().into_iter().enumerate() {
        let _ = writeln!(
            s,
            "    float4 kv{i} = *reinterpret_cast<const float4*>(state_in + (thread_row + {r}u) * {e}u + thread_col);  // value {v}",
            e = config.dim_v,
            v = 4 * i
        );
    }
    s
}

/// The consumer and the o epilogue, per token.
fn token_loop(config: &LightningConfig, tiling: &StateTiling) -> String {
    let tpp = config.tokens_per_pass;
    let cols = config.cols_per_cta();
    let mut s = format!(
        "    for (int pass = 0; pass < p.tokens; pass += {tpp}) {{\n\
         \x20       const int count = min({tpp}, p.tokens - pass);\n\
         \x20       for (int j = 0; j < count; ++j) {{\n\
         \x20           const long long token = pass + j;\n\
         \x20           const fm_act* q_t = q + token * p.q_stride_token;\n\
         \x20           const fm_act* k_t = k + token * p.k_stride_token;\n\
         \x20           const fm_act* v_t = v + token * p.v_stride_token;\n\
         \x20           const float v0 = fm_act_load(v_t), v1 = fm_act_load(v_t + 1), v2 = fm_act_load(v_t + 2), v3 = fm_act_load(v_t + 3);\n\
         \x20           float o0 = 0.f, o1 = 0.f, o2 = 0.f, o3 = 0.f;\n"
    );
    for (i, r) in tiling.value_rows().into_iter().enumerate() {
        let _ = writeln!(
            s,
            "            {{  // row thread_row + {r} (value {v})\n\
             \x20               const float kr = fm_act_load(k_t + thread_row + {r}u), qr = fm_act_load(q_t + thread_row + {r}u);\n\
             \x20               kv{i}.x = fmaf(ratio, kv{i}.x, kr * v0); kv{i}.y = fmaf(ratio, kv{i}.y, kr * v1);\n\
             \x20               kv{i}.z = fmaf(ratio, kv{i}.z, kr * v2); kv{i}.w = fmaf(ratio, kv{i}.w, kr * v3);\n\
             \x20               o0 = fmaf(qr, kv{i}.x, o0); o1 = fmaf(qr, kv{i}.y, o1); o2 = fmaf(qr, kv{i}.z, o2); o3 = fmaf(qr, kv{i}.w, o3);\n\
             \x20           }}",
            v = 4 * i
        );
    }
    // Lanes of one warp that share a column differ by multiples of col_vectors (the
    // thread layout's row leaf): sum them with xor shuffles.
    let _ = writeln!(
        s,
        "            // sum over the warp's rows: lanes with one column are {cv} apart (thread layout {thread})",
        cv = config.col_vectors,
        thread = tiling.thread_layout()
    );
    let mut offset = config.col_vectors;
    while offset < 32 {
        let _ = writeln!(
            s,
            "            o0 += __shfl_xor_sync(0xffffffffu, o0, {offset}); o1 += __shfl_xor_sync(0xffffffffu, o1, {offset});\n\
             \x20           o2 += __shfl_xor_sync(0xffffffffu, o2, {offset}); o3 += __shfl_xor_sync(0xffffffffu, o3, {offset});"
        );
        offset *= 2;
    }
    let _ = write!(
        s,
        "            if (lane < {cv}u) {{\n\
         \x20               float* dst = &partial[j][warp][thread_col - cta_col];\n\
         \x20               dst[0] = o0; dst[1] = o1; dst[2] = o2; dst[3] = o3;\n\
         \x20           }}\n\
         \x20       }}\n\
         \x20       if (pass + {tpp} >= p.tokens) {{\n{store}\
         \x20       }}\n\
         \x20       __syncthreads();\n\
         \x20       // sum over the warps; thread c < {cols} writes column cta_col + c of each token\n\
         \x20       for (int j = 0; j < count; ++j) {{\n\
         \x20           if (thread < {cols}u) {{\n\
         \x20               float sum = 0.f;\n\
         \x20               #pragma unroll\n\
         \x20               for (int w = 0; w < {warps}; ++w) sum += partial[j][w][thread];\n\
         \x20               fm_act_store(o + (pass + j) * p.o_stride_token + thread, sum);\n\
         \x20           }}\n\
         \x20       }}\n\
         \x20       __syncthreads();\n\
         \x20   }}\n",
        cv = config.col_vectors,
        warps = config.warps(),
        store = store_state(config, tiling),
    );
    s
}

/// The epilogue of the state: the same 16-byte accesses as the producer, issued after
/// the last token's update and before the o reduction (the stores drain while the CTA
/// reduces o).
fn store_state(config: &LightningConfig, tiling: &StateTiling) -> String {
    // st.global.v4 (PTX ISA §9.7.9.9) keeps each row one 16-byte store: a plain float4
    // assignment is split into four 4-byte stores once the registers are updated apart.
    let mut s = format!(
        "            // epilogue: the state, value layout {}\n",
        tiling.value_layout()
    );
    for (i, r) in tiling.value_rows().into_iter().enumerate() {
        let _ = writeln!(
            s,
            "            asm volatile(\"st.global.v4.f32 [%0], {{%1, %2, %3, %4}};\" :: \"l\"(state_out + (thread_row + {r}u) * {e}u + thread_col),\n\
             \x20               \"f\"(kv{i}.x), \"f\"(kv{i}.y), \"f\"(kv{i}.z), \"f\"(kv{i}.w) : \"memory\");",
            e = config.dim_v
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::dtype::ActDtype;

    #[test]
    fn rust_mirror_has_the_c_offsets() {
        assert_eq!(
            LightningParams::rust_offsets(),
            LightningParams::ABI.offsets()
        );
        assert_eq!(
            core::mem::size_of::<LightningParams>(),
            LightningParams::ABI.size()
        );
    }

    #[test]
    fn source_takes_every_number_from_the_config() {
        let config = LightningConfig::new(96, 96, ActDtype::Bf16, 8).unwrap();
        let src = source(config).unwrap();
        assert!(src.contains("__launch_bounds__(128, 7)"));
        assert!(src.contains("partial[8][4][32]"));
        assert!(src.contains("float4 kv5 ="));
        assert!(!src.contains("float4 kv6 ="));
        assert!(src.contains("__shfl_xor_sync(0xffffffffu, o0, 16)"));
        assert!(!src.contains("#include"));
        let wait = src.find("fm_wait_prior_grids();").unwrap();
        assert!(
            wait < src.find("p.slope[head]").unwrap() && wait < src.find("float4 kv0").unwrap()
        );
        let narrow = source(LightningConfig::new(96, 96, ActDtype::F32, 4).unwrap()).unwrap();
        assert!(narrow.contains("float4 kv2 =") && !narrow.contains("float4 kv3 ="));
        assert!(narrow.contains("__shfl_xor_sync(0xffffffffu, o0, 4)"));
    }

    #[test]
    fn every_index_line_names_its_layout() {
        let src = source(LightningConfig::new(128, 128, ActDtype::F16, 8).unwrap()).unwrap();
        assert!(src.contains("thread layout (8,16):(4,128)"));
        assert!(src.contains("value layout (4,8):(1,2048)"));
        assert!(src.contains("split layout 4:32"));
    }
}
