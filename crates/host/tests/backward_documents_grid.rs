//! The backward's documents grid (`attention::documents::key_tile_items`,
//! `choice::backward_documents`): its work items cover every (document, key tile) once,
//! most query steps first; the kernel's walk and mask (`family::schedule::key_tile`'s
//! window walk with `KeyGrid::Documents`, `family::mask::KEY_TILE_WINDOW`), emulated
//! here from their formulas, visit every visible (query, key) pair exactly once and no
//! other; and the choice takes the grid exactly for a mask with documents at `Sq == Sk`
//! outside the deterministic mode, unless the options turn it off.

mod documents_common;
#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use std::collections::HashSet;

use documents_common::{documents, packed_documents};
use fragmask_host::attention::backward::BackwardOptions;
use fragmask_host::attention::choice::backward_documents;
use fragmask_host::attention::documents::{key_tile_items, key_tile_table, ITEM_INTS};
use fragmask_host::attention::AttentionShape;
use fragmask_kernels::attention::backward::{STEP_M, WIDE_STEP_M};
use fragmask_masks::DocumentKind;
use proptest::prelude::*;

fn floor_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

/// The key tile's walk as the kernel computes it (`fm_make_schedule` of the window
/// schedule with the documents grid's values; window `(inf, 0)` causal or `(inf, inf)`
/// full, diagonal offset 0) in steps of `step` queries: (first step, steps, full steps
/// `begin..end` relative to the first).
fn kernel_walk(
    causal: bool,
    start: i64,
    len: i64,
    n: i64,
    cta_n: i64,
    step: i64,
) -> (i64, i64, i64, i64) {
    let end = start + len;
    let n0 = start + n * cta_n;
    let lo = if causal { start.max(n0) } else { start };
    let hi = end - 1;
    if lo > hi {
        return (0, 0, 0, 0);
    }
    let m_first = lo / step;
    let num_steps = hi / step - m_first + 1;
    let (mut begin, mut full_end) = (0, 0);
    if n0 + cta_n <= end {
        let m_hi = (m_first + num_steps - 1).min(end / step - 1);
        let first_inside = m_first.max((start + step - 1) / step);
        let m_lo = if causal {
            first_inside.max(-floor_div(-(n0 + cta_n - 1), step))
        } else {
            first_inside
        };
        if m_lo <= m_hi {
            begin = m_lo - m_first;
            full_end = m_hi - m_first + 1;
        }
    }
    (m_first, num_steps, begin, full_end)
}

/// The mask the kernel applies on a partial step (`fm_apply_mask` with the documents
/// grid's bounds): query `q` sees key `k` of the tile.
fn kernel_mask(causal: bool, start: i64, len: i64, q: i64, k: i64) -> bool {
    let end = start + len;
    let mut lo = if causal { k } else { i64::MIN };
    let mut hi = i64::MAX;
    if k >= end {
        hi = i64::MIN;
    }
    lo = lo.max(start);
    hi = hi.min(end - 1);
    lo <= q && q <= hi
}

proptest! {
    #![proptest_config(proptest_ci::config(64))]

    #[test]
    fn key_tile_items_cover_every_document_key_tile_once_most_steps_first(
        lengths in prop::collection::vec(prop_oneof![Just(1usize), 1usize..200, 200usize..1500], 1..12),
        causal in any::<bool>(),
        cta_n in prop::sample::select(vec![64u32, 128]),
        step_m in prop::sample::select(vec![STEP_M, WIDE_STEP_M]),
    ) {
        let kind = if causal { DocumentKind::Causal } else { DocumentKind::Full };
        let docs = documents(&lengths, kind);
        let items = key_tile_items(&docs, cta_n, step_m);
        let mut seen: Vec<(u32, u32)> = items.iter().map(|i| (i.document, i.n_block)).collect();
        seen.sort_unstable();
        let want: Vec<(u32, u32)> = lengths
            .iter()
            .enumerate()
            .flat_map(|(d, &len)| (0..len.div_ceil(cta_n as usize) as u32).map(move |n| (d as u32, n)))
            .collect();
        prop_assert_eq!(seen, want);
        prop_assert!(items.windows(2).all(|w| w[0].steps >= w[1].steps));
        for i in &items {
            let (_, steps, _, _) = kernel_walk(causal, i.start.into(), i.len.into(), i.n_block.into(), cta_n.into(), step_m.into());
            prop_assert_eq!(i64::from(i.steps), steps, "{:?}", i);
        }
        let table = key_tile_table(&items);
        prop_assert_eq!(table.len(), items.len() * ITEM_INTS);
        prop_assert_eq!(&table[..4], &[items[0].start as i32, items[0].len as i32, items[0].n_block as i32, items[0].document as i32]);
    }

    #[test]
    fn the_kernel_walk_and_mask_visit_exactly_the_documents_pairs_once(
        lengths in prop::collection::vec(prop_oneof![Just(1usize), 1usize..150, 150usize..400], 1..5),
        causal in any::<bool>(),
        cta_n in prop::sample::select(vec![64u32, 128]),
        step_m in prop::sample::select(vec![STEP_M, WIDE_STEP_M]),
    ) {
        let kind = if causal { DocumentKind::Causal } else { DocumentKind::Full };
        let docs = documents(&lengths, kind);
        let s = docs.seqlen() as i64;
        let step = i64::from(step_m);
        let mut got = HashSet::new();
        for item in key_tile_items(&docs, cta_n, step_m) {
            let (start, len, n, cn) = (i64::from(item.start), i64::from(item.len), i64::from(item.n_block), i64::from(cta_n));
            let (m_first, steps, begin, full_end) = kernel_walk(causal, start, len, n, cn, step);
            let n0 = start + n * cn;
            for kk in 0..steps {
                let m = m_first + kk;
                let full = kk >= begin && kk < full_end;
                for q in m * step..(m + 1) * step {
                    for k in n0..n0 + cn {
                        let visible = if full { true } else { kernel_mask(causal, start, len, q, k) };
                        if !visible {
                            continue;
                        }
                        // A full step sees only real pairs of the document.
                        prop_assert!(q < s && k < s, "item {:?} step {} pair ({}, {})", item, m, q, k);
                        prop_assert!(got.insert((q, k)), "pair ({}, {}) visited twice", q, k);
                    }
                }
            }
        }
        let want: HashSet<(i64, i64)> = (0..s)
            .flat_map(|q| (0..s).map(move |k| (q, k)))
            .filter(|&(q, k)| docs.is_visible(q as usize, k as usize))
            .collect();
        prop_assert_eq!(got.len(), want.len());
        prop_assert!(got == want);
    }

    #[test]
    fn the_backward_documents_grid_is_chosen_for_documents_at_sq_eq_sk_unless_deterministic(
        lengths in prop::collection::vec(1usize..300, 1..6),
        causal in any::<bool>(),
        deterministic in any::<bool>(),
        grid in prop_oneof![Just(None), Just(Some(true)), Just(Some(false))],
        longer_k in any::<bool>(),
    ) {
        let s: usize = lengths.iter().sum();
        let packed = packed_documents(&lengths, causal);
        let shape = AttentionShape {
            batch: 1,
            heads: 2,
            kv_heads: 2,
            seqlen_q: s,
            seqlen_k: if longer_k { s + 1 } else { s },
            head_dim: 128,
        };
        let opts = BackwardOptions { deterministic, documents_grid: grid, ..BackwardOptions::default() };
        let want = !longer_k
            && !deterministic
            && grid.unwrap_or(fragmask_host::attention::choice::BACKWARD_DOCUMENTS_GRID);
        prop_assert_eq!(backward_documents(&shape, &packed, &opts).is_some(), want);
        let mut lists_only = packed.clone();
        lists_only.drop_documents();
        prop_assert!(backward_documents(&shape, &lists_only, &opts).is_none());
    }
}

#[test]
fn twelve_documents_at_16k_walk_fewer_steps_than_the_tile_lists() {
    let lengths = [
        2100, 731, 1666, 403, 3000, 129, 1, 2555, 1777, 1234, 1500, 1288,
    ];
    let docs = documents(&lengths, DocumentKind::Causal);
    let steps: u64 = key_tile_items(&docs, 128, STEP_M)
        .iter()
        .map(|i| u64::from(i.steps))
        .sum();
    // The tile lists of the 128x128 mask: every 128x128 tile holding a visible pair, two
    // steps each.
    let mut tiles = 0u64;
    for qt in 0..16384 / 128 {
        for kt in 0..=qt {
            let (q, k) = (qt * 128..qt * 128 + 128, kt * 128..kt * 128 + 128);
            // Some document holds a key of the tile at or before a query of the tile.
            let any = (0..docs.count()).any(|d| {
                let r = docs.range(d);
                let (q0, q1) = (q.start.max(r.start), q.end.min(r.end));
                let (k0, k1) = (k.start.max(r.start), k.end.min(r.end));
                q0 < q1 && k0 < k1 && k0 < q1
            });
            tiles += u64::from(any);
        }
    }
    assert!(steps < 2 * tiles, "{steps} steps vs {tiles} tiles");
}
