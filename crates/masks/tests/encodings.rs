//! The encodings are derived from the fragment model, and say what they claim.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use common::{acc, config, Rng, CONFIGS};
use fragmask_gmma_frag::quad_lane;
use fragmask_masks::{
    pack, pack_transposed, words_per_quad, DenseMask, EncodedLayout, Encoding, PackOptions,
    TilePlan, TiledAccumulator, Transcoder, TransposedLists,
};
use proptest::prelude::*;

fn layouts(i: usize) -> Vec<EncodedLayout> {
    Encoding::ALL
        .iter()
        .map(|&e| EncodedLayout::derive(&acc(i), e).unwrap())
        .collect()
}

/// THE CENTRAL THEOREM. For every partial tile of a packed random mask, every thread
/// `t` and every fragment value `v`: bit `v % 32` of word `v / 32` of thread `t` in the
/// FragmentNative words equals `mask[tile origin + TiledAccumulator::coord(t, v)]`
/// (0 outside the mask), and every bit past `values_per_thread` is 0. Read straight
/// from the raw words with `coord`, independent of the encoder's tables.
#[test]
fn central_theorem_fragment_native_bit_of_thread_value_is_mask_at_coord() {
    for (i, &(bm, bn, ..)) in CONFIGS.iter().enumerate() {
        let acc = acc(i);
        let (bm, bn) = (bm as usize, bn as usize);
        for seed in 0..3u64 {
            let (sq, sk) = (bm * 2 + 1 + seed as usize * 7, bn * 2 - 3 + seed as usize);
            let mask = common::random_mask(seed * 31 + i as u64, 1, 2, sq, sk, bm, bn);
            let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
            let packed = pack(
                &dense,
                &acc,
                Encoding::FragmentNative,
                &PackOptions::default(),
            )
            .unwrap();
            let (threads, vpt) = (acc.threads() as usize, acc.values_per_thread() as usize);
            let wpt = vpt.div_ceil(32);
            let grid = packed.grid();
            let mut checked = 0;
            for h in 0..2 {
                for m in 0..grid.m_blocks {
                    let row = h * grid.m_blocks + m;
                    for j in 0..packed.lists().num_blocks()[row] as usize {
                        let n = packed.lists().indices()[row * grid.n_blocks + j] as usize;
                        let tile = packed.lists().tile_offsets()[row * grid.n_blocks + j] as usize;
                        let words = packed.tile_words(tile);
                        assert_eq!(words.len(), threads * wpt);
                        for t in 0..threads {
                            for v in 0..wpt * 32 {
                                let bit = (words[t * wpt + v / 32] >> (v % 32)) & 1 == 1;
                                if v >= vpt {
                                    assert!(!bit, "padding bit {v} of thread {t} is set");
                                    continue;
                                }
                                let (r, c) = acc.coord(t as u32, v as u32).unwrap();
                                let (q, k) = (m * bm + r as usize, n * bn + c as usize);
                                let expected = q < sq && k < sk && mask.at(0, h, q, k);
                                assert_eq!(
                                    bit, expected,
                                    "config {i} thread {t} value {v} -> ({q}, {k})"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
            assert!(checked > 0, "config {i}: no partial tile was checked");
        }
    }
}

/// Every backward accumulator of the forward tile of config `i`: 1 to 3 warpgroups,
/// with and without SwapAB, wherever the tiling is legal.
fn backward_accs(i: usize) -> Vec<TiledAccumulator> {
    let a = acc(i);
    (1..=3)
        .flat_map(|w| [true, false].map(|swap| (w, swap)))
        .filter_map(|(w, swap)| TiledAccumulator::new(a.block_m(), a.block_n(), w, swap).ok())
        .collect()
}

/// Checks THE CENTRAL THEOREM for the transposed words of a packed random mask: for
/// every transposed partial tile (key block `n`, `j`-th query block `m =
/// q_indices[n, j]`), every thread `t` of the backward accumulator and every value
/// `v`: bit `v % 32` of word `v / 32` of thread `t` equals `mask[(m, n) tile origin +
/// backward.coord(t, v)]` (0 outside the mask), and every bit past
/// `values_per_thread` is 0. Read straight from the raw `q_words` with `coord`.
/// Returns the number of bits checked.
fn check_transposed_theorem(
    i: usize,
    backward: &TiledAccumulator,
    encoding: Encoding,
    seed: u64,
    (sq, sk): (usize, usize),
) -> usize {
    let a = acc(i);
    let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
    let mask = common::random_mask(seed, 1, 2, sq, sk, bm, bn);
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    let packed = pack_transposed(&dense, &a, encoding, backward, &PackOptions::default()).unwrap();
    let t = packed.transposed().unwrap();
    assert_eq!(t.accumulator(), backward);
    let (threads, vpt) = (
        backward.threads() as usize,
        backward.values_per_thread() as usize,
    );
    let wpt = vpt.div_ceil(32);
    let grid = packed.grid();
    let (mb, nb) = (grid.m_blocks, grid.n_blocks);
    let mut checked = 0;
    for h in 0..2 {
        for n in 0..nb {
            let row = h * nb + n;
            for j in 0..t.lists().num_blocks()[row] as usize {
                let m = t.lists().indices()[row * mb + j] as usize;
                let tile = t.lists().tile_offsets()[row * mb + j] as usize;
                let words = t.tile_words(tile);
                assert_eq!(words.len(), threads * wpt);
                for th in 0..threads {
                    for v in 0..wpt * 32 {
                        let bit = (words[th * wpt + v / 32] >> (v % 32)) & 1 == 1;
                        if v >= vpt {
                            assert!(!bit, "padding bit {v} of thread {th} is set");
                            continue;
                        }
                        let (r, c) = backward.coord(th as u32, v as u32).unwrap();
                        let (q, k) = (m * bm + r as usize, n * bn + c as usize);
                        let expected = q < sq && k < sk && mask.at(0, h, q, k);
                        assert_eq!(
                            bit, expected,
                            "config {i} backward {backward:?} thread {th} value {v} -> ({q}, {k})"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    checked
}

/// THE CENTRAL THEOREM, transposed: the backward's words say, thread by thread and
/// value by value, what `coord` of the backward accumulator says, for every forward
/// configuration, every legal backward accumulator of its tile and every forward
/// encoding the words are re-encoded from.
#[test]
fn central_theorem_transposed_bit_of_thread_value_is_mask_at_backward_coord() {
    for (i, &(bm, bn, ..)) in CONFIGS.iter().enumerate() {
        let (bm, bn) = (bm as usize, bn as usize);
        let backs = backward_accs(i);
        assert!(!backs.is_empty(), "config {i}: no backward accumulator");
        for (b, backward) in backs.iter().enumerate() {
            for (e, encoding) in Encoding::ALL.into_iter().enumerate() {
                let seed = (i * 31 + b * 7 + e) as u64;
                let shape = (bm * 2 + 1 + b * 7, bn * 2 - 3 + e);
                let checked = check_transposed_theorem(i, backward, encoding, seed, shape);
                assert!(
                    checked > 0,
                    "config {i}: no transposed partial tile was checked"
                );
            }
        }
    }
}

/// FlashAttention-3's backward tile for head dim 128 (hopper/flash_bwd_launch_template.h:
/// kBlockM = 64, kBlockN = 128, 2 MMA warpgroups, SdP_swapAB): its S^T accumulator
/// holds 32 values per thread, so a transposed tile is one 4-byte load per thread; at
/// 128 x 128 (head dim 64) it is 64 values, one 8-byte load.
#[test]
fn fa3_backward_tiles_read_one_load_per_thread() {
    for ((bm, bn), bytes) in [((64, 128), 4), ((128, 128), 8)] {
        let bwd = TiledAccumulator::new(bm, bn, 2, true).unwrap();
        let cost = Encoding::FragmentNative.load_cost(&bwd);
        assert_eq!((cost.bytes_per_thread, cost.loads_per_thread), (bytes, 1));
        let fwd = TiledAccumulator::new(bm, bn, 1, false).unwrap();
        assert_eq!(TransposedLists::default_accumulator(&fwd).unwrap(), bwd);
    }
}

/// A SwapAB accumulator of the `block_m × block_n` tile is the plain accumulator of the
/// transposed `block_n × block_m` tile: same threads, same values, coordinates
/// swapped. So "FragmentNative over the SwapAB accumulator" is the register order of
/// a kernel that tiles `Sᵀ = K Qᵀ` directly.
#[test]
fn swap_ab_accumulator_is_the_transposed_tiles_accumulator() {
    let mut compared = 0;
    for bm in [16u32, 64, 80, 96, 128, 192, 256] {
        for bn in [64u32, 128, 192, 256] {
            for w in 1..=3 {
                let (Ok(swap), Ok(plain)) = (
                    TiledAccumulator::new(bm, bn, w, true),
                    TiledAccumulator::new(bn, bm, w, false),
                ) else {
                    continue;
                };
                assert_eq!(swap.threads(), plain.threads());
                assert_eq!(swap.values_per_thread(), plain.values_per_thread());
                for t in 0..swap.threads() {
                    for v in 0..swap.values_per_thread() {
                        let (r, c) = plain.coord(t, v).unwrap();
                        assert_eq!(swap.coord(t, v).unwrap(), (c, r), "{bm}x{bn} w{w}");
                    }
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 10, "only {compared} tilings compared");
}

/// docs/masks.md's closed form of `coord` (used by its Python decoder).
#[test]
fn documented_closed_form_equals_coord() {
    for i in 0..CONFIGS.len() {
        let acc = acc(i);
        let (w, swap) = (acc.warpgroups(), acc.swap_ab());
        let n = if swap { acc.block_m() } else { acc.block_n() };
        for t in 0..acc.threads() {
            for v in 0..acc.values_per_thread() {
                let (mma_m, r) = (v / (n / 2), v % (n / 2));
                let (lane, warp, wg) = (t % 32, (t / 32) % 4, t / 128);
                let mma_row = 64 * (wg + w * mma_m) + 16 * warp + lane / 4 + 8 * ((r / 2) % 2);
                let mma_col = 8 * (r / 4) + 2 * (lane % 4) + r % 2;
                let expected = if swap {
                    (mma_col, mma_row)
                } else {
                    (mma_row, mma_col)
                };
                assert_eq!(
                    acc.coord(t, v).unwrap(),
                    expected,
                    "config {i} thread {t} value {v}"
                );
            }
        }
    }
}

#[test]
fn quad_lane_layout_equals_chapter7_formula() {
    // Word q of MMA row R holds quad lane q's bits: bit 2*(c/8) + c%2 for q = (c%8)/2,
    // with (R, c) = (row, col), or (col, row) under SwapAB.
    for (i, &(bm, bn, _, swap)) in CONFIGS.iter().enumerate() {
        let acc = acc(i);
        let layout = EncodedLayout::derive(&acc, Encoding::QuadLane).unwrap();
        let wpq = words_per_quad(&acc);
        for row in 0..bm as usize {
            for col in 0..bn as usize {
                let (r, c) = if swap { (col, row) } else { (row, col) };
                let expected = (r * 4 + (c % 8) / 2) * 32 * wpq + 2 * (c / 8) + c % 2;
                assert_eq!(
                    layout.position(row, col),
                    expected,
                    "config {i} ({row}, {col})"
                );
            }
        }
    }
}

#[test]
fn quad_lane_word_is_the_order_the_quad_lane_thread_visits_its_columns() {
    // Without SwapAB, the rowcol view lists a thread's columns in the order its
    // registers visit them; QuadLane bit j of (row, quad lane) is column j of that list.
    for (i, &(.., swap)) in CONFIGS.iter().enumerate() {
        if swap {
            continue;
        }
        let acc = acc(i);
        let layout = EncodedLayout::derive(&acc, Encoding::QuadLane).unwrap();
        let wpq = words_per_quad(&acc);
        for thread in (0..acc.threads()).step_by(5) {
            for row_index in 0..acc.rows_per_thread() {
                let row = acc.row(thread, row_index).unwrap() as usize;
                for j in 0..acc.cols_per_thread() {
                    let col = acc.col(thread, j).unwrap() as usize;
                    let expected = (row * 4 + quad_lane(thread) as usize) * 32 * wpq + j as usize;
                    assert_eq!(layout.position(row, col), expected);
                }
            }
        }
    }
}

#[test]
fn row_major_layout_is_fa3_shared_memory_order() {
    for i in 0..CONFIGS.len() {
        let acc = acc(i);
        let layout = EncodedLayout::derive(&acc, Encoding::RowMajor).unwrap();
        let words_per_row = (acc.block_n() as usize).div_ceil(32);
        for row in 0..acc.block_m() as usize {
            for col in 0..acc.block_n() as usize {
                assert_eq!(
                    layout.position(row, col),
                    (row * words_per_row + col / 32) * 32 + col % 32
                );
            }
        }
    }
}

#[test]
fn bit_position_from_owner_agrees_with_table_from_coord() {
    for i in 0..CONFIGS.len() {
        let acc = acc(i);
        for layout in layouts(i) {
            let mut rng = Rng(i as u64);
            for _ in 0..300 {
                let row = rng.below(acc.block_m() as u64) as u32;
                let col = rng.below(acc.block_n() as u64) as u32;
                assert_eq!(
                    layout.encoding().bit_position(&acc, row, col).unwrap(),
                    layout.position(row as usize, col as usize)
                );
            }
        }
    }
}

#[test]
fn every_layout_is_injective_and_fits_its_words() {
    for i in 0..CONFIGS.len() {
        let acc = acc(i);
        for layout in layouts(i) {
            let bits = layout.words_per_tile() * 32;
            let mut seen = vec![false; bits];
            for &p in layout.positions() {
                assert!((p as usize) < bits);
                assert!(
                    !std::mem::replace(&mut seen[p as usize], true),
                    "position {p} used twice"
                );
            }
            assert_eq!(
                layout.positions().len(),
                (acc.block_m() * acc.block_n()) as usize
            );
            assert_eq!(
                layout.words_per_tile(),
                layout.encoding().word_shape(&acc).words()
            );
        }
    }
}

#[test]
fn fa3_128x128_fragment_native_is_64_bits_per_thread_in_one_load() {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let cost = Encoding::FragmentNative.load_cost(&acc);
    assert_eq!(
        (
            cost.bytes_per_thread,
            cost.loads_per_thread,
            cost.bytes_per_tile
        ),
        (8, 1, 2048)
    );
    let plan = TilePlan::new(&EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap());
    assert!(plan.is_bit_permutation());
}

#[test]
fn power_of_two_tiles_take_the_bit_permutation_path() {
    for (i, &(bm, bn, ..)) in CONFIGS.iter().enumerate() {
        for layout in layouts(i) {
            let plan = TilePlan::new(&layout);
            let exact = layout.words_per_tile() * 32 == (bm * bn) as usize;
            let pow2 = bm.is_power_of_two() && bn.is_power_of_two() && bn >= 64;
            assert_eq!(
                plan.is_bit_permutation(),
                pow2 && exact,
                "config {i} {:?}",
                layout.encoding()
            );
        }
    }
}

proptest! {
    #![proptest_config(proptest_ci::config(48))]

    #[test]
    fn tile_plan_encodes_as_the_reference_encoder(i in config(), e in 0usize..3, seed in any::<u64>(), density in 0u64..=100) {
        let acc = acc(i);
        let layout = EncodedLayout::derive(&acc, Encoding::ALL[e]).unwrap();
        let plan = TilePlan::new(&layout);
        let (bm, bn) = (acc.block_m() as usize, acc.block_n() as usize);
        let mut rng = Rng(seed);
        let bools: Vec<bool> = (0..bm * bn).map(|_| rng.below(100) < density).collect();
        let mut tile = vec![0u64; plan.tile_words()];
        for (i, &b) in bools.iter().enumerate() {
            let (r, c) = (i / bn, i % bn);
            tile[r * plan.row_words() + c / 64] |= (b as u64) << (c % 64);
        }
        let mut out = vec![0xdead_beef; plan.words_per_tile()];
        plan.encode(&mut tile, &mut out);
        prop_assert_eq!(&out, &layout.encode_bools(&bools));
        prop_assert_eq!(layout.decode(&out).unwrap(), bools);
        prop_assert!(layout.padding_is_zero(&out));
    }

    #[test]
    fn central_theorem_transposed_holds_on_random_shapes(i in config(), b in 0usize..6, e in 0usize..3, seed in any::<u64>(), rows in 1usize..=3, cols in 1usize..=3, cut in 0usize..64) {
        let a = acc(i);
        let backs = backward_accs(i);
        let backward = &backs[b % backs.len()];
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        let shape = ((rows * bm).saturating_sub(cut % bm).max(1), (cols * bn).saturating_sub(cut % bn).max(1));
        check_transposed_theorem(i, backward, Encoding::ALL[e], seed, shape);
    }

    #[test]
    fn transcoder_output_is_the_reference_encoding_of_the_same_tile(i in config(), b in 0usize..6, e in 0usize..3, seed in any::<u64>(), density in 0u64..=100) {
        let a = acc(i);
        let backs = backward_accs(i);
        let from = EncodedLayout::derive(&a, Encoding::ALL[e]).unwrap();
        let to = EncodedLayout::derive(&backs[b % backs.len()], Encoding::FragmentNative).unwrap();
        let transcoder = Transcoder::new(&from, &to).unwrap();
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        let mut rng = Rng(seed);
        let bools: Vec<bool> = (0..bm * bn).map(|_| rng.below(100) < density).collect();
        let mut scratch = vec![0u64; transcoder.scratch_words()];
        let mut out = vec![0xdead_beef; transcoder.out_words()];
        transcoder.run(&from.encode_bools(&bools), &mut scratch, &mut out);
        prop_assert_eq!(&out, &to.encode_bools(&bools));
        let exact = |l: &EncodedLayout| l.words_per_tile() * 32 == bm * bn;
        prop_assert_eq!(
            transcoder.is_bit_permutation(),
            exact(&from) && exact(&to) && (bm * bn).is_power_of_two()
        );
    }
}
