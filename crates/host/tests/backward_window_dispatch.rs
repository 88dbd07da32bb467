//! The backward's dispatch order in window mode (`family::schedule::key_tile`'s
//! `fm_dispatch` with `KeyGrid::Global`), emulated here from its formula: the CTAs of a
//! batch take every (K/V head, key tile) exactly once; with a finite left window the key
//! tiles whose walk the sequence's end cuts come after every full-length tile, in order of
//! their walks' lengths, longest first; and the full-length tiles keep the index order,
//! head by head.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use std::collections::HashSet;

use fragmask_kernels::attention::backward::STEP_M;
use proptest::prelude::*;

fn floor_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

/// A window call: `None` for an unbounded side.
#[derive(Clone, Copy, Debug)]
struct Call {
    kv_heads: i64,
    seqlen_q: i64,
    seqlen_k: i64,
    left: Option<i64>,
    right: Option<i64>,
    diag_offset: i64,
    cta_n: i64,
}

impl Call {
    fn ctas(&self) -> i64 {
        (self.seqlen_k + self.cta_n - 1) / self.cta_n
    }

    /// The number of leading key tiles `fm_dispatch` treats as full-length.
    fn full(&self) -> i64 {
        let Some(left) = self.left else {
            return self.ctas();
        };
        let a = self.seqlen_q - self.cta_n + self.diag_offset - left;
        (floor_div(a, self.cta_n) + 1).clamp(0, self.ctas())
    }

    /// `fm_dispatch`: the (K/V head, key tile) of the `w`-th CTA of a batch.
    fn dispatch(&self, w: i64) -> (i64, i64) {
        let (h, ctas, full) = (self.kv_heads, self.ctas(), self.full());
        if self.left.is_none()
            || (full > 0 && full < ctas && self.steps(full) > self.steps(full - 1))
        {
            return (w / ctas, w % ctas);
        }
        if w < h * full {
            (w / full, w % full)
        } else {
            let r = w - h * full;
            (r % h, full + r / h)
        }
    }

    /// Query steps key tile `n` walks (`fm_make_schedule`, global grid).
    fn steps(&self, n: i64) -> i64 {
        let step = i64::from(STEP_M);
        let n0 = n * self.cta_n;
        let n_end = (n0 + self.cta_n).min(self.seqlen_k) - 1;
        let lo = match self.right {
            None => 0,
            Some(r) => 0.max(n0 - self.diag_offset - r),
        };
        let hi = match self.left {
            None => self.seqlen_q - 1,
            Some(l) => (self.seqlen_q - 1).min(n_end - self.diag_offset + l),
        };
        if lo > hi {
            0
        } else {
            hi / step - lo / step + 1
        }
    }
}

fn call() -> impl Strategy<Value = Call> {
    (
        1i64..9,
        1i64..3000,
        1i64..3000,
        prop_oneof![Just(None), (0i64..2000).prop_map(Some)],
        prop_oneof![Just(None), (0i64..300).prop_map(Some)],
        -400i64..400,
        prop_oneof![Just(64i64), Just(128i64)],
    )
        .prop_map(
            |(kv_heads, seqlen_q, seqlen_k, left, right, diag_offset, cta_n)| Call {
                kv_heads,
                seqlen_q,
                seqlen_k,
                left,
                right,
                diag_offset,
                cta_n,
            },
        )
}

proptest! {
    #![proptest_config(proptest_ci::config(256))]

    #[test]
    fn window_dispatch_takes_every_key_tile_once_full_tiles_first_in_index_order_then_longest_first(
        c in call()
    ) {
        let (h, ctas) = (c.kv_heads, c.ctas());
        let order: Vec<(i64, i64)> = (0..h * ctas).map(|w| c.dispatch(w)).collect();
        // The tiles taken in index order, head by head, before the first out of it.
        let full = if order == (0..h * ctas).map(|w| (w / ctas, w % ctas)).collect::<Vec<_>>() {
            ctas
        } else {
            c.full()
        };
        let seen: HashSet<(i64, i64)> = order.iter().copied().collect();
        prop_assert_eq!(seen.len() as i64, h * ctas);
        prop_assert!(order.iter().all(|&(head, n)| (0..h).contains(&head) && (0..ctas).contains(&n)));
        // The full-length tiles: head by head, each head's in index order.
        let bulk = &order[..(h * full) as usize];
        prop_assert!(bulk.windows(2).all(|p| p[0] < p[1]));
        // Every full-length tile walks at least as many steps as any later tile ...
        let tail = &order[(h * full) as usize..];
        if let Some(longest_tail) = tail.iter().map(|&(_, n)| c.steps(n)).max() {
            let max_full = (0..full).map(|n| c.steps(n)).max().unwrap_or(longest_tail);
            prop_assert!(max_full >= longest_tail, "full tiles {} < tail {}", max_full, longest_tail);
        }
        // ... and the later tiles come longest first.
        prop_assert!(tail.windows(2).all(|p| c.steps(p[0].1) >= c.steps(p[1].1)));
    }
}

#[test]
fn a_1024_window_at_16k_sends_the_eight_cut_tiles_of_every_head_last() {
    let c = Call {
        kv_heads: 16,
        seqlen_q: 16384,
        seqlen_k: 16384,
        left: Some(1024),
        right: Some(0),
        diag_offset: 0,
        cta_n: 128,
    };
    assert_eq!(c.full(), 120);
    assert_eq!((0..120).map(|n| c.steps(n)).min(), Some(18));
    assert_eq!(c.steps(120), 16);
    assert_eq!(c.dispatch(16 * 120 - 1), (15, 119));
    assert_eq!(c.dispatch(16 * 120), (0, 120));
    assert_eq!(c.dispatch(16 * 120 + 15), (15, 120));
    assert_eq!(c.dispatch(16 * 128 - 1), (15, 127));
    // Causal (no left bound): the index order.
    let causal = Call { left: None, ..c };
    assert_eq!(causal.dispatch(129), (1, 1));
}
