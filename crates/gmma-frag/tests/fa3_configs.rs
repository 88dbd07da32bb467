//! Compile-time checks of FlashAttention-3's standard tile configurations:
//! block_m ∈ {64, 128, 192} with block_m / 64 MMA warpgroups, block_n ∈ {64, 128, 176,
//! 192, 256}.

use fragmask_gmma_frag::TiledAccumulator;
use static_assertions::const_assert;

const fn acc(block_m: u32, block_n: u32, warpgroups: u32, swap_ab: bool) -> TiledAccumulator {
    match TiledAccumulator::new(block_m, block_n, warpgroups, swap_ab) {
        Ok(a) => a,
        Err(_) => panic!("FA3 configuration rejected"),
    }
}

/// Whether `(thread, value)` sits at `(row, col)` and `owner` says so back.
const fn at(a: &TiledAccumulator, thread: u32, value: u32, row: u32, col: u32) -> bool {
    matches!(a.coord(thread, value), Ok((r, c)) if r == row && c == col)
        && matches!(a.owner(row, col), Ok((t, v)) if t == thread && v == value)
}

/// Every FA3 block_m / block_n pair is legal with block_m / 64 warpgroups, each
/// thread holds block_n / 2 values (one 64-row slab per warpgroup), 2 rows and
/// block_n / 4 columns.
const fn fa3_config_holds(block_m: u32, block_n: u32) -> bool {
    let w = block_m / 64;
    let a = acc(block_m, block_n, w, false);
    a.values_per_thread() == block_n / 2
        && a.threads() == 128 * w
        && a.rows_per_thread() == 2
        && a.cols_per_thread() == block_n / 4
        && a.mma_m() == 1
        // Thread 0 starts the tile; the last warpgroup's first thread starts its slab.
        && at(&a, 0, 0, 0, 0)
        && at(&a, 0, 1, 0, 1)
        && at(&a, 0, 2, 8, 0)
        && at(&a, 128 * (w - 1), 0, 64 * (w - 1), 0)
        // Lane 5 of warp 1: row 16 + 1, columns 2 and 3 of each 8-column block.
        && at(&a, 37, 0, 17, 2)
        && at(&a, 37, 4, 17, 10)
        // The last element belongs to the last thread's last value.
        && at(&a, 128 * w - 1, block_n / 2 - 1, block_m - 1, block_n - 1)
}

const_assert!(fa3_config_holds(64, 64));
const_assert!(fa3_config_holds(64, 128));
const_assert!(fa3_config_holds(64, 176));
const_assert!(fa3_config_holds(64, 192));
const_assert!(fa3_config_holds(64, 256));
const_assert!(fa3_config_holds(128, 64));
const_assert!(fa3_config_holds(128, 128));
const_assert!(fa3_config_holds(128, 176));
const_assert!(fa3_config_holds(128, 192));
const_assert!(fa3_config_holds(128, 256));
const_assert!(fa3_config_holds(192, 64));
const_assert!(fa3_config_holds(192, 128));
const_assert!(fa3_config_holds(192, 176));
const_assert!(fa3_config_holds(192, 192));
const_assert!(fa3_config_holds(192, 256));

// docs/architecture.md fact 2: kBlockM = 128 with 2 warpgroups gives 64 values per thread.
const_assert!(acc(128, 128, 2, false).values_per_thread() == 64);
// With one warpgroup the same tile needs MMA_M = 2: 128 values, rows r, r+8, r+64, r+72.
const_assert!(acc(128, 128, 1, false).values_per_thread() == 128);
const_assert!(acc(128, 128, 1, false).mma_m() == 2);
const_assert!(at(&acc(128, 128, 1, false), 0, 64, 64, 0));
// block_m = 256 with 2 warpgroups: atoms along M alternate warpgroups, so warpgroup 1
// holds rows 64.. and the second atom (value 64) of warpgroup 0 is at row 128.
const_assert!(at(&acc(256, 128, 2, false), 128, 0, 64, 0));
const_assert!(at(&acc(256, 128, 2, false), 0, 64, 128, 0));
// Valid and invalid warpgroup counts.
const_assert!(TiledAccumulator::new(128, 128, 1, false).is_ok());
const_assert!(TiledAccumulator::new(128, 128, 3, false).is_err());
const_assert!(TiledAccumulator::new(192, 128, 3, false).is_ok());
const_assert!(TiledAccumulator::new(192, 128, 2, false).is_err());
const_assert!(TiledAccumulator::new(64, 204, 1, false).is_err());
// SwapAB: the MMA computes the transposed 128 x 64 tile (block_n = 128 rows of the MMA).
const_assert!(at(&acc(64, 128, 2, true), 128, 0, 0, 64));
const_assert!(at(&acc(64, 128, 2, true), 0, 1, 1, 0));

#[test]
fn fa3_configurations_are_checked_at_compile_time() {
    // The const_assert!s above are the proof; this test only names them in the report.
    assert!(fa3_config_holds(128, 176));
}
