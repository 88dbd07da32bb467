//! RS-mode A operands, SM80 mma.sync fragments, and the stacking theorem linking them
//! to the wgmma accumulator.

mod common;

use common::legal_ns;
use fragmask_gmma_frag::{
    rs_a16_slot, rs_a8_slot, Sm80TiledAccumulator, WgmmaAccumulator, A16_LAYOUT, A8_LAYOUT,
    FP8_K_PERMUTATION, SM80_A_LAYOUT, SM80_B_LAYOUT, SM80_C_LAYOUT,
};
use fragmask_layout::{composition, Layout};

/// `(i % rows, i / rows)` of a column-major offset.
fn rc(offset: i64, rows: i64) -> (i64, i64) {
    (offset % rows, offset / rows)
}

fn is_bijection(layout: &Layout) -> bool {
    let size = layout.size().unwrap();
    let mut seen = vec![false; size as usize];
    for i in 0..size {
        let o = layout.eval(i).unwrap();
        if o < 0 || o >= size || seen[o as usize] {
            return false;
        }
        seen[o as usize] = true;
    }
    true
}

#[test]
fn a_layout_64x16_equals_c_layout_64x16() {
    assert_eq!(A16_LAYOUT, WgmmaAccumulator::new(16).unwrap().c_layout());
}

#[test]
fn rs_a16_keeps_every_value_in_its_thread_and_packs_pairs_lower_column_low() {
    // docs/architecture.md fact 5: d[8j..8j+7] -> the four A registers of k-block j, pairs
    // (d0,d1) (d2,d3) (d4,d5) (d6,d7), lower column in the low half.
    for n in legal_ns().filter(|n| n % 16 == 0) {
        let atom = WgmmaAccumulator::new(n).unwrap();
        for thread in 0..128 {
            for i in 0..n / 2 {
                let slot = rs_a16_slot(n, thread, i).unwrap();
                assert_eq!(slot.thread, thread);
                assert_eq!(
                    (slot.k_block, slot.register, slot.part),
                    (i / 8, (i % 8) / 2, i % 2)
                );
            }
            for pair in 0..n / 4 {
                let (lo, hi) = (
                    atom.coord(thread, 2 * pair).unwrap(),
                    atom.coord(thread, 2 * pair + 1).unwrap(),
                );
                assert_eq!(
                    (lo.0, lo.1 + 1),
                    hi,
                    "same row, lower column in the low half"
                );
            }
        }
    }
}

#[test]
fn fp8_k_permutation_is_a_permutation_of_each_32_column_block() {
    assert!(is_bijection(&FP8_K_PERMUTATION));
    assert_eq!(FP8_K_PERMUTATION.size(), Ok(32));
}

#[test]
fn rs_a8_at_true_columns_moves_values_only_within_the_quad() {
    let n = 64;
    let mut moved = 0;
    for thread in 0..128 {
        for i in 0..n / 2 {
            let slot = rs_a8_slot(n, thread, i, false).unwrap();
            assert_eq!(slot.thread / 4, thread / 4, "never leaves the quad");
            assert_eq!(slot.k_block, i / 16);
            if slot.thread != thread {
                moved += 1;
            }
        }
    }
    // Lane q holds columns {2q, 2q+1, 8+2q, 9+2q} of each 16 but fp8 A wants
    // {4q..4q+3}: lanes 0 and 3 keep half their values, lanes 1 and 2 none, so 3/4 of
    // the accumulator crosses lanes (FA3's permute_Aregs_fp8 shuffles).
    assert_eq!(moved, 128 * 32 / 2 + 128 * 32 / 4);
}

#[test]
fn rs_a8_with_fa3_k_order_stays_in_thread_as_permute_cregs_fp8_swaps_64_bit_pairs() {
    // permute_Cregs_fp8 swaps the 64-bit pairs (d2,d3) <-> (d4,d5) of every 8 registers;
    // the fp8 A registers then hold bytes in this accumulator order.
    let order = [0u32, 1, 4, 5, 2, 3, 6, 7];
    for n in legal_ns().filter(|n| n % 32 == 0) {
        for thread in 0..128 {
            for i in 0..n / 2 {
                let slot = rs_a8_slot(n, thread, i, true).unwrap();
                assert_eq!(slot.thread, thread);
                assert_eq!(slot.k_block, i / 16);
                let position = 4 * slot.register + slot.part; // byte index within k-block
                let x = i % 16;
                let expected = 8 * (x / 8) + order.iter().position(|&o| o == x % 8).unwrap() as u32;
                assert_eq!(position, expected, "n{n} t{thread} d{i}");
            }
        }
    }
    assert!(is_bijection(&A8_LAYOUT));
}

#[test]
fn sm80_m16n8k16_layouts_agree_with_the_ptx_fragment_formulas() {
    // PTX ISA "Matrix fragments for mma.m16n8k16": group g = lane/4, q = lane%4.
    for lane in 0..32i64 {
        let (g, q) = (lane / 4, lane % 4);
        for i in 0..4 {
            let c = rc(SM80_C_LAYOUT.eval(lane + 32 * i).unwrap(), 16);
            assert_eq!(c, (g + 8 * (i / 2), 2 * q + i % 2), "C lane {lane} c{i}");
            let b = rc(SM80_B_LAYOUT.eval(lane + 32 * i).unwrap(), 8); // (n, k)
            assert_eq!(b, (g, 2 * q + i % 2 + 8 * (i / 2)), "B lane {lane} b{i}");
        }
        for i in 0..8 {
            let a = rc(SM80_A_LAYOUT.eval(lane + 32 * i).unwrap(), 16);
            assert_eq!(
                a,
                (g + 8 * ((i / 2) % 2), 2 * q + i % 2 + 8 * (i / 4)),
                "A lane {lane} a{i}"
            );
        }
    }
    assert!(is_bijection(&SM80_C_LAYOUT));
    assert!(is_bijection(&SM80_A_LAYOUT));
    assert!(is_bijection(&SM80_B_LAYOUT));
}

#[test]
fn fa2_tiled_m16n8_accumulator_is_a_bijection_with_warps_stacked_along_m() {
    for (bm, bn, warps) in [
        (64, 64, 4),
        (128, 64, 4),
        (128, 128, 8),
        (64, 32, 2),
        (48, 40, 1),
    ] {
        let acc = Sm80TiledAccumulator::new(bm, bn, warps).unwrap();
        let mma_m = bm / (16 * warps);
        let mut seen = vec![false; (bm * bn) as usize];
        for thread in 0..acc.threads() {
            let (w, lane) = (thread / 32, thread % 32);
            for value in 0..acc.values_per_thread() {
                let (c, mm, nn) = (value % 4, (value / 4) % mma_m, value / 4 / mma_m);
                let expected = (
                    16 * (w + warps * mm) + lane / 4 + 8 * (c / 2),
                    8 * nn + 2 * (lane % 4) + c % 2,
                );
                let (row, col) = acc.coord(thread, value).unwrap();
                assert_eq!((row, col), expected);
                assert!(!seen[(row + bm * col) as usize]);
                seen[(row + bm * col) as usize] = true;
                assert_eq!(acc.owner(row, col), Ok((thread, value)));
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}

#[test]
fn wgmma_64xn_c_is_four_stacked_m16n8_c_fragments() {
    // docs/architecture.md fact 4. As layouts: the m16n8 C layout embedded in 64 x N
    // (m + 16n -> m + 64n), repeated over 4 warps at rows 16w and N/8 times along N,
    // is CLayout_64xN leaf for leaf.
    let embed = Layout::parse("(16,8):(1,64)").unwrap();
    let c16 = composition(&embed, &SM80_C_LAYOUT).unwrap();
    for n in legal_ns() {
        let v = i64::from(n / 8);
        let stacked = Layout::from_modes(&[
            Layout::from_modes(&[c16.mode(0).unwrap(), Layout::leaf(4, 16).unwrap()]).unwrap(),
            Layout::from_modes(&[c16.mode(1).unwrap(), Layout::leaf(v, 512).unwrap()]).unwrap(),
        ])
        .unwrap();
        let wgmma = WgmmaAccumulator::new(n).unwrap();
        assert_eq!(stacked.flatten(), wgmma.c_layout().flatten(), "N = {n}");
        // And pointwise, per warp: warp w's lane l, register i holds the m16n8 C element
        // of value i % 4 in the (i / 4)-th 8-column block, at rows 16w.
        for warp in 0..4 {
            for lane in 0..32 {
                for i in 0..n / 2 {
                    let (r16, c8) = rc(
                        SM80_C_LAYOUT.eval(i64::from(lane + 32 * (i % 4))).unwrap(),
                        16,
                    );
                    let expected = (16 * warp + r16 as u32, 8 * (i / 4) + c8 as u32);
                    assert_eq!(wgmma.coord(32 * warp + lane, i), Ok(expected));
                }
            }
        }
    }
}
