//! The backward's configuration value: every number of the generated source derives from
//! it (keys per CTA, warpgroups, threads, register split, shared memory, stages, mask words).
//! Its checks are `const fn`, pinned by `const_assert!`s on the defaults.

use static_assertions::const_assert;

use super::{DQ_CHUNK_ROWS, ROW_PAD, STEP_M, WIDE_STEP_M};
use crate::attention::ConfigError;
use crate::family::dtype::ActDtype;
use crate::family::schedule::ListEntries;
use crate::family::sm90::{block_register_pool, MAX_DYNAMIC_SMEM, PRODUCER_REGS};

/// What a consumer thread asks `setmaxnreg.inc` for (FlashAttention-3's 240).
pub(super) const CONSUMER_REGS: u32 = 240;
/// The register split with the dQ writer warp ([`BackwardKernel::with_dq_writer`]): the
/// producer warpgroup keeps 40 (at 24 and 32 the producer warp's walk spilled 16-48 bytes
/// beside the writer's loop, NVRTC 13.0), the consumers 232, which fill the register file
/// beside it at two consumer warpgroups.
pub(super) const WRITER_PRODUCER_REGS: u32 = 40;
pub(super) const WRITER_CONSUMER_REGS: u32 = 232;
/// The register split with a deterministic writer warp, which also counts the step's rank
/// in the lists and waits for the dQ turns: the producer warpgroup keeps
/// `DET_WRITER_PRODUCER_REGS`, the consumers `DET_WRITER_CONSUMER_REGS`.
pub(super) const DET_WRITER_PRODUCER_REGS: u32 = 56;
pub(super) const DET_WRITER_CONSUMER_REGS: u32 = 224;
/// Staging buffers the dQ writer warp serves per CTA (named barriers 9..12: one empty and
/// one full barrier each).
pub(super) const MAX_DQ_WRITER_BUFFERS: u32 = 2;
// The splits fill the three warpgroups' launch registers (168 per thread), no more: a
// `setmaxnreg.inc` past them never returns.
const_assert!((PRODUCER_REGS + 2 * CONSUMER_REGS) * 128 <= block_register_pool(384, 1));
const_assert!(
    (WRITER_PRODUCER_REGS + 2 * WRITER_CONSUMER_REGS) * 128 <= block_register_pool(384, 1)
);
const_assert!(
    (DET_WRITER_PRODUCER_REGS + 2 * DET_WRITER_CONSUMER_REGS) * 128 <= block_register_pool(384, 1)
);
/// f32 registers a consumer thread needs besides dK and dV at a step of `step_m` queries:
/// `Sᵀ` and `dPᵀ` (`step_m / 2` each), then one dQ chunk (32) beside the bf16 `Pᵀ`/`dSᵀ`
/// A operands (`step_m / 4` each), with addresses: 96 at 64 queries, 160 at 128.
const fn step_regs(step_m: u32) -> u32 {
    step_m + 32
}

/// How the backward decides which (query, key) pairs are visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackwardMask {
    /// Causal / sliding window / none, computed in the kernel.
    Window,
    /// The transposed tile lists and FragmentNative words of a mask packed at
    /// `block_m x block_n` (backward accumulator: SwapAB, `block_n / 64` warpgroups).
    Blocks {
        /// Query rows of the mask tile.
        block_m: u32,
        /// Keys of the mask tile.
        block_n: u32,
    },
    /// Contiguous documents, causal or full within each (FlashAttention's varlen grid on
    /// the key side): one CTA per (document, key tile of the document) work item of
    /// `BackwardParams::doc_items`, the key tile aligned to the document's first token,
    /// walking the document's query steps with the window schedule and mask; no mask
    /// words. Not deterministic (a query step straddling two documents is visited by the
    /// key tiles of both).
    Documents,
}

impl BackwardMask {
    /// Every mode with its default tiles: the window walk, the documents grid, and masks
    /// packed at 128x128 and 64x64 (the modes the configuration tests and sweeps walk).
    pub const ALL: [BackwardMask; 4] = [
        BackwardMask::Window,
        BackwardMask::Documents,
        BackwardMask::Blocks {
            block_m: 128,
            block_n: 128,
        },
        BackwardMask::Blocks {
            block_m: 64,
            block_n: 64,
        },
    ];
}

/// How the main kernel adds its dQ chunks into the f32 accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DqReduce {
    /// `red.global.add.v2.f32` from the registers; the accumulator is row-major
    /// `[B, H, Sq_pad, D]`.
    Atomics,
    /// Each warpgroup stages its 64 x 64 chunk in shared memory in register order and one
    /// thread adds it with one TMA bulk reduction (`cp.reduce.async.bulk .add.f32`,
    /// FlashAttention-3's dQ path); the accumulator holds each chunk in that order
    /// (`[B, H, Sq_pad/64, D/64, 16 pairs, 128 threads, 2]`), which the postprocess maps
    /// back through the same fragment layout.
    Bulk,
    /// `red.global.add.v4.f32` from the registers into a register-order accumulator:
    /// values 4q..4q+3 of thread t at `[q][t]` of each chunk
    /// (`[B, H, Sq_pad/64, D/64, 8 quads, 128 threads, 4]`), so each warp's reduction
    /// covers 512 contiguous bytes, with no staging in shared memory; the postprocess reads
    /// the quads through the same fragment layout as `Bulk`'s pairs.
    FragmentAtomics,
}

/// Most Q/dO stages a configuration takes.
pub const MAX_STAGES: u32 = 4;

/// Bytes of one staged dQ chunk (64 x 64 f32).
pub const DQ_CHUNK_BYTES: u32 = DQ_CHUNK_ROWS * 64 * 4;

/// Bytes of the pair mode's probability exchange: the f32 `Pᵀ` of one step (64 keys x
/// [`STEP_M`] queries), written by the warpgroup that computes `Sᵀ` and read by the one that
/// computes `dPᵀ` ([`BackwardKernel::with_pair`]).
pub const P_EXCHANGE_BYTES: u32 = 64 * STEP_M * 4;

/// A validated backward configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackwardKernel {
    warpgroups: u32,
    head_dim: u32,
    d_split: u32,
    stages: u32,
    mask: BackwardMask,
    dtype: ActDtype,
    deterministic: bool,
    dq_reduce: DqReduce,
    kv_registers: bool,
    pair: bool,
    step_m: u32,
    dq_writer: bool,
    group_slices: u32,
    paired_keys: bool,
    strided_grads: bool,
    list_entries: ListEntries,
}

/// The most CTAs a GQA group's query heads are split over per key tile
/// ([`BackwardKernel::with_group_slices`]).
pub const MAX_GROUP_SLICES: u32 = 16;

/// dQ chunks (64 queries x 64 columns) one warpgroup computes per step: the step's
/// `step_m / 64` query halves times `dkv / 64` column chunks, over the warpgroups.
pub const fn dq_chunks_per_warpgroup(warpgroups: u32, dkv: u32, step_m: u32) -> u32 {
    (step_m / DQ_CHUNK_ROWS * (dkv / 64)).div_ceil(warpgroups)
}

/// Staging buffers per warpgroup of the bulk dQ path: one per chunk where shared memory
/// has room, else one (reused, waiting for its previous bulk read).
pub const fn dq_buffers(warpgroups: u32, head_dim: u32, dkv: u32, stages: u32, step_m: u32) -> u32 {
    let chunks = dq_chunks_per_warpgroup(warpgroups, dkv, step_m);
    let all =
        smem_bytes(warpgroups, head_dim, stages, step_m) + warpgroups * chunks * DQ_CHUNK_BYTES;
    if all <= MAX_DYNAMIC_SMEM {
        chunks
    } else {
        1
    }
}

/// Bytes of the shared memory a configuration uses (const fn: K, V, the Q/dO stages with
/// their lse/Dsum rows, two dS buffers, barriers, and the 1024-byte alignment slack; the dQ
/// staging comes on top), at steps of `step_m` queries.
pub const fn smem_bytes(warpgroups: u32, head_dim: u32, stages: u32, step_m: u32) -> u32 {
    let cta_n = 64 * warpgroups;
    let kv = 2 * cta_n * head_dim * 2;
    let per_stage = 2 * step_m * head_dim * 2 + 2 * step_m * 4;
    let ds = 2 * step_m * cta_n * 2;
    1024 + kv + stages * per_stage + ds + 256
}

/// Bytes of shared memory of the pair mode ([`BackwardKernel::with_pair`]) before the dQ
/// staging: one key group of 64 keys, its two column halves in two consumer warpgroups,
/// and the f32 probability exchange.
pub const fn pair_smem_bytes(head_dim: u32, stages: u32) -> u32 {
    smem_bytes(1, head_dim, stages, STEP_M) + P_EXCHANGE_BYTES
}

/// Whether a consumer thread also holds its warpgroup's 64 rows of K and V as RS-mode A
/// fragments (`head_dim / 2` registers: 2 · 64 · head_dim bf16 over 128 threads), so that
/// `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` read only Q and dO from shared memory.
pub const fn kv_registers_fit(head_dim: u32, dkv: u32) -> bool {
    dkv + step_regs(STEP_M) + head_dim / 2 <= CONSUMER_REGS
}

/// Whether `warpgroups` consumer warpgroups holding dK and dV of `dkv` columns fit the
/// register file with one producer warpgroup, at steps of `step_m` queries.
pub const fn registers_fit(warpgroups: u32, dkv: u32, step_m: u32) -> bool {
    // dK and dV: 2 * 64 * dkv / 128 f32 per thread.
    let needed = dkv + step_regs(step_m);
    needed <= CONSUMER_REGS
        && (PRODUCER_REGS + warpgroups * CONSUMER_REGS) * 128
            <= block_register_pool(128 * (1 + warpgroups), 1)
        && warpgroups >= 1
        && warpgroups <= 2
}

// The defaults fit: 128 keys over two warpgroups at head dim 128 with two stages, and
// 64 keys over one at head dim 256 (dK/dV split in two column halves).
// The producer warp copies lse and Dsum two queries per lane per 64 queries of a step.
const_assert!(STEP_M % 64 == 0 && WIDE_STEP_M % 64 == 0);
const_assert!(smem_bytes(2, 128, 2, STEP_M) <= MAX_DYNAMIC_SMEM);
const_assert!(smem_bytes(2, 64, 2, STEP_M) <= MAX_DYNAMIC_SMEM);
const_assert!(smem_bytes(1, 256, 2, STEP_M) <= MAX_DYNAMIC_SMEM);
const_assert!(registers_fit(2, 128, STEP_M));
const_assert!(registers_fit(1, 128, STEP_M));
const_assert!(!registers_fit(1, 256, STEP_M));
// Head dim 64's wide step: two stages and one staging buffer per warpgroup fit, and the
// registers of 128-query `Sᵀ`/`dPᵀ` beside dK and dV of 64 columns (no K/V registers).
const_assert!(smem_bytes(2, 64, 2, WIDE_STEP_M) + 2 * DQ_CHUNK_BYTES <= MAX_DYNAMIC_SMEM);
const_assert!(registers_fit(2, 64, WIDE_STEP_M));
const_assert!(!registers_fit(2, 128, WIDE_STEP_M));
const_assert!(kv_registers_fit(64, 64));
const_assert!(!kv_registers_fit(128, 128));
// The pair mode at head dim 256: two Q/dO stages fit only with dQ reductions that need no
// staging buffers; one stage with two staging buffers per warpgroup.
const_assert!(pair_smem_bytes(256, 2) <= MAX_DYNAMIC_SMEM);
const_assert!(pair_smem_bytes(256, 1) + 2 * 2 * DQ_CHUNK_BYTES <= MAX_DYNAMIC_SMEM);
const_assert!(pair_smem_bytes(256, 2) + 2 * DQ_CHUNK_BYTES > MAX_DYNAMIC_SMEM);

impl BackwardKernel {
    /// Validates a configuration: `warpgroups` consumer warpgroups of 64 keys each (1 or 2),
    /// dK/dV split into `d_split` column groups (one CTA each), `stages` Q/dO buffers.
    pub fn new(
        warpgroups: u32,
        head_dim: u32,
        d_split: u32,
        stages: u32,
        mask: BackwardMask,
    ) -> Result<Self, ConfigError> {
        if ![64, 128, 256].contains(&head_dim) {
            return Err(ConfigError::HeadDim(head_dim));
        }
        let cta_n = 64 * warpgroups;
        let geometry_err = || ConfigError::Geometry {
            block_m: STEP_M,
            block_n: cta_n,
            warpgroups,
        };
        if !(1..=2).contains(&warpgroups) || d_split == 0 || head_dim % d_split != 0 {
            return Err(geometry_err());
        }
        let dkv = head_dim / d_split;
        if dkv % 64 != 0 || !registers_fit(warpgroups, dkv, STEP_M) {
            return Err(ConfigError::Layout(format!(
                "dK and dV of {dkv} columns over {warpgroups} warpgroup(s) do not fit in \
                 registers; split head dim {head_dim} into more column groups"
            )));
        }
        if let BackwardMask::Blocks { block_m, block_n } = mask {
            // A listed tile's steps cover its whole `block_m` rows, and the workspace's rows
            // are padded to ROW_PAD only: a 192-row tile's last steps would run past them.
            let rows_fit = block_m % STEP_M == 0 && block_m != 0 && ROW_PAD % block_m == 0;
            if !rows_fit || block_n % cta_n != 0 || block_n > 128 {
                return Err(ConfigError::BackwardMaskTile {
                    block_m,
                    block_n,
                    cta_n,
                });
            }
        }
        Self {
            warpgroups,
            head_dim,
            d_split,
            stages: 1,
            mask,
            dtype: ActDtype::Bf16,
            deterministic: false,
            dq_reduce: DqReduce::Bulk,
            kv_registers: false,
            pair: false,
            step_m: STEP_M,
            dq_writer: false,
            group_slices: 1,
            strided_grads: false,
            list_entries: ListEntries::Read,
            paired_keys: false,
        }
        .with_stages(stages)
    }

    /// Every variant the compile sweeps cover: the default of head dims 64/128/256 for a
    /// window, the documents grid and 128x128 and 64x64 mask tiles, each in bf16 and fp16,
    /// deterministic or not, with each dQ reduction (bulk, row-major atomics, fragment-order
    /// atomics), the dQ writer warp where it fits, GQA group slices of 2 and 8 where the
    /// window walk takes them, and head dim 256's two-CTA column split. The NVRTC compile test and
    /// `examples/kernel_fingerprints` both walk it.
    pub fn compile_sweep() -> Result<Vec<Self>, ConfigError> {
        use DqReduce::{Atomics, Bulk, FragmentAtomics};
        // (deterministic, dtype, dQ reduction; None: the head dim's default).
        let variants = [
            (false, ActDtype::Bf16, None),
            (true, ActDtype::Bf16, None),
            (false, ActDtype::F16, None),
            (false, ActDtype::Bf16, Some(Bulk)),
            (true, ActDtype::Bf16, Some(Bulk)),
            (false, ActDtype::Bf16, Some(Atomics)),
            (true, ActDtype::Bf16, Some(Atomics)),
            (false, ActDtype::Bf16, Some(FragmentAtomics)),
        ];
        let mut kernels = Vec::new();
        let mut push = |k: Self| {
            if !kernels.contains(&k) {
                kernels.push(k);
            }
        };
        for d in [64, 128, 256] {
            for mask in std::iter::once(BackwardMask::Documents).chain(SWEEP_MASKS) {
                for (deterministic, dtype, reduce) in variants {
                    // The documents grid is never deterministic.
                    if deterministic && mask == BackwardMask::Documents {
                        continue;
                    }
                    let mut k = Self::default_for(d, mask)?
                        .with_dtype(dtype)?
                        .with_deterministic(deterministic);
                    if let Some(reduce) = reduce {
                        k = k.with_dq_reduce(reduce).with_fitting_stages()?;
                    }
                    push(k);
                }
                // The dQ writer warp, where the default takes it, and in the deterministic mode
                // (where it takes the dQ turns).
                let k = Self::default_for(d, mask)?;
                if k.dq_writer_fits() {
                    push(k.with_dq_writer(true)?);
                }
                let det = k.with_deterministic(true);
                if det.dq_writer_fits() && mask != BackwardMask::Documents {
                    push(det.with_dq_writer(true)?);
                }
                // GQA group slices (2 and 8) where the window walk takes them.
                for slices in [2, 8] {
                    let writer = k.with_dq_writer(k.dq_writer_fits())?;
                    if let Ok(sliced) = writer.with_group_slices(slices) {
                        push(sliced);
                    }
                }
            }
            // Head dim 64's wide step (`with_step_m(WIDE_STEP_M)`) with each dQ reduction
            // and in fp16.
            if d == 64 {
                let wide = Self::default_for(d, BackwardMask::Window)?
                    .with_kv_registers(false)?
                    .with_step_m(WIDE_STEP_M)?;
                push(wide);
                push(wide.with_dtype(ActDtype::F16)?);
                for reduce in [Atomics, FragmentAtomics] {
                    push(wide.with_dq_reduce(reduce).with_fitting_stages()?);
                }
                let documents = Self::default_for(d, BackwardMask::Documents)?
                    .with_kv_registers(false)?
                    .with_step_m(WIDE_STEP_M)?;
                for reduce in [Bulk, FragmentAtomics] {
                    push(documents.with_dq_reduce(reduce).with_fitting_stages()?);
                }
                let lists = Self::default_for(d, SWEEP_MASKS[1])?
                    .with_kv_registers(false)?
                    .with_step_m(WIDE_STEP_M)?;
                for reduce in [Bulk, FragmentAtomics] {
                    push(lists.with_dq_reduce(reduce).with_fitting_stages()?);
                }
                push(
                    lists
                        .with_dtype(ActDtype::F16)?
                        .with_dq_reduce(FragmentAtomics),
                );
            }
            // Paired key blocks on the 64x64 mask tile (head dims 64 and 128), bf16 and fp16.
            if d != 256 {
                let paired = Self::default_for(d, SWEEP_MASKS[2])?.with_paired_keys(true)?;
                push(paired);
                push(paired.with_dtype(ActDtype::F16)?);
                if paired.dq_writer_fits() {
                    push(paired.with_dq_writer(true)?);
                }
                // The deterministic mode: the turns in the writer warp where it fits (head dim
                // 128), and the consumers' own.
                let det = paired.with_deterministic(true);
                push(det);
                if det.dq_writer_fits() {
                    push(det.with_dq_writer(true)?);
                }
            }
            // Dense tile lists on the 128x128 mask tile: the default, its dQ writer and the
            // deterministic mode (whose rank they compute too).
            let lists =
                Self::default_for(d, SWEEP_MASKS[1])?.with_list_entries(ListEntries::Dense)?;
            push(lists);
            if lists.dq_writer_fits() {
                push(lists.with_dq_writer(true)?);
            }
            push(lists.with_deterministic(true));
            // Where the GPU packer's count says so at run time: the deterministic mode (the host's
            // choice, choice::backward_list_entries).
            let at_run_time = Self::default_for(d, SWEEP_MASKS[1])?
                .with_deterministic(true)
                .with_list_entries(ListEntries::DenseAtRunTime)?;
            push(at_run_time);
            if lists.with_deterministic(true).dq_writer_fits() {
                push(lists.with_deterministic(true).with_dq_writer(true)?);
                push(at_run_time.with_dq_writer(true)?);
            }
            // Head dim 256's two-CTA column split (`with_pair(false)`).
            if d == 256 {
                for mask in [BackwardMask::Window, SWEEP_MASKS[1]] {
                    push(Self::new(1, d, 2, 2, mask)?);
                }
            }
        }
        Ok(kernels)
    }

    /// The default configuration of a head dim and mask: 128 keys over two warpgroups at
    /// head dims 64 and 128 (64 keys over one where the mask tile has 64 keys), 64 keys over
    /// one warpgroup at 256 with dK/dV in two column halves of one CTA (the pair mode) and dQ
    /// by [`DqReduce::FragmentAtomics`], whose lack of staging buffers leaves room for the
    /// second Q/dO stage; two Q/dO stages (three on the 64-key tile at head dim 128:
    /// write-up 002's 10% of 64-token blocks took 0.977 of the two-stage time, an H100,
    /// 3 rounds); K and V in registers where they fit (head dim 64).
    pub fn default_for(head_dim: u32, mask: BackwardMask) -> Result<Self, ConfigError> {
        let narrow = matches!(mask, BackwardMask::Blocks { block_n, .. } if block_n < 128);
        let (warpgroups, d_split) = match head_dim {
            256 => (1, 2),
            _ if narrow => (1, 1),
            _ => (2, 1),
        };
        if d_split == 2 {
            return Self::new(warpgroups, head_dim, d_split, 1, mask)?
                .with_pair(true)?
                .with_dq_reduce(DqReduce::FragmentAtomics)
                .with_stages(2);
        }
        let stages = if narrow && head_dim == 128 { 3 } else { 2 };
        let k = Self::new(warpgroups, head_dim, d_split, stages, mask)?;
        let fits = kv_registers_fit(head_dim, k.dkv());
        k.with_kv_registers(fits)
    }

    /// The pair mode: the `d_split = 2` column halves of one 64-key tile in two consumer
    /// warpgroups of one CTA instead of two CTAs. Warpgroup half 0 computes `Sᵀ` and `Pᵀ`,
    /// half 1 `dPᵀ` and `dSᵀ`; `Pᵀ` (f32) and `dSᵀ` (the dQ operand) are exchanged
    /// through shared memory, so each GEMM runs once per (key tile, step); each half then
    /// adds its dK/dV columns and its dQ chunks as a column split would.
    pub fn with_pair(mut self, pair: bool) -> Result<Self, ConfigError> {
        if pair && (self.warpgroups != 1 || self.d_split != 2 || self.kv_registers) {
            return Err(ConfigError::Layout(format!(
                "the pair mode takes one 64-key warpgroup, two column halves and K/V in shared \
                 memory, not {} warpgroup(s), {} column group(s)",
                self.warpgroups, self.d_split
            )));
        }
        self.pair = pair;
        self.check_smem()?;
        Ok(self)
    }

    /// The same configuration with `stages` Q/dO stages, checked whole
    /// ([`Self::check_smem`]).
    pub fn with_stages(mut self, stages: u32) -> Result<Self, ConfigError> {
        let max = self.max_stages();
        if stages == 0 || stages > max {
            return Err(ConfigError::Stages { stages, max });
        }
        self.stages = stages;
        Ok(self)
    }

    /// The same configuration with its stages cut to [`Self::max_stages`] where they do not
    /// fit (a dQ reduction with staging buffers at head dim 256 takes one stage).
    pub fn with_fitting_stages(self) -> Result<Self, ConfigError> {
        let stages = self.stages.min(self.max_stages()).max(1);
        self.with_stages(stages)
    }

    /// The most Q/dO stages this configuration fits in shared memory with everything
    /// else it holds (the pair exchange, the dQ staging of its reduction); 0 if none.
    pub fn max_stages(&self) -> u32 {
        let mut k = *self;
        let mut max = 0;
        while max < MAX_STAGES {
            k.stages = max + 1;
            if k.smem_bytes() > MAX_DYNAMIC_SMEM {
                break;
            }
            max += 1;
        }
        max
    }

    /// Refuses a configuration whose whole shared memory ([`Self::smem_bytes`]: buffers,
    /// pair exchange and dQ staging) exceeds the SM's, naming the most stages that fit.
    /// Every builder that changes the total calls it; the generator calls it again.
    pub fn check_smem(&self) -> Result<(), ConfigError> {
        if self.smem_bytes() > MAX_DYNAMIC_SMEM {
            return Err(ConfigError::Stages {
                stages: self.stages,
                max: self.max_stages(),
            });
        }
        Ok(())
    }

    /// Whether the column halves share a CTA (see [`Self::with_pair`]).
    pub fn pair(&self) -> bool {
        self.pair
    }

    /// Consumer warpgroups per 64-key group: 2 in the pair mode, else 1.
    pub fn column_warpgroups(&self) -> u32 {
        if self.pair {
            self.d_split
        } else {
            1
        }
    }

    /// CTAs per key tile along x: the column groups not held by one CTA.
    pub fn grid_split(&self) -> u32 {
        self.d_split / self.column_warpgroups()
    }

    /// K and V of each warpgroup's keys held in registers as the A operands of `Sᵀ` and
    /// `dPᵀ` (RS-mode wgmma) instead of read from shared memory by every step.
    pub fn with_kv_registers(mut self, kv_registers: bool) -> Result<Self, ConfigError> {
        if kv_registers && (!kv_registers_fit(self.head_dim, self.dkv()) || self.step_m != STEP_M) {
            return Err(ConfigError::Layout(format!(
                "K and V of head dim {} do not fit in registers beside dK and dV of {} columns \
                 at {}-query steps",
                self.head_dim,
                self.dkv(),
                self.step_m
            )));
        }
        self.kv_registers = kv_registers;
        Ok(self)
    }

    /// Whether K and V are held in registers (see [`Self::with_kv_registers`]).
    pub fn kv_registers(&self) -> bool {
        self.kv_registers
    }

    /// Queries per step: [`STEP_M`], or [`WIDE_STEP_M`] (FlashAttention-3/4's 128-query
    /// `m_block_size` at head dim 64): `Sᵀ`/`dPᵀ` are m64n128, the step's dS holds two
    /// 64-query halves and warpgroup `wg` computes half `wg`'s dQ chunk, so the two
    /// warpgroups share the dQ GEMM that one of them runs at 64 queries. Taken by head dim
    /// 64's window walk, documents grid and tile lists of 128-query mask tiles (two mask
    /// words a thread per step) with two warpgroups, K and V in shared memory (their
    /// registers do not fit beside 128-query `Sᵀ` and `dPᵀ`), one column group, not
    /// deterministic.
    pub fn with_step_m(mut self, step_m: u32) -> Result<Self, ConfigError> {
        if step_m != STEP_M && step_m != WIDE_STEP_M {
            return Err(ConfigError::BackwardStep(format!(
                "a backward step is {STEP_M} or {WIDE_STEP_M} queries, not {step_m}"
            )));
        }
        self.step_m = step_m;
        self.check_step()?;
        self.with_fitting_stages()
    }

    /// Refuses a wide step ([`Self::with_step_m`]) outside the configurations it takes;
    /// the generator calls it again, after every builder.
    pub fn check_step(&self) -> Result<(), ConfigError> {
        let fits = self.step_m == STEP_M
            || (self.head_dim == 64
                && self.warpgroups == 2
                && self.d_split == 1
                && !self.pair
                && !self.kv_registers
                && !self.deterministic
                && match self.mask {
                    BackwardMask::Window | BackwardMask::Documents => true,
                    // Whole 128-query steps of the tile, two words a thread each.
                    BackwardMask::Blocks { block_m, block_n } => {
                        block_m % self.step_m == 0 && block_n == 128
                    }
                }
                && registers_fit(self.warpgroups, self.dkv(), self.step_m));
        if !fits {
            return Err(ConfigError::BackwardStep(format!(
                "the {}-query step takes head dim 64's window walk, documents grid or 128x128 \
                 mask tiles on two warpgroups with K and V in shared memory, not deterministic: \
                 not {}",
                self.step_m,
                self.label()
            )));
        }
        Ok(())
    }

    /// Queries per step (see [`Self::with_step_m`]).
    pub fn step_m(&self) -> u32 {
        self.step_m
    }

    /// The element type of q, k, v, o, dO and the gradients (bf16 or fp16).
    pub fn with_dtype(mut self, dtype: ActDtype) -> Result<Self, ConfigError> {
        if dtype == ActDtype::F32 {
            return Err(ConfigError::Dtype(dtype));
        }
        self.dtype = dtype;
        Ok(self)
    }

    /// Orders the dQ reductions by key tile (bit-identical results run to run).
    pub fn with_deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// The dQ reduction (default [`DqReduce::Bulk`], at head dim 256
    /// [`DqReduce::FragmentAtomics`]). The bulk reduction's staging buffers shrink to one
    /// per warpgroup where shared memory is short, so every reduction fits wherever
    /// another does, except the pair mode's second stage, which only the atomics leave
    /// room for: [`Self::check_smem`] refuses it.
    pub fn with_dq_reduce(mut self, dq_reduce: DqReduce) -> Self {
        self.dq_reduce = dq_reduce;
        self
    }

    /// The dQ reduction.
    pub fn dq_reduce(&self) -> DqReduce {
        self.dq_reduce
    }

    /// The bulk dQ reductions issued by a writer warp of the producer warpgroup
    /// (FlashAttention-3's dQ path, `flash_bwd_sm90`'s `dQaccum_store`): a consumer
    /// warpgroup waits on a named barrier until the writer has read its staging buffer's
    /// previous chunk, stores the chunk and its destination, and only arrives on a second
    /// barrier, where the writer issues the reduction; the consumers neither wait for one
    /// another's stores nor for a bulk read. Taken by [`DqReduce::Bulk`] on 64-query steps
    /// where the CTA stages at most two chunks per step, one buffer each (head dim 128 on
    /// two warpgroups, head dims 64 and 128 on the 64-token tile's one), outside the pair
    /// mode ([`Self::check_dq_writer`]); at head dim 64's wide step the consumers spilled 28
    /// bytes in the 232 registers the writer leaves them. In the deterministic mode the
    /// writer waits for the dQ turns and passes them on, and the consumers run no turn code.
    pub fn with_dq_writer(mut self, dq_writer: bool) -> Result<Self, ConfigError> {
        self.dq_writer = dq_writer;
        self.check_dq_writer()?;
        Ok(self)
    }

    /// Whether a writer warp issues the bulk dQ reductions ([`Self::with_dq_writer`]).
    pub fn dq_writer(&self) -> bool {
        self.dq_writer
    }

    /// Registers per thread of a consumer warpgroup after `setmaxnreg.inc`.
    pub fn consumer_regs(&self) -> u32 {
        if self.dq_writer {
            self.writer_split().1
        } else {
            CONSUMER_REGS
        }
    }

    /// Registers per thread of the producer warpgroup after `setmaxnreg.dec`.
    pub fn producer_regs(&self) -> u32 {
        if self.dq_writer {
            self.writer_split().0
        } else {
            PRODUCER_REGS
        }
    }

    /// The (producer, consumer) registers per thread beside a writer warp: the producers
    /// keep more in the deterministic mode, whose writer also counts ranks in the lists and
    /// waits for turns; paired key blocks read their ranks from the pair table, and at head
    /// dim 128 their consumers spilled 48 bytes in the 224 registers the deterministic split
    /// leaves them.
    fn writer_split(&self) -> (u32, u32) {
        if self.deterministic && !self.paired_keys {
            (DET_WRITER_PRODUCER_REGS, DET_WRITER_CONSUMER_REGS)
        } else {
            (WRITER_PRODUCER_REGS, WRITER_CONSUMER_REGS)
        }
    }

    /// Whether this configuration can take the writer warp: bulk reductions, 64-query steps
    /// with the same chunks per consumer warpgroup, one staging buffer per chunk, at most
    /// `MAX_DQ_WRITER_BUFFERS` in the CTA, not the pair mode. In the deterministic mode the
    /// writer takes the dQ turns (`dq::DQ_WRITER_WARP`).
    pub fn dq_writer_fits(&self) -> bool {
        let chunks = dq_chunks_per_warpgroup(self.warpgroups, self.dkv(), self.step_m);
        self.dq_reduce == DqReduce::Bulk
            && !self.pair
            && self.step_m == STEP_M
            // every warpgroup computes the same number of chunks per step, each staged in a
            // buffer of its own, and their empty/full barrier pairs fit named barriers 9..12
            && self.dkv() / 64 == self.warpgroups * chunks
            && self.dq_buffers() == chunks
            && self.warpgroups * chunks <= MAX_DQ_WRITER_BUFFERS
            && {
                // the split sums within the block's launch registers (sm90::block_register_pool)
                let (producer, consumer) = self.writer_split();
                let consumers = self.threads() / 128 - 1;
                (producer + consumers * consumer) * 128 <= block_register_pool(self.threads(), 1)
            }
    }

    /// Refuses the writer warp ([`Self::with_dq_writer`]) where it does not fit; the
    /// generator calls it again, after every builder.
    pub fn check_dq_writer(&self) -> Result<(), ConfigError> {
        if self.dq_writer && !self.dq_writer_fits() {
            return Err(ConfigError::DqWriter(format!(
                "the dQ writer warp takes bulk dQ reductions on 64-query steps with at most two \
                 staged chunks per CTA, not the pair mode: not {}",
                self.label()
            )));
        }
        Ok(())
    }

    /// The query heads of a GQA group split over `slices` CTAs per key tile (1: one CTA
    /// walks them all, summing dK and dV in registers). Each CTA walks `group / slices`
    /// heads and adds its dK and dV into f32 accumulators (`BackwardParams::dk_accum`,
    /// `dv_accum`: `red.global.add`, zeroed before the main kernel), which a fourth kernel
    /// casts ([`super::POST_KV_KERNEL_NAME`]); the grid's x runs one slice's key tiles after
    /// the other's, so the CTAs running at once walk the same query head, as they do
    /// without GQA (FlashAttention-3/4's GQA backward, `dk_accum`). Taken by the window walk
    /// without the column split or the pair mode, outside the deterministic mode (the
    /// accumulators' sums are not ordered; [`Self::check_group_slices`]).
    pub fn with_group_slices(mut self, slices: u32) -> Result<Self, ConfigError> {
        self.group_slices = slices;
        self.check_group_slices()?;
        Ok(self)
    }

    /// CTAs per key tile that share the GQA group's query heads
    /// ([`Self::with_group_slices`]).
    pub fn group_slices(&self) -> u32 {
        self.group_slices
    }

    /// Refuses group slices ([`Self::with_group_slices`]) where they do not run; the
    /// generator calls it again, after every builder.
    pub fn check_group_slices(&self) -> Result<(), ConfigError> {
        let s = self.group_slices;
        let ok = s == 1
            || (s.is_power_of_two()
                && s <= MAX_GROUP_SLICES
                && self.mask == BackwardMask::Window
                && !self.deterministic
                && !self.pair
                && self.d_split == 1);
        if !ok {
            return Err(ConfigError::GroupSlices(format!(
                "GQA group slices take a power of two up to {MAX_GROUP_SLICES} CTAs of the window \
                 walk, without the column split, the pair mode or the deterministic mode: not {s} \
                 slices of {}",
                self.label()
            )));
        }
        Ok(())
    }

    /// Paired key blocks (docs/backward.md, "Paired key blocks"): the 64-key tile of a
    /// 64x64 mask becomes one of two in a CTA of two consumer warpgroups, each owning the
    /// 64 keys of its own key block, which walk the union of the two blocks' transposed
    /// lists (`BackwardParams::key_pairs`, built by the host): a query step both lists
    /// hold loads Q and dO and reduces dQ once for both, and a warpgroup whose block does
    /// not see a step computes only its dQ chunk, over the other block's 64 keys. Taken by
    /// a 64x64 mask's kernel at head dims 64 and 128 on 64-query steps, without the column split,
    /// the pair mode or group slices; the K/V tensor maps then load 64-row boxes
    /// ([`Self::kv_box_rows`]). In the deterministic mode a pair takes its dQ turn at a step
    /// by its rank among the plane's pairs before it that visit the step (the table's).
    pub fn with_paired_keys(mut self, paired: bool) -> Result<Self, ConfigError> {
        if !paired {
            if self.paired_keys {
                self.paired_keys = false;
                self.warpgroups = 1;
                return self.with_fitting_stages();
            }
            return Ok(self);
        }
        if self.paired_keys {
            return Ok(self);
        }
        let ok = self.mask
            == (BackwardMask::Blocks {
                block_m: STEP_M,
                block_n: 64,
            })
            && self.warpgroups == 1
            && matches!(self.head_dim, 64 | 128)
            && self.d_split == 1
            && !self.pair
            && self.group_slices == 1
            && self.step_m == STEP_M;
        if !ok {
            return Err(ConfigError::Geometry {
                block_m: STEP_M,
                block_n: 64,
                warpgroups: 2,
            });
        }
        self.paired_keys = true;
        self.warpgroups = 2;
        let writer = self.dq_writer;
        self.dq_writer = false;
        let k = self.with_fitting_stages()?;
        k.with_dq_writer(writer && k.dq_writer_fits())
    }

    /// Whether two warpgroups own two 64-key blocks that share their query steps
    /// ([`Self::with_paired_keys`]).
    pub fn paired_keys(&self) -> bool {
        self.paired_keys
    }

    /// Rows of the K and V tensor maps' boxes: the CTA's keys, or one warpgroup's 64 with
    /// paired key blocks (each loads its own block).
    pub fn kv_box_rows(&self) -> u32 {
        if self.paired_keys {
            64
        } else {
            self.cta_n()
        }
    }

    /// Staging buffers per warpgroup for the bulk dQ path (0 with atomics).
    pub fn dq_buffers(&self) -> u32 {
        match self.dq_reduce {
            DqReduce::Atomics | DqReduce::FragmentAtomics => 0,
            DqReduce::Bulk if self.pair => {
                let chunks = dq_chunks_per_warpgroup(1, self.dkv(), self.step_m);
                let base = pair_smem_bytes(self.head_dim, self.stages);
                if base + 2 * chunks * DQ_CHUNK_BYTES <= MAX_DYNAMIC_SMEM {
                    chunks
                } else {
                    1
                }
            }
            DqReduce::Bulk => dq_buffers(
                self.warpgroups,
                self.head_dim,
                self.dkv(),
                self.stages,
                self.step_m,
            ),
        }
    }

    /// Consumer warpgroups (64 keys each).
    pub fn warpgroups(&self) -> u32 {
        self.warpgroups
    }

    /// Keys per CTA.
    pub fn cta_n(&self) -> u32 {
        64 * self.warpgroups
    }

    /// Head dim.
    pub fn head_dim(&self) -> u32 {
        self.head_dim
    }

    /// dK/dV column groups (CTAs per key tile).
    pub fn d_split(&self) -> u32 {
        self.d_split
    }

    /// dK/dV columns per CTA.
    pub fn dkv(&self) -> u32 {
        self.head_dim / self.d_split
    }

    /// Q/dO stages.
    pub fn stages(&self) -> u32 {
        self.stages
    }

    /// The mask mode.
    pub fn mask(&self) -> BackwardMask {
        self.mask
    }

    /// Element type.
    pub fn dtype(&self) -> ActDtype {
        self.dtype
    }

    /// Whether dQ reductions are ordered.
    pub fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// Threads per CTA of the main kernel: a producer warpgroup and the consumers.
    pub fn threads(&self) -> u32 {
        128 * (1 + self.warpgroups * self.column_warpgroups())
    }

    /// Dynamic shared memory of the main kernel (with the dQ staging buffers).
    pub fn smem_bytes(&self) -> u32 {
        let base = if self.pair {
            pair_smem_bytes(self.head_dim, self.stages)
        } else {
            smem_bytes(self.warpgroups, self.head_dim, self.stages, self.step_m)
        };
        base + self.warpgroups * self.column_warpgroups() * self.dq_buffers() * DQ_CHUNK_BYTES
    }

    /// Key tiles (CTAs along x per column group) for `seqlen_k`.
    pub fn n_ctas(&self, seqlen_k: u32) -> u32 {
        seqlen_k.div_ceil(self.cta_n())
    }

    /// A short label: `bwd 128k/2wg bf16 d128 window s2`.
    pub fn label(&self) -> String {
        let mask = match self.mask {
            BackwardMask::Window => "window".to_string(),
            BackwardMask::Blocks { block_m, block_n } => format!("blocks {block_m}x{block_n}"),
            BackwardMask::Documents => "documents".to_string(),
        };
        format!(
            "bwd {}k/{}wg {} d{}{} {} s{}{}",
            self.cta_n(),
            self.warpgroups,
            self.dtype.name(),
            self.head_dim,
            if self.d_split > 1 {
                format!("/{}", self.d_split)
            } else {
                String::new()
            },
            mask,
            self.stages,
            if self.deterministic { " det" } else { "" }
        ) + match self.dq_reduce {
            DqReduce::Atomics => " red",
            DqReduce::FragmentAtomics => " red-fragment",
            DqReduce::Bulk => "",
        } + if self.kv_registers { " kvr" } else { "" }
            + if self.pair { " pair" } else { "" }
            + if self.step_m != STEP_M { " q128" } else { "" }
            + if self.dq_writer { " dqw" } else { "" }
            + if self.paired_keys { " paired" } else { "" }
            + self.list_entries.suffix()
            + if self.strided_grads {
                " strided-grads"
            } else {
                ""
            }
            + &if self.group_slices > 1 {
                format!(" gs{}", self.group_slices)
            } else {
                String::new()
            }
    }

    /// Writes dQ, dK and dV through `BackwardParams::dq_stride_*` and `dkv_stride_*` (e.g.
    /// into a `[B, S, H, D]` caller's memory) instead of contiguous `[B, H, S, D]`. Off by
    /// default: the strided addresses cost the epilogues and postprocesses, and calls with
    /// contiguous gradients kept their kernels (always strided, the 12-document rows ran
    /// 1.006 / 1.013 at S = 16k / 8k, bench/results/session-2026-11-28f/bshd-grads/).
    pub fn with_strided_grads(mut self, strided: bool) -> Self {
        self.strided_grads = strided;
        self
    }

    /// Whether the gradients are written through their strides ([`Self::with_strided_grads`]).
    pub fn strided_grads(&self) -> bool {
        self.strided_grads
    }

    /// How the transposed lists' partial entries and the deterministic rank are got
    /// ([`ListEntries`]; docs/masks.md, "Dense tile lists"): read, computed for dense lists
    /// (every query block of every transposed row partial, in order, its words at tile
    /// `row * m_blocks + block`, and every key block of every forward row partial, the
    /// deterministic rank's row, which the host checks with
    /// `fragmask_masks::BlockLists::dense_partial` on both before it asks for
    /// [`ListEntries::Dense`]), or computed where the GPU packer's partial-tile count says
    /// so at run time (a count of every tile makes both directions dense). The deterministic
    /// mode computes only the rank and reads the entries, and the run-time check decides only
    /// the rank (`key_tile::list_values`). Other than `Read`: block masks only, not with
    /// paired key blocks.
    pub fn with_list_entries(mut self, entries: ListEntries) -> Result<Self, ConfigError> {
        if entries != ListEntries::Read
            && (!matches!(self.mask, BackwardMask::Blocks { .. }) || self.paired_keys)
        {
            return Err(ConfigError::DenseLists(
                "dense tile lists need a block mask without paired key blocks".into(),
            ));
        }
        self.list_entries = entries;
        Ok(self)
    }

    /// How the tile lists' entries are got ([`Self::with_list_entries`]).
    pub fn list_entries(&self) -> ListEntries {
        self.list_entries
    }

    /// The CUDA source of the three kernels (header-free; sm_90a).
    pub fn source(&self) -> Result<String, ConfigError> {
        super::source::generate(self)
    }
}

/// The masks whose default kernels the compile sweep and the configuration tests cover: a
/// window and 128x128 and 64x64 mask tiles.
pub(crate) const SWEEP_MASKS: [BackwardMask; 3] = [
    BackwardMask::ALL[0],
    BackwardMask::ALL[2],
    BackwardMask::ALL[3],
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A `setmaxnreg.inc` beyond the block's launch registers never returns (the
    /// deterministic writer split once asked for 48 + 2 x 232 of 504 and hung), so every
    /// kernel the sweep compiles keeps its warpgroups' registers within the pool.
    #[test]
    fn every_swept_register_split_sums_within_the_block_s_launch_registers() {
        for k in BackwardKernel::compile_sweep().unwrap() {
            let consumers = k.threads() / 128 - 1;
            let split = (k.producer_regs() + consumers * k.consumer_regs()) * 128;
            assert!(
                split <= block_register_pool(k.threads(), 1),
                "{}: {} + {consumers} x {} registers per thread",
                k.label(),
                k.producer_regs(),
                k.consumer_regs()
            );
            assert_eq!(k.producer_regs() % 8, 0, "{}", k.label());
            assert_eq!(k.consumer_regs() % 8, 0, "{}", k.label());
        }
    }

    #[test]
    fn paired_key_blocks_take_only_a_64x64_mask_s_one_warpgroup_tile_at_head_dims_64_and_128() {
        let tile64 = BackwardMask::Blocks {
            block_m: 64,
            block_n: 64,
        };
        for d in [64, 128] {
            let k = BackwardKernel::default_for(d, tile64).unwrap();
            let paired = k.with_paired_keys(true).unwrap();
            assert!(
                paired.paired_keys() && paired.warpgroups() == 2,
                "{}",
                paired.label()
            );
            assert_eq!((paired.cta_n(), paired.kv_box_rows()), (128, 64));
            assert!(paired.smem_bytes() <= MAX_DYNAMIC_SMEM);
            assert!(paired.source().is_ok(), "{}", paired.label());
            // Off again: the one-warpgroup tile, with its K/V boxes of 64 keys.
            let back = paired.with_paired_keys(false).unwrap();
            assert!(!back.paired_keys() && back.warpgroups() == 1);
            assert_eq!(back.kv_box_rows(), 64);
            // The deterministic mode: the pairs' turns in the writer warp where it fits (head
            // dim 128; at 64 the paired kernel holds K and V in registers and has no writer),
            // else the consumers' (a warpgroup skipping a step takes the turn in its skip
            // branch).
            let one_wg = k.with_deterministic(true).with_dq_writer(true).unwrap();
            let det = one_wg.with_paired_keys(true).unwrap();
            assert_eq!(det.dq_writer(), d == 128, "{}", det.label());
            assert!(det.source().is_ok(), "{}", det.label());
            let consumers = k.with_deterministic(true).with_dq_writer(false).unwrap();
            let consumers = consumers.with_paired_keys(true).unwrap();
            assert!(!consumers.dq_writer() && consumers.source().is_ok());
        }
        // Not the window walk, the documents grid, 128x128 tiles or head dim 256.
        for (d, mask) in [
            (128, BackwardMask::Window),
            (128, BackwardMask::Documents),
            (128, BackwardMask::ALL[2]),
            (256, tile64),
        ] {
            let k = BackwardKernel::default_for(d, mask).unwrap();
            assert!(k.with_paired_keys(true).is_err(), "{}", k.label());
            assert_eq!(k.with_paired_keys(false).unwrap(), k);
        }
    }

    #[test]
    fn group_slices_run_only_the_window_walk_outside_the_deterministic_and_split_modes() {
        let window = BackwardKernel::default_for(128, BackwardMask::Window).unwrap();
        for slices in [1, 2, 4, 8, MAX_GROUP_SLICES] {
            let k = window.with_group_slices(slices).unwrap();
            assert_eq!(k.group_slices(), slices);
            assert!(k.source().is_ok(), "{}", k.label());
        }
        let d256 = BackwardKernel::default_for(256, BackwardMask::Window).unwrap();
        for bad in [
            window.with_group_slices(0),
            window.with_group_slices(3),
            window.with_group_slices(2 * MAX_GROUP_SLICES),
            window.with_deterministic(true).with_group_slices(2),
            BackwardKernel::default_for(128, SWEEP_MASKS[1])
                .unwrap()
                .with_group_slices(2),
            BackwardKernel::default_for(128, BackwardMask::Documents)
                .unwrap()
                .with_group_slices(2),
            d256.with_group_slices(2),
            BackwardKernel::new(1, 256, 2, 2, BackwardMask::Window)
                .unwrap()
                .with_group_slices(2),
        ] {
            assert!(matches!(bad, Err(ConfigError::GroupSlices(_))), "{bad:?}");
        }
        // A builder after the slices cannot slip a refused mode past the generator.
        let sliced = window
            .with_group_slices(4)
            .unwrap()
            .with_deterministic(true);
        assert!(matches!(sliced.source(), Err(ConfigError::GroupSlices(_))));
    }

    #[test]
    fn the_wide_step_is_refused_with_a_typed_error_outside_its_configurations() {
        let d64 = BackwardKernel::default_for(64, BackwardMask::Window).unwrap();
        // Not a step size; K and V still in registers; deterministic; other head dims; 64-key tiles.
        for bad in [
            d64.with_kv_registers(false).unwrap().with_step_m(96),
            d64.with_step_m(WIDE_STEP_M),
            d64.with_kv_registers(false)
                .unwrap()
                .with_deterministic(true)
                .with_step_m(WIDE_STEP_M),
            BackwardKernel::default_for(128, BackwardMask::Window)
                .unwrap()
                .with_step_m(WIDE_STEP_M),
            BackwardKernel::default_for(64, SWEEP_MASKS[2])
                .unwrap()
                .with_kv_registers(false)
                .unwrap()
                .with_step_m(WIDE_STEP_M),
        ] {
            assert!(matches!(bad, Err(ConfigError::BackwardStep(_))), "{bad:?}");
        }
        let wide = d64
            .with_kv_registers(false)
            .unwrap()
            .with_step_m(WIDE_STEP_M)
            .unwrap();
        assert_eq!(wide.step_m(), WIDE_STEP_M);
        assert!(wide.label().ends_with(" q128"));
        // K and V cannot go back into registers at the wide step, and a deterministic wide
        // kernel does not generate.
        assert!(wide.with_kv_registers(true).is_err());
        assert!(wide.with_deterministic(true).source().is_err());
    }

    #[test]
    fn k_and_v_are_held_in_registers_exactly_where_they_fit() {
        for mask in SWEEP_MASKS {
            for d in [64, 128, 256] {
                let k = BackwardKernel::default_for(d, mask).unwrap();
                assert_eq!(k.kv_registers(), d == 64, "{k:?}");
                assert_eq!(k.label().ends_with(" kvr"), d == 64, "{}", k.label());
                let forced = k.with_kv_registers(true);
                assert_eq!(forced.is_ok(), d == 64, "{forced:?}");
                assert!(!k.with_kv_registers(false).unwrap().kv_registers());
            }
        }
    }

    #[test]
    fn head_dim_256_defaults_to_both_column_halves_in_one_cta_within_shared_memory() {
        for mask in SWEEP_MASKS {
            let k = BackwardKernel::default_for(256, mask).unwrap();
            assert!(
                k.pair() && k.grid_split() == 1 && k.threads() == 384,
                "{k:?}"
            );
            assert!(k.smem_bytes() <= MAX_DYNAMIC_SMEM, "{k:?}");
            assert!(k.source().is_ok());
            // Two stages, with the dQ reductions that need no staging buffers.
            assert_eq!((k.stages(), k.dq_reduce()), (2, DqReduce::FragmentAtomics));
            assert_eq!(k.max_stages(), 2);
            let bulk = k.with_dq_reduce(DqReduce::Bulk);
            assert_eq!(
                bulk.check_smem(),
                Err(ConfigError::Stages { stages: 2, max: 1 })
            );
            assert!(bulk.source().is_err());
            assert!(bulk.with_stages(1).unwrap().source().is_ok());
            assert!(k.with_dq_reduce(DqReduce::Atomics).source().is_ok());
            // The two-CTA column split stays available.
            let split = k.with_pair(false).unwrap();
            assert!(split.grid_split() == 2 && split.threads() == 256);
            assert!(split.source().is_ok());
        }
        for d in [64, 128] {
            let k = BackwardKernel::default_for(d, BackwardMask::Window).unwrap();
            assert!(!k.pair() && k.with_pair(true).is_err());
        }
    }

    /// `max_stages` is exact: that many stages pass the whole check, one more does not.
    #[test]
    fn max_stages_is_the_largest_count_the_whole_check_accepts() {
        for d in [64, 128, 256] {
            for mask in SWEEP_MASKS {
                let def = BackwardKernel::default_for(d, mask).unwrap();
                for reduce in [DqReduce::Bulk, DqReduce::Atomics, DqReduce::FragmentAtomics] {
                    let k = def.with_dq_reduce(reduce);
                    let max = k.max_stages();
                    assert!(max >= 1, "{k:?}");
                    assert!(k.with_stages(max).is_ok(), "{k:?}");
                    assert_eq!(
                        k.with_stages(max + 1).unwrap_err(),
                        ConfigError::Stages {
                            stages: max + 1,
                            max
                        },
                        "{k:?}"
                    );
                    assert!(k.with_stages(0).is_err());
                }
            }
        }
    }

    #[test]
    fn defaults_fit_and_bad_configurations_are_refused() {
        for d in [64, 128, 256] {
            for mask in SWEEP_MASKS {
                let k = BackwardKernel::default_for(d, mask).unwrap();
                assert!(k.smem_bytes() <= MAX_DYNAMIC_SMEM, "{k:?}");
            }
        }
        assert_eq!(
            BackwardKernel::new(2, 96, 1, 2, BackwardMask::Window),
            Err(ConfigError::HeadDim(96))
        );
        assert!(matches!(
            BackwardKernel::new(1, 256, 1, 2, BackwardMask::Window),
            Err(ConfigError::Layout(_))
        ));
        assert!(matches!(
            BackwardKernel::new(2, 128, 1, 9, BackwardMask::Window),
            Err(ConfigError::Stages { stages: 9, .. })
        ));
        // Head dim 64's forward tile: 192-row steps would run past the workspace's rows.
        assert_eq!(
            BackwardKernel::default_for(
                64,
                BackwardMask::Blocks {
                    block_m: 192,
                    block_n: 128
                }
            ),
            Err(ConfigError::BackwardMaskTile {
                block_m: 192,
                block_n: 128,
                cta_n: 128
            })
        );
        // Head dim 256's forward tile: 80 keys over 64-key CTAs.
        assert_eq!(
            BackwardKernel::default_for(
                256,
                BackwardMask::Blocks {
                    block_m: 128,
                    block_n: 80
                }
            ),
            Err(ConfigError::BackwardMaskTile {
                block_m: 128,
                block_n: 80,
                cta_n: 64
            })
        );
        // A 64-key mask tile cannot feed a 128-key CTA.
        assert!(matches!(
            BackwardKernel::new(
                2,
                128,
                1,
                2,
                BackwardMask::Blocks {
                    block_m: 64,
                    block_n: 64
                }
            ),
            Err(ConfigError::BackwardMaskTile {
                block_m: 64,
                block_n: 64,
                cta_n: 128
            })
        ));
    }
}
