//! Split-KV of the attention forward (docs/architecture.md, "Split-KV forward"): how many
//! splits a call gets ([`plan_splits`]), its grid and its workspace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fragmask_kernels::attention::{Geometry, COMBINE_THREADS, MAX_SPLITS};
use fragmask_masks::PackedMask;

use super::persistent::TileSteps;
use super::{AttentionError, AttentionShape};

/// The split count of a call whose `row_blocks` CTAs (row blocks x heads x batch) each
/// walk at most `max_steps` key steps, on `sm_count` SMs: 1 when the row blocks alone
/// fill half the SMs (prefill), otherwise about one CTA per SM, and at least two steps
/// per split. Measured on write-up 002's decode (12 row blocks; docs/PERF.md, "Split-KV
/// forward"): 8 to 12 splits are within 2% of the best at 50% and 10% of the blocks.
///
/// `max_steps` is asked for only when the row blocks leave room to split (a block mask's
/// count reads every row of its lists).
pub fn plan_splits(row_blocks: usize, max_steps: impl FnOnce() -> usize, sm_count: usize) -> u32 {
    if row_blocks == 0 || row_blocks.saturating_mul(2) > sm_count {
        return 1;
    }
    let by_sms = sm_count / row_blocks;
    let by_steps = max_steps() / 2;
    by_sms.min(by_steps).clamp(1, MAX_SPLITS as usize) as u32
}

/// The most key steps any row block of `mask` walks on `geometry` (its partial and full
/// blocks, `step_blocks` per step).
pub fn max_steps_of_mask(mask: &PackedMask, geometry: &Geometry) -> usize {
    let step = geometry.step_blocks().max(1) as usize;
    mask.lists()
        .num_blocks()
        .iter()
        .zip(mask.lists().full_num_blocks())
        .map(|(&p, &f)| (p.max(0) as usize + f.max(0) as usize).div_ceil(step))
        .max()
        .unwrap_or(0)
}

/// The grid of a split-KV forward: `splits` CTAs per row block along x and, with more
/// than one split, the combine's grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SplitLaunch {
    pub(super) splits: u32,
    pub(super) grid_x: u32,
    pub(super) combine_grid: Option<u32>,
    /// Rows of one split's partials in the workspace: every row of o (`B H Sq`), or the
    /// split tail's tiles' rows.
    partial_rows: usize,
}

/// Most floats of a split-KV workspace (16 GiB).
const MAX_WORKSPACE_FLOATS: usize = 1 << 32;

impl SplitLaunch {
    pub(super) fn new(
        shape: &AttentionShape,
        splits: u32,
        m_blocks: u32,
    ) -> Result<Self, AttentionError> {
        if !(1..=MAX_SPLITS).contains(&splits) {
            return Err(AttentionError::Shape(format!(
                "splits must be 1..={MAX_SPLITS}, got {splits}"
            )));
        }
        let grid_x = m_blocks
            .checked_mul(splits)
            .filter(|&x| x < 1 << 31)
            .ok_or_else(|| {
                AttentionError::Shape(format!(
                    "{m_blocks} row blocks x {splits} splits: grid too large"
                ))
            })?;
        let combine_grid = if splits > 1 {
            let rows = shape
                .batch
                .checked_mul(shape.heads)
                .and_then(|x| x.checked_mul(shape.seqlen_q))
                .ok_or_else(|| AttentionError::Shape("B x H x Sq overflows".into()))?;
            let per_cta = fragmask_kernels::family::combine::rows_per_cta(
                COMBINE_THREADS,
                shape.head_dim as u32,
            ) as usize;
            let grid = u32::try_from(rows.div_ceil(per_cta))
                .ok()
                .filter(|&g| g < 1 << 31)
                .ok_or_else(|| AttentionError::Shape("combine grid too large".into()))?;
            Some(grid)
        } else {
            None
        };
        let partial_rows = shape
            .batch
            .checked_mul(shape.heads)
            .and_then(|x| x.checked_mul(shape.seqlen_q))
            .ok_or_else(|| AttentionError::Shape("B x H x Sq overflows".into()))?;
        Ok(SplitLaunch {
            splits,
            grid_x,
            combine_grid,
            partial_rows,
        })
    }

    /// The launch of a split tail over `tiles` work tiles of `block_m` rows (checked by
    /// [`TailSplit::check`]): a one-dimensional grid of its CTAs, and the combine's grid
    /// over the tail tiles' rows.
    pub(super) fn tail(
        tail: TailSplit,
        tiles: usize,
        block_m: u32,
        head_dim: usize,
    ) -> Result<Self, AttentionError> {
        tail.check(tiles)?;
        let grid_x = tail
            .ctas(tiles)
            .and_then(|c| u32::try_from(c).ok())
            .ok_or_else(|| AttentionError::Shape("split tail: grid too large".into()))?;
        let partial_rows = (tail.tiles as usize)
            .checked_mul(block_m as usize)
            .ok_or_else(|| AttentionError::Shape("split tail: rows overflow".into()))?;
        let per_cta =
            fragmask_kernels::family::combine::rows_per_cta(COMBINE_THREADS, head_dim as u32)
                as usize;
        let combine_grid = u32::try_from(partial_rows.div_ceil(per_cta))
            .ok()
            .filter(|&g| g < 1 << 31)
            .ok_or_else(|| AttentionError::Shape("combine grid too large".into()))?;
        Ok(SplitLaunch {
            splits: tail.splits,
            grid_x,
            combine_grid: Some(combine_grid),
            partial_rows,
        })
    }

    /// Floats of the workspace's partial o `[splits, rows, D]` and lse `[splits, rows]`
    /// (rows: `B H Sq`, or the split tail's tiles' rows), checked against
    /// [`MAX_WORKSPACE_FLOATS`].
    pub(super) fn workspace_len(
        &self,
        shape: &AttentionShape,
    ) -> Result<(usize, usize), AttentionError> {
        let lse = (self.splits as usize).checked_mul(self.partial_rows);
        let o = lse.and_then(|x| x.checked_mul(shape.head_dim));
        match (o, lse) {
            (Some(o), Some(lse)) if o <= MAX_WORKSPACE_FLOATS => Ok((o, lse)),
            _ => Err(AttentionError::Shape(format!(
                "a split-KV workspace of {} splits x {:?} exceeds {MAX_WORKSPACE_FLOATS} floats",
                self.splits,
                shape.q_shape()
            ))),
        }
    }
}

/// The split tail of a one-tile forward (docs/architecture.md, "Split tail";
/// `AttentionKernel::with_tail_split`): the last `tiles` work tiles of the plain launch
/// order run `splits` splits each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailSplit {
    /// Work tiles at the end of the launch order that are split.
    pub tiles: u32,
    /// Splits of each of them (2..=[`MAX_SPLITS`]).
    pub splits: u32,
}

/// The least estimated gain (the launch's end, [`tail_makespan`] against the plain grid's)
/// for which a call gets the split tail by default. The estimate counts SM time only; a
/// partly idle last wave runs at higher clocks under the power cap, which takes back part
/// of what it loses. On an H200, one binary, 4 interleaved pairs after 500 ms of warm-up
/// (bench/results/session-2026-11-28i/tailsplit/): head dim 64 at S = 16384 (estimated
/// 4.5%) took 0.975 of the plain grid's time, head dims 128 and 256 (estimated 1.9%)
/// 1.003 and 1.009, random 50% at head dim 128 0.995.
pub const TAIL_MIN_GAIN: f64 = 0.03;

/// The most splits of a tail tile the planner weighs.
pub const TAIL_MAX_SPLITS: u32 = 4;

/// The fewest key steps of a split the planner makes: shorter ones leave the combine's
/// launch and the partials' traffic uncovered (head dim 64 at S = 4096, 32-step tiles in
/// thirds, took 1.022 of the plain grid's time on an H200; S = 8192, 64-step tiles in
/// halves, 0.929).
pub const TAIL_MIN_SPLIT_STEPS: u32 = 16;

/// The estimate's cost of a split beyond its steps, in half steps (two per step): its
/// own Q load and pipeline start, its fp32 partial, and its share of the combine.
pub const SPLIT_OVERHEAD_HALF_STEPS: u64 = 2;

/// Grids of more waves than this are not weighed: their last wave is at most
/// 1 / `TAIL_MAX_WAVES` of the launch, below [`TAIL_MIN_GAIN`].
const TAIL_MAX_WAVES: usize = 100;

/// Whether [`plan_tail`] weighs a launch of `tiles` work tiles on `slots` SM slots
/// (more than one wave, at most `TAIL_MAX_WAVES`).
pub fn tail_weighed(tiles: usize, slots: usize) -> bool {
    tiles > slots && tiles <= slots.max(1).saturating_mul(TAIL_MAX_WAVES)
}

impl TailSplit {
    /// CTAs of the launch over `tiles` work tiles: the whole ones and every split.
    pub fn ctas(&self, tiles: usize) -> Option<usize> {
        let tail = self.tiles as usize;
        tiles
            .checked_sub(tail)?
            .checked_add(tail.checked_mul(self.splits as usize)?)
    }

    /// The work of CTA `c` of a launch over `tiles` tiles: `(tile, split, splits)`, the
    /// host's copy of the kernel's `fm_work_at` (`family::schedule::row_block::WORK_TAIL`).
    pub fn work_at(&self, c: usize, tiles: usize) -> (usize, u32, u32) {
        let whole = tiles - self.tiles as usize;
        if c < whole {
            (c, 0, 1)
        } else {
            let piece = c - whole;
            let n = self.splits as usize;
            (whole + piece / n, (piece % n) as u32, self.splits)
        }
    }

    /// Checks the tail against a launch of `tiles` work tiles: 1..=tiles tail tiles, 2..=
    /// [`MAX_SPLITS`] splits, and a grid below 2^31 CTAs.
    pub fn check(&self, tiles: usize) -> Result<(), AttentionError> {
        if self.tiles == 0 || self.tiles as usize > tiles {
            return Err(AttentionError::Shape(format!(
                "the split tail's {} tiles must be 1..={tiles} (the call's work tiles)",
                self.tiles
            )));
        }
        if !(2..=MAX_SPLITS).contains(&self.splits) {
            return Err(AttentionError::Shape(format!(
                "the split tail's splits must be 2..={MAX_SPLITS}, got {}",
                self.splits
            )));
        }
        match self.ctas(tiles) {
            Some(c) if c < 1 << 31 => Ok(()),
            _ => Err(AttentionError::Shape(format!(
                "{tiles} work tiles with {} split {} ways: grid too large",
                self.tiles, self.splits
            ))),
        }
    }
}

/// The estimated end, in half steps (two per step, one per tile), of a one-tile launch
/// over the tiles of `steps` on `slots` SM slots with `tail` split (none: the plain grid):
/// list scheduling in launch order, the whole tiles first, then each tail tile's splits
/// (each split's share `[T s / n, T (s + 1) / n)` of its steps, as the kernel's
/// `fm_split_start`, plus [`SPLIT_OVERHEAD_HALF_STEPS`]).
pub fn tail_makespan(steps: &TileSteps, slots: usize, tail: Option<TailSplit>) -> u64 {
    let tiles = steps.len();
    let tail = tail.unwrap_or(TailSplit {
        tiles: 0,
        splits: 1,
    });
    let whole = tiles.saturating_sub(tail.tiles as usize);
    let mut free: BinaryHeap<Reverse<u64>> = (0..slots.max(1)).map(|_| Reverse(0)).collect();
    let mut end = 0;
    let mut take = |cost: u64| {
        if let Some(Reverse(at)) = free.pop() {
            end = end.max(at + cost);
            free.push(Reverse(at + cost));
        }
    };
    for t in 0..whole {
        take(2 * u64::from(steps.steps_of(t)) + 1);
    }
    let n = u64::from(tail.splits.max(1));
    for t in whole..tiles {
        let total = u64::from(steps.steps_of(t));
        for s in 0..n {
            let share = total * (s + 1) / n - total * s / n;
            take(2 * share + 1 + SPLIT_OVERHEAD_HALF_STEPS);
        }
    }
    end
}

/// The split tail of a one-tile launch over the tiles of `steps` on `slots` SM slots:
/// of the candidates (the last partial wave's tiles, or that and one more wave, cut 2 to
/// [`TAIL_MAX_SPLITS`] ways, each split at least [`TAIL_MIN_SPLIT_STEPS`] steps), the one [`tail_makespan`]
/// ends earliest, where it ends the launch at least [`TAIL_MIN_GAIN`] earlier than the
/// plain grid (`forced`: whatever it gains). None where no candidate qualifies: a launch
/// of whole waves, of more than `TAIL_MAX_WAVES` waves, or of tail tiles too short to split.
/// Measured on an H200 (bench/results/session-2026-11-28i/tail/): the 56 tiles past 10
/// whole waves at head dim 64 (S = 16384, H = 16) alone, split 2 ways, took 0.104 ms
/// against the 0.163 ms the plain grid's last wave added.
pub fn plan_tail(steps: &TileSteps, slots: usize, forced: bool) -> Option<TailSplit> {
    let tiles = steps.len();
    let slots = slots.max(1);
    if tiles == 0 || (!forced && tiles > slots.saturating_mul(TAIL_MAX_WAVES)) {
        return None;
    }
    let rest = tiles % slots;
    let mut sizes = vec![];
    if rest > 0 {
        sizes.push(rest);
        if rest + slots <= tiles {
            sizes.push(rest + slots);
        }
    } else if forced {
        sizes.push(slots.min(tiles));
    }
    let plain = tail_makespan(steps, slots, None);
    let mut best: Option<(u64, TailSplit)> = None;
    for &n in &sizes {
        let shortest = (tiles - n..tiles)
            .map(|t| steps.steps_of(t))
            .min()
            .unwrap_or(0);
        for k in 2..=TAIL_MAX_SPLITS {
            if shortest < TAIL_MIN_SPLIT_STEPS * k {
                break;
            }
            let Ok(tail_tiles) = u32::try_from(n) else {
                continue;
            };
            let tail = TailSplit {
                tiles: tail_tiles,
                splits: k,
            };
            let end = tail_makespan(steps, slots, Some(tail));
            if best.is_none_or(|(e, _)| end < e) {
                best = Some((end, tail));
            }
        }
    }
    let (end, tail) = best?;
    let gain = 1.0 - end as f64 / plain.max(1) as f64;
    (forced || gain >= TAIL_MIN_GAIN).then_some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn write_up_002_decode_gets_about_one_cta_per_sm_and_prefill_none() {
        // 12 heads x one 64-row block; 91 steps (50% of 364 blocks, two per step) or 18.
        assert_eq!(plan_splits(12, || 91, 132), 11);
        assert_eq!(plan_splits(12, || 18, 132), 9);
        // Prefill: 16 heads x 128 row blocks.
        assert_eq!(plan_splits(16 * 128, || 64, 132), 1);
        assert_eq!(plan_splits(0, || 10, 132), 1);
    }

    fn uniform(steps: u32, m_blocks: usize, planes: usize) -> TileSteps {
        TileSteps::PerRowBlock {
            steps: vec![steps; m_blocks],
            planes,
        }
    }

    #[test]
    fn the_last_partial_wave_is_split_where_it_ends_the_launch_earlier() {
        // Head dim 64, S = 16384, H = 16: 86 row blocks of 128 steps, 1376 tiles on 132
        // SMs: 10 whole waves and 56 tiles, run as 112 half tiles.
        let d64 = uniform(128, 86, 16);
        assert_eq!(
            plan_tail(&d64, 132, false),
            Some(TailSplit {
                tiles: 56,
                splits: 2
            })
        );
        // Head dim 128: 2048 tiles, 15 waves and 68; 136 halves would need a 17th round,
        // thirds end in two short ones: about 2% earlier, below the default's bar.
        let d128 = uniform(128, 128, 16);
        assert_eq!(plan_tail(&d128, 132, false), None);
        let forced = plan_tail(&d128, 132, true);
        assert_eq!(
            forced,
            Some(TailSplit {
                tiles: 68,
                splits: 3
            })
        );
        let gain =
            1.0 - tail_makespan(&d128, 132, forced) as f64 / tail_makespan(&d128, 132, None) as f64;
        assert!((0.015..0.025).contains(&gain), "{gain}");
        // Head dim 256 (128x80 tiles): 205 steps per tile, the same two percent.
        assert_eq!(plan_tail(&uniform(205, 128, 16), 132, false), None);
        // Whole waves, one wave, too many waves, tail tiles too short to split.
        assert_eq!(plan_tail(&uniform(128, 132, 10), 132, false), None);
        assert_eq!(plan_tail(&uniform(128, 100, 1), 132, false), None);
        assert_eq!(plan_tail(&uniform(128, 1000, 14), 132, false), None);
        assert_eq!(plan_tail(&uniform(3, 86, 16), 132, false), None);
        // Head dim 64 at S = 4096: 352 tiles of 32 steps; thirds would be 10 steps.
        assert_eq!(plan_tail(&uniform(32, 22, 16), 132, false), None);
        // S = 8192: 688 tiles of 64 steps, the last 28 in 16-step quarters (measured
        // 0.929 of the plain grid's time).
        assert_eq!(
            plan_tail(&uniform(64, 43, 16), 132, false),
            Some(TailSplit {
                tiles: 28,
                splits: 4
            })
        );
        // Forced, a one-wave launch splits every tile.
        assert_eq!(
            plan_tail(&uniform(128, 100, 1), 132, true),
            Some(TailSplit {
                tiles: 100,
                splits: 2
            })
        );
    }

    #[test]
    fn a_tail_outside_the_launch_is_refused() {
        let t = |tiles, splits| TailSplit { tiles, splits };
        assert!(t(0, 2).check(10).is_err());
        assert!(t(11, 2).check(10).is_err());
        assert!(t(5, 1).check(10).is_err());
        assert!(t(5, MAX_SPLITS + 1).check(10).is_err());
        assert!(t(u32::MAX, MAX_SPLITS).check(usize::MAX).is_err());
        assert!(t(10, MAX_SPLITS).check(10).is_ok());
    }

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(64))]

        #[test]
        fn the_tail_grid_runs_every_split_of_every_tile_exactly_once(
            tiles in 1usize..3000, tail_frac in 0.0f64..1.0, splits in 2u32..=MAX_SPLITS,
        ) {
            let tail = TailSplit { tiles: ((tiles as f64 * tail_frac) as u32).max(1), splits };
            prop_assert!(tail.check(tiles).is_ok());
            let ctas = tail.ctas(tiles).unwrap();
            let mut seen = vec![0u64; tiles];
            for c in 0..ctas {
                let (t, s, n) = tail.work_at(c, tiles);
                prop_assert!(t < tiles && s < n);
                prop_assert_eq!(n > 1, t >= tiles - tail.tiles as usize);
                seen[t] |= 1 << s.min(63);
            }
            for (t, &bits) in seen.iter().enumerate() {
                let n = if t >= tiles - tail.tiles as usize { splits } else { 1 };
                prop_assert_eq!(bits, if n >= 64 { u64::MAX } else { (1u64 << n) - 1 });
            }
        }

        #[test]
        fn without_a_tail_the_estimate_is_the_plain_grid_s(
            steps in proptest::collection::vec(0u32..300, 1..600), slots in 1usize..200,
        ) {
            let steps = TileSteps::PerTile(steps);
            prop_assert_eq!(
                tail_makespan(&steps, slots, None),
                super::super::persistent::makespan(&steps, slots, 1)
            );
        }

        #[test]
        fn a_planned_tail_is_valid_and_never_estimated_later(
            steps in proptest::collection::vec(0u32..300, 1..600), slots in 1usize..200,
        ) {
            let steps = TileSteps::PerTile(steps);
            if let Some(tail) = plan_tail(&steps, slots, false) {
                prop_assert!(tail.check(steps.len()).is_ok());
                prop_assert!(
                    tail_makespan(&steps, slots, Some(tail)) < tail_makespan(&steps, slots, None)
                );
                let whole = steps.len() - tail.tiles as usize;
                for t in whole..steps.len() {
                    prop_assert!(steps.steps_of(t) >= TAIL_MIN_SPLIT_STEPS * tail.splits);
                }
            }
        }

        #[test]
        fn planned_splits_are_in_range_and_leave_two_steps_each(
            rows in 0usize..4096, steps in 0usize..100_000, sms in 1usize..1024,
        ) {
            let n = plan_splits(rows, || steps, sms) as usize;
            prop_assert!((1..=MAX_SPLITS as usize).contains(&n));
            if n > 1 {
                prop_assert!(n * 2 <= steps);
                prop_assert!(rows * n <= sms);
            }
        }
    }
}
