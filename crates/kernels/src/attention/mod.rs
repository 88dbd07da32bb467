//! Masked attention forward for SM90 (H100): TMA + wgmma + mbarrier, warp-specialised.
//!
//! [`AttentionKernel::source`] generates one header-free CUDA translation unit
//! (compile for `sm_90a` with NVRTC) holding the kernel [`KERNEL_NAME`]:
//!
//! - Block tile 128 x 128 (`BLOCK_M` query rows x `BLOCK_N` keys), 3 warpgroups:
//!   warpgroup 0 is the producer (one thread issues the TMA loads of Q, K and V
//!   into 128-byte-swizzled shared memory, `setmaxnreg.dec` to 24), warpgroups
//!   1 and 2 are consumers (`setmaxnreg.inc` to 240) that own query rows
//!   `64*wg .. 64*wg+63`.
//! - `S = Q K^T` with wgmma SS (both K-major), `O += P V` with wgmma RS: P stays
//!   in registers, registers `d[8j..8j+7]` of S become the four A registers of
//!   k-block `j` (docs/architecture.md fact 5), V is read MN-major (`imm-trans-b = 1`).
//! - Online softmax in base 2 with quad shuffles; with `overlap`, the QK^T of
//!   tile `k` and the PV of tile `k-1` are in flight while the softmax of tile
//!   `k` runs (FlashAttention-3's intra-warpgroup overlap).
//! - Only listed tiles are visited. [`MaskMode::Blocks`] reads FlexAttention-style
//!   tile lists and applies FragmentNative mask words to partial tiles only (one
//!   `uint2` load per consumer thread per tile, straight into registers);
//!   [`MaskMode::Window`] computes causal / sliding-window / no-mask visibility in
//!   the kernel with no mask words.
//!
//! Conventions of the kernel (the host API documents them to users):
//! - `lse` is the natural-log row log-sum-exp of the scaled scores
//!   (`scale * max + ln(sum)`), FlashAttention-3's `softmax_lse`.
//! - A query row with no visible key gets `O = 0` and `lse = -inf`.
//! - Window mode: key `j` is visible from query `i` iff
//!   `i + diag_offset - window_left <= j <= i + diag_offset + window_right` and `j < seqlen_k`.
//!   Causal (top-left aligned, as torch SDPA `is_causal`) is `window_right = 0`,
//!   `window_left = infinite`, `diag_offset = 0`; bottom-right alignment is
//!   `diag_offset = seqlen_k - seqlen_q`. "Infinite" is any value `>= WINDOW_INFINITE`.

mod fragment;
mod source;

pub use fragment::{FragmentMap, NotSeparable, Term};

/// Name of the generated `extern "C"` kernel.
pub const KERNEL_NAME: &str = "fragmask_attention_fwd";
/// Query rows per block.
pub const BLOCK_M: u32 = 128;
/// Keys per tile.
pub const BLOCK_N: u32 = 128;
/// Consumer (MMA) warpgroups per block; each owns 64 query rows.
pub const CONSUMER_WARPGROUPS: u32 = 2;
/// Threads per block: one producer warpgroup plus the consumers.
pub const THREADS: u32 = 128 * (1 + CONSUMER_WARPGROUPS);
/// Threads that consume mask words (the consumer threads), the `threads` axis of `words`.
pub const MASK_THREADS: u32 = 128 * CONSUMER_WARPGROUPS;
/// f32 values of one tile per consumer thread (`BLOCK_M * BLOCK_N / MASK_THREADS`).
pub const MASK_VALUES_PER_THREAD: u32 = BLOCK_M * BLOCK_N / MASK_THREADS;
/// 32-bit mask words per consumer thread per partial tile (`ceil(values / 32)`).
pub const MASK_WORDS_PER_THREAD: u32 = MASK_VALUES_PER_THREAD.div_ceil(32);
/// Window bounds at or above this are treated as unbounded.
pub const WINDOW_INFINITE: i32 = 1 << 30;

/// How the kernel decides which keys each query sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MaskMode {
    /// Causal / sliding window / no mask, computed from indices in the kernel.
    Window,
    /// FlexAttention-style tile lists with FragmentNative words for partial tiles.
    Blocks,
}

impl MaskMode {
    /// Short name used in generated comments and cache keys.
    pub fn name(self) -> &'static str {
        match self {
            MaskMode::Window => "window",
            MaskMode::Blocks => "blocks",
        }
    }
}

/// Why a kernel configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// Head dimension other than 64, 128 or 256.
    HeadDim(u32),
    /// The overlapped main loop at a head dimension where it does not fit in
    /// registers (256: S, P and O together exceed 240 per thread and ptxas spills).
    Overlap {
        /// The head dimension.
        head_dim: u32,
    },
    /// Pipeline stages outside what fits in shared memory.
    Stages {
        /// The rejected stage count.
        stages: u32,
        /// Largest count that fits for this head dimension.
        max: u32,
    },
    /// The fragment layout could not be turned into index expressions.
    Layout(String),
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::HeadDim(d) => {
                write!(f, "head dim {d} is not supported (64, 128 or 256)")
            }
            ConfigError::Overlap { head_dim } => write!(
                f,
                "the overlapped main loop does not fit in registers at head dim {head_dim}; \
                 turn overlap off"
            ),
            ConfigError::Stages { stages, max } => {
                write!(f, "{stages} K/V stages do not fit; use 1..={max}")
            }
            ConfigError::Layout(e) => write!(f, "fragment layout not separable: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Largest dynamic shared memory a block may use on sm_90 (227 KiB).
pub const MAX_DYNAMIC_SMEM: u32 = 232_448;

/// A validated attention-kernel configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionKernel {
    head_dim: u32,
    mask: MaskMode,
    stages: u32,
    overlap: bool,
    pingpong: bool,
    lookahead: bool,
}

impl AttentionKernel {
    /// Validates a configuration. `stages` K/V buffers (2 is FlashAttention-3's
    /// choice at head dim 128); `overlap` turns on the intra-warpgroup
    /// GEMM/softmax overlap.
    pub fn new(
        head_dim: u32,
        mask: MaskMode,
        stages: u32,
        overlap: bool,
    ) -> Result<Self, ConfigError> {
        if head_dim != 64 && head_dim != 128 && head_dim != 256 {
            return Err(ConfigError::HeadDim(head_dim));
        }
        if head_dim == 256 && overlap {
            return Err(ConfigError::Overlap { head_dim });
        }
        let max = Self::max_stages(head_dim);
        if !(1..=max).contains(&stages) {
            return Err(ConfigError::Stages { stages, max });
        }
        Ok(Self {
            head_dim,
            mask,
            stages,
            overlap,
            pingpong: false,
            lookahead: true,
        })
    }

    /// Whether the producer reads the tile list one tile ahead (default on).
    pub fn with_lookahead(mut self, lookahead: bool) -> Self {
        self.lookahead = lookahead;
        self
    }

    /// Whether the producer's tile-list lookahead is on.
    pub fn lookahead(&self) -> bool {
        self.lookahead
    }

    /// Turns FlashAttention-3's inter-warpgroup ping-pong on or off (named
    /// barriers alternate the two consumer warpgroups' GEMM issue, so one warpgroup's
    /// softmax runs while the other's GEMMs use the tensor cores; with or without
    /// `overlap`).
    pub fn with_pingpong(mut self, pingpong: bool) -> Self {
        self.pingpong = pingpong;
        self
    }

    /// Whether the inter-warpgroup ping-pong is on.
    pub fn pingpong(&self) -> bool {
        self.pingpong
    }

    /// The default configuration for a head dimension and mask mode: intra-warpgroup
    /// overlap and inter-warpgroup ping-pong on, 3 K/V stages at head dim 64 and 2 at
    /// 128 (measured on an H100, docs/PERF.md "Attention forward"); at 256, one stage
    /// (Q, K and V tiles of 64 KiB each fill shared memory; K and V still load while
    /// the other is in use, their barriers being separate), no overlap (registers) and
    /// no ping-pong.
    pub fn default_for(head_dim: u32, mask: MaskMode) -> Result<Self, ConfigError> {
        let (stages, overlap) = match head_dim {
            64 => (3, true),
            256 => (1, false),
            _ => (2, true),
        };
        // Ping-pong with the serial loop (head dim 256) measured within noise of none
        // (docs/PERF.md, "head dim 256"), so it stays off there.
        Ok(Self::new(head_dim, mask, stages, overlap)?.with_pingpong(overlap))
    }

    fn max_stages(head_dim: u32) -> u32 {
        let tile = BLOCK_N * head_dim * 2;
        let fixed = BLOCK_M * head_dim * 2 + 1024 + 2048;
        ((MAX_DYNAMIC_SMEM - fixed) / (2 * tile)).min(4)
    }

    /// Head dimension.
    pub fn head_dim(&self) -> u32 {
        self.head_dim
    }

    /// Mask mode.
    pub fn mask(&self) -> MaskMode {
        self.mask
    }

    /// K/V pipeline stages.
    pub fn stages(&self) -> u32 {
        self.stages
    }

    /// Whether the intra-warpgroup overlap is on.
    pub fn overlap(&self) -> bool {
        self.overlap
    }

    /// Bytes of one 128-row tile of Q, K or V in shared memory.
    pub fn tile_bytes(&self) -> u32 {
        BLOCK_N * self.head_dim * 2
    }

    /// Dynamic shared memory to launch with: Q, `stages` K and V tiles, 2 KiB
    /// for the mbarriers (first 256 bytes) and a 4-byte scratch word per
    /// consumer thread, and 1 KiB of slack to align the base to 1024 bytes (the
    /// 128-byte swizzle atom).
    pub fn smem_bytes(&self) -> u32 {
        self.tile_bytes() * (1 + 2 * self.stages) + 1024 + 2048
    }

    /// Query-row blocks for `seqlen_q` (the grid's x extent).
    pub fn m_blocks(seqlen_q: u32) -> u32 {
        seqlen_q.div_ceil(BLOCK_M)
    }

    /// Key tiles for `seqlen_k`.
    pub fn n_blocks(seqlen_k: u32) -> u32 {
        seqlen_k.div_ceil(BLOCK_N)
    }

    /// The CUDA source (header-free; compile for sm_90a).
    pub fn source(&self) -> Result<String, ConfigError> {
        source::generate(self)
    }
}

crate::abi_struct! {
    /// The kernel's by-value parameter struct `fm_attn_params`, declared once: the CUDA
    /// struct (with offset checks) is emitted from this list and the host passes this
    /// `#[repr(C)]` mirror (docs/architecture.md, "ABI").
    pub struct AttentionParams as "fm_attn_params" {
        /// [B, H, Sq, D] bf16 output.
        o: Ptr("fm_bf16*"),
        /// [B, H, Sq] natural-log row log-sum-exp.
        lse: Ptr("float*"),
        /// [Bm, Hm, Mb] partial tiles per row block.
        kv_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Mb, Nb] partial key blocks, ascending.
        kv_indices: Ptr("const int*"),
        /// [Bm, Hm, Mb] full tiles per row block.
        full_kv_num_blocks: Ptr("const int*"),
        /// [Bm, Hm, Mb, Nb] full key blocks.
        full_kv_indices: Ptr("const int*"),
        /// [Bm, Hm, Mb, Nb] index along dim 0 of words of partial tile j.
        kv_tile_offsets: Ptr("const int*"),
        /// [tiles, consumer threads, words per thread] FragmentNative words.
        words: Ptr("const unsigned*"),
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
        /// ceil(Sq / BLOCK_M).
        m_blocks: I32("int"),
        /// ceil(Sk / BLOCK_N).
        n_blocks: I32("int"),
        /// Rows of [Bm, Hm, Mb] between mask batches; 0 where the mask broadcasts.
        mask_batch_stride: I32("int"),
        /// Rows of [Bm, Hm, Mb] between mask heads; 0 where the mask broadcasts.
        mask_head_stride: I32("int"),
        /// Keys visible left of the diagonal (>= WINDOW_INFINITE: unbounded).
        window_left: I32("int"),
        /// Keys visible right of the diagonal.
        window_right: I32("int"),
        /// Diagonal offset (Sk - Sq: bottom-right alignment).
        diag_offset: I32("int"),
        /// softmax scale * log2(e).
        scale_log2: F32("float"),
        /// softmax scale.
        scale: F32("float"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_mirror_has_the_c_offsets() {
        assert_eq!(
            AttentionParams::rust_offsets(),
            AttentionParams::ABI.offsets()
        );
        assert_eq!(
            core::mem::size_of::<AttentionParams>(),
            AttentionParams::ABI.size()
        );
        assert_eq!(AttentionParams::ABI.size(), 8 * 8 + 12 * 4 + 2 * 4);
    }

    #[test]
    fn mask_geometry_matches_the_normative_format() {
        assert_eq!(MASK_THREADS, 256);
        assert_eq!(MASK_VALUES_PER_THREAD, 64);
        assert_eq!(MASK_WORDS_PER_THREAD, 2);
        assert_eq!(THREADS, 384);
    }

    #[test]
    fn configurations_fit_in_shared_memory() {
        for d in [64, 128, 256] {
            for mode in [MaskMode::Window, MaskMode::Blocks] {
                let k = AttentionKernel::default_for(d, mode).unwrap();
                assert!(k.smem_bytes() <= MAX_DYNAMIC_SMEM, "{k:?}");
            }
        }
        assert_eq!(
            AttentionKernel::new(96, MaskMode::Window, 2, true),
            Err(ConfigError::HeadDim(96))
        );
        assert_eq!(
            AttentionKernel::new(128, MaskMode::Window, 9, true),
            Err(ConfigError::Stages { stages: 9, max: 3 })
        );
        assert_eq!(
            AttentionKernel::new(256, MaskMode::Window, 2, false),
            Err(ConfigError::Stages { stages: 2, max: 1 })
        );
        assert_eq!(
            AttentionKernel::new(256, MaskMode::Blocks, 1, true),
            Err(ConfigError::Overlap { head_dim: 256 })
        );
    }

    #[test]
    fn sources_are_header_free_and_name_the_layout() {
        for d in [64, 128, 256] {
            for mode in [MaskMode::Window, MaskMode::Blocks] {
                for (overlap, pingpong) in
                    [(false, false), (false, true), (true, false), (true, true)]
                {
                    if d == 256 && overlap {
                        continue;
                    }
                    let stages = AttentionKernel::default_for(d, mode).unwrap().stages();
                    let k = AttentionKernel::new(d, mode, stages, overlap)
                        .unwrap()
                        .with_pingpong(pingpong);
                    let src = k.source().unwrap();
                    assert!(!src.lines().any(|l| l.trim_start().starts_with("#include")));
                    assert!(src.contains(KERNEL_NAME));
                    assert!(src.contains("CLayout_64x128"));
                    assert!(src.contains(&format!("m64n{d}k16")));
                    assert!(!src.contains('$'), "unreplaced placeholder in {k:?}");
                }
            }
        }
    }
}
