//! Shared helpers for the proof tests: the configuration sweep and an independent
//! statement of the PTX fragment formula (docs/architecture.md fact 1), written without the
//! crate's layouts.
#![allow(dead_code)]

use fragmask_gmma_frag::TiledAccumulator;

/// Every legal wgmma N for 16-bit inputs.
pub fn legal_ns() -> impl Iterator<Item = u32> {
    (8..=256).step_by(8)
}

/// The sweep: all legal N, 1..=3 warpgroups, MMA_M in 1..=max_mma_m, SwapAB off and on.
/// Yields (block_m, block_n, warpgroups, swap_ab).
pub fn sweep(max_mma_m: u32) -> Vec<(u32, u32, u32, bool)> {
    let mut out = Vec::new();
    for n in legal_ns() {
        for warpgroups in 1..=3 {
            for mma_m in 1..=max_mma_m {
                let m_side = 64 * warpgroups * mma_m;
                out.push((m_side, n, warpgroups, false));
                out.push((n, m_side, warpgroups, true));
            }
        }
    }
    out
}

/// PTX ISA wgmma m64nNk16 accumulator D, tiled FA3 style: `(row, col)` in the
/// `block_m × block_n` tile of `value` of `thread`, computed from the formula.
pub fn ptx_coord(acc: &TiledAccumulator, thread: u32, value: u32) -> (u32, u32) {
    let warpgroups = acc.warpgroups();
    let (m_side, n_side) = if acc.swap_ab() {
        (acc.block_n(), acc.block_m())
    } else {
        (acc.block_m(), acc.block_n())
    };
    let atom_n = acc.atom().n();
    let mma_m = m_side / (64 * warpgroups);
    let _ = n_side;
    let registers = atom_n / 2;
    let (wg, t) = (thread / 128, thread % 128);
    let i = value % registers;
    let rest = value / registers;
    let (mm, mn) = (rest % mma_m, rest / mma_m);
    let mma_row = 64 * (wg + warpgroups * mm) + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    let mma_col = atom_n * mn + 8 * (i / 4) + 2 * (t % 4) + (i % 2);
    if acc.swap_ab() {
        (mma_col, mma_row)
    } else {
        (mma_row, mma_col)
    }
}
