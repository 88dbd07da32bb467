//! Masked attention forward for SM90 (H100): TMA + wgmma + mbarrier, warp-specialised.
//!
//! [`AttentionKernel::source`] generates one header-free CUDA translation unit
//! (compile for `sm_90a` with NVRTC) holding the kernel [`KERNEL_NAME`]:
//!
//! - The tile comes from one [`Geometry`] value (`block_m` query rows x `block_n`
//!   keys, e.g. 128 x 128 over two consumer warpgroups, or 64 x 64 over one with two
//!   blocks per SM): warpgroup 0 is the producer (one thread issues the TMA loads of
//!   Q, K and V into 128-byte-swizzled shared memory, `setmaxnreg.dec` to 24), the
//!   others are consumers (`setmaxnreg.inc` to what the geometry leaves) that own
//!   query rows `64*wg .. 64*wg+63`.
//! - `S = Q K^T` with wgmma SS (both K-major), `O += P V` with wgmma RS: P stays
//!   in registers, registers `d[8j..8j+7]` of S become the four A registers of
//!   k-block `j` (docs/architecture.md fact 5), V is read MN-major (`imm-trans-b = 1`).
//! - Online softmax in base 2 with quad shuffles; with `overlap`, the QK^T of
//!   tile `k` and the PV of tile `k-1` are in flight while the softmax of tile
//!   `k` runs (FlashAttention-3's intra-warpgroup overlap).
//! - Only listed tiles are visited. [`MaskMode::Blocks`] reads FlexAttention-style
//!   tile lists and applies FragmentNative mask words to partial tiles only (one
//!   load per consumer thread per tile, straight into registers);
//!   [`MaskMode::Window`] computes causal / sliding-window / no-mask visibility in
//!   the kernel with no mask words; [`MaskMode::Documents`] runs the same walk inside
//!   each document of a varlen grid (one CTA per document and row block).
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

pub mod backward;
mod geometry;
mod mainloop;
mod smem;
mod source;

pub use crate::family::dtype::ActDtype;
pub use crate::family::fragment::{FragmentMap, NotSeparable, Term};
pub use geometry::{Geometry, MAX_DYNAMIC_SMEM, PRODUCER_REGS};

/// Name of the generated `extern "C"` kernel.
pub const KERNEL_NAME: &str = "fragmask_attention_fwd";
/// The split-KV combine kernel of the same module (docs/architecture.md, "Split-KV
/// forward"): merges the `num_splits` partials of each row of o by LSE.
pub const COMBINE_KERNEL_NAME: &str = "fragmask_attention_combine";
/// Threads per CTA of [`COMBINE_KERNEL_NAME`].
pub const COMBINE_THREADS: u32 = 128;
/// Most splits of one forward call (the workspace holds `splits · B · H · Sq · D` floats).
pub const MAX_SPLITS: u32 = 128;
pub use crate::family::schedule::{ListEntries, WINDOW_INFINITE};

/// How the kernel decides which keys each query sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MaskMode {
    /// Causal / sliding window / no mask, computed from indices in the kernel.
    Window,
    /// FlexAttention-style tile lists with FragmentNative words for partial tiles.
    Blocks,
    /// Contiguous documents, causal or full within each (FlashAttention's varlen grid):
    /// one CTA per (document, row block) work item of `AttentionParams::doc_items`, and
    /// the window walk inside the document; no mask words.
    Documents,
}

impl MaskMode {
    /// Short name used in generated comments and cache keys.
    pub fn name(self) -> &'static str {
        match self {
            MaskMode::Window => "window",
            MaskMode::Blocks => "blocks",
            MaskMode::Documents => "documents",
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
    /// Pipeline stages (the forward's K/V, the backward's Q/dO) outside what fits in shared
    /// memory.
    Stages {
        /// The rejected stage count.
        stages: u32,
        /// Largest count that fits for this head dimension.
        max: u32,
    },
    /// A tile the generator does not emit.
    Geometry {
        /// Query rows of the tile.
        block_m: u32,
        /// Keys of the tile.
        block_n: u32,
        /// Consumer warpgroups.
        warpgroups: u32,
    },
    /// A head dimension the tile cannot hold in registers.
    GeometryHeadDim {
        /// The tile.
        geometry: Geometry,
        /// The head dimension.
        head_dim: u32,
    },
    /// A tile name that is not `MxN`.
    GeometryName(String),
    /// An element type the tensor cores of this kernel do not take (bf16 and fp16 only).
    Dtype(ActDtype),
    /// Inter-warpgroup ping-pong needs two or three consumer warpgroups.
    PingPong {
        /// The geometry's consumer warpgroups.
        warpgroups: u32,
    },
    /// The fragment layout could not be turned into index expressions.
    Layout(String),
    /// Persistent CTAs refused for this configuration (the reason).
    Persistent(String),
    /// A shared-K/V geometry ([`Geometry::shared_kv`]) with what it does not run: a mask
    /// mode other than tile lists, split-KV, persistent CTAs or ping-pong (the reason).
    SharedKv(String),
    /// The split tail ([`AttentionKernel::with_tail_split`]) where it does not run (the reason).
    TailSplit(String),
    /// A backward step size ([`backward::BackwardKernel::with_step_m`]) with a
    /// configuration it does not run (the reason).
    BackwardStep(String),
    /// Q in registers ([`AttentionKernel::with_q_registers`]) with what it does not run:
    /// the serial loop, or a tile and head dim where its registers do not fit (the reason).
    QRegisters(String),
    /// Dense tile lists ([`AttentionKernel::with_list_entries`]) with what they do not run:
    /// a mask mode other than tile lists, or the shared-K/V tile (the reason).
    DenseLists(String),
    /// The backward's dQ writer warp ([`backward::BackwardKernel::with_dq_writer`]) with a
    /// configuration it does not run (the reason).
    DqWriter(String),
    /// The backward's GQA group slices ([`backward::BackwardKernel::with_group_slices`])
    /// with a configuration they do not run (the reason).
    GroupSlices(String),
    /// A mask tile the backward does not read: its CTA of `cta_n` keys walks the tile's
    /// `cta_n`-key columns, and the tile's query rows must divide the workspace's row
    /// padding ([`backward::ROW_PAD`]; [`backward::BackwardKernel::new`]).
    BackwardMaskTile {
        /// Query rows of the mask tile.
        block_m: u32,
        /// Keys of the mask tile.
        block_n: u32,
        /// Keys per CTA of the backward at that head dim and tile width.
        cta_n: u32,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::HeadDim(d) => {
                write!(f, "head dim {d} is not supported (64, 128 or 256)")
            }
            ConfigError::Overlap { head_dim } => write!(
                f,
                "the overlapped main loop does not fit in registers at head dim {head_dim} \
                 with this tile; turn overlap off or use a narrower tile"
            ),
            ConfigError::Geometry {
                block_m,
                block_n,
                warpgroups,
            } => write!(
                f,
                "tile {block_m}x{block_n} over {warpgroups} warpgroup(s) is not supported; \
                 supported tiles: {}",
                Geometry::supported_list()
            ),
            ConfigError::GeometryHeadDim { geometry, head_dim } => write!(
                f,
                "head dim {head_dim} does not fit in registers on the {} tile ({} registers per \
                 thread at entry); supported: {}",
                geometry.name(),
                geometry.entry_regs(),
                Geometry::SUPPORTED
                    .iter()
                    .map(|g| format!(
                        "{}: {}",
                        g.name(),
                        [64, 128, 256]
                            .iter()
                            .filter(|&&d| g.supports_head_dim(d))
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join("/")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ConfigError::GeometryName(t) => write!(
                f,
                "tile '{t}' is not MxN; supported tiles: {}",
                Geometry::supported_list()
            ),
            ConfigError::Dtype(d) => write!(
                f,
                "element type {} is not supported by the attention kernel (bf16 or f16)",
                d.name()
            ),
            ConfigError::PingPong { warpgroups } => write!(
                f,
                "ping-pong needs 2 or 3 consumer warpgroups, this tile has {warpgroups}"
            ),
            ConfigError::Stages { stages, max } => {
                write!(
                    f,
                    "{stages} pipeline stages do not fit in shared memory; use 1..={max}"
                )
            }
            ConfigError::Layout(e) => write!(f, "fragment layout not separable: {e}"),
            ConfigError::Persistent(why) => write!(f, "{why}"),
            ConfigError::TailSplit(why) => write!(f, "{why}"),
            ConfigError::SharedKv(why) => write!(f, "{why}"),
            ConfigError::BackwardStep(why) => write!(f, "{why}"),
            ConfigError::QRegisters(why) => write!(f, "{why}"),
            ConfigError::DenseLists(why) => write!(f, "{why}"),
            ConfigError::DqWriter(why) => write!(f, "{why}"),
            ConfigError::GroupSlices(why) => write!(f, "{why}"),
            ConfigError::BackwardMaskTile {
                block_m,
                block_n,
                cta_n,
            } => write!(
                f,
                "the backward does not read a {block_m}x{block_n} mask tile: its query rows must \
                 be 64 or 128 and its keys a multiple of {cta_n} (the backward CTA's keys here), at \
                 most 128 (128x128, 64x64 or 128x64)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<crate::family::LayoutError> for ConfigError {
    fn from(e: crate::family::LayoutError) -> Self {
        ConfigError::Layout(e.0)
    }
}

/// A validated attention-kernel configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionKernel {
    geometry: Geometry,
    dtype: ActDtype,
    head_dim: u32,
    mask: MaskMode,
    stages: u32,
    overlap: bool,
    pingpong: bool,
    lookahead: bool,
    split_kv: bool,
    tail_split: bool,
    persistent: bool,
    strided_o: bool,
    lazy_rescale: bool,
    q_registers: bool,
    list_entries: ListEntries,
}

impl AttentionKernel {
    /// Validates a configuration of `geometry`. `stages` K/V buffers (2 is
    /// FlashAttention-3's choice at head dim 128); `overlap` turns on the intra-warpgroup
    /// GEMM/softmax overlap. Ping-pong starts off ([`Self::with_pingpong`]).
    pub fn new(
        geometry: Geometry,
        head_dim: u32,
        mask: MaskMode,
        stages: u32,
        overlap: bool,
    ) -> Result<Self, ConfigError> {
        if head_dim != 64 && head_dim != 128 && head_dim != 256 {
            return Err(ConfigError::HeadDim(head_dim));
        }
        if !geometry.supports_head_dim(head_dim) {
            return Err(ConfigError::GeometryHeadDim { geometry, head_dim });
        }
        if overlap && !geometry.overlap_fits(head_dim) {
            return Err(ConfigError::Overlap { head_dim });
        }
        let max = geometry.max_stages(head_dim);
        if !(1..=max).contains(&stages) {
            return Err(ConfigError::Stages { stages, max });
        }
        if geometry.shared_kv() && mask != MaskMode::Blocks {
            return Err(ConfigError::SharedKv(format!(
                "the {} tile walks tile lists only, not the {} mode",
                geometry.name(),
                mask.name()
            )));
        }
        Ok(Self {
            geometry,
            dtype: ActDtype::Bf16,
            head_dim,
            mask,
            stages,
            overlap,
            pingpong: false,
            lookahead: true,
            split_kv: false,
            tail_split: false,
            persistent: false,
            strided_o: false,
            lazy_rescale: false,
            q_registers: false,
            list_entries: ListEntries::Read,
        })
    }

    /// The element type of q, k, v and o: bf16 (the default) or fp16; the softmax, the
    /// accumulators and lse stay f32.
    pub fn with_dtype(mut self, dtype: ActDtype) -> Result<Self, ConfigError> {
        if dtype == ActDtype::F32 {
            return Err(ConfigError::Dtype(dtype));
        }
        self.dtype = dtype;
        Ok(self)
    }

    /// The element type of q, k, v and o.
    pub fn dtype(&self) -> ActDtype {
        self.dtype
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

    /// Lazy rescale (`family::softmax::WgmmaRows::lazy_rescale`): a row keeps its running
    /// max while a step's max is at most 2^8 above it, and O is rescaled only when a row
    /// of the thread moved. Off in [`Self::new`], on in [`Self::default_for_geometry`]
    /// (bench/results/history.md, 2026-11-26 "head dim 64 and lazy rescale"). The softmax
    /// scale must be positive (the host checks it).
    pub fn with_lazy_rescale(mut self, lazy: bool) -> Self {
        self.lazy_rescale = lazy;
        self
    }

    /// Whether lazy rescale is on ([`Self::with_lazy_rescale`]).
    pub fn lazy_rescale(&self) -> bool {
        self.lazy_rescale
    }

    /// Q as the register (RS) A operand of `S = Q K^T`, loaded once per query tile by
    /// `ldmatrix` (FlashAttention-2's `Q_in_regs`): each QK^T k-step then reads only K
    /// from shared memory. Costs `head_dim / 4` registers per consumer thread; refused
    /// where they do not fit beside the loop's O, S and P ([`Geometry::q_registers_fit`]),
    /// and with the serial loop, where ptxas (NVRTC 13.0) gave P the registers of Q inside
    /// the loop (every multi-step serial selftest case failed; `tests/attention_compile.rs`
    /// checks in the SASS that only Q's `ldmatrix` writes them).
    pub fn with_q_registers(mut self, q_registers: bool) -> Result<Self, ConfigError> {
        if q_registers && !self.overlap {
            return Err(ConfigError::QRegisters(
                "Q in registers runs with the overlapped loop only (not with --no-overlap)".into(),
            ));
        }
        if q_registers && !self.geometry.q_registers_fit(self.head_dim) {
            return Err(ConfigError::QRegisters(format!(
                "Q in registers does not fit the {} tile at head dim {} ({} registers of Q \
                 beside the loop's O, S and P)",
                self.geometry.name(),
                self.head_dim,
                self.head_dim / 4
            )));
        }
        self.q_registers = q_registers;
        Ok(self)
    }

    /// Whether Q is held in registers ([`Self::with_q_registers`]).
    pub fn q_registers(&self) -> bool {
        self.q_registers
    }

    /// How the tile lists' partial entries are got ([`ListEntries`]; docs/masks.md, "Dense
    /// tile lists"): read, computed for lists in which every key block of every row is
    /// partial, in key order, with its words at tile `row * n_blocks + block`
    /// (`fragmask_masks::BlockLists::dense_partial`, which the host checks before it asks
    /// for [`ListEntries::Dense`]), or computed where the GPU packer's partial-tile count
    /// says so at run time. Other than `Read`: tile lists only, not on the shared-K/V tile.
    pub fn with_list_entries(mut self, entries: ListEntries) -> Result<Self, ConfigError> {
        let computed = entries != ListEntries::Read;
        if computed && self.mask != MaskMode::Blocks {
            return Err(ConfigError::DenseLists(format!(
                "dense tile lists need the tile-list mask mode, not {}",
                self.mask.name()
            )));
        }
        if computed && self.geometry.shared_kv() {
            return Err(ConfigError::DenseLists(format!(
                "dense tile lists do not run on the shared-K/V tile {}",
                self.geometry.name()
            )));
        }
        self.list_entries = entries;
        Ok(self)
    }

    /// How the tile lists' partial entries are got ([`Self::with_list_entries`]).
    pub fn list_entries(&self) -> ListEntries {
        self.list_entries
    }

    /// Compiles in split-KV support (docs/architecture.md, "Split-KV forward"): the split
    /// index from the grid, each split's share of the schedule, the fp32 partials epilogue
    /// and the programmatic-dependent-launch trigger for the combine. Off by default: a
    /// call with one split runs the kernel without any of it (about 600-800 fewer SASS
    /// instructions at head dim 128), so only calls that plan several splits pay for them.
    pub fn with_split_kv(mut self, split_kv: bool) -> Self {
        self.split_kv = split_kv;
        self
    }

    /// Whether split-KV support is compiled in.
    pub fn split_kv(&self) -> bool {
        self.split_kv
    }

    /// The split tail (docs/architecture.md, "Split tail"): a one-dimensional one-tile grid
    /// in the plain launch order whose last `AttentionParams::tail_tiles` work tiles run
    /// `num_splits` splits each, merged by the combine, so the launch's last partial wave
    /// runs shorter pieces on more SMs. Needs split-KV compiled in
    /// ([`Self::with_split_kv`]); refused with persistent CTAs, the shared-K/V tile and the
    /// documents grid (each has its own work order).
    pub fn with_tail_split(mut self, tail_split: bool) -> Result<Self, ConfigError> {
        if tail_split && !self.tail_split_fits() {
            return Err(ConfigError::TailSplit(format!(
                "the split tail runs on the global one-tile grid with split-KV compiled in \
                 (split-KV {}, persistent {}, {} tile, {} mode)",
                self.split_kv,
                self.persistent,
                self.geometry.name(),
                self.mask.name()
            )));
        }
        self.tail_split = tail_split;
        Ok(self)
    }

    /// Whether the last work tiles are split ([`Self::with_tail_split`]).
    pub fn tail_split(&self) -> bool {
        self.tail_split
    }

    /// Whether this configuration can run the split tail: split-KV compiled in, on the
    /// global one-tile grid (not persistent CTAs, the shared-K/V tile or the documents grid).
    pub(crate) fn tail_split_fits(&self) -> bool {
        self.split_kv
            && !self.persistent
            && !self.geometry.shared_kv()
            && self.mask != MaskMode::Documents
    }

    /// Writes O through `AttentionParams::o_stride_*` (e.g. into a `[B, S, H, D]` caller's
    /// memory) instead of contiguous `[B, H, Sq, D]`. Off by default: the strided addresses
    /// cost the epilogue 64-bit multiplies per 16-byte piece, and calls with a contiguous O
    /// kept their kernels (an always-strided epilogue ran the 12-document rows 1.9-4.4%
    /// slower, bench/results/session-2026-11-28f/bshd-out/).
    pub fn with_strided_o(mut self, strided_o: bool) -> Self {
        self.strided_o = strided_o;
        self
    }

    /// Whether O is written through its strides ([`Self::with_strided_o`]).
    pub fn strided_o(&self) -> bool {
        self.strided_o
    }

    /// Persistent CTAs (docs/architecture.md, "Persistent forward"): the launch has about
    /// one CTA per SM slot, each walking a list of work tiles (row block, head, batch) from
    /// `AttentionParams::work`; the K/V pipeline's stages and phases run on across tiles,
    /// and a second Q buffer lets the next tile's Q and first K/V load while this tile's
    /// last steps and O epilogue run. Refused with split-KV (a split grid has its own
    /// combine) and where the second Q buffer does not fit beside the stages
    /// ([`Geometry::persistent_fits`]).
    pub fn with_persistent(mut self, persistent: bool) -> Result<Self, ConfigError> {
        if persistent && (self.split_kv || self.tail_split) {
            return Err(ConfigError::Persistent(
                "persistent CTAs do not run split-KV".into(),
            ));
        }
        if persistent && self.geometry.shared_kv() {
            return Err(ConfigError::Persistent(format!(
                "the {} tile runs one pair of query blocks per CTA, not persistent CTAs",
                self.geometry.name()
            )));
        }
        if persistent && !self.geometry.persistent_fits(self.head_dim, self.stages) {
            return Err(ConfigError::Persistent(format!(
                "persistent CTAs: two Q tiles and {} K/V stages of the {} tile at head dim {} do not fit in \
                 shared memory",
                self.stages,
                self.geometry.name(),
                self.head_dim
            )));
        }
        self.persistent = persistent;
        Ok(self)
    }

    /// Whether the CTAs are persistent ([`Self::with_persistent`]).
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// Turns FlashAttention-3's inter-warpgroup ping-pong on or off (named barriers pass
    /// the turn to issue GEMMs from one consumer warpgroup to the next, round robin, so
    /// one warpgroup's softmax runs while another's GEMMs use the tensor cores; with or
    /// without `overlap`). Needs a geometry with two or three consumer warpgroups
    /// (FlashAttention-3's scheduler barrier, `hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp`).
    pub fn with_pingpong(mut self, pingpong: bool) -> Result<Self, ConfigError> {
        let warpgroups = self.geometry.consumer_warpgroups();
        if pingpong && !(2..=3).contains(&warpgroups) {
            return Err(ConfigError::PingPong { warpgroups });
        }
        if pingpong && self.geometry.shared_kv() {
            return Err(ConfigError::SharedKv(format!(
                "the {} tile's warpgroups skip different steps: no ping-pong turn to pass",
                self.geometry.name()
            )));
        }
        self.pingpong = pingpong;
        Ok(self)
    }

    /// Whether the inter-warpgroup ping-pong is on.
    pub fn pingpong(&self) -> bool {
        self.pingpong
    }

    /// The tile geometry for a head dimension when the caller names none (docs/PERF.md,
    /// "Tile geometries", head-dim table): 192x128 at head dim 64 (1.045x SDPA, against
    /// 0.92x at 128x128), 128x128 at 128, 128x80 at 256 (0.98x SDPA, against 0.875x).
    pub fn default_geometry(head_dim: u32) -> Geometry {
        match head_dim {
            64 => Geometry::TILE_192X128,
            256 => Geometry::TILE_128X80,
            _ => Geometry::TILE_128X128,
        }
    }

    /// The default configuration for a head dimension and mask mode on the default
    /// geometry ([`Self::default_geometry`]).
    pub fn default_for(head_dim: u32, mask: MaskMode) -> Result<Self, ConfigError> {
        Self::default_for_geometry(Self::default_geometry(head_dim), head_dim, mask)
    }

    /// Every variant the compile sweeps cover: the default of every geometry and head dim
    /// in both mask modes, with and without split-KV; every loop variant (overlap x
    /// ping-pong) of the 128x128 tile, with Q in registers too where its default has
    /// them; fp16 defaults. The NVRTC compile test and
    /// `examples/kernel_fingerprints` (the SASS of each, for refactors) both walk it.
    pub fn compile_sweep() -> Result<Vec<AttentionKernel>, ConfigError> {
        let mut kernels = Vec::new();
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                if !g.supports_head_dim(d) {
                    continue;
                }
                for mode in [MaskMode::Window, MaskMode::Blocks] {
                    let default = Self::default_for_geometry(g, d, mode)?;
                    // The documents grid: the default configuration of every geometry
                    // (it never splits).
                    if mode == MaskMode::Window {
                        kernels.push(Self::default_for_geometry(g, d, MaskMode::Documents)?);
                    }
                    kernels.push(default.with_split_kv(true));
                    if g != Geometry::TILE_128X128 {
                        kernels.push(default);
                        continue;
                    }
                    for (overlap, pingpong) in
                        [(false, false), (false, true), (true, false), (true, true)]
                    {
                        // Head dim 256 at 128x128 runs the serial loop on one stage (the
                        // overlapped one is a ConfigError there: it would spill).
                        if overlap && !g.overlap_fits(d) {
                            continue;
                        }
                        let k = Self::new(g, d, mode, default.stages(), overlap)?
                            .with_pingpong(pingpong)?;
                        kernels.push(k);
                        // Q in registers on each overlapped loop of its default walks.
                        if default.q_registers() && overlap {
                            kernels.push(k.with_q_registers(true)?);
                        }
                    }
                }
            }
        }
        // fp16: the default tile of every head dim, both mask modes, and the 64-token tile.
        for d in [64, 128, 256] {
            for mode in [MaskMode::Window, MaskMode::Blocks] {
                kernels.push(Self::default_for(d, mode)?.with_dtype(ActDtype::F16)?);
            }
        }
        kernels.push(
            Self::default_for_geometry(Geometry::TILE_64X64, 128, MaskMode::Blocks)?
                .with_dtype(ActDtype::F16)?,
        );
        kernels.extend(Self::shared_kv_sweep()?);
        kernels.extend(Self::persistent_sweep()?);
        kernels.extend(Self::tail_sweep()?);
        kernels.extend(Self::dense_lists_sweep()?);
        Ok(kernels)
    }

    /// The dense-list variants ([`Self::with_list_entries`]) the compile sweep covers: the
    /// tile-list default of every head dim and the 64-token tile with entries computed
    /// ([`ListEntries::Dense`]), and where the count says so
    /// ([`ListEntries::DenseAtRunTime`]) the defaults at head dims 64 (with its split tail,
    /// which a mask left on the GPU takes there) and 256, where the host takes the check.
    pub fn dense_lists_sweep() -> Result<Vec<AttentionKernel>, ConfigError> {
        let mut kernels = Vec::new();
        for d in [64, 128, 256] {
            kernels.push(
                Self::default_for(d, MaskMode::Blocks)?.with_list_entries(ListEntries::Dense)?,
            );
        }
        kernels.push(
            Self::default_for_geometry(Geometry::TILE_64X64, 128, MaskMode::Blocks)?
                .with_list_entries(ListEntries::Dense)?,
        );
        for d in [64, 256] {
            kernels.push(
                Self::default_for(d, MaskMode::Blocks)?
                    .with_list_entries(ListEntries::DenseAtRunTime)?,
            );
        }
        kernels.push(
            Self::default_for(64, MaskMode::Blocks)?
                .with_split_kv(true)
                .with_tail_split(true)?
                .with_list_entries(ListEntries::DenseAtRunTime)?,
        );
        Ok(kernels)
    }

    /// The split-tail variants ([`Self::with_tail_split`]) the compile sweep covers: the
    /// default tile of every head dim, window and tile lists.
    pub fn tail_sweep() -> Result<Vec<AttentionKernel>, ConfigError> {
        let mut kernels = Vec::new();
        for d in [64, 128, 256] {
            for mode in [MaskMode::Window, MaskMode::Blocks] {
                kernels.push(
                    Self::default_for(d, mode)?
                        .with_split_kv(true)
                        .with_tail_split(true)?,
                );
            }
        }
        Ok(kernels)
    }

    /// The shared-K/V variants ([`Geometry::SHARED`], tile lists only) the compile sweep
    /// and the selftest cover: the default of every head dim that fits, both loops at
    /// head dim 128, fp16.
    pub fn shared_kv_sweep() -> Result<Vec<AttentionKernel>, ConfigError> {
        let mut kernels = Vec::new();
        for g in Geometry::SHARED {
            for d in [64, 128, 256] {
                if !g.supports_head_dim(d) {
                    continue;
                }
                let default = Self::default_for_geometry(g, d, MaskMode::Blocks)?;
                kernels.push(default);
                if d == 128 {
                    kernels.push(Self::new(g, d, MaskMode::Blocks, 2, !default.overlap())?);
                    kernels.push(default.with_dtype(ActDtype::F16)?);
                }
            }
        }
        Ok(kernels)
    }

    /// The persistent variants ([`Self::with_persistent`]) the compile sweep and the
    /// selftest cover: the default configuration of every geometry and head dim where the
    /// second Q buffer fits, in every mask mode.
    pub fn persistent_sweep() -> Result<Vec<AttentionKernel>, ConfigError> {
        let mut kernels = Vec::new();
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                if !g.supports_head_dim(d) {
                    continue;
                }
                for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
                    if let Some(k) = Self::persistent_default_for_geometry(g, d, mode)? {
                        kernels.push(k);
                    }
                }
            }
        }
        Ok(kernels)
    }

    /// The default configuration of `geometry`: the intra-warpgroup overlap wherever it
    /// fits in registers, inter-warpgroup ping-pong with it (not for the tile lists on the
    /// 128x128 tile at head dim 128, whose partial steps write the mask bias before each
    /// QK^T: random 50% of tokens at S = 16384 took 0.934 of the ping-pong time, an H100,
    /// 3 rounds; the other list geometries were not measured and keep it), and K/V
    /// stages by head dim (3 at 64, 2 at 128 and 256, measured on an H100, docs/PERF.md
    /// "Attention forward"; 3 on those 128x128 list kernels at head dim 128: one H200, 4
    /// ABBA pairs against 2, S = 16384 random 50% 0.984, random 10% 0.982, top-k 0.985,
    /// block-sparse 10% 0.997, S = 8192 0.997, S = 4096 0.999-1.013,
    /// bench/results/session-2026-11-28m), fewer where shared memory has no room for them
    /// ([`Self::persistent_default_for_geometry`] for the persistent form). Q sits in
    /// registers ([`Self::with_q_registers`]) for the window and documents walks on the
    /// 128x128 tile at head dim 128 (where it was measured): one H100, 3 rounds against Q in shared
    /// memory, S = 16384 no mask 0.978, causal 0.986, GQA 32:8 causal 0.943, window 1024
    /// 0.993; the tile lists were slower with it (random 50% 1.114, top-k 1.053,
    /// write-up 002's 50% 1.038), so they keep Q in shared memory.
    pub fn default_for_geometry(
        geometry: Geometry,
        head_dim: u32,
        mask: MaskMode,
    ) -> Result<Self, ConfigError> {
        Self::default_with_max_stages(geometry, head_dim, mask, geometry.max_stages(head_dim))
    }

    /// The persistent form of [`Self::default_for_geometry`], with the K/V stages that fit
    /// beside the second Q tile ([`Geometry::persistent_stages`]); `None` where they do not.
    pub fn persistent_default_for_geometry(
        geometry: Geometry,
        head_dim: u32,
        mask: MaskMode,
    ) -> Result<Option<Self>, ConfigError> {
        let default = Self::default_for_geometry(geometry, head_dim, mask)?;
        match geometry.persistent_stages(head_dim, default.stages()) {
            Some(stages) => Self::default_with_max_stages(geometry, head_dim, mask, stages)?
                .with_persistent(true)
                .map(Some),
            None => Ok(None),
        }
    }

    /// [`Self::default_for_geometry`] with at most `max_stages` K/V stages.
    fn default_with_max_stages(
        geometry: Geometry,
        head_dim: u32,
        mask: MaskMode,
        max_stages: u32,
    ) -> Result<Self, ConfigError> {
        // The head dim is checked before any size is derived from it (a zero head dim
        // makes the K/V tile empty and the stage count a division by zero).
        if head_dim != 64 && head_dim != 128 && head_dim != 256 {
            return Err(ConfigError::HeadDim(head_dim));
        }
        // The shared-K/V tile takes what fits: its warpgroups run apart by up to the
        // stages between them.
        let lists_128x128_d128 =
            mask == MaskMode::Blocks && head_dim == 128 && geometry == Geometry::TILE_128X128;
        let wanted = if head_dim == 64 || geometry.shared_kv() || lists_128x128_d128 {
            3
        } else {
            2
        };
        let stages = wanted.min(max_stages).max(1);
        let overlap = geometry.overlap_fits(head_dim);
        let k = Self::new(geometry, head_dim, mask, stages, overlap)?
            .with_pingpong(
                overlap
                    && geometry.consumer_warpgroups() >= 2
                    && !geometry.shared_kv()
                    && !lists_128x128_d128,
            )?
            .with_lazy_rescale(true);
        // Q in registers where it was measured, wherever `with_q_registers` takes them.
        let q_registers =
            mask != MaskMode::Blocks && geometry == Geometry::TILE_128X128 && head_dim == 128;
        Ok(k.with_q_registers(q_registers).unwrap_or(k))
    }

    /// The tile geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
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

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.geometry.threads()
    }

    /// Dynamic shared memory to launch with ([`Geometry::smem_bytes`], or
    /// [`Geometry::persistent_smem_bytes`] with persistent CTAs).
    pub fn smem_bytes(&self) -> u32 {
        if self.persistent {
            self.geometry
                .persistent_smem_bytes(self.head_dim, self.stages)
        } else {
            self.geometry.smem_bytes(self.head_dim, self.stages)
        }
    }

    /// Query-row blocks for `seqlen_q` (the grid's x extent).
    pub fn m_blocks(&self, seqlen_q: u32) -> u32 {
        self.geometry.m_blocks(seqlen_q)
    }

    /// Key tiles for `seqlen_k`.
    pub fn n_blocks(&self, seqlen_k: u32) -> u32 {
        self.geometry.n_blocks(seqlen_k)
    }

    /// A short label: `128x128 d128 blocks s2 overlap pp`.
    pub fn label(&self) -> String {
        format!(
            "{} {} d{} {} s{}{}{}{}{}{}{}{}",
            self.geometry.name(),
            self.dtype.name(),
            self.head_dim,
            self.mask.name(),
            self.stages,
            if self.overlap { " overlap" } else { "" },
            if self.pingpong { " pp" } else { "" },
            if self.lookahead { "" } else { " nola" },
            if self.persistent { " persistent" } else { "" },
            if self.strided_o { " strided-o" } else { "" },
            if self.tail_split { " tail" } else { "" },
            self.list_entries.suffix(),
        )
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
        /// [B, H, Sq, D] output, bf16 or fp16 bits (the kernel's element type).
        o: Ptr("unsigned short*"),
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
        /// Split-KV workspace: [splits, B, H, Sq, D] fp32 partial o (each normalised by its own sum).
        ws_o: Ptr("float*"),
        /// Split-KV workspace: [splits, B, H, Sq] natural-log lse of the partials.
        ws_lse: Ptr("float*"),
        /// Documents grid: [m_blocks, 4] work items (document start, length, row block, document), 16-byte aligned.
        doc_items: Ptr("const int*"),
        /// Persistent CTAs: [ctas + 1] offsets, then every CTA's work tiles in turn (indices of the one-tile grid's CTAs).
        work: Ptr("const int*"),
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
        /// ceil(Sq / BLOCK_M); on the documents grid, the work items.
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
        /// Splits of each row block's steps (1: o and lse directly; more: workspace + combine).
        num_splits: I32("int"),
        /// One-tile grid: (head, batch) planes per section of its launch order (0 or 1: the plain grid order).
        head_section: I32("int"),
        /// Shared-K/V tile: [Bm, Hm, Mb] int4 pair headers (query blocks a and b, first step, steps), then 8 ints per step.
        pair_steps: Ptr("const int*"),
        /// Elements between o's batches (contiguous [B, H, Sq, D]: H Sq D; a [B, Sq, H, D] caller's: Sq H D).
        o_stride_b: I64("long long"),
        /// Elements between o's heads (contiguous: Sq D; [B, Sq, H, D]: D).
        o_stride_h: I64("long long"),
        /// Elements between o's rows (contiguous: D; [B, Sq, H, D]: H D). Each a multiple of 8 (16 bytes).
        o_stride_s: I64("long long"),
        /// Split tail: the launch order's last work tiles, each run as num_splits splits (0: none).
        tail_tiles: I32("int"),
        /// Dense lists at run time (ListEntries::DenseAtRunTime): the GPU packer's i32 count of partial tiles (null: read the lists; appended, the fields above keep their offsets).
        lists_partial_count: Ptr("const int*"),
        /// The tiles of the lists' grid ([Bm, Hm, Mb, Nb]): a count equal to it means dense lists.
        lists_tiles: I32("int"),
        /// Tile lists on the one-tile grid: [Bm, Hm, Mb] the row blocks in dispatch order (fragmask_masks::row_order; null: from the last row block).
        row_order: Ptr("const int*"),
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
        // 13 pointers, 14 ints, 2 floats, padded to the pointers' alignment, then 3 i64
        // strides and the split tail's int, padded to the next pointer, the partial count's,
        // and the tiles' int, padded to the row order's pointer, which ends the struct.
        assert_eq!(
            AttentionParams::ABI.size(),
            (((13 * 8 + 14 * 4 + 2 * 4usize).next_multiple_of(8) + 3 * 8 + 4).next_multiple_of(8)
                + 8
                + 4)
            .next_multiple_of(8)
                + 8
        );
    }

    #[test]
    fn the_split_tail_runs_only_on_the_global_one_tile_grid_and_reads_its_work_order() {
        let d128 = AttentionKernel::default_for(128, MaskMode::Window).unwrap();
        // Needs split-KV; refused with persistent CTAs, the documents grid, shared K/V.
        assert!(d128.with_tail_split(true).is_err());
        let tail = d128.with_split_kv(true).with_tail_split(true).unwrap();
        assert!(tail.with_persistent(true).is_err());
        let persistent = d128.with_persistent(true).unwrap().with_split_kv(true);
        assert!(persistent.with_tail_split(true).is_err());
        let docs = AttentionKernel::default_for(128, MaskMode::Documents).unwrap();
        assert!(docs.with_split_kv(true).with_tail_split(true).is_err());
        let shared = AttentionKernel::shared_kv_sweep().unwrap()[0];
        assert!(shared.with_split_kv(true).with_tail_split(true).is_err());
        // The tail kernel reads its work tile off the one-dimensional order and its combine
        // the tail's rows; the plain split-KV kernel keeps the grid's.
        let src = tail.source().unwrap();
        assert!(src.contains("the last p.tail_tiles cut into p.num_splits splits"));
        assert!(
            src.contains("const long long split_stride = (long long)p.tail_tiles * FM_BLOCK_M;")
        );
        assert!(!src.contains("fm_section_tile"));
        let split = d128.with_split_kv(true).source().unwrap();
        assert!(split.contains("fm_section_tile") && !split.contains("p.tail_tiles"));
        assert!(tail.label().ends_with(" tail"));
    }

    #[test]
    fn mask_geometry_matches_the_normative_format() {
        let g = Geometry::TILE_128X128;
        assert_eq!(g.mask_threads(), 256);
        assert_eq!(g.values_per_thread(), 64);
        assert_eq!(g.mask_words_per_thread(), 2);
        assert_eq!(g.threads(), 384);
        let g = Geometry::TILE_64X64_SINGLE;
        assert_eq!((g.mask_threads(), g.values_per_thread()), (128, 32));
        let g = Geometry::TILE_64X64;
        assert_eq!(
            (
                g.values_per_thread(),
                g.block_values(),
                g.mask_words_per_thread()
            ),
            (64, 32, 1)
        );
    }

    #[test]
    fn configurations_fit_in_shared_memory() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                if !g.supports_head_dim(d) {
                    let e = AttentionKernel::default_for_geometry(g, d, MaskMode::Blocks);
                    assert_eq!(
                        e,
                        Err(ConfigError::GeometryHeadDim {
                            geometry: g,
                            head_dim: d
                        })
                    );
                    continue;
                }
                for mode in [MaskMode::Window, MaskMode::Blocks] {
                    let k = AttentionKernel::default_for_geometry(g, d, mode).unwrap();
                    assert!(k.smem_bytes() <= g.smem_budget(), "{k:?}");
                    assert!(k.lazy_rescale(), "{k:?}");
                }
            }
        }
        let g = Geometry::TILE_128X128;
        assert_eq!(
            AttentionKernel::new(g, 96, MaskMode::Window, 2, true),
            Err(ConfigError::HeadDim(96))
        );
        assert_eq!(
            AttentionKernel::new(g, 128, MaskMode::Window, 9, true),
            Err(ConfigError::Stages { stages: 9, max: 3 })
        );
        assert_eq!(
            AttentionKernel::new(g, 256, MaskMode::Window, 2, false),
            Err(ConfigError::Stages { stages: 2, max: 1 })
        );
        assert_eq!(
            AttentionKernel::new(g, 256, MaskMode::Blocks, 1, true),
            Err(ConfigError::Overlap { head_dim: 256 })
        );
        assert_eq!(
            AttentionKernel::default_for(128, MaskMode::Window)
                .unwrap()
                .with_dtype(ActDtype::F32),
            Err(ConfigError::Dtype(ActDtype::F32))
        );
        let one_wg = AttentionKernel::new(Geometry::TILE_64X64, 128, MaskMode::Blocks, 1, true);
        assert_eq!(
            one_wg.unwrap().with_pingpong(true),
            Err(ConfigError::PingPong { warpgroups: 1 })
        );
    }

    #[test]
    fn pingpong_passes_the_turn_round_robin_over_every_consumer_warpgroup() {
        // Two warpgroups: each opens the other's barrier; three: 0 -> 1 -> 2 -> 0, the last
        // one opening warpgroup 0's first turn and skipping its very last arrival.
        let two = AttentionKernel::default_for(128, MaskMode::Window).unwrap();
        assert!(two.pingpong() && two.geometry().consumer_warpgroups() == 2);
        let src = two.source().unwrap();
        assert!(src.contains("#define FM_PP_NEXT (2 - wg)"));
        assert!(src.contains("if (wg == 1) fm_named_arrive<FM_PINGPONG_THREADS>(1);"));
        assert!(src.contains("if (wg == 0) fm_named_arrive<FM_PINGPONG_THREADS>(wg + 2);"));
        let three = AttentionKernel::default_for(64, MaskMode::Window).unwrap();
        assert!(three.overlap() && three.pingpong());
        assert_eq!(three.geometry().consumer_warpgroups(), 3);
        let src = three.source().unwrap();
        assert!(src.contains("#define FM_PP_NEXT (wg == 2 ? 1 : wg + 2)"));
        assert!(src.contains("if (wg == 2) fm_named_arrive<FM_PINGPONG_THREADS>(1);"));
        assert!(src.contains("if (wg != 2) fm_named_arrive<FM_PINGPONG_THREADS>(wg + 2);"));
        assert!(src.contains("#define FM_PINGPONG_THREADS 256"));
        // One warpgroup has no one to pass the turn to.
        let one =
            AttentionKernel::new(Geometry::TILE_64X64, 128, MaskMode::Blocks, 1, true).unwrap();
        assert_eq!(
            one.with_pingpong(true),
            Err(ConfigError::PingPong { warpgroups: 1 })
        );
    }

    #[test]
    fn sources_are_header_free_and_name_the_layout() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
                    for (overlap, pingpong) in
                        [(false, false), (false, true), (true, false), (true, true)]
                    {
                        if !g.supports_head_dim(d)
                            || (overlap && !g.overlap_fits(d))
                            || (pingpong && g.consumer_warpgroups() != 2)
                        {
                            continue;
                        }
                        let stages = AttentionKernel::default_for_geometry(g, d, mode)
                            .unwrap()
                            .stages();
                        let k = AttentionKernel::new(g, d, mode, stages, overlap)
                            .unwrap()
                            .with_pingpong(pingpong)
                            .unwrap();
                        let src = k.source().unwrap();
                        assert!(!src.lines().any(|l| l.trim_start().starts_with("#include")));
                        assert!(src.contains(KERNEL_NAME));
                        assert!(src.contains(&format!("CLayout_64x{}", g.step_n())));
                        assert!(src.contains(&format!("m64n{d}k16")));
                        assert!(src.contains(&format!(
                            "__launch_bounds__({}, {})",
                            g.threads(),
                            g.ctas_per_sm()
                        )));
                        assert!(!src.contains('$'), "unreplaced placeholder in {k:?}");
                        let f16 = k.with_dtype(ActDtype::F16).unwrap().source().unwrap();
                        assert!(f16.contains(".f32.f16.f16") && !f16.contains("bf16.bf16"));
                        assert!(f16.contains("cvt.rn.f16x2.f32"));
                    }
                }
            }
        }
    }

    #[test]
    fn strided_o_kernels_write_o_through_its_strides_and_the_others_contiguous() {
        let shared = Geometry::SHARED.iter();
        for &g in Geometry::SUPPORTED.iter().chain(shared) {
            for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
                for d in [64, 128, 256] {
                    let Ok(k) = AttentionKernel::default_for_geometry(g, d, mode) else {
                        continue;
                    };
                    for (split, strided) in
                        [(false, false), (true, false), (false, true), (true, true)]
                    {
                        let k = k.with_split_kv(split).with_strided_o(strided);
                        let Ok(src) = k.source() else {
                            continue;
                        };
                        let what = k.label();
                        // The staged epilogue's, the direct stores' and the combine's O
                        // addresses: all through o's (batch, head) plane of its strides, or
                        // none (no stride is read).
                        let o_addresses: Vec<&str> = src
                            .match_indices("p.o + ")
                            .map(|(i, _)| &src[i + 6..])
                            .collect();
                        assert_eq!(o_addresses.len(), 3, "{what}");
                        for a in o_addresses {
                            let through_strides = a.starts_with("o_plane + (long long)(")
                                || a.starts_with("(o_plane / p.heads) * p.o_stride_b");
                            assert!(
                                a.starts_with("off)") || through_strides == strided,
                                "{what}: {}",
                                &a[..40]
                            );
                        }
                        assert_eq!(src.contains("p.o_stride_"), strided, "{what}");
                        assert_eq!(
                            src.contains("const long long off = o_plane + (long long)("),
                            strided,
                            "{what}"
                        );
                        assert!(src.contains("p.lse[out_row] = lse"), "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn q_registers_run_where_they_fit_and_are_refused_elsewhere_before_any_gpu() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                if !g.supports_head_dim(d) {
                    continue;
                }
                for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
                    let k = AttentionKernel::default_for_geometry(g, d, mode).unwrap();
                    // The default: the 128x128 window and documents walks at head dim 128.
                    assert_eq!(
                        k.q_registers(),
                        g == Geometry::TILE_128X128 && d == 128 && mode != MaskMode::Blocks,
                        "{k:?}"
                    );
                    let asked = k.with_q_registers(true);
                    if k.overlap() && g.q_registers_fit(d) {
                        let src = asked.unwrap().source().unwrap();
                        // Every k-step of S = Q K^T takes its A registers; none reads Q's descriptor.
                        for j in 0..d / 16 {
                            assert!(
                                src.contains(&format!("k16_rs_kb(s, q[{}]", 4 * j)),
                                "{g} d{d}"
                            );
                        }
                        assert!(!src.contains("fm_desc_at(q_start"), "{g} d{d}");
                        assert!(src.contains("fm_ldmatrix_a_offset(lt, j, FM_Q_CHUNK_BYTES)"));
                        assert!(!src.contains('$'));
                    } else {
                        assert!(matches!(asked, Err(ConfigError::QRegisters(_))), "{g} d{d}");
                    }
                    // The serial loop refuses them (ptxas reused Q's registers there).
                    let serial = AttentionKernel::new(g, d, mode, k.stages(), false).unwrap();
                    assert!(matches!(
                        serial.with_q_registers(true),
                        Err(ConfigError::QRegisters(_))
                    ));
                    let off = k.with_q_registers(false).unwrap().source().unwrap();
                    assert!(
                        off.contains("fm_desc_at(q_start") && !off.contains("q_operand[4 * j]")
                    );
                }
            }
        }
        // Head dim 64's 192x128 tile has no room for Q's 16 registers (O, S, P and the
        // margin take its 160).
        assert!(!Geometry::TILE_192X128.q_registers_fit(64));
        assert!(Geometry::TILE_128X128.q_registers_fit(128));
    }
}
