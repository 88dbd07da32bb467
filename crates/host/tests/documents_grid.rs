//! The documents grid (`attention::documents`, `choice::forward_mode`): its work items
//! cover every (document, row block) once, longest first, with the window walk's blocks;
//! the choice takes it exactly for a mask with documents, no split-KV and `Sq == Sk`.

mod documents_common;
#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use documents_common::{documents, packed_documents};
use fragmask_host::attention::blockmask::pack_for_kernel;
use fragmask_host::attention::choice::forward_mode;
use fragmask_host::attention::documents::{item_table, tiles, work_items, ITEM_INTS};
use fragmask_host::attention::{AttentionOptions, AttentionShape};
use fragmask_kernels::attention::{Geometry, MaskMode};
use fragmask_masks::{DocumentIds, DocumentKind, Predicate, PredicateMask};
use proptest::prelude::*;

fn lengths_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![Just(1usize), 1usize..200, 200usize..1500],
        1..12,
    )
}

fn kind_strategy() -> impl Strategy<Value = DocumentKind> {
    prop_oneof![Just(DocumentKind::Causal), Just(DocumentKind::Full)]
}

proptest! {
    #![proptest_config(proptest_ci::config(64))]

    #[test]
    fn work_items_cover_every_document_row_block_once_most_steps_first(
        lengths in lengths_strategy(),
        kind in kind_strategy(),
        g in prop::sample::select(Geometry::SUPPORTED.to_vec()),
    ) {
        let docs = documents(&lengths, kind);
        let items = work_items(&docs, &g);
        let mut seen: Vec<(u32, u32)> = items.iter().map(|i| (i.document, i.m_block)).collect();
        seen.sort_unstable();
        let want: Vec<(u32, u32)> = lengths
            .iter()
            .enumerate()
            .flat_map(|(d, &len)| (0..len.div_ceil(g.block_m() as usize) as u32).map(move |m| (d as u32, m)))
            .collect();
        prop_assert_eq!(seen, want);
        prop_assert!(items.windows(2).all(|w| w[0].steps(&g) >= w[1].steps(&g)));
        // Each item's blocks are those of its rows' visible keys, each block visited
        // once; the partial ones hold a masked element or a key past the document.
        for i in &items {
            let (bm, bn) = (g.block_m() as usize, g.block_n() as usize);
            let range = docs.range(i.document as usize);
            prop_assert_eq!((i.start as usize, i.len as usize), (range.start, range.len()));
            let rows = i.m_block as usize * bm..((i.m_block as usize + 1) * bm).min(range.len());
            let (mut blocks, mut partial) = (0u32, 0u32);
            for n in 0..range.len().div_ceil(bn) {
                let keys = n * bn..(n + 1) * bn;
                let visible = |q: usize, k: usize| {
                    k < range.len() && (kind == DocumentKind::Full || k <= q)
                };
                let any = rows.clone().any(|q| keys.clone().any(|k| visible(q, k)));
                // Rows past the document are never written, so only its own rows count.
                let all = rows.clone().all(|q| keys.clone().all(|k| visible(q, k)));
                blocks += u32::from(any);
                partial += u32::from(any && !all);
            }
            prop_assert_eq!((i.key_blocks, i.partial_blocks), (blocks, partial), "{:?}", i);
        }
        let table = item_table(&items);
        prop_assert_eq!(table.len(), items.len() * ITEM_INTS);
        prop_assert_eq!(&table[..4], &[items[0].start as i32, items[0].len as i32, items[0].m_block as i32, items[0].document as i32]);
        let (visited, partial) = tiles(&items);
        prop_assert!(partial <= visited);
    }

    #[test]
    fn the_documents_grid_is_chosen_exactly_for_documents_without_splits_at_sq_eq_sk(
        lengths in prop::collection::vec(1usize..300, 1..6),
        causal in any::<bool>(),
        splits in prop_oneof![Just(None), Just(Some(1u32)), Just(Some(3u32))],
        longer_k in any::<bool>(),
    ) {
        let s: usize = lengths.iter().sum();
        let packed = packed_documents(&lengths, causal);
        prop_assert!(packed.documents().is_some());
        let shape = AttentionShape {
            batch: 1,
            heads: 2,
            kv_heads: 2,
            seqlen_q: s,
            seqlen_k: if longer_k { s + 1 } else { s },
            head_dim: 128,
        };
        let opts = AttentionOptions { splits, ..AttentionOptions::default() };
        let want = if !longer_k && splits.is_none_or(|n| n == 1) {
            MaskMode::Documents
        } else {
            MaskMode::Blocks
        };
        prop_assert_eq!(forward_mode(&shape, Some(&packed), &opts), want);
        // The same mask without its documents runs the lists; no mask, the window.
        let mut lists_only = packed.clone();
        lists_only.drop_documents();
        prop_assert_eq!(forward_mode(&shape, Some(&lists_only), &opts), MaskMode::Blocks);
        prop_assert_eq!(forward_mode(&shape, None, &opts), MaskMode::Window);
    }
}

#[test]
fn twelve_documents_at_16k_visit_fewer_tiles_than_the_global_grid() {
    // Twelve documents of random lengths summing to 16384, as the benchmark draws them.
    let lengths = [
        2100, 731, 1666, 403, 3000, 129, 1, 2555, 1777, 1234, 1500, 1288,
    ];
    assert_eq!(lengths.iter().sum::<usize>(), 16384);
    let docs = documents(&lengths, DocumentKind::Causal);
    let g = Geometry::TILE_128X128;
    let (visited, partial) = tiles(&work_items(&docs, &g));
    let ids: Vec<i64> = lengths
        .iter()
        .enumerate()
        .flat_map(|(d, &len)| std::iter::repeat_n(d as i64, len))
        .collect();
    let packed = pack_for_kernel(
        &PredicateMask::new(
            16384,
            16384,
            Predicate::causal() & Predicate::Document(DocumentIds::new(&ids)),
        )
        .unwrap(),
        &g,
    )
    .unwrap();
    let stats = packed.stats();
    assert!(
        visited <= stats.partial + stats.full,
        "{visited} vs {stats:?}"
    );
    assert!(partial < stats.partial, "{partial} vs {stats:?}");
}
