//! The operand tilings of the decode kernel's two products, as layouts, and the proof
//! (this module's tests) that they feed `mma.sync.m16n8k16` consistent operands.
//!
//! Every operand comes from shared memory as one 16-byte vector per thread per use
//! (`ld.shared.v4`), with no `ldmatrix`: the kernel reorders the contraction instead.
//!
//! - `S = Q·Kᵀ` contracts over d. A sum does not depend on the order of its terms, so
//!   slot `k` of MMA step `s` may read any d as long as Q (A operand) and K (B operand)
//!   read the same one. [`qk_contraction`] is that order: the 16-byte chunk a lane loads
//!   for a pair of k16 steps holds exactly its four A (or two B) registers of both.
//! - `O = P·V` contracts over keys in their natural order (P comes from S's C fragment,
//!   [`p_source`]); the output column `n` of n-tile `nt` is the d of [`o_columns`], chosen
//!   so that a lane's B registers of eight consecutive n-tiles come from one 16-byte
//!   chunk of a V row ([`v_thread_chunks`]), and its C registers hold 16 consecutive d.
//!
//! Fragments: docs/architecture.md fact 4 (gmma-frag `SM80_A_LAYOUT`, `SM80_B_LAYOUT`,
//! `SM80_C_LAYOUT`); `thread` below is the lane (`threadIdx.x % 32`).

use fragmask_layout::{Layout, Swizzle};

use super::config::{ConfigError, DecodeConfig};
use crate::emit::{layout_offset, Expr};

fn flat(shapes: &[i64], strides: &[i64]) -> Result<Layout, ConfigError> {
    Layout::from_flat(shapes, strides).map_err(|e| ConfigError(format!("operand layout: {e}")))
}

fn nested(text: &str) -> Result<Layout, ConfigError> {
    Layout::parse(text).map_err(|e| ConfigError(format!("operand layout {text}: {e}")))
}

/// The contraction order of `S = Q·Kᵀ`: `(slot k, step s) → d`, the layout
/// `((2,4,2),(2,D/32)):((1,8,2),(4,32))`. Slot `k = k0 + 2·q + 8·k2` of step
/// `s = h + 2j` reads `d = 32j + 8q + 4h + 2·k2 + k0`.
pub fn qk_contraction(head_dim: u32) -> Result<Layout, ConfigError> {
    nested(&format!("((2,4,2),(2,{})):((1,8,2),(4,32))", head_dim / 32))
}

/// The lane's first 16-byte chunk of a Q or K tile, in chunks of the row-major
/// `[rows, C]` chunk grid (`C` = [`DecodeConfig::chunks_per_row`]): thread
/// `(4,8):(1,C)`, quad lane `q` at chunk `q`, lane row `r` at row `r`. Step pair `j`
/// adds `4j` chunks, key n-tile `nt` (or Q's rows `r + 8`) adds `8C`.
pub fn qk_thread_chunks(config: DecodeConfig) -> Result<Layout, ConfigError> {
    flat(&[4, 8], &[1, i64::from(config.chunks_per_row())])
}

/// The lane's first 16-byte chunk of a V tile: thread `(4,8):(2C,1)`, quad lane `q`
/// at key row `2q`, lane row `r` at chunk `r`. B register `b1` adds 8 rows, its upper
/// half 1 row ([`v_row`]); d group `g` (64 columns) adds 8 chunks.
pub fn v_thread_chunks(config: DecodeConfig) -> Result<Layout, ConfigError> {
    flat(&[4, 8], &[2 * i64::from(config.chunks_per_row()), 1])
}

/// The d of output column `n` (0..8) of n-tile `nt = t + 8g` of `O = P·V`: the layout
/// `(8,(8,D/64)):(8,(1,64))` over `(n, nt)`, i.e. `d = 64g + 8n + t`.
pub fn o_columns(head_dim: u32) -> Result<Layout, ConfigError> {
    nested(&format!("(8,(8,{})):(8,(1,64))", head_dim / 64))
}

/// The lane's first fp32 element of its o rows in a row-major `[16, D]` tile: thread
/// `(4,8):(16,D)`, quad lane `q` at d = 16q (C columns `2q`, `2q + 1` of eight n-tiles,
/// through [`o_columns`]), lane row `r` at row `r`.
pub fn o_thread_floats(config: DecodeConfig) -> Result<Layout, ConfigError> {
    flat(&[4, 8], &[16, i64::from(config.head_dim)])
}

/// The C fragment's row and column of a lane's first value, from `SM80_C_LAYOUT`'s
/// thread mode `(4,8):(32,1)` over `m + 16n`: row `(4,8):(0,1)`, column `(4,8):(2,0)`.
pub fn c_thread_row_col() -> Result<(Layout, Layout), ConfigError> {
    Ok((flat(&[4, 8], &[0, 1])?, flat(&[4, 8], &[2, 0])?))
}

/// Where A register `reg` (0..4) of MMA step parity `h` comes from in a lane's Q chunks
/// of a step pair: `(row + 8?, 32-bit word of the 16-byte chunk)`. a0 and a2 are row r,
/// a1 and a3 row r + 8; a0/a1 hold slots `2q, 2q+1`, a2/a3 slots `2q+8, 2q+9`.
pub const fn qk_a_source(h: u32, reg: u32) -> (bool, u32) {
    (reg % 2 == 1, 2 * h + reg / 2)
}

/// The 32-bit word of a lane's K chunk that B register `reg` (0..2) of step parity `h`
/// takes: b0 holds slots `2q, 2q+1`, b1 slots `2q+8, 2q+9`.
pub const fn qk_b_source(h: u32, reg: u32) -> u32 {
    2 * h + reg
}

/// P's A register `reg` (0..4) packs S's C registers `(n_tile, c, c + 1)` of the same
/// rows: a0 = (tile 0: c0, c1), a1 = (tile 0: c2, c3), a2 = (tile 1: c0, c1), a3 =
/// (tile 1: c2, c3), the lower column in the low half (fact 5's pairing, for m16n8k16).
pub const fn p_source(reg: u32) -> (u32, u32) {
    (reg / 2, 2 * (reg % 2))
}

/// The V tile row (key of the 16-key tile) that half `half` of B register `reg` of quad
/// lane `q` holds: `2q + half + 8·reg`.
pub const fn v_row(q: u32, reg: u32, half: u32) -> u32 {
    2 * q + half + 8 * reg
}

/// The swizzle of Q and K tiles on chunk offsets `row·C + chunk`: `Swizzle<1,2,log2 C − 2>`
/// flips chunk bit 2 on odd rows, so the two rows a quarter warp reads fall in
/// different banks.
pub fn qk_swizzle(config: DecodeConfig) -> Result<Swizzle, ConfigError> {
    let log_c = config.chunks_per_row().trailing_zeros() as i32;
    Swizzle::new(1, 2, log_c - 2).map_err(|e| ConfigError(format!("qk swizzle: {e}")))
}

/// The swizzle of V tiles on chunk offsets: `Swizzle<3,0,log2 C>` XORs the chunk with
/// the row's low three bits, so the four rows a quarter warp reads (`2q` for four q)
/// fall in different banks.
pub fn v_swizzle(config: DecodeConfig) -> Result<Swizzle, ConfigError> {
    let log_c = config.chunks_per_row().trailing_zeros() as i32;
    Swizzle::new(3, 0, log_c).map_err(|e| ConfigError(format!("v swizzle: {e}")))
}

/// `layout(thread)` as an emitted expression of the lane.
pub fn lane_expr(layout: &Layout) -> Result<Expr, ConfigError> {
    layout_offset(layout, Expr::Thread).map_err(|e| ConfigError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::config::KvLayout;
    use crate::family::dtype::ActDtype;
    use fragmask_gmma_frag::{SM80_A_LAYOUT, SM80_B_LAYOUT, SM80_C_LAYOUT};

    fn configs() -> Vec<DecodeConfig> {
        [64, 128, 256]
            .into_iter()
            .map(|d| DecodeConfig::new(d, ActDtype::Bf16, KvLayout::Contiguous).unwrap())
            .collect()
    }

    /// `(row or n, k)` of value `v` of `lane` in a fragment layout over `row + rows·k`.
    fn frag(layout: &Layout, rows: i64, lane: u32, v: u32) -> (u32, u32) {
        let off = layout.eval(i64::from(lane) + 32 * i64::from(v)).unwrap();
        ((off % rows) as u32, (off / rows) as u32)
    }

    #[test]
    fn qk_contraction_is_a_bijection_onto_the_head_dim() {
        for d in [64u32, 128, 256] {
            let pi = qk_contraction(d).unwrap();
            let mut seen = vec![false; d as usize];
            for i in 0..i64::from(d) {
                let x = pi.eval(i).unwrap() as usize;
                assert!(!seen[x], "D = {d}: d {x} twice");
                seen[x] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn q_and_k_registers_read_the_same_d_for_every_slot_of_every_step() {
        for config in configs() {
            let c = config.chunks_per_row();
            let pi = qk_contraction(config.head_dim).unwrap();
            let lane_chunk = qk_thread_chunks(config).unwrap();
            for lane in 0..32u32 {
                let first = lane_chunk.eval(i64::from(lane)).unwrap() as u32;
                let (row, chunk0) = (first / c, first % c);
                for step in 0..config.head_dim / 16 {
                    let (j, h) = (step / 2, step % 2);
                    let chunk = chunk0 + 4 * j;
                    // A = Q: register reg = v / 2, half v % 2 (SM80_A_LAYOUT, m + 16k).
                    for v in 0..8 {
                        let (m, k) = frag(&SM80_A_LAYOUT, 16, lane, v);
                        let (plus8, word) = qk_a_source(h, v / 2);
                        let d = 8 * chunk + 2 * word + v % 2;
                        assert_eq!(row + 8 * u32::from(plus8), m, "A row, lane {lane} v {v}");
                        let want = pi.eval(i64::from(k + 16 * step)).unwrap() as u32;
                        assert_eq!(
                            d, want,
                            "A d, D {} lane {lane} step {step} v {v}",
                            config.head_dim
                        );
                    }
                    // B = K: (SM80_B_LAYOUT, n + 8k); the lane's key is its row.
                    for v in 0..4 {
                        let (n, k) = frag(&SM80_B_LAYOUT, 8, lane, v);
                        let d = 8 * chunk + 2 * qk_b_source(h, v / 2) + v % 2;
                        assert_eq!(row, n, "B key, lane {lane} v {v}");
                        let want = pi.eval(i64::from(k + 16 * step)).unwrap() as u32;
                        assert_eq!(d, want, "B d, lane {lane} step {step} v {v}");
                    }
                }
            }
        }
    }

    #[test]
    fn p_registers_hold_the_keys_that_the_v_registers_hold() {
        for lane in 0..32u32 {
            let q = lane % 4;
            for v in 0..8 {
                // A = P: value v is register v / 2, half v % 2.
                let (m_a, k_a) = frag(&SM80_A_LAYOUT, 16, lane, v);
                let (tile, c) = p_source(v / 2);
                let (m_c, n_c) = frag(&SM80_C_LAYOUT, 16, lane, c + v % 2);
                assert_eq!(m_a, m_c, "lane {lane} v {v}: P row");
                assert_eq!(k_a, 8 * tile + n_c, "lane {lane} v {v}: P key");
            }
            for v in 0..4 {
                // B = V: key k of the B fragment is the V row the lane loads.
                let (_, k) = frag(&SM80_B_LAYOUT, 8, lane, v);
                assert_eq!(v_row(q, v / 2, v % 2), k, "lane {lane} v {v}");
            }
        }
    }

    #[test]
    fn v_chunks_and_o_registers_agree_on_every_output_column() {
        for config in configs() {
            let d = config.head_dim;
            let c = config.chunks_per_row();
            let cols = o_columns(d).unwrap();
            let v_lane = v_thread_chunks(config).unwrap();
            let o_lane = o_thread_floats(config).unwrap();
            let mut seen = vec![0u32; (16 * d) as usize];
            for lane in 0..32u32 {
                let first = v_lane.eval(i64::from(lane)).unwrap() as u32;
                let (key_row, chunk) = (first / c, first % c);
                assert_eq!(key_row, v_row(lane % 4, 0, 0));
                let o_first = o_lane.eval(i64::from(lane)).unwrap() as u32;
                for nt in 0..d / 8 {
                    let (t, g) = (nt % 8, nt / 8);
                    // B's column n is the lane row; element t of chunk r + 8g is d 64g + 8r + t.
                    let (n, _) = frag(&SM80_B_LAYOUT, 8, lane, 0);
                    let col = cols.eval(i64::from(n + 8 * nt)).unwrap() as u32;
                    assert_eq!(8 * (chunk + 8 * g) + t, col, "V d, lane {lane} nt {nt}");
                    for cv in 0..4 {
                        let (m, n) = frag(&SM80_C_LAYOUT, 16, lane, cv);
                        let col = cols.eval(i64::from(n + 8 * nt)).unwrap() as u32;
                        // The kernel stores c-value cv of n-tile (t, g) at row + 8 (cv / 2),
                        // d = o_first + 64 g + 8 (cv % 2) + t.
                        let at = o_first + 64 * g + 8 * (cv % 2) + t + 8 * d * (cv / 2);
                        assert_eq!(at, m * d + col, "O, lane {lane} nt {nt} c {cv}");
                        seen[at as usize] += 1;
                    }
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "D = {d}: o tile not covered once"
            );
        }
    }

    #[test]
    fn swizzled_reads_of_each_quarter_warp_fall_in_distinct_banks() {
        for config in configs() {
            let c = config.chunks_per_row();
            let qk = qk_swizzle(config).unwrap();
            let vs = v_swizzle(config).unwrap();
            let lane_qk = qk_thread_chunks(config).unwrap();
            let lane_v = v_thread_chunks(config).unwrap();
            let bank_groups = |offsets: Vec<i64>| {
                let mut g: Vec<i64> = offsets.iter().map(|o| o % 8).collect();
                g.sort_unstable();
                g.dedup();
                g.len()
            };
            for quarter in 0..4u32 {
                let lanes = 8 * quarter..8 * quarter + 8;
                for j in 0..c / 4 {
                    let k_reads = lanes
                        .clone()
                        .map(|l| qk.apply(lane_qk.eval(i64::from(l)).unwrap() + i64::from(4 * j)))
                        .collect();
                    assert_eq!(
                        bank_groups(k_reads),
                        8,
                        "K, D {}, pair {j}",
                        config.head_dim
                    );
                }
                for extra in [0, c as i64, 8 * c as i64, 9 * c as i64] {
                    for g in 0..i64::from(c / 8) {
                        let v_reads = lanes
                            .clone()
                            .map(|l| vs.apply(lane_v.eval(i64::from(l)).unwrap() + extra + 8 * g))
                            .collect();
                        assert_eq!(bank_groups(v_reads), 8, "V, D {}", config.head_dim);
                    }
                }
            }
            // Both swizzles permute the chunks of a tile.
            for sw in [qk, vs] {
                let mut all: Vec<i64> = (0..16 * i64::from(c)).map(|o| sw.apply(o)).collect();
                all.sort_unstable();
                assert_eq!(all, (0..16 * i64::from(c)).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn lane_expressions_evaluate_as_their_layouts() {
        let config = configs()[1];
        for layout in [
            qk_thread_chunks(config).unwrap(),
            v_thread_chunks(config).unwrap(),
            o_thread_floats(config).unwrap(),
        ] {
            let e = lane_expr(&layout).unwrap();
            for lane in 0..32 {
                assert_eq!(
                    i64::from(e.eval(lane, &[]).unwrap()),
                    layout.eval(lane.into()).unwrap()
                );
            }
        }
        let (row, col) = c_thread_row_col().unwrap();
        for lane in 0..32u32 {
            let (m, n) = frag(&SM80_C_LAYOUT, 16, lane, 0);
            assert_eq!(row.eval(lane.into()).unwrap(), i64::from(m));
            assert_eq!(col.eval(lane.into()).unwrap(), i64::from(n));
        }
    }
}
