//! The tile a dense or predicate mask is packed at (`choice::pack_geometry`): the head
//! dim's default, except where a 128-column tile visits fewer key columns by more than
//! the narrow default's dense speed-up (head dim 256, 128x80 against 128x128).

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use fragmask_host::attention::blockmask::pack_for_kernel;
use fragmask_host::attention::choice::{
    pack_geometry, visited_key_columns, NARROW_DEFAULT_DENSE_TIME, PACK_GEOMETRY_SAMPLED_ROW_BLOCKS,
};
use fragmask_host::attention::AttentionOptions;
use fragmask_kernels::attention::{AttentionKernel, Geometry};
use fragmask_masks::DenseMask;
use proptest::prelude::*;

const NARROW: Geometry = Geometry::TILE_128X80;
const WIDE: Geometry = Geometry::TILE_128X128;

/// A `[heads, sq, sk]` byte mask from `visible(h, q, k)`.
fn dense_bytes(
    heads: usize,
    sq: usize,
    sk: usize,
    visible: impl Fn(usize, usize, usize) -> bool,
) -> Vec<u8> {
    let mut bytes = vec![0u8; heads * sq * sk];
    for h in 0..heads {
        for q in 0..sq {
            for k in 0..sk {
                bytes[(h * sq + q) * sk + k] = u8::from(visible(h, q, k));
            }
        }
    }
    bytes
}

/// Key blocks of 128 tokens kept per (head, row block): never two neighbours in a row
/// block, at least one per row block.
fn isolated_blocks() -> impl Strategy<Value = (usize, usize, usize, Vec<Vec<bool>>)> {
    (1usize..=2, 1usize..=3, 2usize..=9).prop_flat_map(|(heads, m_blocks, n_blocks)| {
        let rows = heads * m_blocks;
        (
            Just(heads),
            Just(m_blocks),
            Just(n_blocks),
            prop::collection::vec(
                (0..n_blocks, prop::collection::vec(any::<bool>(), n_blocks)),
                rows,
            )
            .prop_map(move |rows| {
                rows.into_iter()
                    .map(|(first, wish)| {
                        // `first` kept; any other wished block kept when its left
                        // neighbour is not.
                        let mut kept = vec![false; n_blocks];
                        kept[first] = true;
                        for n in 0..n_blocks {
                            let free =
                                (n == 0 || !kept[n - 1]) && (n + 1 == n_blocks || !kept[n + 1]);
                            if wish[n] && free {
                                kept[n] = true;
                            }
                        }
                        kept
                    })
                    .collect::<Vec<_>>()
            }),
        )
    })
}

proptest! {
    #![proptest_config(proptest_ci::config(24))]

    /// With every row block read, the count is the packer's visited (partial + full)
    /// tiles at each width times the width.
    #[test]
    fn visited_key_columns_equal_the_packers_visited_tiles_times_the_tile_width(
        heads in 1usize..=2,
        sq in 1usize..=300,
        sk in 1usize..=700,
        density in prop::sample::select(vec![0.0, 0.002, 0.02, 0.3, 1.0]),
        banded in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let visible = |h: usize, q: usize, k: usize| {
            let x = (seed ^ ((h * 7919 + q) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (k as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9))
                .wrapping_mul(0x94D0_49BB_1331_11EB);
            let band = !banded || k.abs_diff(q) < 100;
            band && ((x >> 11) as f64 / (1u64 << 53) as f64) < density
        };
        let bytes = dense_bytes(heads, sq, sk, visible);
        let mask = DenseMask::new(&bytes, &[1, heads, sq, sk]).unwrap();
        let counted = visited_key_columns(&mask, 128, [80, 128], usize::MAX);
        for (i, g) in [NARROW, WIDE].iter().enumerate() {
            let stats = pack_for_kernel(&mask, g).unwrap().stats();
            prop_assert_eq!(
                counted[i],
                (stats.partial + stats.full) * u64::from(g.block_n()),
                "{}x{}", g.block_m(), g.block_n()
            );
        }
    }

    /// A mask of 128-token key blocks, none next to another in its row block, each with
    /// a visible element in its first and last column: each block costs 128x80 two or
    /// three tiles (at least 160 columns) and 128x128 one, so head dim 256 packs at
    /// 128x128.
    #[test]
    fn isolated_128_token_blocks_pack_at_the_128_wide_tile_at_head_dim_256(
        (heads, m_blocks, n_blocks, kept) in isolated_blocks(),
        inside in prop::sample::select(vec![0.1, 0.5, 1.0]),
        seed in any::<u64>(),
    ) {
        let (sq, sk) = (128 * m_blocks, 128 * n_blocks);
        let visible = |h: usize, q: usize, k: usize| {
            let (m, n) = (q / 128, k / 128);
            if !kept[h * m_blocks + m][n] {
                return false;
            }
            let edge = q % 128 == 0 && (k % 128 == 0 || k % 128 == 127);
            let x = (seed ^ ((q * 131 + k) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .wrapping_mul(0xBF58_476D_1CE4_E5B9);
            edge || ((x >> 11) as f64 / (1u64 << 53) as f64) < inside
        };
        let bytes = dense_bytes(heads, sq, sk, visible);
        let mask = DenseMask::new(&bytes, &[1, heads, sq, sk]).unwrap();
        let g = pack_geometry(256, &mask, &AttentionOptions::default()).unwrap();
        prop_assert_eq!(g, WIDE);
    }

    /// A mask with a visible element in every 16-column cell of every row block, with
    /// the keys a multiple of both tile widths (640): both tiles visit every key column,
    /// so head dim 256 keeps its default (the faster dense tile).
    #[test]
    fn masks_visible_in_every_key_cell_keep_the_default_tile_at_head_dim_256(
        sq in 1usize..=400,
        keys in 1usize..=2,
        density in prop::sample::select(vec![0.5, 0.9, 1.0]),
        seed in any::<u64>(),
    ) {
        let sk = 640 * keys;
        let visible = |_h: usize, q: usize, k: usize| {
            let x = (seed ^ ((q * 1031 + k) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (q % 128 == 0 && k % 16 == 0) || ((x >> 11) as f64 / (1u64 << 53) as f64) < density
        };
        let bytes = dense_bytes(1, sq, sk, visible);
        let mask = DenseMask::new(&bytes, &[sq, sk]).unwrap();
        let g = pack_geometry(256, &mask, &AttentionOptions::default()).unwrap();
        prop_assert_eq!(g, AttentionKernel::default_geometry(256));
        prop_assert_eq!(g, NARROW);
    }
}

/// Head dims whose default is not a narrower tile on 128 rows keep it, and a caller's
/// geometry always wins, whatever the mask.
#[test]
fn other_head_dims_and_a_named_geometry_ignore_the_mask() {
    // One isolated 128-token block: head dim 256 would pack it at 128x128.
    let (sq, sk) = (128, 384);
    let bytes = dense_bytes(1, sq, sk, |_, _, k| k < 128);
    let mask = DenseMask::new(&bytes, &[sq, sk]).unwrap();
    let none = AttentionOptions::default();
    assert_eq!(pack_geometry(256, &mask, &none).unwrap(), WIDE);
    for d in [64, 128] {
        assert_eq!(
            pack_geometry(d, &mask, &none).unwrap(),
            AttentionKernel::default_geometry(d as u32)
        );
    }
    let named = AttentionOptions {
        geometry: Some(NARROW),
        ..AttentionOptions::default()
    };
    assert_eq!(pack_geometry(256, &mask, &named).unwrap(), NARROW);
}

/// More row blocks than are read: the count covers the sampled ones only (the mask's
/// first row block and every `rows / sampled`-th after it), so it is bounded by that
/// many row blocks' worth of columns, and a mask that is the same in every row block
/// gives the same choice as a single row block.
#[test]
fn a_long_mask_is_counted_on_the_sampled_row_blocks_only() {
    let m_blocks = 4 * PACK_GEOMETRY_SAMPLED_ROW_BLOCKS;
    let (sq, sk) = (128 * m_blocks, 640);
    let bytes = dense_bytes(1, sq, sk, |_, _, k| k < 128);
    let mask = DenseMask::new(&bytes, &[sq, sk]).unwrap();
    let counted = visited_key_columns(&mask, 128, [80, 128], PACK_GEOMETRY_SAMPLED_ROW_BLOCKS);
    let sampled = PACK_GEOMETRY_SAMPLED_ROW_BLOCKS as u64;
    assert_eq!(counted, [2 * 80 * sampled, 128 * sampled]);
    assert!(counted[0] as f64 * NARROW_DEFAULT_DENSE_TIME > counted[1] as f64);
    assert_eq!(
        pack_geometry(256, &mask, &AttentionOptions::default()).unwrap(),
        WIDE
    );
}
