//! Proof of the tiled wgmma accumulator model over the whole configuration sweep.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use common::{ptx_coord, sweep};
use fragmask_gmma_frag::{quad_lane, FragError, TiledAccumulator, WgmmaAccumulator};
use proptest::prelude::*;

/// MMA_M up to this in the exhaustive sweep (all N, 1..=3 warpgroups, SwapAB on/off).
const MAX_MMA_M: u32 = 4;

fn configs() -> Vec<TiledAccumulator> {
    sweep(MAX_MMA_M)
        .into_iter()
        .map(|(m, n, w, s)| TiledAccumulator::new(m, n, w, s).expect("sweep configs are legal"))
        .collect()
}

#[test]
fn coord_is_a_bijection_onto_the_tile_agrees_with_the_ptx_formula_and_owner_inverts_it() {
    for acc in configs() {
        let (bm, bn) = (acc.block_m(), acc.block_n());
        assert_eq!(acc.threads() * acc.values_per_thread(), bm * bn);
        let mut seen = vec![false; (bm * bn) as usize];
        for thread in 0..acc.threads() {
            for value in 0..acc.values_per_thread() {
                let (row, col) = acc.coord(thread, value).unwrap();
                assert_eq!(
                    (row, col),
                    ptx_coord(&acc, thread, value),
                    "{acc:?} t{thread} v{value}"
                );
                assert!(row < bm && col < bn);
                let cell = &mut seen[(row + bm * col) as usize];
                assert!(!*cell, "element ({row},{col}) hit twice");
                *cell = true;
                assert_eq!(acc.owner(row, col), Ok((thread, value)));
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}

/// Rows and columns in the MMA's own orientation (the transposed tile under SwapAB).
fn mma_orientation(acc: &TiledAccumulator, (row, col): (u32, u32)) -> (u32, u32) {
    if acc.swap_ab() {
        (col, row)
    } else {
        (row, col)
    }
}

#[test]
fn quad_lanes_share_mma_rows_and_together_cover_each_8_column_block() {
    for acc in configs() {
        for quad_base in (0..acc.threads()).step_by(4) {
            let mut rows: Vec<Vec<u32>> = Vec::with_capacity(4);
            // (MMA row, 8-column block, column within the block) of the quad's values.
            let mut cells = Vec::with_capacity(4 * acc.values_per_thread() as usize);
            for lane in 0..4 {
                let thread = quad_base + lane;
                let mut own = Vec::with_capacity(acc.values_per_thread() as usize);
                for v in 0..acc.values_per_thread() {
                    let (r, c) = mma_orientation(&acc, acc.coord(thread, v).unwrap());
                    own.push(r);
                    cells.push((r, c / 8, c % 8));
                }
                own.sort_unstable();
                own.dedup();
                rows.push(own);
            }
            assert!(
                rows.iter().all(|r| *r == rows[0]),
                "quad {quad_base} rows differ"
            );
            cells.sort_unstable();
            for block in cells.chunks(8) {
                assert!(block
                    .iter()
                    .all(|&(r, b, _)| (r, b) == (block[0].0, block[0].1)));
                assert!(
                    block.iter().map(|&(_, _, c)| c).eq(0..8),
                    "8-column block not covered"
                );
            }
        }
    }
}

#[test]
fn rowcol_view_visits_rows_ascending_and_columns_as_8v_plus_2_quad_lane_plus_01() {
    for acc in configs() {
        let (n_rows, n_cols) = (acc.rows_per_thread(), acc.cols_per_thread());
        assert_eq!(n_rows * n_cols, acc.values_per_thread());
        // The view is the same for every thread: (row index, col index) -> value.
        let grid: Vec<u32> = (0..n_cols)
            .flat_map(|j| (0..n_rows).map(move |i| (i, j)))
            .map(|(i, j)| acc.rowcol_value(i, j).unwrap())
            .collect();
        for thread in 0..acc.threads() {
            let q = quad_lane(thread);
            let rows: Vec<u32> = (0..n_rows).map(|i| acc.row(thread, i).unwrap()).collect();
            let cols: Vec<u32> = (0..n_cols).map(|j| acc.col(thread, j).unwrap()).collect();
            assert!(
                rows.windows(2).all(|w| w[0] < w[1]),
                "rows not ascending: {rows:?}"
            );
            assert!(
                cols.windows(2).all(|w| w[0] < w[1]),
                "cols not ascending: {cols:?}"
            );
            // The MMA's N side: 8v + 2q + {0,1}.
            let n_side = if acc.swap_ab() { &rows } else { &cols };
            for (j, &c) in (0u32..).zip(n_side.iter()) {
                assert_eq!(c, 8 * (j / 2) + 2 * q + j % 2);
            }
            // Every rowcol cell (i, j) is the value at (row i, col j).
            for (index, &value) in grid.iter().enumerate() {
                let (i, j) = (index % n_rows as usize, index / n_rows as usize);
                assert_eq!(acc.coord(thread, value), Ok((rows[i], cols[j])));
            }
            if thread % 64 == 0 {
                assert_eq!(acc.rows_of(thread).unwrap().as_slice(), &rows[..]);
                assert_eq!(acc.cols_of(thread).unwrap().as_slice(), &cols[..]);
            }
        }
    }
}

#[test]
fn row_sharers_are_one_quad_or_under_swap_ab_one_quad_lane_of_every_quad() {
    for acc in configs().into_iter().step_by(7) {
        for row in 0..acc.block_m() {
            let sharers = acc.row_sharers(row).unwrap();
            let (thread, _) = acc.owner(row, 0).unwrap();
            if acc.swap_ab() {
                assert_eq!(sharers.len() as u32, 32 * acc.warpgroups());
                assert!(sharers
                    .as_slice()
                    .iter()
                    .all(|&t| quad_lane(t) == quad_lane(thread)));
            } else {
                let base = thread / 4 * 4;
                assert_eq!(sharers.as_slice(), &[base, base + 1, base + 2, base + 3]);
            }
        }
    }
}

#[test]
fn tv_layout_has_cutes_shape_and_rowcol_is_fa3s_view() {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    assert_eq!(
        acc.tv_layout().to_string(),
        "(((4,8,4),2),((2,2,16),1,1)):(((256,1,16),64),((128,8,1024),128,16384))"
    );
    assert_eq!(acc.fragment_layout().shape().to_string(), "((2,2,16),1,1)");
    assert_eq!(
        acc.rowcol_layout().to_string(),
        "((2,1),(2,16,1)):((2,64),(1,4,64))"
    );
    let swapped = TiledAccumulator::new(128, 128, 2, true).unwrap();
    assert_eq!(
        swapped.rowcol_layout().to_string(),
        "((2,16,1),(2,1)):((1,4,64),(2,64))"
    );
}

#[test]
fn values_per_thread_is_64_at_block_m_128_with_2_warpgroups() {
    // docs/architecture.md fact 2: FA3 runs kBlockM = 128 with two MMA warpgroups; the write-up's
    // 128 values per thread assumed one.
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    assert_eq!(acc.values_per_thread(), 64);
    assert_eq!(acc.fragment_layout().shape().to_string(), "((2,2,16),1,1)");
    assert_eq!((acc.rows_per_thread(), acc.cols_per_thread()), (2, 32));
    assert_eq!(acc.mma_m(), 1);
}

#[test]
fn writeup_row_formula_matches_512_of_4096_m64n64_elements() {
    // docs/architecture.md fact 2: reference 000 §4.3 says a thread holds rows row_base and
    // row_base + 1 with row_base = warp*16 + quad*2 (columns as in fact 1). Index by
    // index it agrees only for quads 0 (first row) and 7 (second row): 512 of 4096.
    // An earlier count of 523 compared values, not positions: 11 values are equal by
    // coincidence.
    let atom = WgmmaAccumulator::new(64).unwrap();
    let mut matches = 0;
    for thread in 0..128u32 {
        let (warp, quad, q) = (thread / 32, (thread % 32) / 4, thread % 4);
        for register in 0..32u32 {
            let writeup = (
                warp * 16 + quad * 2 + (register / 2) % 2,
                8 * (register / 4) + 2 * q + register % 2,
            );
            if atom.coord(thread, register).unwrap() == writeup {
                matches += 1;
            }
        }
    }
    assert_eq!(matches, 512);
}

#[test]
fn thread_holds_rows_r_and_r_plus_8_not_r_and_r_plus_1() {
    let atom = WgmmaAccumulator::new(64).unwrap();
    for thread in 0..128u32 {
        let r0 = atom.coord(thread, 0).unwrap().0;
        let r1 = atom.coord(thread, 2).unwrap().0;
        assert_eq!(r1, r0 + 8);
        assert_eq!(r0, 16 * (thread / 32) + (thread % 32) / 4);
    }
}

#[test]
fn illegal_configurations_are_typed_errors() {
    for n in [0, 4, 12, 260, 264, 1000] {
        assert_eq!(WgmmaAccumulator::new(n), Err(FragError::IllegalN { n }));
        assert_eq!(
            TiledAccumulator::new(64, n, 1, false),
            Err(FragError::IllegalN { n })
        );
        assert_eq!(
            TiledAccumulator::new(n, 64, 1, true),
            Err(FragError::IllegalN { n })
        );
    }
    assert_eq!(
        TiledAccumulator::new(128, 64, 0, false),
        Err(FragError::Warpgroups { warpgroups: 0 })
    );
    assert_eq!(
        TiledAccumulator::new(128, 64, 4, false),
        Err(FragError::Warpgroups { warpgroups: 4 })
    );
    assert_eq!(
        TiledAccumulator::new(64, 64, 2, false),
        Err(FragError::BlockM {
            block_m: 64,
            multiple_of: 128
        })
    );
    assert_eq!(
        TiledAccumulator::new(96, 64, 1, false),
        Err(FragError::BlockM {
            block_m: 96,
            multiple_of: 64
        })
    );
    assert_eq!(
        TiledAccumulator::new(64, 96, 1, true),
        Err(FragError::BlockN {
            block_n: 96,
            multiple_of: 64
        })
    );
    assert_eq!(
        TiledAccumulator::with_atom_n(64, 200, 1, 64, false),
        Err(FragError::BlockN {
            block_n: 200,
            multiple_of: 64
        })
    );
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    assert_eq!(
        acc.coord(256, 0),
        Err(FragError::ThreadOutOfRange {
            thread: 256,
            threads: 256
        })
    );
    assert_eq!(
        acc.coord(0, 64),
        Err(FragError::ValueOutOfRange {
            value: 64,
            values_per_thread: 64
        })
    );
    assert_eq!(
        acc.owner(128, 0),
        Err(FragError::OutOfTile {
            row: 128,
            col: 0,
            block_m: 128,
            block_n: 128
        })
    );
    assert_eq!(
        acc.row(0, 2),
        Err(FragError::IndexOutOfRange { index: 2, len: 2 })
    );
    assert_eq!(
        acc.col(0, 32),
        Err(FragError::IndexOutOfRange { index: 32, len: 32 })
    );
}

proptest! {
    #![proptest_config(proptest_ci::config(64))]

    /// Atoms along N too (MMA_N > 1) and deeper MMA_M than the exhaustive sweep.
    #[test]
    fn tiled_configs_with_several_atoms_along_m_and_n_agree_with_the_ptx_formula(
        n_eighths in 1u32..=32,
        mma_n in 1u32..=4,
        warpgroups in 1u32..=3,
        mma_m in 1u32..=5,
        swap_ab: bool,
        samples in proptest::collection::vec((0u32..384, 0u32..1 << 20), 64),
    ) {
        let atom_n = 8 * n_eighths;
        let (m_side, n_side) = (64 * warpgroups * mma_m, atom_n * mma_n);
        prop_assume!(m_side <= 1024 && n_side <= 1024);
        let (bm, bn) = if swap_ab { (n_side, m_side) } else { (m_side, n_side) };
        let acc = TiledAccumulator::with_atom_n(bm, bn, warpgroups, atom_n, swap_ab).unwrap();
        prop_assert_eq!(acc.mma_n(), mma_n);
        prop_assert_eq!(acc.mma_m(), mma_m);
        for (thread, value) in samples {
            let (thread, value) = (thread % acc.threads(), value % acc.values_per_thread());
            let (row, col) = acc.coord(thread, value).unwrap();
            prop_assert_eq!((row, col), ptx_coord(&acc, thread, value));
            prop_assert_eq!(acc.owner(row, col), Ok((thread, value)));
        }
    }
}
