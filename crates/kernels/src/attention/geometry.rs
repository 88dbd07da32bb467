//! The tile geometry of the attention forward: one value from which every number of the
//! generated source derives (tile sizes, threads, launch bounds, register split, barrier
//! counts, mask words, shared memory). docs/architecture.md, "The attention kernel family".
//!
//! A block of `block_m = 64 * consumer_warpgroups` query rows runs one producer warpgroup
//! (TMA) and `consumer_warpgroups` MMA warpgroups, each owning 64 query rows (one wgmma
//! m64 atom along M, docs/architecture.md fact 2). Key tiles are `block_n` wide: S of one
//! warpgroup is a `m64n{block_n}` accumulator. `ctas_per_sm` blocks share an SM; with one
//! consumer warpgroup per block, two blocks give the scheduler the second warpgroup that
//! FlashAttention-3's ping-pong gets from a 128-row tile, while each 64-row query block
//! follows its own tile list (64-token block sparsity, write-up 002).

use super::ConfigError;

use crate::family::sm90::{block_register_pool, RESERVED_PER_BLOCK, SM_SHARED_BYTES};
pub use crate::family::sm90::{MAX_DYNAMIC_SMEM, PRODUCER_REGS};

/// Upper bound of `setmaxnreg.inc` a consumer asks for (FlashAttention-3's 240).
const CONSUMER_REGS_CAP: u32 = 240;

/// Registers the overlapped loop needs beside O, S and P (addresses, row statistics,
/// the mask): 32, what 192x128 at head dim 64 leaves (160 - 128), compiled without spills
/// (`tests/attention_compile.rs`).
const OVERLAP_MARGIN: u32 = 32;

/// A tile geometry of the attention forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    block_m: u32,
    block_n: u32,
    consumer_warpgroups: u32,
    ctas_per_sm: u32,
    step_blocks: u32,
    shared_kv: bool,
}

impl Geometry {
    /// 128 x 128 tiles, two consumer warpgroups, one block per SM (FlashAttention-3's
    /// head-dim-128 tile; ping-pong between the two warpgroups).
    pub const TILE_128X128: Geometry = Geometry::new(128, 128, 2, 1);
    /// 64 x 64 tiles, one consumer warpgroup, two blocks per SM, two key blocks per step:
    /// block sparsity at 64 tokens on both the query and the key side (write-up 002's
    /// 64-token blocks), with the S tile of a step 64 x 128 (the two listed key blocks side
    /// by side, each loaded by its own TMA box), so the MMA and the per-step overhead are
    /// those of a 128-key tile.
    pub const TILE_64X64: Geometry = Geometry::new(64, 64, 1, 2).with_step_blocks(2);
    /// 64 x 64 tiles, one key block per step (S is 64 x 64): the plain form, for comparison.
    pub const TILE_64X64_SINGLE: Geometry = Geometry::new(64, 64, 1, 2);
    /// 128 x 64 tiles, two consumer warpgroups: a narrower key tile for head dim 256, where
    /// S, P and O of a 128-wide tile do not fit in registers with the overlapped loop.
    pub const TILE_128X64: Geometry = Geometry::new(128, 64, 2, 1);
    /// 128 x 80 tiles, two consumer warpgroups (FlashAttention-3's head-dim-256 tile).
    pub const TILE_128X80: Geometry = Geometry::new(128, 80, 2, 1);
    /// 192 x 128 tiles, three consumer warpgroups (FlashAttention-3's head-dim-64 tile M).
    pub const TILE_192X128: Geometry = Geometry::new(192, 128, 3, 1);
    /// Two 64-token query blocks per block that share their K/V loads (`64x64/2x2`): two
    /// consumer warpgroups, each owning one 64-row query block of a [`Self::TILE_64X64`]
    /// mask (any two row blocks of a plane, paired by the host), walk the union of their
    /// key-block lists, two key blocks per step; a key block both lists hold is loaded
    /// once, and a warpgroup skips the steps its own list does not hold
    /// (docs/architecture.md, "Shared K/V of the 64-token tile"). Tile lists only, from a
    /// plan (the pairs' step table is built at planning).
    pub const TILE_64X64_SHARED: Geometry = Geometry::new(128, 64, 2, 1)
        .with_step_blocks(2)
        .with_shared_kv();

    /// The geometries whose query blocks share K/V ([`Self::shared_kv`]): emitted for tile
    /// lists only, so they are kept apart from [`Self::SUPPORTED`], whose geometries run
    /// every mask mode.
    pub const SHARED: [Geometry; 1] = [Geometry::TILE_64X64_SHARED];

    /// Every geometry the generator emits for every mask mode.
    pub const SUPPORTED: [Geometry; 6] = [
        Geometry::TILE_128X128,
        Geometry::TILE_64X64,
        Geometry::TILE_64X64_SINGLE,
        Geometry::TILE_128X64,
        Geometry::TILE_128X80,
        Geometry::TILE_192X128,
    ];

    const fn new(block_m: u32, block_n: u32, consumer_warpgroups: u32, ctas_per_sm: u32) -> Self {
        Geometry {
            block_m,
            block_n,
            consumer_warpgroups,
            ctas_per_sm,
            step_blocks: 1,
            shared_kv: false,
        }
    }

    const fn with_step_blocks(mut self, step_blocks: u32) -> Self {
        self.step_blocks = step_blocks;
        self
    }

    const fn with_shared_kv(mut self) -> Self {
        self.shared_kv = true;
        self
    }

    /// Whether each consumer warpgroup owns its own 64-row query block of a
    /// [`Self::mask_geometry`] mask and the block walks the union of their key-block lists
    /// ([`Self::TILE_64X64_SHARED`]).
    pub const fn shared_kv(&self) -> bool {
        self.shared_kv
    }

    /// The geometry a mask for this one is packed at: itself, or for a shared-K/V geometry
    /// the one-warpgroup tile of each of its query blocks ([`Self::TILE_64X64`]).
    pub const fn mask_geometry(&self) -> Geometry {
        if self.shared_kv {
            Geometry::new(64, self.block_n, 1, 2).with_step_blocks(self.step_blocks)
        } else {
            *self
        }
    }

    /// The preferred supported geometry of a `block_m x block_n` tile over `warpgroups`
    /// consumer warpgroups (the tile of a packed mask; the first of [`Self::SUPPORTED`]), or
    /// a [`ConfigError::Geometry`] listing the supported ones.
    pub fn from_tile(block_m: u32, block_n: u32, warpgroups: u32) -> Result<Self, ConfigError> {
        Self::SUPPORTED
            .into_iter()
            .find(|g| {
                g.block_m == block_m && g.block_n == block_n && g.consumer_warpgroups == warpgroups
            })
            .ok_or(ConfigError::Geometry {
                block_m,
                block_n,
                warpgroups,
            })
    }

    /// Parses `MxN` (`64x64`, `128x128`, ...) into the preferred geometry of that tile, or
    /// `MxN/S` into the one with `S` key blocks per step (`64x64/1`).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let bad = || ConfigError::GeometryName(text.to_string());
        let (tile, step) = match text.split_once('/') {
            Some((tile, step)) => (tile, Some(step.trim())),
            None => (text, None),
        };
        // `MxN/SxQ`: Q query blocks per block sharing K/V (Self::SHARED).
        if let Some((step, query_blocks)) = step.and_then(|s| s.split_once(['x', 'X'])) {
            let step: u32 = step.trim().parse().map_err(|_| bad())?;
            let query_blocks: u32 = query_blocks.trim().parse().map_err(|_| bad())?;
            let (m, n) = tile.split_once(['x', 'X']).ok_or_else(bad)?;
            let m: u32 = m.trim().parse().map_err(|_| bad())?;
            let n: u32 = n.trim().parse().map_err(|_| bad())?;
            return Self::SHARED
                .into_iter()
                .find(|g| {
                    (g.mask_geometry().block_m, g.block_n) == (m, n)
                        && g.step_blocks == step
                        && g.consumer_warpgroups == query_blocks
                })
                .ok_or_else(bad);
        }
        let step = match step {
            Some(s) => Some(s.parse::<u32>().map_err(|_| bad())?),
            None => None,
        };
        let (m, n) = tile.split_once(['x', 'X']).ok_or_else(bad)?;
        let m: u32 = m.trim().parse().map_err(|_| bad())?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        let warpgroups = m.div_ceil(64).max(1);
        match step {
            None => Self::from_tile(m, n, warpgroups),
            Some(s) => Self::SUPPORTED
                .into_iter()
                .find(|g| {
                    g.block_m == m
                        && g.block_n == n
                        && g.consumer_warpgroups == warpgroups
                        && g.step_blocks == s
                })
                .ok_or_else(bad),
        }
    }

    /// `"128x128"`, `"64x64/2"` (2 key blocks per step), `"64x64/2x2"` (and 2 query
    /// blocks sharing K/V), ...
    pub fn name(&self) -> String {
        if self.shared_kv {
            let tile = self.mask_geometry();
            format!(
                "{}x{}/{}x{}",
                tile.block_m, tile.block_n, self.step_blocks, self.consumer_warpgroups
            )
        } else if self.step_blocks == 1 {
            format!("{}x{}", self.block_m, self.block_n)
        } else {
            format!("{}x{}/{}", self.block_m, self.block_n, self.step_blocks)
        }
    }

    /// `MxN/S` with the key blocks per step always spelled out (`64x64/1`): parses back to
    /// exactly this geometry.
    pub fn spec(&self) -> String {
        if self.shared_kv {
            return self.name();
        }
        format!("{}x{}/{}", self.block_m, self.block_n, self.step_blocks)
    }

    /// The supported tiles, for messages: `128x128 (2 warpgroups), 64x64 (1), ...`.
    pub fn supported_list() -> String {
        Self::SUPPORTED
            .iter()
            .chain(Self::SHARED.iter())
            .map(|g| format!("{} ({} wg)", g.name(), g.consumer_warpgroups))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Query rows per block.
    pub const fn block_m(&self) -> u32 {
        self.block_m
    }

    /// Keys per block (the N of the mask's tile).
    pub const fn block_n(&self) -> u32 {
        self.block_n
    }

    /// Key blocks side by side in the S tile of one pipeline step.
    pub const fn step_blocks(&self) -> u32 {
        self.step_blocks
    }

    /// Keys per step: S of one warpgroup is a `m64n{step_n}` accumulator.
    pub const fn step_n(&self) -> u32 {
        self.block_n * self.step_blocks
    }

    /// Consumer (MMA) warpgroups per block; each owns 64 query rows.
    pub const fn consumer_warpgroups(&self) -> u32 {
        self.consumer_warpgroups
    }

    /// Blocks resident per SM (the launch bounds' minimum).
    pub const fn ctas_per_sm(&self) -> u32 {
        self.ctas_per_sm
    }

    /// Threads per block: the producer warpgroup plus the consumers.
    pub const fn threads(&self) -> u32 {
        128 * (1 + self.consumer_warpgroups)
    }

    /// Consumer threads of the mask's tile: the `threads` axis of the FragmentNative
    /// words (one warpgroup's 128 where each warpgroup owns its own query block).
    pub const fn mask_threads(&self) -> u32 {
        if self.shared_kv {
            128
        } else {
            128 * self.consumer_warpgroups
        }
    }

    /// Consumer threads of the block.
    pub const fn consumer_threads(&self) -> u32 {
        128 * self.consumer_warpgroups
    }

    /// Consumer warps (the arrival count of a stage's "empty" barrier).
    pub const fn consumer_warps(&self) -> u32 {
        4 * self.consumer_warpgroups
    }

    /// f32 values of S per consumer thread: the `m64n{step_n}` accumulator's `step_n / 2`.
    pub const fn values_per_thread(&self) -> u32 {
        self.step_n() / 2
    }

    /// f32 values per consumer thread of one key block (the mask tile's `m64n{block_n}`).
    pub const fn block_values(&self) -> u32 {
        self.block_n / 2
    }

    /// 32-bit FragmentNative words per consumer thread per partial mask tile.
    pub const fn mask_words_per_thread(&self) -> u32 {
        self.block_values().div_ceil(32)
    }

    /// Registers per consumer thread after `setmaxnreg.inc`: what the block's share of the
    /// register file leaves after the producer's [`PRODUCER_REGS`], in multiples of 8,
    /// at most 240.
    pub const fn consumer_regs(&self) -> u32 {
        let block = block_register_pool(self.threads(), self.ctas_per_sm);
        let per_thread = (block - 128 * PRODUCER_REGS) / (128 * self.consumer_warpgroups);
        let regs = per_thread / 8 * 8;
        if regs > CONSUMER_REGS_CAP {
            CONSUMER_REGS_CAP
        } else {
            regs
        }
    }

    /// The most dynamic shared memory one block may use at this residency.
    pub const fn smem_budget(&self) -> u32 {
        let share = SM_SHARED_BYTES / self.ctas_per_sm - RESERVED_PER_BLOCK;
        if share > MAX_DYNAMIC_SMEM {
            MAX_DYNAMIC_SMEM
        } else {
            share
        }
    }

    /// Bytes of the Q tile (`block_m x head_dim` bf16).
    pub const fn q_tile_bytes(&self, head_dim: u32) -> u32 {
        self.block_m * head_dim * 2
    }

    /// Bytes of one step's K or V tile (`step_n x head_dim` bf16).
    pub const fn kv_tile_bytes(&self, head_dim: u32) -> u32 {
        self.step_n() * head_dim * 2
    }

    /// Bytes after the tiles: the mbarriers (256 bytes) and a 4-byte scratch word per
    /// consumer thread, plus 1 KiB of slack to align the base to the 1024-byte swizzle atom.
    pub const fn smem_overhead(&self) -> u32 {
        1024 + 256 + 4 * self.consumer_threads()
    }

    /// Dynamic shared memory of a block with `stages` K and V buffers.
    pub const fn smem_bytes(&self, head_dim: u32, stages: u32) -> u32 {
        self.q_tile_bytes(head_dim)
            + 2 * stages * self.kv_tile_bytes(head_dim)
            + self.smem_overhead()
    }

    /// Dynamic shared memory of a persistent block ([`crate::attention::AttentionKernel::with_persistent`]):
    /// a second Q buffer, so the next work tile's Q loads while this one's O is staged in
    /// the first.
    pub const fn persistent_smem_bytes(&self, head_dim: u32, stages: u32) -> u32 {
        self.smem_bytes(head_dim, stages) + self.q_tile_bytes(head_dim)
    }

    /// Whether a persistent block with `stages` K/V stages fits in [`Self::smem_budget`].
    pub const fn persistent_fits(&self, head_dim: u32, stages: u32) -> bool {
        match (
            self.block_m.checked_mul(head_dim),
            self.step_n().checked_mul(head_dim),
        ) {
            (Some(q), Some(kv)) if q <= u32::MAX / 8 && kv <= u32::MAX / 16 && stages <= 8 => {
                self.persistent_smem_bytes(head_dim, stages) <= self.smem_budget()
            }
            _ => false,
        }
    }

    /// The K/V stages of the persistent form of a configuration with `stages`: `stages`
    /// where the second Q tile fits beside them ([`Self::persistent_fits`]), else the most
    /// that fit, but never fewer than `stages.min(2)` (one stage serialises the loads);
    /// `None` where those do not fit.
    pub const fn persistent_stages(&self, head_dim: u32, stages: u32) -> Option<u32> {
        let floor = if stages < 2 { stages } else { 2 };
        let mut s = stages;
        while s >= floor && s > 0 {
            if self.persistent_fits(head_dim, s) {
                return Some(s);
            }
            s -= 1;
        }
        None
    }

    /// Most K/V stages that fit (at most 4; 0 for a head dim of 0 or one whose tiles
    /// overflow or leave no room).
    pub const fn max_stages(&self, head_dim: u32) -> u32 {
        let (Some(q_tile), Some(kv_tile)) = (
            self.block_m.checked_mul(head_dim),
            self.step_n().checked_mul(head_dim),
        ) else {
            return 0;
        };
        if kv_tile == 0 || q_tile > u32::MAX / 4 || kv_tile > u32::MAX / 8 {
            return 0;
        }
        let fixed = self.q_tile_bytes(head_dim) + self.smem_overhead();
        let budget = self.smem_budget();
        if fixed >= budget {
            return 0;
        }
        let stages = (budget - fixed) / (2 * self.kv_tile_bytes(head_dim));
        if stages > 4 {
            4
        } else {
            stages
        }
    }

    /// Live f32/b32 registers of the overlapped main loop per consumer thread: O, S and P.
    pub const fn loop_registers(&self, head_dim: u32) -> u32 {
        head_dim / 2 + self.values_per_thread() + self.values_per_thread() / 2
    }

    /// Registers per thread at kernel entry: the launch bounds' share of the register file
    /// (`65536 / (threads * ctas_per_sm)`, in multiples of 8).
    pub const fn entry_regs(&self) -> u32 {
        block_register_pool(self.threads(), self.ctas_per_sm) / self.threads()
    }

    /// Whether ptxas can compile the kernel at `head_dim` without spilling: the
    /// `m64n{head_dim}` PV wgmma's `head_dim / 2` accumulators plus about 32 operands fit
    /// under the entry register cap (ptxas C7602 otherwise, seen for 64x64 at head dim
    /// 256), and O, S and P of the serial loop leave 16 of the consumer's registers
    /// (192x128 at head dim 128 spills; 128x128 at 256 fits exactly).
    pub const fn supports_head_dim(&self, head_dim: u32) -> bool {
        // The shared-K/V tile holds its mask tile's head dims (ptxas serialises its
        // wgmmas and spills at 256).
        if self.shared_kv && !self.mask_geometry().supports_head_dim(head_dim) {
            return false;
        }
        head_dim / 2 + 32 <= self.entry_regs()
            && self.loop_registers(head_dim) + 16 <= self.consumer_regs()
    }

    /// Whether the overlapped loop's O, S and P leave `OVERLAP_MARGIN` registers for
    /// addresses, row statistics and the mask (head dim 256 at 128-wide tiles does not:
    /// ptxas spills; 192x128 at head dim 64 fits exactly, without spills, as in
    /// FlashAttention-4's SM90 head-dim-64 configuration).
    pub const fn overlap_fits(&self, head_dim: u32) -> bool {
        self.loop_registers(head_dim) + OVERLAP_MARGIN <= self.consumer_regs()
    }

    /// Whether Q's `head_dim / 4` registers ([`super::AttentionKernel::with_q_registers`])
    /// fit beside the overlapped loop's O, S and P with its `OVERLAP_MARGIN`.
    pub const fn q_registers_fit(&self, head_dim: u32) -> bool {
        self.loop_registers(head_dim) + head_dim / 4 + OVERLAP_MARGIN <= self.consumer_regs()
    }

    /// Query-row blocks for `seqlen_q` (the grid's x extent).
    pub const fn m_blocks(&self, seqlen_q: u32) -> u32 {
        seqlen_q.div_ceil(self.block_m)
    }

    /// Key tiles for `seqlen_k`.
    pub const fn n_blocks(&self, seqlen_k: u32) -> u32 {
        seqlen_k.div_ceil(self.block_n)
    }
}

impl core::fmt::Display for Geometry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} ({} keys per step), {} consumer warpgroup{}, {} block{}/SM",
            self.name(),
            self.step_n(),
            self.consumer_warpgroups,
            if self.consumer_warpgroups == 1 {
                ""
            } else {
                "s"
            },
            self.ctas_per_sm,
            if self.ctas_per_sm == 1 { "" } else { "s" },
        )
    }
}

// Compile-time facts of the supported geometries.
static_assertions::const_assert_eq!(Geometry::TILE_128X128.threads(), 384);
static_assertions::const_assert_eq!(Geometry::TILE_128X128.consumer_regs(), 240);
static_assertions::const_assert_eq!(Geometry::TILE_128X128.mask_words_per_thread(), 2);
static_assertions::const_assert_eq!(Geometry::TILE_64X64.threads(), 256);
static_assertions::const_assert_eq!(Geometry::TILE_64X64.consumer_regs(), 232);
static_assertions::const_assert_eq!(Geometry::TILE_64X64.mask_words_per_thread(), 1);
static_assertions::const_assert_eq!(Geometry::TILE_64X64.step_n(), 128);
static_assertions::const_assert_eq!(Geometry::TILE_192X128.consumer_regs(), 160);
// Two 64x64 blocks of head dim 128 with two stages each fit in one SM's shared memory.
static_assertions::const_assert!(Geometry::TILE_64X64.max_stages(128) >= 1);
static_assertions::const_assert!(Geometry::TILE_64X64_SINGLE.max_stages(128) >= 2);
// Head dim 256 with two stages and the overlapped loop fits at 128x80 and 128x64.
static_assertions::const_assert!(Geometry::TILE_128X80.max_stages(256) >= 2);
static_assertions::const_assert!(Geometry::TILE_128X80.overlap_fits(256));
static_assertions::const_assert!(!Geometry::TILE_128X128.overlap_fits(256));
// Persistent CTAs hold two Q tiles beside the default stages: 128x128 at head dim 128 with two
// stages, the 64-token tile with its one stage, 192x128 at head dim 64 with three.
static_assertions::const_assert!(Geometry::TILE_128X128.persistent_fits(128, 2));
static_assertions::const_assert!(Geometry::TILE_64X64.persistent_fits(128, 1));
static_assertions::const_assert!(Geometry::TILE_192X128.persistent_fits(64, 3));
// Head dim 64 runs the overlapped loop on its 192x128 default tile.
static_assertions::const_assert!(Geometry::TILE_192X128.overlap_fits(64));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_or_huge_head_dim_has_no_stages_and_no_kernel() {
        for g in Geometry::SUPPORTED {
            assert_eq!(g.max_stages(0), 0, "{g}");
            assert_eq!(g.max_stages(u32::MAX), 0, "{g}");
            assert!(matches!(
                crate::attention::AttentionKernel::default_for_geometry(
                    g,
                    0,
                    crate::attention::MaskMode::Window
                ),
                Err(crate::attention::ConfigError::HeadDim(0))
            ));
        }
    }

    #[test]
    fn persistent_stages_fit_beside_two_q_tiles_and_are_the_most_up_to_the_asked() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                for asked in 1..=4 {
                    match g.persistent_stages(d, asked) {
                        Some(s) => {
                            assert!(s <= asked && s >= asked.min(2), "{g} d{d} {asked}: {s}");
                            assert!(g.persistent_fits(d, s), "{g} d{d} {asked}: {s}");
                            assert!(
                                s == asked || !g.persistent_fits(d, s + 1),
                                "{g} d{d} {asked}: {s} is not the most"
                            );
                        }
                        None => assert!(
                            !g.persistent_fits(d, asked.min(2)),
                            "{g} d{d} {asked}: {} stages fit",
                            asked.min(2)
                        ),
                    }
                }
            }
        }
        // The 128x128 list kernel at head dim 128 runs 3 stages, its persistent form 2.
        let lists = crate::attention::AttentionKernel::default_for_geometry(
            Geometry::TILE_128X128,
            128,
            crate::attention::MaskMode::Blocks,
        )
        .unwrap();
        assert_eq!(lists.stages(), 3);
        let persistent = crate::attention::AttentionKernel::persistent_default_for_geometry(
            Geometry::TILE_128X128,
            128,
            crate::attention::MaskMode::Blocks,
        )
        .unwrap()
        .unwrap();
        assert_eq!((persistent.stages(), persistent.persistent()), (2, true));
    }

    #[test]
    fn every_supported_geometry_is_consistent() {
        for g in Geometry::SUPPORTED {
            assert_eq!(g.block_m(), 64 * g.consumer_warpgroups(), "{g}");
            assert_eq!(g.block_n() % 16, 0, "{g}: PV k-blocks are 16 keys");
            assert!(g.block_n() <= 256, "{g}: wgmma N <= 256");
            assert_eq!(
                g.block_values() * g.mask_threads(),
                g.block_m() * g.block_n(),
                "{g}"
            );
            assert!(g.step_n() <= 256, "{g}: wgmma N <= 256");
            assert!(g.threads() * g.ctas_per_sm() <= 2048, "{g}: threads per SM");
            assert!(g.consumer_regs() >= 128, "{g}");
            assert!(g.supports_head_dim(64), "{g}");
            assert!(
                128 * PRODUCER_REGS + g.mask_threads() * g.consumer_regs()
                    <= block_register_pool(g.threads(), g.ctas_per_sm()),
                "{g}: the block's launch registers"
            );
            let preferred = Geometry::from_tile(g.block_m(), g.block_n(), g.consumer_warpgroups());
            assert_eq!(
                preferred.map(|p| (p.block_m(), p.block_n())),
                Ok((g.block_m(), g.block_n()))
            );
            assert_eq!(Geometry::parse(&g.spec()), Ok(g));
        }
    }

    #[test]
    fn unsupported_tiles_name_the_supported_ones() {
        let e = Geometry::from_tile(64, 128, 1).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("64x128"), "{text}");
        assert!(
            text.contains("64x64 (1 wg)") && text.contains("128x128 (2 wg)"),
            "{text}"
        );
        assert!(matches!(
            Geometry::parse("64"),
            Err(ConfigError::GeometryName(_))
        ));
        assert_eq!(Geometry::parse("64x64"), Ok(Geometry::TILE_64X64));
        assert_eq!(Geometry::parse("64x64/1"), Ok(Geometry::TILE_64X64_SINGLE));
        assert!(matches!(
            Geometry::parse("64x64/3"),
            Err(ConfigError::GeometryName(_))
        ));
        assert!(matches!(
            Geometry::parse("96x64"),
            Err(ConfigError::Geometry { block_m: 96, .. })
        ));
    }
}
