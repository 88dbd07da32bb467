//! The deterministic backward's walk order (docs/backward.md, "Deterministic mode"): a
//! host mirror of the kernel's window walk and of its rank (`key_tile::WINDOW_RANK`),
//! property-tested so that no turn repeats, none is skipped and no CTA waits for one
//! launched after it.

use fragmask_kernels::attention::backward::BackwardParams;
use fragmask_kernels::attention::WINDOW_INFINITE;
use proptest::prelude::*;

/// The host's mirror of the deterministic window walk of key tile `n` (the kernel's
/// `fm_make_schedule` and `fm_step_at` on the whole sequence, `key_tile::WINDOW`): the query
/// steps it visits, in walk order, for `cta_n` keys per CTA and `step_m` queries per step.
fn deterministic_walk(params: &BackwardParams, cta_n: u32, step_m: u32, n: i64) -> Vec<i64> {
    let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
    // The bounds the host's step counts use too (`backward_window_steps`).
    let Some((lo, hi)) = super::backward::window_walk_queries(params, cta_n, n) else {
        return Vec::new();
    };
    (lo / step..=hi / step).collect()
}

/// The host's mirror of the kernel's `fm_step_rank` in the window walk: key tile `n`'s turn
/// among the tiles visiting query step `m`.
fn deterministic_rank(params: &BackwardParams, cta_n: u32, step_m: u32, n: i64, m: i64) -> i64 {
    let (sq, sk) = (i64::from(params.seqlen_q), i64::from(params.seqlen_k));
    let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
    let i1 = (m * step + step - 1).min(sq - 1);
    let last_key = if params.window_right >= WINDOW_INFINITE {
        sk - 1
    } else {
        (sk - 1).min(i1 + i64::from(params.diag_offset) + i64::from(params.window_right))
    };
    last_key / cta_n - n
}

proptest! {
    #![proptest_config(super::super::proptest_ci::config(256))]

    /// No deterministic window walk can hang or reorder: at every query step the visitors'
    /// ranks are exactly 0, 1, .. (so each turn comes once), a visitor's rank is its place
    /// in the order the visitors reach the step (its walk position, ties to the higher
    /// tile), and a CTA waits only for higher tiles, which the deterministic grid
    /// launches before it.
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
        let params = BackwardParams {
            seqlen_q: sq,
            seqlen_k: sk,
            n_ctas: (sk + cta_n as i32 - 1) / cta_n as i32,
            window_left: left,
            window_right: right,
            diag_offset: diag,
            ..BackwardParams::default()
        };
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
                prop_assert!(v[..want].iter().all(|&(_, before)| before > n));
            }
        }
    }
}
