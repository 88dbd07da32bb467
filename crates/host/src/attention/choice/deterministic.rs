//! The deterministic backward's walk order (docs/backward.md, "Deterministic mode"): where
//! the unmasked walk may start each key tile at its own step.

use fragmask_kernels::attention::backward::{BackwardKernel, BackwardMask, BackwardParams};
use fragmask_kernels::attention::WINDOW_INFINITE;

/// Whether the deterministic window walk of `params` starts key tile n at step
/// `floor(n * steps / tiles)` (`BackwardParams::det_rotate`). Only without a window, where
/// every key tile walks every query step; the CTAs then wait for tiles on both sides of
/// them, so this takes every CTA of one (KV head, batch) plane resident at once: the
/// grid's x (key tiles × CTAs per tile) at most `slots`, the SM count. Elsewhere the ranks
/// point only at tiles launched earlier and need no such bound.
pub fn deterministic_rotation(
    kernel: &BackwardKernel,
    params: &BackwardParams,
    slots: usize,
) -> bool {
    let unbounded = params.window_left >= WINDOW_INFINITE && params.window_right >= WINDOW_INFINITE;
    let per_plane = u64::try_from(params.n_ctas.max(0))
        .unwrap_or(0)
        .saturating_mul(u64::from(kernel.grid_split()))
        .saturating_mul(u64::from(kernel.group_slices().max(1)));
    // The kernel's rank takes steps * tiles in 32 bits.
    let steps =
        u64::try_from(params.seqlen_q.max(1) - 1).unwrap_or(0) / u64::from(kernel.step_m()) + 1;
    kernel.deterministic()
        && kernel.mask() == BackwardMask::Window
        && unbounded
        && per_plane >= 1
        && per_plane <= slots as u64
        && steps.saturating_mul(u64::try_from(params.n_ctas.max(0)).unwrap_or(0)) < 1 << 32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The host's mirror of the deterministic window walk of key tile `n` (the kernel's
    /// `fm_make_schedule` and `fm_step_at` on the whole sequence, `key_tile::WINDOW`): the query
    /// steps it visits, in walk order, for `cta_n` keys per CTA and `step_m` queries per step.
    fn deterministic_walk(params: &BackwardParams, cta_n: u32, step_m: u32, n: i64) -> Vec<i64> {
        let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
        // The bounds the host's step counts use too (`backward_window_steps`).
        let Some((lo, hi)) = super::super::backward::window_walk_queries(params, cta_n, n) else {
            return Vec::new();
        };
        let (m_first, steps) = (lo / step, hi / step - lo / step + 1);
        let rot = if params.det_rotate != 0 {
            n * steps / i64::from(params.n_ctas)
        } else {
            0
        };
        (0..steps).map(|kk| m_first + (kk + rot) % steps).collect()
    }

    /// The host's mirror of the kernel's `fm_step_rank` in the window walk: key tile `n`'s turn
    /// among the tiles visiting query step `m`.
    fn deterministic_rank(params: &BackwardParams, cta_n: u32, step_m: u32, n: i64, m: i64) -> i64 {
        let (sq, sk) = (i64::from(params.seqlen_q), i64::from(params.seqlen_k));
        let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
        let steps = (sq - 1) / step + 1;
        if params.det_rotate != 0 {
            let tiles = i64::from(params.n_ctas);
            let n0 = (tiles - 1).min(((m + 1) * tiles - 1) / steps);
            return (n0 - n + tiles) % tiles;
        }
        let i1 = (m * step + step - 1).min(sq - 1);
        let last_key = if params.window_right >= WINDOW_INFINITE {
            sk - 1
        } else {
            (sk - 1).min(i1 + i64::from(params.diag_offset) + i64::from(params.window_right))
        };
        last_key / cta_n - n
    }

    fn params(n_ctas: i32, left: i32, right: i32) -> BackwardParams {
        BackwardParams {
            n_ctas,
            window_left: left,
            window_right: right,
            ..BackwardParams::default()
        }
    }

    fn kernel(deterministic: bool) -> BackwardKernel {
        BackwardKernel::default_for(128, BackwardMask::Window)
            .expect("head dim 128's window kernel")
            .with_deterministic(deterministic)
    }

    #[test]
    fn rotation_only_for_the_deterministic_unwindowed_walk_of_resident_tiles() {
        let inf = WINDOW_INFINITE;
        assert!(deterministic_rotation(
            &kernel(true),
            &params(128, inf, inf),
            132
        ));
        assert!(deterministic_rotation(
            &kernel(true),
            &params(132, inf, inf),
            132
        ));
        // More tiles than SMs: some CTA could wait for a tile not yet launched.
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(133, inf, inf),
            132
        ));
        // A causal or windowed walk ranks from the top tile down instead.
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(128, inf, 0),
            132
        ));
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(128, 1024, inf),
            132
        ));
        // The kernel's rank multiplies steps by tiles in 32 bits: 2^25 steps of 64 queries
        // times 128 tiles is 2^32, one step fewer fits.
        let long = |seqlen_q| BackwardParams {
            seqlen_q,
            ..params(128, inf, inf)
        };
        assert!(!deterministic_rotation(&kernel(true), &long(i32::MAX), 132));
        assert!(deterministic_rotation(
            &kernel(true),
            &long(((1 << 25) - 1) * 64),
            132
        ));
        // Not deterministic: nothing to order.
        assert!(!deterministic_rotation(
            &kernel(false),
            &params(128, inf, inf),
            132
        ));
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(0, inf, inf),
            132
        ));
    }

    proptest! {
        #![proptest_config(super::super::super::proptest_ci::config(256))]

        /// No deterministic window walk can hang or reorder: at every query step the visitors'
        /// ranks are exactly 0, 1, .. (so each turn comes once), a visitor's rank is its place
        /// in the order the visitors reach the step (its walk position, ties to the higher
        /// tile), and without the rotation a CTA waits only for higher tiles, which the
        /// deterministic grid launches before it.
        #[test]
        fn every_step_s_ranks_count_up_in_arrival_order_and_wait_only_on_earlier_launches(
            sq in 1i32..2500,
            sk in 1i32..2500,
            left in prop_oneof![Just(WINDOW_INFINITE), 0i32..2000],
            right in prop_oneof![Just(WINDOW_INFINITE), 0i32..2000],
            diag in -2000i32..2000,
            wide in any::<bool>(),
            small_tiles in any::<bool>(),
        ) {
            let (cta_n, step_m) = (if small_tiles { 64 } else { 128 }, if wide { 128 } else { 64 });
            let mut params = BackwardParams {
                seqlen_q: sq,
                seqlen_k: sk,
                n_ctas: (sk + cta_n as i32 - 1) / cta_n as i32,
                window_left: left,
                window_right: right,
                diag_offset: diag,
                ..BackwardParams::default()
            };
            params.det_rotate = i32::from(left >= WINDOW_INFINITE && right >= WINDOW_INFINITE);
            let tiles = i64::from(params.n_ctas);
            // step -> (walk position, tile) of each visitor
            let mut visits: std::collections::BTreeMap<i64, Vec<(usize, i64)>> = Default::default();
            for n in 0..tiles {
                for (kk, m) in deterministic_walk(&params, cta_n, step_m, n).into_iter().enumerate() {
                    visits.entry(m).or_default().push((kk, n));
                }
            }
            for (m, mut v) in visits {
                v.sort_by_key(|&(kk, n)| (kk, -n));
                for (want, &(_, n)) in v.iter().enumerate() {
                    let rank = deterministic_rank(&params, cta_n, step_m, n, m);
                    prop_assert_eq!(rank, want as i64, "step {} tile {} visitors {:?}", m, n, v);
                    if params.det_rotate == 0 {
                        prop_assert!(v[..want].iter().all(|&(_, before)| before > n));
                    }
                }
            }
        }
    }
}
