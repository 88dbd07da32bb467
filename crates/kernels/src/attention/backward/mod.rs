//! Masked attention backward for SM90 (H100): dQ, dK, dV from Q, K, V, O, lse and dO
//! (docs/backward.md; FlashAttention-3's backward structure, read for understanding).
//!
//! [`BackwardKernel::source`] generates one header-free translation unit with three kernels
//! (four with GQA group slices):
//! - [`PRE_KERNEL_NAME`]: `Dsum = rowsum(dO ∘ O)` (f32), `lse` moved to the log2 domain
//!   (`+inf` for rows with no visible key and for padding rows, so their P is 0), the f32 dQ
//!   accumulator and the deterministic mode's semaphores zeroed;
//! - [`KERNEL_NAME`]: one CTA per `(key tile of 64·W keys, dK/dV column split, KV head, batch)`
//!   (at head dim 256 both column halves of a 64-key tile are two consumer warpgroups of one
//!   CTA, [`BackwardKernel::with_pair`])
//!   walking the query heads of its GQA group and, for each, the 64-query steps its tile
//!   visits (window bounds in the kernel, or the mask's transposed lists). Per step:
//!   `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (wgmma SS, keys as the MMA rows: SwapAB, so `Pᵀ` and `dSᵀ`
//!   are the RS A operand, docs/architecture.md fact 5), `dV += Pᵀ dO`, `dK += dSᵀ Q` (RS,
//!   registers for the whole CTA), `dS` to shared memory and `dQ += dS K` (SS) reduced into the
//!   f32 accumulator ([`DqReduce`]: TMA bulk reductions of staged chunks, or `red.global.add`
//!   from the registers, in the accumulator's register order or row-major);
//! - [`POST_KERNEL_NAME`]: `dQ = scale · accumulator` to bf16/fp16;
//! - [`POST_KV_KERNEL_NAME`] (only with [`BackwardKernel::with_group_slices`]): dK and dV cast
//!   from their f32 accumulators.
//!
//! Conventions are the forward's ([`super`]): natural-log `lse`, window semantics, GQA head
//! `h / (H / Hkv)`. dK and dV are summed over the query heads of a group in registers (one CTA
//! walks all of them), so they need no atomics and are deterministic, unless group slices
//! split the heads over several CTAs, which add into f32 accumulators (docs/backward.md,
//! "GQA"; refused in the deterministic mode); dQ is deterministic in
//! [`BackwardKernel::with_deterministic`] mode (a per-(query step, split) semaphore orders the
//! reductions by key tile, as FlashAttention-3's `Deterministic`).

mod config;
mod dq;
mod source;
mod template;

pub use config::{BackwardKernel, BackwardMask, DqReduce, DQ_CHUNK_BYTES, MAX_GROUP_SLICES};

/// Name of the generated main (dK, dV, dQ-accumulate) kernel.
pub const KERNEL_NAME: &str = "fragmask_attention_bwd";
/// Name of the preprocess kernel (Dsum, lse in log2, zeroing).
pub const PRE_KERNEL_NAME: &str = "fragmask_attention_bwd_pre";
/// Name of the postprocess kernel (dQ scale and cast).
pub const POST_KERNEL_NAME: &str = "fragmask_attention_bwd_post";
/// Name of the kv postprocess kernel (dK, dV cast from their f32 accumulators), generated
/// only with GQA group slices ([`BackwardKernel::with_group_slices`]).
pub const POST_KV_KERNEL_NAME: &str = "fragmask_attention_bwd_post_kv";
/// Queries per step of the main kernel (the N of `Sᵀ`) by default; head dim 64's window
/// walk, documents grid and 128x128 tile lists take [`WIDE_STEP_M`]
/// ([`BackwardKernel::with_step_m`]).
pub const STEP_M: u32 = 64;
/// The wide step: 128 queries, FlashAttention-3/4's `m_block_size` at head dim 64.
pub const WIDE_STEP_M: u32 = 128;
/// Query rows of one dQ chunk of the accumulator (the m64n64 dQ GEMM's rows): a step holds
/// `step_m / 64` of them, and the postprocess takes one chunk per block.
pub const DQ_CHUNK_ROWS: u32 = 64;
/// Query rows of the workspace (`lse_log2`, `dsum`, the dQ accumulator) are padded to a
/// multiple of this (every mask tile's `block_m` divides it), so no step reads past them.
pub const ROW_PAD: u32 = 128;
/// Rows per block of the pre/postprocess kernels (one warp per row).
pub const ROWS_PER_BLOCK: u32 = 8;

crate::abi_struct! {
    /// The backward kernels' by-value parameter struct `fm_bwd_params` (one field list for the
    /// CUDA struct and this mirror; docs/architecture.md, "ABI").
    pub struct BackwardParams as "fm_bwd_params" {
        /// [B, H, Sq, D] forward output (strided: o_stride_*), read by the preprocess.
        o: Ptr("const unsigned short*"),
        /// [B, H, Sq, D] output gradient (strided: do_stride_*), read by the preprocess.
        d_o: Ptr("const unsigned short*"),
        /// [B, H, Sq] natural-log lse of the forward (contiguous).
        lse: Ptr("const float*"),
        /// [B, H, Sq_pad] lse * log2(e) (+inf: P = 0), written by the preprocess.
        lse_log2: Ptr("float*"),
        /// [B, H, Sq_pad] rowsum(dO ∘ O), written by the preprocess.
        dsum: Ptr("float*"),
        /// [B, H, Sq_pad, D] f32 dQ accumulator.
        dq_accum: Ptr("float*"),
        /// [B, H, Sq_pad / 64, d_split] semaphores of the deterministic mode.
        sem: Ptr("int*"),
        /// [B, Hkv, Sk, D] f32 dK accumulator of the group slices (zeroed before the main kernel).
        dk_accum: Ptr("float*"),
        /// [B, Hkv, Sk, D] f32 dV accumulator of the group slices (zeroed before the main kernel).
        dv_accum: Ptr("float*"),
        /// [B, H, Sq, D] dQ output (contiguous, or strided: dq_stride_*).
        dq: Ptr("unsigned short*"),
        /// [B, Hkv, Sk, D] dK output (contiguous, or strided: dkv_stride_*).
        dk: Ptr("unsigned short*"),
        /// [B, Hkv, Sk, D] dV output (contiguous, or strided: dkv_stride_*).
        dv: Ptr("unsigned short*"),
        /// [Bm, Hm, Nb] partial query tiles per key tile (transposed lists).
        q_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Nb, Mb] partial query tiles, ascending.
        q_indices: Ptr("const int*"),
        /// [Bm, Hm, Nb] full query tiles per key tile.
        full_q_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Nb, Mb] full query tiles, ascending.
        full_q_indices: Ptr("const int*"),
        /// [Bm, Hm, Nb, Mb] index along dim 0 of q_words of partial entry j.
        q_tile_offsets: Ptr("const int*"),
        /// [tiles, mask threads, words per thread] FragmentNative words of the backward accumulator.
        q_words: Ptr("const unsigned*"),
        /// [Bm, Hm, Mb] forward partial counts (deterministic order).
        kv_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Mb, Nb] forward partial key tiles, ascending.
        kv_indices: Ptr("const int*"),
        /// [Bm, Hm, Mb] forward full counts.
        full_kv_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Mb, Nb] forward full key tiles, ascending.
        full_kv_indices: Ptr("const int*"),
        /// [plane, mask key tiles] the mask's key tiles, most visited query tiles first (CTA dispatch order; null: index order).
        tile_order: Ptr("const int*"),
        /// Documents grid: [items, 4] work items (document start, length, key tile, document), 16-byte aligned.
        doc_items: Ptr("const int*"),
        /// Paired key blocks: [planes, n_ctas] pair headers, then the pairs' steps, int4 each (host: attention::backward::key_pairs).
        key_pairs: Ptr("const int*"),
        /// Element stride of O between batches.
        o_stride_b: I64("long long"),
        /// Element stride of O between heads.
        o_stride_h: I64("long long"),
        /// Element stride of O between rows.
        o_stride_s: I64("long long"),
        /// Element stride of dO between batches.
        do_stride_b: I64("long long"),
        /// Element stride of dO between heads.
        do_stride_h: I64("long long"),
        /// Element stride of dO between rows.
        do_stride_s: I64("long long"),
        /// B.
        batch: I32("int"),
        /// H (query heads).
        heads: I32("int"),
        /// Hkv.
        kv_heads: I32("int"),
        /// Sq.
        seqlen_q: I32("int"),
        /// Sk.
        seqlen_k: I32("int"),
        /// Sq rounded up to ROW_PAD: rows of the workspace per (batch, head).
        seqlen_q_pad: I32("int"),
        /// Key tiles of the main kernel: ceil(Sk / CTA_N).
        n_ctas: I32("int"),
        /// Query tiles of the mask (its m_blocks); 0 in window mode.
        mask_m_blocks: I32("int"),
        /// Key tiles of the mask (its n_blocks); 0 in window mode.
        mask_n_blocks: I32("int"),
        /// Rows of the mask's [Bm, Hm, X] lists between batches (0: broadcast), in units of heads.
        mask_batch_heads: I32("int"),
        /// 1 if the mask has a head dimension, 0 if it broadcasts.
        mask_has_heads: I32("int"),
        /// Keys visible left of the diagonal (>= WINDOW_INFINITE: unbounded).
        window_left: I32("int"),
        /// Keys visible right of the diagonal.
        window_right: I32("int"),
        /// Diagonal offset (Sk - Sq: bottom-right alignment).
        diag_offset: I32("int"),
        /// (KV head, batch) planes per section of the launch order (key_tile::SECTION_ORDER: the window walk, and the tile lists in the deterministic mode; <= 1: the grid's).
        head_section: I32("int"),
        /// softmax scale * log2(e).
        scale_log2: F32("float"),
        /// softmax scale.
        scale: F32("float"),
        /// Element stride of dQ between batches (appended: the fields above keep their offsets; read by the strided-gradient kernels, BackwardKernel::with_strided_grads).
        dq_stride_b: I64("long long"),
        /// Element stride of dQ between heads.
        dq_stride_h: I64("long long"),
        /// Element stride of dQ between rows.
        dq_stride_s: I64("long long"),
        /// Element stride of dK and dV between batches (both in one layout).
        dkv_stride_b: I64("long long"),
        /// Element stride of dK and dV between heads.
        dkv_stride_h: I64("long long"),
        /// Element stride of dK and dV between rows.
        dkv_stride_s: I64("long long"),
        /// Dense lists at run time (ListEntries::DenseAtRunTime): the GPU packer's i32 count of partial tiles of the transposed lists (null: read the lists; appended, the fields above keep their offsets).
        lists_partial_count: Ptr("const int*"),
        /// The tiles of the lists' grid ([Bm, Hm, Nb, Mb]): a count equal to it means dense lists, both directions.
        lists_tiles: I32("int"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_mirror_has_the_c_offsets() {
        assert_eq!(
            BackwardParams::rust_offsets(),
            BackwardParams::ABI.offsets()
        );
        assert_eq!(
            core::mem::size_of::<BackwardParams>(),
            BackwardParams::ABI.size()
        );
    }
}
