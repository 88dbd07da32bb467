//! Split-KV of the attention forward (docs/architecture.md, "Split-KV forward"): how many
//! splits a call gets ([`plan_splits`]), its grid and its workspace.

use fragmask_kernels::attention::{Geometry, COMBINE_THREADS, MAX_SPLITS};
use fragmask_masks::PackedMask;

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
        Ok(SplitLaunch {
            splits,
            grid_x,
            combine_grid,
        })
    }

    /// Floats of the workspace's partial o `[splits, B, H, Sq, D]` and lse
    /// `[splits, B, H, Sq]`, checked against [`MAX_WORKSPACE_FLOATS`].
    pub(super) fn workspace_len(
        &self,
        shape: &AttentionShape,
    ) -> Result<(usize, usize), AttentionError> {
        let lse = (self.splits as usize)
            .checked_mul(shape.batch)
            .and_then(|x| x.checked_mul(shape.heads))
            .and_then(|x| x.checked_mul(shape.seqlen_q));
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

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(64))]

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
