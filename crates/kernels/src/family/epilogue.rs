//! The staged epilogue of the wgmma kernels: a warpgroup's 64-row accumulator, packed into
//! 16-bit pairs, goes by `stmatrix.x4` into rows of a 128-byte-swizzled K-major operand tile
//! that the warpgroup owns by then, and from there to global memory in 16-byte pieces of whole
//! rows (FlashAttention-3/4 stage their epilogues in shared memory too). The forward stages O
//! in its Q rows, the backward dK and dV in its K and V rows.
//!
//! [`check_tile`] proves the staging address formula against the tile's layout, and the
//! accumulator's [`FragmentMap::check_stmatrix`] proves the stmatrix mapping; [`emit`] writes
//! the CUDA that relies on both.

use std::fmt::Write as _;

use super::fragment::FragmentMap;
use super::smem::OperandTile;
use super::LayoutError;

/// One tensor of a staged epilogue.
pub struct StagedTensor<'a> {
    /// Shared-memory address (u32) of the tile it is staged in.
    pub smem: &'a str,
    /// The packed pair of values `2 mi`, `2 mi + 1` (one 32-bit register, e.g.
    /// `fm_act2(acc[2 * mi] * s, acc[2 * mi + 1] * s)`).
    pub pack: &'a str,
    /// Global pointer (16-bit elements) it is written to.
    pub dst: &'a str,
}

/// Where a staged epilogue's rows come from and go to. Every field is CUDA text of the
/// kernel that uses it.
pub struct Staging<'a> {
    /// The tensors, staged and written together (one address computation for all).
    pub tensors: &'a [StagedTensor<'a>],
    /// Statements run per pair before the packs (may read `mi`), or empty.
    pub pair_prelude: &'a str,
    /// Tile row of the warpgroup's accumulator row 0 (e.g. `64 * wg`).
    pub row0: &'a str,
    /// Tile column of the accumulator's column 0 (e.g. `0`, or a column group's first).
    pub col0: &'a str,
    /// Columns of the accumulator (a multiple of 16; e.g. `FM_D`).
    pub cols: &'a str,
    /// Bytes of one 64-column chunk of the tile.
    pub chunk_bytes: &'a str,
    /// Named barrier of the warpgroup's 128 threads between the stores and the write-out.
    pub barrier_id: &'a str,
    /// Global row of tile row `row` (an `int` expression).
    pub global_row: &'a str,
    /// Rows at or past this are not written.
    pub row_limit: &'a str,
    /// Element offset of global row `grow`, column `col` (a `long long` expression).
    pub dst_offset: &'a str,
}

/// Byte of tile element (row, col) in the staging formula the emitted code uses:
/// `(col / 64) * chunk + sw128(128 row + 2 (col % 64))`.
fn staging_byte(row: u32, col: u32, chunk: u32) -> u32 {
    let linear = row * 128 + (col % 64) * 2;
    (col / 64) * chunk + (linear ^ (((linear >> 7) & 7) << 4))
}

/// Proves the staging formula on `tile` (16-bit elements, K-major, 128-byte swizzle): for
/// every row below `rows` and column below `cols`, the tile's layout puts (row, col) at
/// `(col / 64) * chunk + sw128(128 row + 2 (col % 64))`, so 8 columns from a multiple of 8
/// are 16 contiguous bytes (a stmatrix row and a write-out piece).
pub fn check_tile(
    tile: &OperandTile,
    rows: u32,
    cols: u32,
    chunk: u32,
    what: &str,
) -> Result<(), LayoutError> {
    for row in 0..rows {
        for col in 0..cols {
            let want = staging_byte(row, col, chunk);
            let got = tile.swizzled_bytes(row, col)?;
            if got != want {
                return Err(LayoutError(format!(
                    "{what} staging: {} ({row}, {col}) is at byte {got}, not {want}",
                    tile.name
                )));
            }
        }
    }
    Ok(())
}

/// The staged epilogue of accumulator `map` (checked by [`FragmentMap::check_stmatrix`]; the
/// tile by [`check_tile`]): the stmatrix pass, the warpgroup barrier, the 16-byte write-out.
/// Reads `lt` (the thread's index in its warpgroup) and `sm_lt` (`(lt & ~31) | (4 * (lt & 7))`:
/// the warp's thread whose pair starts stmatrix row `lane % 8`), both defined by the kernel.
pub fn emit(map: &FragmentMap, s: &Staging<'_>, indent: &str) -> Result<String, LayoutError> {
    map.check_stmatrix()?;
    let x4 = map.values() / 8;
    let (tr, tc) = (map.thread_row_expr("sm_lt"), map.thread_col_expr("sm_lt"));
    let (vr, vc) = (map.value_row_expr("(2 * m)"), map.value_col_expr("(2 * m)"));
    let layout = format!("CLayout_64x{} = {}", map.n(), map.layout_text());
    let mut o = String::new();
    let mut line = |depth: usize, text: &str| {
        let _ = writeln!(o, "{indent}{}{text}", "    ".repeat(depth));
    };
    line(0, "// Staged epilogue (family::epilogue): stmatrix.x4 stores pairs 4g..4g+3 of the warp as four 8x8");
    line(0, "// matrices (FragmentMap::check_stmatrix); lane 8j + r gives row r of matrix j = pair m = 4g + j, at the");
    line(0, "// pair 2m of the warp's thread sm_lt; the tile byte of (row, col) is (col / 64) * chunk +");
    line(
        0,
        "// sw128(128 row + 2 (col % 64)) (family::epilogue::check_tile).",
    );
    line(0, "#pragma unroll");
    line(0, &format!("for (int g = 0; g < {x4}; ++g) {{"));
    let regs: Vec<String> = (0..s.tensors.len()).map(|t| format!("pk{t}")).collect();
    line(
        1,
        &format!(
            "unsigned {};",
            regs.iter()
                .map(|r| format!("{r}[4]"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    line(1, "#pragma unroll");
    line(1, "for (int j = 0; j < 4; ++j) {");
    line(
        2,
        "const int mi = 4 * g + j;   // this thread's pair: values 2mi, 2mi+1 (adjacent columns)",
    );
    if !s.pair_prelude.is_empty() {
        line(2, s.pair_prelude);
    }
    for (r, t) in regs.iter().zip(s.tensors) {
        line(2, &format!("{r}[j] = {};", t.pack));
    }
    line(1, "}");
    line(1, "const int m = 4 * g + (lt % 32) / 8;");
    line(
        1,
        &format!(
            "// {layout}: row {} + {tr} + {vr}, column {} + {tc} + {vc}",
            s.row0, s.col0
        ),
    );
    line(
        1,
        &format!("const unsigned row = (unsigned)({} + {tr} + {vr});", s.row0),
    );
    line(
        1,
        &format!("const unsigned col = (unsigned)({} + {tc} + {vc});", s.col0),
    );
    line(
        1,
        &format!(
            "const unsigned b = (col / 64u) * {} + fm_sw128(row * 128u + (col % 64u) * 2u);",
            s.chunk_bytes
        ),
    );
    for (r, t) in regs.iter().zip(s.tensors) {
        line(
            1,
            &format!(
                "fm_stmatrix_x4({} + b, {r}[0], {r}[1], {r}[2], {r}[3]);",
                t.smem
            ),
        );
    }
    line(0, "}");
    line(
        0,
        &format!(
            "fm_named_sync<128>({});   // the warpgroup's rows are in shared memory",
            s.barrier_id
        ),
    );
    line(0, "#pragma unroll");
    line(
        0,
        &format!("for (int it = 0; it < {} / 16; ++it) {{", s.cols),
    );
    line(1, "// 16-byte piece it*128 + lt of the warpgroup's 64-row tile, row-major: 8 columns of one row.");
    line(1, "const int piece = it * 128 + lt;");
    line(
        1,
        &format!(
            "const unsigned row = (unsigned)({} + piece / ({} / 8));",
            s.row0, s.cols
        ),
    );
    line(
        1,
        &format!(
            "const unsigned col = (unsigned)({} + (piece % ({} / 8)) * 8);",
            s.col0, s.cols
        ),
    );
    line(
        1,
        &format!(
            "const unsigned b = (col / 64u) * {} + fm_sw128(row * 128u + (col % 64u) * 2u);",
            s.chunk_bytes
        ),
    );
    // The shared loads come before the row bound, unconditionally (every tile row exists), so
    // the unrolled pieces' loads issue back to back instead of one per guarded store.
    for (i, t) in s.tensors.iter().enumerate() {
        line(
            1,
            &format!("const uint4 piece{i} = fm_lds128({} + b);", t.smem),
        );
    }
    line(1, &format!("const int grow = {};", s.global_row));
    line(1, &format!("if (grow < {}) {{", s.row_limit));
    line(2, &format!("const long long off = {};", s.dst_offset));
    for (i, t) in s.tensors.iter().enumerate() {
        line(
            2,
            &format!("*reinterpret_cast<uint4*>({} + off) = piece{i};", t.dst),
        );
    }
    line(1, "}");
    line(0, "}");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emitted_write_out_loads_every_piece_before_its_row_bound() {
        let map = FragmentMap::new(128).unwrap();
        let tensors = [
            StagedTensor {
                smem: "smem_k",
                pack: "fm_act2(a[2 * mi], a[2 * mi + 1])",
                dst: "p.dk",
            },
            StagedTensor {
                smem: "smem_v",
                pack: "fm_act2(b[2 * mi], b[2 * mi + 1])",
                dst: "p.dv",
            },
        ];
        let text = emit(
            &map,
            &Staging {
                tensors: &tensors,
                pair_prelude: "",
                row0: "64 * wg",
                col0: "0",
                cols: "FM_D",
                chunk_bytes: "FM_KV_CHUNK_BYTES",
                barrier_id: "5 + wg",
                global_row: "n0 + (int)row",
                row_limit: "p.seqlen_k",
                dst_offset: "(row0 + grow) * FM_D + col",
            },
            "",
        )
        .unwrap();
        let bound = text.find("if (grow < p.seqlen_k)").unwrap();
        for (i, t) in tensors.iter().enumerate() {
            let load = text
                .find(&format!(
                    "const uint4 piece{i} = fm_lds128({} + b);",
                    t.smem
                ))
                .unwrap();
            let store = text
                .find(&format!(
                    "*reinterpret_cast<uint4*>({} + off) = piece{i};",
                    t.dst
                ))
                .unwrap();
            assert!(load < bound && bound < store, "{text}");
        }
        assert_eq!(text.matches("fm_stmatrix_x4(").count(), 2);
    }

    #[test]
    fn staging_byte_keeps_eight_columns_contiguous_and_rows_in_their_swizzle_atom() {
        for row in 0..64 {
            for col in (0..128).step_by(8) {
                let b = staging_byte(row, col, 8192);
                for k in 0..8 {
                    assert_eq!(staging_byte(row, col + k, 8192), b + 2 * k);
                }
                assert_eq!(b % 16, 0);
            }
        }
    }
}
