//! CUDA source of split-KV decode, assembled from components: the ABI
//! ([`DecodeParams`]), the geometry ([`DecodeConfig`]), the operand tilings and
//! swizzles ([`super::operands`]), the activation dtype, and the family's combine
//! ([`crate::family::combine`]). The text is a template filled by
//! [`crate::family::template::fill`]; every index expression that depends on the lane is
//! emitted from a layout, and its comment names the layout.
//!
//! Kernel `fm_decode_split`, grid `(num_splits · m_blocks, Hkv, B)`: CTA
//! `(split · m_blocks + m_block, hkv, b)` owns the `cta_rows` (16, or 64 with shared
//! K/V) packed query rows `cta_rows·m_block ..` of KV head `hkv` of request `b` (row
//! `t·G + g` is token `t`, query head `hkv·G + g`: packed GQA) and the key tiles `split`
//! of `num_splits` of the tiles those rows can see.
//! - scheduler: the visible key range comes from `seqlens_k[b]` (clamped to the planned
//!   capacity) and the causal / sliding-window bounds (bottom-right aligned: token `t`
//!   sits at key position `seqlen_k − Sq + t`), all on the device, so the split count is
//!   static and a CUDA graph captured at one length is right at any other;
//! - producer: each warp streams its own 16-key tiles (every `warps`-th tile of the
//!   split) through `stages` cp.async stages, 16 bytes per copy, zero-filled past
//!   `seqlen_k`; paged caches find each page through `block_table`;
//! - consumer: `S = Q·Kᵀ` and `O += P·V` with `mma.sync.m16n8k16` (fp32 accumulate),
//!   online softmax in base 2, causal / window masks computed per element;
//! - epilogue: the warps' `(o, lse)` are merged through shared memory with the combine
//!   helpers; one split writes o (dtype) and lse, several write fp32 partials to the
//!   workspace for `fm_decode_combine`.

use std::fmt::Write as _;

use super::config::{
    ConfigError, DecodeConfig, KvLayout, LIST_CAP, MAX_CLUSTER_SPLITS, TILE_KEYS, TILE_ROWS,
};
use super::operands::{
    c_thread_row_col, lane_expr, o_thread_floats, qk_swizzle, qk_thread_chunks, v_swizzle,
    v_thread_chunks,
};
use super::tile;
use crate::family::combine::{self, CombineSpec};
use crate::family::ptx;
use crate::family::schedule::SPLIT_RANGE;
use crate::family::softmax::{self, Log2, RowFinish, RunningMax};
use crate::family::template::fill;

/// The split kernel's entry point.
pub const SPLIT_KERNEL: &str = "fm_decode_split";
/// The combine kernel's entry point.
pub const COMBINE_KERNEL: &str = "fm_decode_combine";
/// Threads per CTA of the combine kernel.
pub const COMBINE_THREADS: u32 = 128;

crate::abi_struct! {
    /// Parameters of both decode kernels (strides in elements; the last dimension of
    /// every tensor is contiguous; k and v share one layout).
    pub struct DecodeParams as "FmDecodeParams" {
        /// q `[B, Sq, H, D]` (strided).
        q: Ptr("const fm_act*"),
        /// k: contiguous `[B, capacity, Hkv, D]` or pages `[num_pages, page_size, Hkv, D]`.
        k: Ptr("const fm_act*"),
        /// v, with k's layout.
        v: Ptr("const fm_act*"),
        /// o `[B, Sq, H, D]` (strided), written.
        o: Ptr("fm_act*"),
        /// lse `[B, H, Sq]` fp32 (natural log), written; may be null.
        lse: Ptr("float*"),
        /// Partial o `[num_splits, B, Hkv, m_pad, D]` fp32 (num_splits > 1).
        ws_o: Ptr("float*"),
        /// Partial lse `[num_splits, B, Hkv, m_pad]` fp32 (num_splits > 1).
        ws_lse: Ptr("float*"),
        /// Keys per request `[B]` int32, clamped to capacity_k; null: capacity_k each.
        seqlens_k: Ptr("const int*"),
        /// Varlen queries `[B + 1]` int32 token offsets into q / o (null: seqlen_q each).
        cu_seqlens_q: Ptr("const int*"),
        /// Pages of each request `[B, max_pages]` int32 (paged caches).
        block_table: Ptr("const int*"),
        /// Mask lists `[rows, n_blocks, 2]` int32: (key block, partial block or -1), ascending.
        mask_list: Ptr("const int*"),
        /// Listed key blocks per mask row block `[mask rows]` int32.
        mask_count: Ptr("const int*"),
        /// Partial blocks' bits `[partials, block_m, row_words]`, row-major (bit c%32 of word c/32).
        mask_bits: Ptr("const unsigned*"),
        /// q stride between requests.
        q_stride_batch: I64("long long"),
        /// q stride between tokens.
        q_stride_token: I64("long long"),
        /// q stride between heads.
        q_stride_head: I64("long long"),
        /// o stride between requests.
        o_stride_batch: I64("long long"),
        /// o stride between tokens.
        o_stride_token: I64("long long"),
        /// o stride between heads.
        o_stride_head: I64("long long"),
        /// lse stride between requests (0 with cu_seqlens_q).
        lse_stride_batch: I64("long long"),
        /// lse stride between heads (tokens are contiguous).
        lse_stride_head: I64("long long"),
        /// k/v stride between requests (contiguous) or pages (paged).
        kv_stride_batch: I64("long long"),
        /// k/v stride between keys.
        kv_stride_key: I64("long long"),
        /// k/v stride between KV heads.
        kv_stride_head: I64("long long"),
        /// block_table stride between requests.
        block_table_stride: I64("long long"),
        /// B.
        batch: I32("int"),
        /// Sq, new tokens per request (with cu_seqlens_q: the most, clamping each).
        seqlen_q: I32("int"),
        /// Rows of q and o with cu_seqlens_q (offsets are clamped to them).
        total_q: I32("int"),
        /// H, query heads.
        heads: I32("int"),
        /// Hkv, KV heads.
        kv_heads: I32("int"),
        /// G = H / Hkv, query heads per KV head (packed rows per token).
        group: I32("int"),
        /// Keys a request may hold (contiguous: the cache's Sk; paged: max_pages x page_size).
        capacity_k: I32("int"),
        /// Pages in the pool (paged; block_table entries are clamped below it).
        num_pages: I32("int"),
        /// Keys a query sees to its left (key >= pos - window_left); -1: unlimited.
        window_left: I32("int"),
        /// Keys a query sees to its right (key <= pos + window_right); 0: causal; -1: unlimited.
        window_right: I32("int"),
        /// Splits of each request's key tiles.
        num_splits: I32("int"),
        /// CTAs of 16 packed rows per (request, KV head): ceil(Sq x G / 16).
        m_blocks: I32("int"),
        /// Rows of a partial (request, KV head) block: m_blocks x 16.
        m_pad: I32("int"),
        /// softmax scale x log2(e).
        scale_log2: F32("float"),
        /// Mask row blocks between requests (0: the mask is broadcast over the batch).
        mask_batch_stride: I32("int"),
        /// Mask row blocks between KV heads (0: broadcast over heads).
        mask_head_stride: I32("int"),
        /// Query tokens per mask row block (the mask tile's rows).
        mask_block_m: I32("int"),
        /// Entries per mask row block's list (the mask's key blocks).
        mask_n_blocks: I32("int"),
        /// Grid heads per KV head: 1 (packed GQA rows), or G (per-head masks: grid y is the query head, kv_heads = H, group = 1).
        kv_head_div: I32("int"),
        /// 1: the launch's clusters are the num_splits splits of one (m-block, grid head, request), grid x = m_block x num_splits + split, merged through distributed shared memory (shared K/V only); 0: grid x = split x m_blocks + m_block, partials to the workspace.
        cluster_merge: I32("int"),
    }
}

/// The split kernel, the combine kernel and their helpers, for `config`.
pub fn source(config: DecodeConfig) -> Result<String, ConfigError> {
    let config = config.validate()?;
    let template = TEMPLATE;
    let values = values(config)?;
    let refs: Vec<(&str, String)> = values.iter().map(|(n, v)| (*n, v.clone())).collect();
    fill(template, &refs).map_err(|e| ConfigError(format!("decode template: {e}")))
}

/// Every placeholder of [`TEMPLATE`], from the config and the layouts.
fn values(config: DecodeConfig) -> Result<Vec<(&'static str, String)>, ConfigError> {
    let d = config.head_dim;
    let c = config.chunks_per_row();
    let qk_sw = qk_swizzle(config)?;
    let v_sw = v_swizzle(config)?;
    let qk_lane = qk_thread_chunks(config)?;
    let v_lane = v_thread_chunks(config)?;
    let o_lane = o_thread_floats(config)?;
    let (c_row, c_col) = c_thread_row_col()?;
    let mut v: Vec<(&'static str, String)> = vec![
        (
            "HEADER",
            format!(
                "// fragmask split-KV decode (fragmask_kernels::decode), generated; do not edit.\n\
                 // Geometry (DecodeConfig): D = {d}, {dt}, {w} warps x 32 threads, {s} cp.async stages of\n\
                 // {tk} keys per warp, {rows} packed query rows per CTA, {smem} bytes of shared memory,\n\
                 // KV cache {kv}.",
                dt = config.dtype.name(),
                w = config.warps,
                s = config.stages,
                tk = TILE_KEYS,
                rows = TILE_ROWS,
                smem = config.smem_bytes(),
                kv = config.kv.describe()
            ),
        ),
        ("DTYPE_HELPERS", config.dtype.cuda_helpers()),
        ("ABI", DecodeParams::ABI.cuda()),
        ("COMBINE_HELPERS", combine::HELPERS.to_string()),
        ("MMA_16816", ptx::mma_sync_16816(config.dtype.mma_ptx_type())),
        ("SMEM_U32", ptx::SMEM_U32.to_string()),
        ("CP_ASYNC", ptx::CP_ASYNC.to_string()),
        ("CLUSTER", ptx::CLUSTER.to_string()),
        ("LDS128", ptx::LDS128.to_string()),
        ("SPLIT_RANGE", SPLIT_RANGE.to_string()),
        ("ACT2", ptx::act2(config.dtype.mma_ptx_type())),
        ("MATH", ptx::MATH.to_string()),
        ("GRID_DEPENDENCY", ptx::GRID_DEPENDENCY.to_string()),
        ("NEG_INF", ptx::NEG_INF.to_string()),
        ("THREADS", config.threads().to_string()),
        ("WARPS", config.warps.to_string()),
        ("MIN_CTAS", config.ctas_per_sm().to_string()),
        ("STAGES", config.stages.to_string()),
        ("HEAD_DIM", d.to_string()),
        ("TILE_ROWS", TILE_ROWS.to_string()),
        ("TILE_KEYS", TILE_KEYS.to_string()),
        ("CHUNKS", c.to_string()),
        ("KV_CHUNKS_PER_LANE", (TILE_KEYS * c / 32).to_string()),
        ("TILE_BYTES", config.tile_bytes().to_string()),
        ("STAGE_BYTES", config.stage_bytes().to_string()),
        ("WARP_STAGES_BYTES", (config.stages * config.stage_bytes()).to_string()),
        ("N_TILES", config.n_tiles().to_string()),
        ("QK_SWIZZLE", format!("Swizzle<{},{},{}>", qk_sw.bits(), qk_sw.base(), qk_sw.shift())),
        ("QK_SRC_MASK", qk_sw.source_mask().to_string()),
        ("QK_SHIFT", qk_sw.shift().to_string()),
        ("V_SWIZZLE", format!("Swizzle<{},{},{}>", v_sw.bits(), v_sw.base(), v_sw.shift())),
        ("V_SRC_MASK", v_sw.source_mask().to_string()),
        ("V_SHIFT", v_sw.shift().to_string()),
        ("QK_LANE_LAYOUT", qk_lane.to_string()),
        ("QK_LANE", lane_expr(&qk_lane)?.cuda(&[])),
        ("V_LANE_LAYOUT", v_lane.to_string()),
        ("V_LANE", lane_expr(&v_lane)?.cuda(&[])),
        ("O_LANE_LAYOUT", o_lane.to_string()),
        ("O_LANE", lane_expr(&o_lane)?.cuda(&[])),
        ("C_ROW_LAYOUT", c_row.to_string()),
        ("C_ROW", lane_expr(&c_row)?.cuda(&[])),
        ("C_COL_LAYOUT", c_col.to_string()),
        ("C_COL", lane_expr(&c_col)?.cuda(&[])),
        ("TILE_BASE", tile_base(config)),
        ("ROW_OFFSET", row_offset(config)),
        ("O_TO_SMEM", o_to_smem(config)),
        ("MERGE_VECS", (d / 4).to_string()),
        (
            "ROW_FINISH",
            softmax::finish(
                &RowFinish {
                    sum: "l_run[h]",
                    max: "m_run[h]",
                    inv: "inv_l[h]",
                    lse: "lse_warp[h]",
                    running_max: RunningMax::Base2,
                    log2: Log2::Full,
                },
                tile::row_partners()?,
                "        ",
            ),
        ),
        ("STORE_OUT", STORE_OUT.to_string()),
        ("TILE_BODY", tile::body(config, &tile::SINGLE, "        ")?),
        ("TILE_PAIR_BODY", tile::body(config, &tile::PAIR, "            ")?),
        ("SCALE_MAX", softmax::MMA_SYNC_SCALE_MAX.to_string()),
        ("PAIR", u32::from(config.pairs_tiles()).to_string()),
        ("SHARED", u32::from(config.shared_kv).to_string()),
        (
            "TILE_COPIES",
            (TILE_KEYS * c / config.threads()).max(1).to_string(),
        ),
        ("CLUSTER_MERGE_BODY", CLUSTER_MERGE_BODY.to_string()),
        ("MAX_CLUSTER", MAX_CLUSTER_SPLITS.to_string()),
        ("CTA_ROWS", config.cta_rows().to_string()),
        ("STEP_TILES", config.step_tiles().to_string()),
        ("Q_BYTES", config.q_bytes().to_string()),
        ("CTA_STAGE_BYTES", config.cta_stage_bytes().to_string()),
        ("LIST_OFFSET", config.list_offset().to_string()),
        ("LIST_CAP", LIST_CAP.to_string()),
        (
            "WORD_COPIES",
            (config.step_tiles() * config.cta_rows())
                .div_ceil(config.threads())
                .to_string(),
        ),
        ("MASKED", u32::from(config.mask_block_n > 0).to_string()),
        ("MASK_BLOCK_N", config.mask_block_n.max(TILE_KEYS).to_string()),
        ("MASK_SUB", (config.mask_block_n.max(TILE_KEYS) / TILE_KEYS).to_string()),
        ("MASK_ROW_WORDS", config.mask_row_words().max(1).to_string()),
    ];
    let combine_kernel = combine::kernel(&CombineSpec {
        kernel_name: COMBINE_KERNEL,
        params_type: DecodeParams::ABI.name,
        threads: COMBINE_THREADS,
        columns: d,
        locate: COMBINE_LOCATE,
        partial_o: "p.ws_o",
        partial_lse: "p.ws_lse",
        store: "    const int b = (int)(row_id / ((long long)p.kv_heads * rows));\n\
                \x20   const int hkv = (int)(row_id / rows % p.kv_heads);\n\
                \x20   const int prow = (int)(row_id % rows);\n\
                \x20   const int q_start = p.cu_seqlens_q ? min(max(p.cu_seqlens_q[b], 0), p.total_q) : 0;\n\
                \x20   $STORE_OUT",
    });
    v.push(("COMBINE_KERNEL", combine_kernel));
    Ok(v)
}

/// Where the combine kernel's row lives among the partials.
const COMBINE_LOCATE: &str = "    const int rows = p.seqlen_q * p.group;  // packed rows per (request, KV head), planned\n\
    \x20   if (row_id >= (long long)p.batch * p.kv_heads * rows) return;\n\
    \x20   if (p.cu_seqlens_q) {  // varlen: rows past this request's tokens have no partials\n\
    \x20       const int rb = (int)(row_id / ((long long)p.kv_heads * rows));\n\
    \x20       const int start_b = min(max(p.cu_seqlens_q[rb], 0), p.total_q);\n\
    \x20       const int sq_b = min(min(max(p.cu_seqlens_q[rb + 1] - start_b, 0), p.seqlen_q), p.total_q - start_b);\n\
    \x20       if ((int)(row_id % rows) >= sq_b * p.group) return;\n\
    \x20   }\n\
    \x20   const int num_splits = p.num_splits;\n\
    \x20   // partial rows [num_splits, B, Hkv, m_pad]: (b, hkv, prow) = row_id split by (B, Hkv, rows)\n\
    \x20   const long long ws_row0 = row_id / rows * p.m_pad + row_id % rows;\n\
    \x20   const long long split_stride = (long long)p.batch * p.kv_heads * p.m_pad;";

/// Writes `out` (4 columns at `col`) and `lse` of packed row `prow` of `(b, hkv)` to o
/// `[B, Sq, H, D]` and lse `[B, H, Sq]` (varlen: o `[total_q, H, D]`, lse `[H, total_q]`,
/// the request's tokens from `q_start`): row `prow` is token `prow / G`, head
/// `hkv·G + prow % G` (packed GQA).
const STORE_OUT: &str = "{\n\
    \x20       const int token = q_start + prow / p.group;\n\
    \x20       const int head = hkv * p.group + prow % p.group;\n\
    \x20       fm_act* dst = p.o + b * p.o_stride_batch + (long long)token * p.o_stride_token + head * p.o_stride_head + col;\n\
    \x20       fm_store4(dst, out);\n\
    \x20       if (col == 0 && p.lse) p.lse[b * p.lse_stride_batch + head * p.lse_stride_head + token] = lse;\n\
    \x20   }";

/// The offset of a tile's first key from the cache's base (k and v alike).
fn tile_base(config: DecodeConfig) -> String {
    match config.kv {
        KvLayout::Contiguous => "        // contiguous [B, capacity, Hkv, D] or head-major [B, Hkv, capacity, D]: (b, key, hkv) with the kv strides\n\
             \x20       const long long tile_off = b * p.kv_stride_batch + (long long)key0 * p.kv_stride_key + kv_head * p.kv_stride_head;"
            .into(),
        KvLayout::Paged { page_size } if page_size >= TILE_KEYS => format!(
            "        // paged [num_pages, {ps}, Hkv, D]: a {tk}-key tile lies in one page (key0 is a multiple of {tk})\n\
             \x20       // (a tile past the request's keys, listed by a mask, reads no table entry)\n\
             \x20       const unsigned page = key0 < seqlen_k ? min((unsigned)p.block_table[b * p.block_table_stride + (key0 >> {log})], (unsigned)p.num_pages - 1u) : 0u;\n\
             \x20       const long long tile_off = page * p.kv_stride_batch + (long long)(key0 & {mask}) * p.kv_stride_key + kv_head * p.kv_stride_head;",
            ps = page_size,
            tk = TILE_KEYS,
            log = page_size.trailing_zeros(),
            mask = page_size - 1
        ),
        KvLayout::Paged { .. } => "        // paged, pages smaller than a tile: each key finds its page (below)\n\
             \x20       const long long tile_off = kv_head * p.kv_stride_head;"
            .into(),
    }
}

/// The offset of key row `row` (key `key0 + row`, valid when `valid`), chunk `chunk`.
fn row_offset(config: DecodeConfig) -> String {
    match config.kv {
        KvLayout::Paged { page_size } if page_size < TILE_KEYS => format!(
            "            // paged [num_pages, {ps}, Hkv, D]: page block_table[b][key / {ps}], slot key % {ps}\n\
             \x20           const unsigned page = valid ? min((unsigned)p.block_table[b * p.block_table_stride + (key >> {log})], (unsigned)p.num_pages - 1u) : 0u;\n\
             \x20           const long long off = tile_off + page * p.kv_stride_batch + (long long)(key & {mask}) * p.kv_stride_key + chunk * 8u;",
            ps = page_size,
            log = page_size.trailing_zeros(),
            mask = page_size - 1
        ),
        _ => "            const long long off = tile_off + (long long)row * p.kv_stride_key + chunk * 8u;".into(),
    }
}

/// The warp's normalised o into the merge area: c-value cv of n-tile (t, g) at row
/// r + 8 (cv / 2), d = 64g + 16q + 8 (cv % 2) + t (o_columns), 16 consecutive floats
/// per row and group.
fn o_to_smem(config: DecodeConfig) -> String {
    let d = config.head_dim;
    let mut s = String::new();
    for g in 0..d / 64 {
        for hrow in 0..2u32 {
            for half in 0..2u32 {
                for quarter in 0..2u32 {
                    let base = 64 * g + 8 * half + 4 * quarter + 8 * d * hrow;
                    let vals: Vec<String> = (0..4)
                        .map(|i| {
                            format!(
                                "o[{}][{}] * inv_l[{hrow}]",
                                8 * g + 4 * quarter + i,
                                2 * hrow + half
                            )
                        })
                        .collect();
                    let _ = writeln!(
                        s,
                        "        *reinterpret_cast<float4*>(merge_o + o_lane + {base}u) = make_float4({});",
                        vals.join(", ")
                    );
                }
            }
        }
    }
    s
}

/// The shared-K/V epilogue under `cluster_merge`: the cluster is the `num_splits` CTAs of
/// the same rows, each holding its split's normalised o (`all_o`, `[CTA_ROWS, D]` fp32)
/// and lse (`merge_lse`) in its merge area; rank r merges rows r, r + n, ... of all n
/// merge areas (the family combine's math, `combine::HELPERS`) and writes o and lse. A
/// second cluster barrier keeps every CTA's shared memory alive until all reads are done.
const CLUSTER_MERGE_BODY: &str = r#"        fm_cluster_sync();
        const int n = p.num_splits;  // the cluster's size; this CTA's rank is `split`
        const unsigned o_base = fm_smem_u32(all_o), lse_base = fm_smem_u32(merge_lse);
        const int mine = ($CTA_ROWS - split + n - 1) / n;  // rows split, split + n, ...
        for (int idx = (int)tid; idx < mine * $MERGE_VECS; idx += $THREADS) {
            const int row = split + n * (idx / $MERGE_VECS);
            const int col = (idx % $MERGE_VECS) * 4;
            const int prow = cta_row0 + row;
            if (prow >= rows) continue;
            // Every rank's lse and o of the row: loads issued together, then merged.
            float l[$MAX_CLUSTER];
            float4 v[$MAX_CLUSTER];
            #pragma unroll
            for (int s = 0; s < $MAX_CLUSTER; ++s) {
                if (s < n) {
                    l[s] = fm_ld_cluster_f32(fm_mapa(lse_base + (unsigned)row * 4u, s));
                    // merge area [CTA_ROWS][D] floats: row, columns col .. col + 3
                    v[s] = fm_ld_cluster_f32x4(fm_mapa(o_base + (unsigned)(row * $HEAD_DIM + col) * 4u, s));
                }
            }
            float max_lse = FM_NEG_INF;
            #pragma unroll
            for (int s = 0; s < $MAX_CLUSTER; ++s) if (s < n) max_lse = fmaxf(max_lse, l[s]);
            FmLseMerge merge;
            fm_lse_merge_init(merge, max_lse);
            #pragma unroll
            for (int s = 0; s < $MAX_CLUSTER; ++s) if (s < n) fm_lse_merge_add(merge, l[s], v[s]);
            float4 out;
            const float lse = fm_lse_merge_finish(merge, out);
            $STORE_OUT
        }
        fm_cluster_sync();
        return;"#;

const TEMPLATE: &str = r#"$HEADER
$DTYPE_HELPERS
$ABI
$COMBINE_HELPERS
$NEG_INF

$MMA_16816
$SCALE_MAX
$ACT2
// Four floats to four activations at dst (8 bytes).
__device__ __forceinline__ void fm_store4(fm_act* dst, float4 v) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(fm_act2(v.x, v.y), fm_act2(v.z, v.w));
}
$MATH
$GRID_DEPENDENCY
$SMEM_U32
$CP_ASYNC
$CLUSTER
$LDS128
$SPLIT_RANGE
// Shared tiles are addressed in 16-byte chunks, offset row * $CHUNKS + chunk, swizzled
// (fragmask_layout::Swizzle, CuTe's Swizzle<B,M,S>: x ^ ((x & mask) >> S)).
// Q and K tiles: $QK_SWIZZLE.
__device__ __forceinline__ unsigned fm_swizzle_qk(unsigned x) { return x ^ ((x & $QK_SRC_MASKu) >> $QK_SHIFTu); }
// V tiles: $V_SWIZZLE.
__device__ __forceinline__ unsigned fm_swizzle_v(unsigned x) { return x ^ ((x & $V_SRC_MASKu) >> $V_SHIFTu); }

extern "C" __global__ void __launch_bounds__($THREADS, $MIN_CTAS) fm_decode_split(const __grid_constant__ FmDecodeParams p) {
    extern __shared__ __align__(128) unsigned char fm_smem[];
    const unsigned tid = threadIdx.x;
    const unsigned warp = tid / 32u;
    // The lane: the thread index of the m16n8k16 fragment layouts.
    const unsigned thread = tid % 32u;
    // C fragment (SM80_C_LAYOUT): the lane's rows are frag_row and frag_row + 8, its
    // columns of an n-tile frag_col and frag_col + 1.
    const unsigned frag_row = $C_ROW;  // row layout $C_ROW_LAYOUT
    const unsigned frag_col = $C_COL;  // column layout $C_COL_LAYOUT
    // Chunk offsets of the lane's operands and o (operands.rs):
    const unsigned qk_lane = $QK_LANE;  // QK operand tiling $QK_LANE_LAYOUT
    const unsigned v_lane = $V_LANE;  // V operand tiling $V_LANE_LAYOUT
    const unsigned o_lane = $O_LANE;  // o tiling $O_LANE_LAYOUT (floats of [16, $HEAD_DIM])
    const int b = blockIdx.z;
    const int hkv = blockIdx.y;  // the KV head (packed), or the query head (kv_head_div = G)
    const int kv_head = hkv / p.kv_head_div;  // K and V's head
    // With cluster_merge, a cluster is the splits of one m-block and its rank the split.
    const int m_block = p.cluster_merge ? (int)blockIdx.x / p.num_splits : (int)blockIdx.x % p.m_blocks;
    const int split = p.cluster_merge ? (int)blockIdx.x % p.num_splits : (int)blockIdx.x / p.m_blocks;

    // Programmatic dependent launch (PTX ISA 9.7.13.11 griddepcontrol): let the combine
    // launch now; wait for the previous kernel's writes before the first global read.
    fm_launch_dependents();
    fm_wait_prior_grids();

    // ---- scheduler: this CTA's key tiles, from the device's lengths ----
    const int seqlen_k = min(max(p.seqlens_k ? p.seqlens_k[b] : p.capacity_k, 0), p.capacity_k);
    // Varlen queries: this request's tokens are q_start .. q_start + seqlen_q of q and o
    // (clamped to the planned seqlen_q, the grid's capacity); CTAs past them exit.
    // (Offsets from the device are clamped to the rows of q, never read past them.)
    const int q_start = p.cu_seqlens_q ? min(max(p.cu_seqlens_q[b], 0), p.total_q) : 0;
    const int seqlen_q = p.cu_seqlens_q ? min(min(max(p.cu_seqlens_q[b + 1] - q_start, 0), p.seqlen_q), p.total_q - q_start) : p.seqlen_q;
    const int group = p.group;
    const int rows = seqlen_q * group;  // packed rows (token, head in group), heads fastest
    // The CTA's $CTA_ROWS packed rows; this warp's 16 (shared K/V: warp w holds m16 tile w).
    const int cta_row0 = m_block * $CTA_ROWS;
    if (cta_row0 >= rows) return;  // uniform over the CTA (varlen only)
    const int row0 = cta_row0 + ($SHARED ? (int)warp * $TILE_ROWS : 0);
    const int offset_q = seqlen_k - seqlen_q;  // token t sits at key position offset_q + t (bottom-right)
    const int t_first = cta_row0 / group;
#if $MASKED
    // Block-sparse mask: the CTA walks the 16-key tiles of the key blocks listed for its
    // mask row block ($MASK_SUB tiles per $MASK_BLOCK_N-key block). The host checked that
    // the CTA's tokens lie in one row block (docs/decode.md, "Masks"); causal, window and
    // length still apply per element below.
    const int mask_row_block = t_first / p.mask_block_m;
    const long long mask_row = (long long)b * p.mask_batch_stride + (long long)hkv * p.mask_head_stride + mask_row_block;
    const int2* mask_list = reinterpret_cast<const int2*>(p.mask_list) + mask_row * p.mask_n_blocks;
    const int tile_lo = 0;
    const int tiles = p.mask_count[mask_row] * $MASK_SUB;
#if !$SHARED
    // Tile i of the list: key block mask_list[i / SUB].x, its 16 keys (i % SUB).
    auto tile_key0 = [&](int tile) { return __ldg(&mask_list[tile / $MASK_SUB].x) * $MASK_BLOCK_N + (tile % $MASK_SUB) * $TILE_KEYS; };
#endif
#else
    const int t_last = min(cta_row0 + $CTA_ROWS - 1, rows - 1) / group;
    int key_lo = 0, key_hi = seqlen_k;  // keys any row of the CTA sees: [key_lo, key_hi)
    if (p.window_left >= 0) key_lo = max(0, offset_q + t_first - p.window_left);
    if (p.window_right >= 0) key_hi = min(key_hi, offset_q + t_last + p.window_right + 1);
    const int tile_lo = key_lo / $TILE_KEYS;
    const int tiles = key_hi > key_lo ? (key_hi + $TILE_KEYS - 1) / $TILE_KEYS - tile_lo : 0;
    auto tile_key0 = [&](int tile) { return tile * $TILE_KEYS; };
#endif
    // Splits cut the tiles in steps of $STEP_TILES (a shared-K/V stage; 1 otherwise):
    // split s takes steps [steps s / n, steps (s + 1) / n) (reference::split_key_ranges).
    const int steps = (tiles + $STEP_TILES - 1) / $STEP_TILES;
    const int split_first = tile_lo + fm_split_start(steps, split, p.num_splits) * $STEP_TILES;
    const int split_end = min(tile_lo + tiles, tile_lo + fm_split_start(steps, split + 1, p.num_splits) * $STEP_TILES);
    // The keys each of the lane's two rows sees: [lo_key, hi_key).
    int lo_key[2], hi_key[2];
    #pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int token = min(row0 + (int)frag_row + 8 * i, rows - 1) / group;
        const int pos = offset_q + token;
        lo_key[i] = p.window_left >= 0 ? pos - p.window_left : 0;
        hi_key[i] = p.window_right >= 0 ? min(seqlen_k, pos + p.window_right + 1) : seqlen_k;
    }
    // Keys both of the lane's rows see: a tile inside [lo_all, hi_all) needs no bound test.
    const int lo_all = max(lo_key[0], lo_key[1]), hi_all = min(hi_key[0], hi_key[1]);
    (void)lo_all; (void)hi_all;
#if $MASKED && !$SHARED
    // The lane's two rows inside the mask block (row-major bits, $MASK_ROW_WORDS words a row).
    int mask_brow[2];
    #pragma unroll
    for (int i = 0; i < 2; ++i) mask_brow[i] = min(row0 + (int)frag_row + 8 * i, rows - 1) / group - mask_row_block * p.mask_block_m;
#endif
#if $MASKED && $SHARED
    // The split's list entries, staged once in shared memory (at most $LIST_CAP; later
    // ones are read from global memory): no list load waits in the key loop.
    const int2* list_smem = reinterpret_cast<const int2*>(fm_smem + $LIST_OFFSETu);
    const int entry_first = split_first / $MASK_SUB;
    {
        const int entries = split_end > split_first ? (split_end - 1) / $MASK_SUB + 1 - entry_first : 0;
        int2* dst = reinterpret_cast<int2*>(fm_smem + $LIST_OFFSETu);
        for (int e = (int)tid; e < min(entries, $LIST_CAP); e += $THREADS) dst[e] = __ldg(&mask_list[entry_first + e]);
    }
    __syncthreads();
    auto entry = [&](int tile) -> int2 {
        const int e = tile / $MASK_SUB - entry_first;
        return e < $LIST_CAP ? list_smem[e] : __ldg(&mask_list[tile / $MASK_SUB]);
    };
    auto step_key0 = [&](int tile) { return entry(tile).x * $MASK_BLOCK_N + (tile % $MASK_SUB) * $TILE_KEYS; };
#elif $SHARED
    auto step_key0 = tile_key0;   // the shared-K/V loops' (the one-warp loops read tile_key0)
#endif

    // ---- producer: Q tiles [$CTA_ROWS, D] (packed rows, 16 per tile), then the K/V stages ----
    fm_act* q_tile = reinterpret_cast<fm_act*>(fm_smem);
    const unsigned q_smem = fm_smem_u32(q_tile);
    const fm_act* q_kv_head = p.q + b * p.q_stride_batch + (long long)q_start * p.q_stride_token + (long long)hkv * group * p.q_stride_head;
    for (unsigned idx = tid; idx < $CTA_ROWS * $CHUNKSu; idx += $THREADSu) {
        const unsigned row = idx / $CHUNKSu, chunk = idx % $CHUNKSu;
        const int prow = cta_row0 + (int)row;
        const bool valid = prow < rows;
        // q [B, Sq, H, D]: packed row prow is token prow / G, head hkv G + prow % G
        const fm_act* src = valid ? q_kv_head + (long long)(prow / group) * p.q_stride_token + (long long)(prow % group) * p.q_stride_head + chunk * 8u : p.q;
        // Q tile row / 16, its row row % 16 (the QK swizzle is per 16-row tile)
        fm_cp_async16(q_smem + (row / $TILE_ROWSu) * $TILE_BYTESu + fm_swizzle_qk((row % $TILE_ROWSu) * $CHUNKSu + chunk) * 16u, src, valid ? 16u : 0u);
    }
    fm_cp_async_commit();
    // This warp's Q tile (its m16 rows).
    const unsigned q_warp = q_smem + ($SHARED ? warp * $TILE_BYTESu : 0u);
    const unsigned kv_smem = q_smem + $Q_BYTESu;

    float o[$N_TILES][4];
    #pragma unroll
    for (int n = 0; n < $N_TILES; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_run[2] = {FM_NEG_INF, FM_NEG_INF};  // running max of rows r, r + 8 (scaled, base 2)
    float l_run[2] = {0.f, 0.f};                // the lane's part of the running sums
#if $SHARED
    // CTA stages: [stage][$STEP_TILES x (K tile, V tile)][mask words [$STEP_TILES][$CTA_ROWS]];
    // every warp consumes every tile of a stage (its own 16 rows).
    const int nsteps = split_end > split_first ? (split_end - split_first + $STEP_TILES - 1) / $STEP_TILES : 0;
    auto load_step = [&](int step, int stage) {
        const unsigned st_base = kv_smem + stage * $CTA_STAGE_BYTESu;
        // Tile by tile: each thread finds a tile's first key (list entry, page) once, then
        // copies its $TILE_COPIES chunks of K and V of it.
        #pragma unroll
        for (int st = 0; st < $STEP_TILES; ++st) {
            const int tile = split_first + step * $STEP_TILES + st;
            const int key0 = tile < split_end ? step_key0(tile) : seqlen_k;  // past the split: nothing read
$TILE_BASE
            const unsigned k_dst = st_base + (unsigned)st * $STAGE_BYTESu;
            #pragma unroll
            for (int i = 0; i < $TILE_COPIES; ++i) {
                const unsigned rest = tid + $THREADSu * i;
                const unsigned row = rest / $CHUNKSu, chunk = rest % $CHUNKSu;
                const int key = key0 + (int)row;
                const bool valid = key < seqlen_k;  // zero-filled past the request's keys
$ROW_OFFSET
                const unsigned bytes = valid ? 16u : 0u;
                fm_cp_async16(k_dst + fm_swizzle_qk(row * $CHUNKSu + chunk) * 16u, valid ? p.k + off : p.k, bytes);
                fm_cp_async16(k_dst + $TILE_BYTESu + fm_swizzle_v(row * $CHUNKSu + chunk) * 16u, valid ? p.v + off : p.v, bytes);
            }
        }
#if $MASKED
        // Each partial tile's word of each CTA row, copied with the tile (full tiles: none).
        #pragma unroll
        for (int i = 0; i < $WORD_COPIES; ++i) {
            const unsigned idx = tid + $THREADSu * i;
            const unsigned st = idx / $CTA_ROWSu, r = idx % $CTA_ROWSu;
            const int tile = split_first + step * $STEP_TILES + (int)st;
            if (idx < $STEP_TILES * $CTA_ROWSu && tile < split_end) {
                const int partial = entry(tile).y;
                if (partial >= 0) {
                    const int brow = min(cta_row0 + (int)r, rows - 1) / group - mask_row_block * p.mask_block_m;
                    const int col = (tile % $MASK_SUB) * $TILE_KEYS;  // a 16-bit run never straddles a word
                    fm_cp_async4(st_base + $STEP_TILES * $STAGE_BYTESu + idx * 4u, p.mask_bits + ((long long)partial * p.mask_block_m + brow) * $MASK_ROW_WORDS + col / 32);
                }
            }
        }
#endif
    };
    #pragma unroll
    for (int s = 0; s < $STAGES - 1; ++s) {
        if (s < nsteps) load_step(s, s);
        fm_cp_async_commit();
    }
    for (int j = 0; j < nsteps; ++j) {
        fm_cp_async_wait<$STAGES - 2>();  // step j (and the Q group) landed: this thread's copies
        __syncthreads();                  // ... everyone's; and everyone is done with step j - 1
        if (j + $STAGES - 1 < nsteps) load_step(j + $STAGES - 1, (j + $STAGES - 1) % $STAGES);
        fm_cp_async_commit();
        const unsigned st_base = kv_smem + (j % $STAGES) * $CTA_STAGE_BYTESu;
        // The mask bits of tile `tile` (stage slot st) for the lane's two rows (all set:
        // a full block, or unmasked).
        auto stage_bits = [&](int tile, int st, unsigned (&bits)[2]) {
            bits[0] = bits[1] = 0xffffu;
#if $MASKED
            if (entry(tile).y >= 0) {
                const unsigned* words = reinterpret_cast<const unsigned*>(fm_smem + (st_base - q_smem) + $STEP_TILES * $STAGE_BYTESu) + st * $CTA_ROWS;
                const int col = (tile % $MASK_SUB) * $TILE_KEYS;
                #pragma unroll
                for (int h = 0; h < 2; ++h) bits[h] = (words[row0 - cta_row0 + (int)frag_row + 8 * h] >> (col % 32)) & 0xffffu;
            }
#endif
        };
#if $PAIR
        // Two 16-key tiles per softmax update: one max / sum / rescale per 32 keys and
        // two independent QK chains. A second tile past the split holds zeros (load_step)
        // and is hidden by key0_1 = seqlen_k.
        #pragma unroll 1
        for (int st = 0; st < $STEP_TILES; st += 2) {
            const int tile = split_first + j * $STEP_TILES + st;
            if (tile >= split_end) break;  // uniform over the CTA
            const bool has1 = tile + 1 < split_end;
            const int key0 = step_key0(tile);
            const int key0_1 = has1 ? step_key0(tile + 1) : seqlen_k;
            unsigned row_bits[2], row_bits1[2];
            stage_bits(tile, st, row_bits);
            if (has1) stage_bits(tile + 1, st + 1, row_bits1); else row_bits1[0] = row_bits1[1] = 0u;
            const unsigned k_tile = st_base + st * $STAGE_BYTESu;
            const unsigned v_tile = k_tile + $TILE_BYTESu;
            const unsigned k_tile1 = k_tile + $STAGE_BYTESu;
            const unsigned v_tile1 = v_tile + $STAGE_BYTESu;
$TILE_PAIR_BODY
        }
#else
        #pragma unroll 1
        for (int st = 0; st < $STEP_TILES; ++st) {
            const int tile = split_first + j * $STEP_TILES + st;
            if (tile >= split_end) break;  // uniform over the CTA
            const int key0 = step_key0(tile);
            unsigned row_bits[2];
            stage_bits(tile, st, row_bits);
            const unsigned k_tile = st_base + st * $STAGE_BYTESu;
            const unsigned v_tile = k_tile + $TILE_BYTESu;
$TILE_BODY
        }
#endif
    }
    fm_cp_async_wait<0>();
#else
    // This warp's stages: [stage][K tile, V tile][16 keys][D], after the Q tile.
    const unsigned warp_smem = kv_smem + warp * $WARP_STAGES_BYTESu;
    auto load_tile = [&](int tile, int stage) {
        const unsigned k_dst = warp_smem + stage * $STAGE_BYTESu;
        const unsigned v_dst = k_dst + $TILE_BYTESu;
        const int key0 = tile_key0(tile);
$TILE_BASE
        #pragma unroll
        for (int i = 0; i < $KV_CHUNKS_PER_LANE; ++i) {
            const unsigned idx = thread + 32u * i;
            const unsigned row = idx / $CHUNKSu, chunk = idx % $CHUNKSu;  // a warp copies whole rows
            const int key = key0 + (int)row;
            const bool valid = key < seqlen_k;  // zero-filled past the request's keys
$ROW_OFFSET
            const unsigned bytes = valid ? 16u : 0u;
            fm_cp_async16(k_dst + fm_swizzle_qk(row * $CHUNKSu + chunk) * 16u, valid ? p.k + off : p.k, bytes);
            fm_cp_async16(v_dst + fm_swizzle_v(row * $CHUNKSu + chunk) * 16u, valid ? p.v + off : p.v, bytes);
        }
    };
    // Warp w takes tiles split_first + w, + $WARPS, ...
    const int my_first = split_first + (int)warp;
    const int count = split_end > my_first ? (split_end - my_first + $WARPS - 1) / $WARPS : 0;
    #pragma unroll
    for (int s = 0; s < $STAGES - 1; ++s) {
        if (s < count) load_tile(my_first + s * $WARPS, s);
        fm_cp_async_commit();
    }
    fm_cp_async_wait<$STAGES - 1>();  // the Q group, committed first, has landed
    __syncthreads();

    // ---- consumer: online softmax over the warp's tiles ----
    for (int i = 0; i < count; ++i) {
        const int ahead = i + $STAGES - 1;
        if (ahead < count) load_tile(my_first + ahead * $WARPS, ahead % $STAGES);
        fm_cp_async_commit();
        fm_cp_async_wait<$STAGES - 1>();  // tile i has landed (this lane's copies)
        __syncwarp();                    // ... and the other lanes'
        const int tile = my_first + i * $WARPS;
        const int key0 = tile_key0(tile);
        // The 16 mask bits of each of the lane's rows for this tile (all set: unmasked or a full block).
        unsigned row_bits[2] = {0xffffu, 0xffffu};
#if $MASKED
        {
            const int partial = __ldg(&mask_list[tile / $MASK_SUB].y);
            if (partial >= 0) {
                const int col = (tile % $MASK_SUB) * $TILE_KEYS;  // a 16-bit run never straddles a word
                #pragma unroll
                for (int h = 0; h < 2; ++h)
                    row_bits[h] = (__ldg(&p.mask_bits[((long long)partial * p.mask_block_m + mask_brow[h]) * $MASK_ROW_WORDS + col / 32]) >> (col % 32)) & 0xffffu;
            }
        }
#endif
        const unsigned k_tile = warp_smem + (i % $STAGES) * $STAGE_BYTESu;
        const unsigned v_tile = k_tile + $TILE_BYTESu;
$TILE_BODY
        __syncwarp();  // every lane has read the stage before it is refilled
    }
    fm_cp_async_wait<0>();
#endif

    // ---- epilogue: merge the warps' (o, lse) (family combine), write o or partials ----
    float inv_l[2], lse_warp[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
$ROW_FINISH
    }
    __syncthreads();  // every warp is done with its stages: they become the merge area
    // [warps][16][D] o and [warps][16] lse: with shared K/V, warp w's rows are CTA rows 16 w ..
    float* merge_o = reinterpret_cast<float*>(fm_smem + $Q_BYTESu) + warp * $TILE_ROWS * $HEAD_DIM;
    float* merge_lse = reinterpret_cast<float*>(fm_smem + $Q_BYTESu) + $WARPS * $TILE_ROWS * $HEAD_DIM;
$O_TO_SMEM
    if (frag_col == 0u) {
        merge_lse[warp * $TILE_ROWS + frag_row] = lse_warp[0];
        merge_lse[warp * $TILE_ROWS + frag_row + 8u] = lse_warp[1];
    }
    __syncthreads();
    const float* all_o = reinterpret_cast<const float*>(fm_smem + $Q_BYTESu);
#if $SHARED
    if (p.cluster_merge) {
$CLUSTER_MERGE_BODY
    }
#endif
    for (unsigned idx = tid; idx < $CTA_ROWS * $MERGE_VECSu; idx += $THREADSu) {
        const int row = (int)(idx / $MERGE_VECSu);
        const int col = (int)(idx % $MERGE_VECSu) * 4;
        const int prow = cta_row0 + row;
        if (prow >= rows) continue;
#if $SHARED
        // One warp holds the row: its (o, lse) as they are.
        float4 out = *reinterpret_cast<const float4*>(all_o + row * $HEAD_DIM + col);
        const float lse = merge_lse[row];
#else
        float max_lse = FM_NEG_INF;
        #pragma unroll
        for (int w = 0; w < $WARPS; ++w) max_lse = fmaxf(max_lse, merge_lse[w * $TILE_ROWS + row]);
        FmLseMerge merge;
        fm_lse_merge_init(merge, max_lse);
        #pragma unroll
        for (int w = 0; w < $WARPS; ++w)
            fm_lse_merge_add(merge, merge_lse[w * $TILE_ROWS + row], *reinterpret_cast<const float4*>(all_o + (w * $TILE_ROWS + row) * $HEAD_DIM + col));
        float4 out;
        const float lse = fm_lse_merge_finish(merge, out);
#endif
        if (p.num_splits == 1) $STORE_OUT
        else {
            // partials [num_splits, B, Hkv, m_pad, D] and [num_splits, B, Hkv, m_pad]
            const long long ws_row = (((long long)split * p.batch + b) * p.kv_heads + hkv) * p.m_pad + prow;
            *reinterpret_cast<float4*>(p.ws_o + ws_row * $HEAD_DIM + col) = out;
            if (col == 0) p.ws_lse[ws_row] = lse;
        }
    }
}
$COMBINE_KERNEL
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::config::KvLayout;
    use crate::family::dtype::ActDtype;

    #[test]
    fn rust_mirror_has_the_c_offsets() {
        assert_eq!(DecodeParams::rust_offsets(), DecodeParams::ABI.offsets());
        assert_eq!(
            core::mem::size_of::<DecodeParams>(),
            DecodeParams::ABI.size()
        );
    }

    #[test]
    fn source_takes_every_number_from_the_config() {
        let config =
            DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Paged { page_size: 16 }).unwrap();
        let src = source(config).unwrap();
        assert!(!src.contains("#include"));
        assert!(src.contains("__launch_bounds__(128, 2)"));
        assert!(src.contains("float o[16][4];"));
        assert!(src.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        assert!(src.contains("cvt.rn.bf16x2.f32"));
        assert!(src.contains("(key0 >> 4)"));
        assert!(src.contains("fm_mma_16816(o[15]"));
        assert!(!src.contains("fm_mma_16816(o[16]"));
        let wait = src.find("fm_wait_prior_grids();").unwrap();
        assert!(wait < src.find("p.seqlens_k[b]").unwrap());
        let per_key =
            source(DecodeConfig::new(64, ActDtype::F16, KvLayout::Paged { page_size: 1 }).unwrap())
                .unwrap();
        assert!(per_key.contains("(key >> 0)"));
        assert!(per_key.contains("f32.f16.f16.f32"));
    }

    #[test]
    fn every_lane_index_line_names_its_layout() {
        let src =
            source(DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Contiguous).unwrap()).unwrap();
        assert!(src.contains("QK operand tiling (4,8):(1,16)"));
        assert!(src.contains("V operand tiling (4,8):(32,1)"));
        assert!(src.contains("o tiling (4,8):(16,128)"));
        assert!(src.contains("Swizzle<1,2,2>"));
        assert!(src.contains("Swizzle<3,0,4>"));
    }
}
