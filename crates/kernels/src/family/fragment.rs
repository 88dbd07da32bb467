//! Index expressions of the wgmma accumulator fragment, derived from its CuTe layout.
//!
//! The m64nNk16 f32 accumulator of one warpgroup is gmma-frag's
//! [`WgmmaAccumulator::c_layout`], `CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`
//! (CuTe `cute/atom/mma_traits_sm90_gmma.hpp`; docs/architecture.md fact 1), proven on the
//! H100 by `fragmask verify`. It maps `(thread, value)` to the offset `m + 64*n` of a
//! column-major 64 x N tile.
//!
//! Every leaf stride of that layout is either below 64 (it moves the row) or a
//! multiple of 64 (it moves the column), and the leaves never carry into each
//! other, so the row and the column are sums of one term per leaf:
//! `row = sum over row leaves of ((index / prefix) % shape) * stride`, likewise
//! for the column with `stride / 64`. [`FragmentMap::new`] checks this
//! separability on every `(thread, value)` pair before any expression is
//! emitted; the generated CUDA never contains hand-typed fragment math.

use std::fmt::Write as _;

use fragmask_gmma_frag::WgmmaAccumulator;
use fragmask_layout::Layout;

use super::LayoutError;

/// Rows of the wgmma accumulator atom (the `M` of m64nNk16).
pub const ATOM_ROWS: u32 = 64;
/// Threads of one warpgroup.
pub const WARPGROUP_THREADS: u32 = 128;

/// One leaf of a mode: `index / prefix % shape * coefficient` added to the row or the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Product of the shapes of the leaves before this one in its mode.
    pub prefix: u32,
    /// Extent of the leaf.
    pub shape: u32,
    /// Contribution per step: rows for a row term, columns for a column term.
    pub coefficient: u32,
    /// Whether the term moves the column (otherwise the row).
    pub is_col: bool,
    /// The leaf as written in the layout, `shape:stride`.
    pub leaf: (i64, i64),
}

/// The thread and value terms of a wgmma accumulator layout with `n` columns.
#[derive(Debug, Clone)]
pub struct FragmentMap {
    n: u32,
    layout_text: String,
    thread_terms: Vec<Term>,
    value_terms: Vec<Term>,
}

/// Why a layout cannot be turned into separable row/column expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSeparable(pub String);

impl FragmentMap {
    /// The CuTe text of `CLayout_64xN` for `n` columns (a legal wgmma N), from gmma-frag.
    pub fn clayout_text(n: u32) -> Result<String, NotSeparable> {
        Ok(Self::clayout(n)?.to_string())
    }

    fn clayout(n: u32) -> Result<Layout, NotSeparable> {
        WgmmaAccumulator::new(n)
            .map(|acc| acc.c_layout())
            .map_err(|e| NotSeparable(format!("wgmma m64n{n}k16: {e:?}")))
    }

    /// Derives the map of gmma-frag's `CLayout_64xN`; checks separability on all
    /// `128 * n/2` pairs.
    pub fn new(n: u32) -> Result<Self, NotSeparable> {
        let layout = Self::clayout(n)?;
        let text = layout.to_string();
        let thread_terms = terms(&layout, 0)?;
        let value_terms = terms(&layout, 1)?;
        let map = Self {
            n,
            layout_text: text,
            thread_terms,
            value_terms,
        };
        // Separability: L(t, v) == row(t) + row(v) + 64 * (col(t) + col(v)) with row < 64.
        for thread in 0..WARPGROUP_THREADS {
            for value in 0..n / 2 {
                let offset = layout
                    .eval(i64::from(thread) + i64::from(WARPGROUP_THREADS) * i64::from(value))
                    .map_err(|e| NotSeparable(format!("{e:?}")))?;
                let (row, col) = map.coord(thread, value);
                if row >= ATOM_ROWS || i64::from(row + ATOM_ROWS * col) != offset {
                    return Err(NotSeparable(format!(
                        "thread {thread} value {value}: layout gives offset {offset}, terms give ({row}, {col})"
                    )));
                }
            }
        }
        Ok(map)
    }

    /// Columns of the accumulator.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// Values (f32 registers) per thread: `n / 2`.
    pub fn values(&self) -> u32 {
        self.n / 2
    }

    /// The layout this map was derived from, in CuTe notation.
    pub fn layout_text(&self) -> &str {
        &self.layout_text
    }

    /// `(row, col)` in the 64 x n tile of `value` held by `thread` (0..128), from the terms.
    pub fn coord(&self, thread: u32, value: u32) -> (u32, u32) {
        let (rt, ct) = eval_terms(&self.thread_terms, thread);
        let (rv, cv) = eval_terms(&self.value_terms, value);
        (rt + rv, ct + cv)
    }

    /// Row offset of `value` relative to the thread's base row.
    pub fn value_row(&self, value: u32) -> u32 {
        eval_terms(&self.value_terms, value).0
    }

    /// Column offset of `value` relative to the thread's base column.
    pub fn value_col(&self, value: u32) -> u32 {
        eval_terms(&self.value_terms, value).1
    }

    /// The distinct row offsets a thread's values take, ascending (`[0, 8]` for wgmma).
    pub fn row_slots(&self) -> Vec<u32> {
        let mut rows: Vec<u32> = (0..self.values()).map(|v| self.value_row(v)).collect();
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// Which of [`Self::row_slots`] `value` lies in.
    pub fn value_row_slot(&self, value: u32) -> usize {
        let row = self.value_row(value);
        self.row_slots().iter().position(|&r| r == row).unwrap_or(0)
    }

    /// CUDA expression of the thread's base row within its warpgroup's 64 rows,
    /// in terms of the variable `var` (the thread index within the warpgroup).
    pub fn thread_row_expr(&self, var: &str) -> String {
        expr(&self.thread_terms, var, false)
    }

    /// CUDA expression of the thread's base column, in terms of `var`.
    pub fn thread_col_expr(&self, var: &str) -> String {
        expr(&self.thread_terms, var, true)
    }

    /// CUDA expression of a value's row offset in terms of the (compile-time) value index `var`.
    pub fn value_row_expr(&self, var: &str) -> String {
        expr(&self.value_terms, var, false)
    }

    /// CUDA expression of a value's column offset in terms of `var`.
    pub fn value_col_expr(&self, var: &str) -> String {
        expr(&self.value_terms, var, true)
    }

    /// CUDA expression of a value's row slot (index into [`Self::row_slots`]).
    pub fn value_row_slot_expr(&self, var: &str) -> String {
        // Exactly one row term in the value mode for wgmma; its step index is the slot.
        let rows: Vec<&Term> = self.value_terms.iter().filter(|t| !t.is_col).collect();
        match rows.as_slice() {
            [] => "0".to_string(),
            [t] => step_expr(var, t),
            _ => {
                // Mixed radix over several row leaves: slot = row offset / smallest step.
                let step = rows.iter().map(|t| t.coefficient).min().unwrap_or(1);
                format!("(({}) / {step})", expr(&self.value_terms, var, false))
            }
        }
    }

    /// A comment block naming the layout and each leaf's contribution.
    pub fn describe(&self, indent: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{indent}// Fragment layout CLayout_64x{} = {}",
            self.n, self.layout_text
        );
        let _ = writeln!(
            s,
            "{indent}//   (thread, value) -> m + 64*n of a column-major 64x{} tile.",
            self.n
        );
        for (mode, terms) in [("thread", &self.thread_terms), ("value", &self.value_terms)] {
            for t in terms.iter() {
                let _ = writeln!(
                    s,
                    "{indent}//   {mode} leaf {}:{} -> {} += (({mode} / {}) % {}) * {}",
                    t.leaf.0,
                    t.leaf.1,
                    if t.is_col { "col" } else { "row" },
                    t.prefix,
                    t.shape,
                    t.coefficient
                );
            }
        }
        s
    }
}

fn terms(layout: &Layout, mode: usize) -> Result<Vec<Term>, NotSeparable> {
    let m = layout
        .mode(mode)
        .map_err(|e| NotSeparable(format!("{e:?}")))?;
    let mut out = Vec::new();
    let mut prefix: i64 = 1;
    for i in 0..m.leaf_count() {
        let (shape, stride) = m
            .leaf_mode(i)
            .ok_or_else(|| NotSeparable(format!("leaf {i} missing")))?;
        let rows = i64::from(ATOM_ROWS);
        let (is_col, coefficient) = if stride % rows == 0 {
            (true, stride / rows)
        } else if stride * (shape - 1) < rows {
            (false, stride)
        } else {
            return Err(NotSeparable(format!(
                "leaf {shape}:{stride} moves both row and column"
            )));
        };
        out.push(Term {
            prefix: prefix as u32,
            shape: shape as u32,
            coefficient: coefficient as u32,
            is_col,
            leaf: (shape, stride),
        });
        prefix *= shape;
    }
    Ok(out)
}

fn eval_terms(terms: &[Term], index: u32) -> (u32, u32) {
    let (mut row, mut col) = (0, 0);
    for t in terms {
        let step = (index / t.prefix) % t.shape * t.coefficient;
        if t.is_col {
            col += step;
        } else {
            row += step;
        }
    }
    (row, col)
}

/// `((var / prefix) % shape)`, simplified where prefix is 1 or the leaf is the last.
fn step_expr(var: &str, t: &Term) -> String {
    let divided = if t.prefix == 1 {
        var.to_string()
    } else {
        format!("({var} / {})", t.prefix)
    };
    format!("({divided} % {})", t.shape)
}

fn expr(terms: &[Term], var: &str, cols: bool) -> String {
    let parts: Vec<String> = terms
        .iter()
        .filter(|t| t.is_col == cols && t.coefficient != 0 && t.shape > 1)
        .map(|t| {
            let step = step_expr(var, t);
            if t.coefficient == 1 {
                step
            } else {
                format!("{} * {step}", t.coefficient)
            }
        })
        .collect();
    if parts.is_empty() {
        "0".to_string()
    } else {
        format!("({})", parts.join(" + "))
    }
}

/// Checks of the layout that the epilogues rely on.
impl FragmentMap {
    /// The epilogues store value pairs `(i, i+1)` as one 16-bit x2 register: they must be
    /// adjacent columns of the same row. Checked on the layout.
    pub fn check_adjacent_pairs(&self) -> Result<(), LayoutError> {
        for i in (0..self.values()).step_by(2) {
            if self.value_row(i) != self.value_row(i + 1)
                || self.value_col(i) + 1 != self.value_col(i + 1)
            {
                return Err(LayoutError(format!(
                    "values {i} and {} are not adjacent columns of one row",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    /// The stores by `stmatrix.m8n8.x4` (PTX ISA 9.7.14.5.16): value pair `m` (values `2m`,
    /// `2m + 1` packed in one register) of every thread of a warp must be one 8x8 b16
    /// matrix in stmatrix's fragment (lane `l` holds row `l / 4`, columns `2 (l % 4)` and
    /// `+1`), whose row `r` starts at pair `2m` of the warp's thread `4 r`, on a column that
    /// is a multiple of 8; and the pairs must come in groups of four (one `.x4` store).
    /// The kernels give lane `8 j + r` the address of row `r` of matrix `j` from thread
    /// `4 r`'s coordinates; the tile's bytes of a matrix row (8 columns) are checked by the
    /// caller.
    pub fn check_stmatrix(&self) -> Result<(), LayoutError> {
        let regs = self.values() / 2;
        if regs % 4 != 0 {
            return Err(LayoutError(format!(
                "{regs} value pairs per thread are not whole stmatrix.x4 stores"
            )));
        }
        for t in 0..128 {
            let (warp, lane) = (t / 32, t % 32);
            let row_thread = 32 * warp + 4 * (lane / 4);
            for m in 0..regs {
                let (row, col) = self.coord(t, 2 * m);
                let (row0, col0) = self.coord(row_thread, 2 * m);
                if row != row0 || col != col0 + 2 * (lane % 4) || col0 % 8 != 0 {
                    return Err(LayoutError(format!(
                        "thread {t} pair {m} at ({row}, {col}) is not lane {lane} of an 8x8 \
                         matrix whose row starts at ({row0}, {col0})"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Row distance between a thread's two row slots (8 for wgmma).
    pub fn row_slot_stride(&self) -> Result<u32, LayoutError> {
        match self.row_slots().as_slice() {
            [0, s] => Ok(*s),
            other => Err(LayoutError(format!(
                "expected two row slots, got {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_coords_match_design_fact_1() {
        for n in [64u32, 128, 256] {
            let map = FragmentMap::new(n).unwrap();
            for t in 0..128 {
                for i in 0..n / 2 {
                    let row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
                    let col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
                    assert_eq!(map.coord(t, i), (row, col), "n={n} t={t} i={i}");
                }
            }
            assert_eq!(map.row_slots(), vec![0, 8]);
        }
    }

    #[test]
    fn emitted_expressions_name_every_leaf() {
        let map = FragmentMap::new(128).unwrap();
        assert_eq!(map.thread_col_expr("lt"), "(2 * (lt % 4))");
        assert_eq!(
            map.thread_row_expr("lt"),
            "(((lt / 4) % 8) + 16 * ((lt / 32) % 4))"
        );
        assert_eq!(map.value_col_expr("i"), "((i % 2) + 8 * ((i / 4) % 16))");
        assert_eq!(map.value_row_expr("i"), "(8 * ((i / 2) % 2))");
        assert_eq!(map.value_row_slot_expr("i"), "((i / 2) % 2)");
    }
}
