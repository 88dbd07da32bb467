//! The packer: decode(encode(mask)) == mask, exact classification, deterministic output.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{acc, config, random_mask, reference_class, RandomMask};
use fragmask_masks::{
    pack, plain_bit_pack, DenseMask, Encoding, MaskShape, MaskSource, PackOptions, PackProgress,
    PackedMask, TileClass,
};
use proptest::prelude::*;

/// A random ragged shape for config `i`: up to 3 tiles each way, B and H in 1..=2.
fn case() -> impl Strategy<Value = (usize, usize, usize, usize, usize, u64)> {
    (config(), 1usize..=2, 1usize..=2, any::<u64>()).prop_flat_map(|(i, b, h, seed)| {
        let a = acc(i);
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        (
            Just(i),
            Just(b),
            Just(h),
            1..=3 * bm,
            1..=3 * bn,
            Just(seed),
        )
    })
}

fn packed_of(mask: &RandomMask, i: usize, encoding: Encoding, threads: usize) -> PackedMask {
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    pack(
        &dense,
        &acc(i),
        encoding,
        &PackOptions {
            threads,
            progress: None,
        },
    )
    .unwrap()
}

fn assert_decodes_to(packed: &PackedMask, mask: &RandomMask) {
    for b in 0..mask.batch {
        for h in 0..mask.heads {
            let plane = packed.decode_plane(b, h);
            for q in 0..mask.seqlen_q {
                for k in 0..mask.seqlen_k {
                    assert_eq!(
                        plane[q * mask.seqlen_k + k],
                        mask.at(b, h, q, k),
                        "({b}, {h}, {q}, {k})"
                    );
                }
            }
        }
    }
}

/// A dense mask that hides its bytes (`dense_rows`): the packer takes the general
/// path (strip bits, tile permutation, growing word vectors) instead of the fused one.
struct BitsOnly<'a>(DenseMask<'a>);

impl MaskSource for BitsOnly<'_> {
    fn shape(&self) -> MaskShape {
        self.0.shape()
    }
    fn row_bits(&self, b: usize, h: usize, q: usize, k0: usize, cols: usize, out: &mut [u64]) {
        self.0.row_bits(b, h, q, k0, cols, out)
    }
    fn strip_bits(
        &self,
        b: usize,
        h: usize,
        rows: std::ops::Range<usize>,
        out: &mut [u64],
    ) -> bool {
        self.0.strip_bits(b, h, rows, out)
    }
    fn fills_strips(&self) -> bool {
        true
    }
}

/// A dense mask that also answers region queries exactly (by scanning its bytes), so
/// the fused path skips the tiles it is told about.
struct DenseWithRegions<'a>(DenseMask<'a>);

impl MaskSource for DenseWithRegions<'_> {
    fn shape(&self) -> MaskShape {
        self.0.shape()
    }
    fn row_bits(&self, b: usize, h: usize, q: usize, k0: usize, cols: usize, out: &mut [u64]) {
        self.0.row_bits(b, h, q, k0, cols, out)
    }
    fn region(
        &self,
        b: usize,
        h: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) -> fragmask_masks::Region {
        let values: Vec<bool> = rows
            .flat_map(|q| cols.clone().map(move |k| (q, k)))
            .map(|(q, k)| self.0.get(b, h, q, k))
            .collect();
        if values.iter().all(|&v| !v) {
            fragmask_masks::Region::Empty
        } else if values.iter().all(|&v| v) {
            fragmask_masks::Region::Full
        } else {
            fragmask_masks::Region::Unknown
        }
    }
    fn dense_rows(&self, b: usize, h: usize) -> Option<fragmask_masks::DenseRows<'_>> {
        self.0.dense_rows(b, h)
    }
}

proptest! {
    #![proptest_config(proptest_ci::config(24))]

    /// Tiles that region queries settle are skipped by the fused path, and the result
    /// is still exactly the general path's.
    #[test]
    fn dense_pack_with_known_regions_is_identical_to_the_general_path((i, b, h, sq, sk, seed) in case()) {
        let a = acc(i);
        let mask = random_mask(seed, b, h, sq, sk, a.block_m() as usize, a.block_n() as usize);
        let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
        let options = PackOptions { threads: 2, progress: None };
        let general = pack(&BitsOnly(dense), &a, Encoding::FragmentNative, &options).unwrap();
        let known = pack(&DenseWithRegions(dense), &a, Encoding::FragmentNative, &options).unwrap();
        prop_assert_eq!(&known, &general);
    }

    /// The dense path (fused AVX2 encoder where the tile allows, words written in
    /// place) produces exactly the general path's lists and words.
    #[test]
    fn dense_pack_is_identical_to_the_general_path((i, b, h, sq, sk, seed) in case(), e in 0usize..3, threads in 1usize..4) {
        let a = acc(i);
        let mask = random_mask(seed, b, h, sq, sk, a.block_m() as usize, a.block_n() as usize);
        let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
        let options = PackOptions { threads, progress: None };
        let general = pack(&BitsOnly(dense), &a, Encoding::ALL[e], &options).unwrap();
        prop_assert_eq!(&packed_of(&mask, i, Encoding::ALL[e], threads), &general);
    }

    #[test]
    fn decode_of_pack_is_the_mask((i, b, h, sq, sk, seed) in case(), e in 0usize..3) {
        let a = acc(i);
        let mask = random_mask(seed, b, h, sq, sk, a.block_m() as usize, a.block_n() as usize);
        let packed = packed_of(&mask, i, Encoding::ALL[e], 2);
        assert_decodes_to(&packed, &mask);
        // Element access agrees with the plane decoder.
        for (q, k) in [(0, 0), (sq - 1, sk - 1), (sq / 2, sk / 3)] {
            prop_assert_eq!(packed.get(b - 1, h - 1, q, k), mask.at(b - 1, h - 1, q, k));
        }
    }

    #[test]
    fn classification_is_exact((i, b, h, sq, sk, seed) in case()) {
        let a = acc(i);
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        let mask = random_mask(seed, b, h, sq, sk, bm, bn);
        let packed = packed_of(&mask, i, Encoding::FragmentNative, 2);
        let grid = *packed.grid();
        let (mut empty, mut full, mut partial) = (0, 0, 0);
        for bi in 0..b {
            for hi in 0..h {
                for m in 0..grid.m_blocks {
                    let row = (bi * h + hi) * grid.m_blocks + m;
                    let (np, nf) = (packed.lists().num_blocks()[row] as usize, packed.lists().full_num_blocks()[row] as usize);
                    let listed = &packed.lists().indices()[row * grid.n_blocks..][..np];
                    let full_listed = &packed.lists().full_indices()[row * grid.n_blocks..][..nf];
                    prop_assert!(listed.windows(2).all(|w| w[0] < w[1]), "partial list ascending");
                    prop_assert!(full_listed.windows(2).all(|w| w[0] < w[1]), "full list ascending");
                    for n in 0..grid.n_blocks {
                        let expected = reference_class(&mask, bi, hi, m, n, bm, bn);
                        let in_partial = listed.contains(&(n as i32));
                        let in_full = full_listed.contains(&(n as i32));
                        prop_assert_eq!((in_partial, in_full), (expected == 2, expected == 1), "tile ({}, {}, {}, {})", bi, hi, m, n);
                        match expected { 0 => empty += 1, 1 => full += 1, _ => partial += 1 }
                    }
                    // Padding past the counts.
                    prop_assert!(packed.lists().indices()[row * grid.n_blocks + np..(row + 1) * grid.n_blocks].iter().all(|&x| x == 0));
                    prop_assert!(packed.lists().tile_offsets()[row * grid.n_blocks + np..(row + 1) * grid.n_blocks].iter().all(|&x| x == -1));
                }
            }
        }
        let stats = packed.stats();
        prop_assert_eq!((stats.empty, stats.full, stats.partial), (empty, full, partial));
        prop_assert_eq!(stats.ones, mask.data.iter().filter(|&&x| x != 0).count() as u64);
    }

    #[test]
    fn output_is_the_same_for_any_thread_count((i, b, h, sq, sk, seed) in case(), e in 0usize..3) {
        let a = acc(i);
        let mask = random_mask(seed, b, h, sq, sk, a.block_m() as usize, a.block_n() as usize);
        let one = packed_of(&mask, i, Encoding::ALL[e], 1);
        prop_assert_eq!(&one, &packed_of(&mask, i, Encoding::ALL[e], 2));
        prop_assert_eq!(&one, &packed_of(&mask, i, Encoding::ALL[e], 5));
    }
}

#[test]
fn tile_offsets_number_partial_tiles_in_list_order() {
    let mask = random_mask(7, 2, 3, 300, 500, 128, 128);
    let packed = packed_of(&mask, 0, Encoding::FragmentNative, 2);
    let grid = *packed.grid();
    let mut next = 0;
    for row in 0..packed.lists().num_blocks().len() {
        for j in 0..packed.lists().num_blocks()[row] as usize {
            assert_eq!(packed.lists().tile_offsets()[row * grid.n_blocks + j], next);
            next += 1;
        }
    }
    assert_eq!(next as usize, packed.partial_tiles());
    assert_eq!(packed.words().len(), packed.partial_tiles() * 256 * 2);
}

#[test]
fn ragged_edge_tile_of_ones_is_partial_not_full() {
    let (sq, sk) = (130, 200);
    let ones = vec![1u8; sq * sk];
    let dense = DenseMask::new(&ones, &[sq, sk]).unwrap();
    let packed = pack(
        &dense,
        &acc(0),
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    assert_eq!(packed.tile_class(0, 0, 0, 0), TileClass::Full);
    for (m, n) in [(0, 1), (1, 0), (1, 1)] {
        assert!(
            matches!(packed.tile_class(0, 0, m, n), TileClass::Partial(_)),
            "({m}, {n})"
        );
    }
    assert!(!packed.get(0, 0, 129, 200) && packed.get(0, 0, 129, 199));
}

#[test]
fn broadcast_heads_are_stored_once_and_read_for_every_head() {
    let mask = random_mask(3, 1, 1, 256, 256, 128, 128);
    let dense = DenseMask::new(&mask.data, &[1, 1, 256, 256]).unwrap();
    let packed = pack(
        &dense,
        &acc(0),
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    assert_eq!((packed.shape().batch, packed.shape().heads), (1, 1));
    for head in [0, 5, 15] {
        assert_eq!(packed.get(3, head, 100, 7), mask.at(0, 0, 100, 7));
    }
}

#[test]
fn progress_reports_every_row_block_once() {
    let mask = random_mask(1, 2, 2, 1000, 300, 128, 128);
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    let calls = AtomicUsize::new(0);
    let last = AtomicUsize::new(0);
    let progress = |p: PackProgress| {
        calls.fetch_add(1, Ordering::Relaxed);
        last.fetch_max(p.done, Ordering::Relaxed);
        assert_eq!(p.total, 2 * 2 * 8);
    };
    for threads in [1, 2] {
        calls.store(0, Ordering::Relaxed);
        let options = PackOptions {
            threads,
            progress: Some(&progress),
        };
        pack(&dense, &acc(0), Encoding::FragmentNative, &options).unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 32);
        assert_eq!(last.load(Ordering::Relaxed), 32);
    }
}

#[test]
fn plain_bit_pack_sets_exactly_the_nonzero_bytes_for_any_thread_count() {
    for (rows, cols) in [(1, 1), (300, 64), (257, 200), (129, 1000), (128, 128)] {
        let mask = random_mask(rows as u64, 1, 1, rows, cols, 128, 128);
        let row_words = cols.div_ceil(64);
        for threads in [1, 2, 3] {
            let bits = plain_bit_pack(&mask.data, rows, cols, threads);
            assert_eq!(bits.len(), rows * row_words);
            for r in 0..rows {
                for c in 0..row_words * 64 {
                    let bit = (bits[r * row_words + c / 64] >> (c % 64)) & 1 == 1;
                    assert_eq!(bit, c < cols && mask.at(0, 0, r, c), "({r}, {c})");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(proptest_ci::config(32))]

    /// The lists are dense (every block of every row partial, in block order, its words at
    /// tile `row × n_blocks + block`: the forward then reads none of them) exactly when the
    /// packer found no full and no empty tile, for any thread count.
    #[test]
    fn lists_are_dense_exactly_when_every_tile_is_partial(
        (i, b, h, sq, sk, seed) in case(),
        spoil in 0u8..3,
        threads in 1usize..=3,
    ) {
        let mut rng = common::Rng(seed);
        let mut mask = RandomMask {
            batch: b,
            heads: h,
            seqlen_q: sq,
            seqlen_k: sk,
            data: (0..b * h * sq * sk).map(|_| rng.below(2) as u8).collect(),
        };
        // Tile (0, 0) of the first plane made full or empty.
        let a = acc(i);
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        if spoil > 0 {
            for q in 0..bm.min(sq) {
                for k in 0..bn.min(sk) {
                    mask.data[q * sk + k] = spoil - 1;
                }
            }
        }
        let packed = packed_of(&mask, i, Encoding::FragmentNative, threads);
        let s = packed.stats();
        prop_assert_eq!(
            packed.lists().dense_partial(),
            s.full == 0 && s.empty == 0,
            "{:?}",
            s
        );
    }
}
