//! Row and column index expressions of a tiled wgmma accumulator, derived from its TV
//! layout.
//!
//! [`TiledAccumulator::tv_layout`] maps `(thread, value)` to the column-major tile
//! offset `row + block_m * col`. Every leaf stride of its modes is either below
//! `block_m` (the leaf moves the row) or a multiple of it (the leaf moves the column),
//! and the leaves never carry into each other, so
//!
//! ```text
//! row(t, v) = row_t(t) + row_v(v)      row_t(t) = Σ_row leaves ((t / prefix) % shape) * stride
//! col(t, v) = col_t(t) + col_v(v)      col_t(t) = Σ_col leaves ((t / prefix) % shape) * stride / block_m
//! ```
//!
//! [`FragmentTerms::derive`] checks this separability on every `(thread, value)` pair
//! against [`TiledAccumulator::coord`] before any expression is handed out. The thread
//! parts become [`Expr`] trees (one term per leaf of the thread mode); the value parts
//! become per-register constants, because the emitted code unrolls over values.

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_layout::Layout;

use super::expr::Expr;
use crate::apply::CodegenError;

/// One leaf of the thread mode: `(thread / prefix) % shape` steps `row` rows and
/// `col` columns (one of the two is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadTerm {
    /// Product of the shapes of the leaves before this one.
    pub prefix: u32,
    /// The leaf's extent.
    pub shape: u32,
    /// Rows per step.
    pub row: u32,
    /// Columns per step.
    pub col: u32,
    /// The leaf as written in the layout, `shape:stride`.
    pub leaf: (i64, i64),
}

/// The separable row/column decomposition of a [`TiledAccumulator`].
#[derive(Clone, Debug)]
pub struct FragmentTerms {
    acc: TiledAccumulator,
    thread_layout: Layout,
    value_layout: Layout,
    thread_terms: Vec<ThreadTerm>,
    /// `(row_v, col_v)` per value.
    values: Vec<(u32, u32)>,
}

impl FragmentTerms {
    /// Decomposes `acc`'s TV layout and proves the decomposition on every
    /// `(thread, value)`.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_kernels::emit::FragmentTerms;
    /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let terms = FragmentTerms::derive(&acc).unwrap();
    /// // docs/architecture.md fact 1 plus warpgroup 1 at row 64: thread 133 = warpgroup 1, lane 5.
    /// assert_eq!(terms.thread_origin(133), (64 + 1, 2));
    /// assert_eq!(terms.value_offset(6), (8, 8));
    /// ```
    pub fn derive(acc: &TiledAccumulator) -> Result<FragmentTerms, CodegenError> {
        let block_m = acc.block_m() as i64;
        let thread_layout = acc.thread_layout();
        let value_layout = acc.fragment_layout();
        let leaf_terms = |layout: &Layout| -> Result<Vec<ThreadTerm>, CodegenError> {
            let mut prefix = 1i64;
            let mut out = Vec::with_capacity(layout.leaf_count());
            for i in 0..layout.leaf_count() {
                let (shape, stride) = layout.leaf_mode(i).ok_or_else(|| {
                    CodegenError::NotSeparable(format!("{layout}: leaf {i} missing"))
                })?;
                let (row, col) = if stride >= 0 && stride < block_m {
                    (stride, 0)
                } else if stride >= 0 && stride % block_m == 0 {
                    (0, stride / block_m)
                } else {
                    return Err(CodegenError::NotSeparable(format!(
                        "{layout}: leaf {shape}:{stride} moves both the row and the column of a \
                         {}-row tile",
                        acc.block_m()
                    )));
                };
                out.push(ThreadTerm {
                    prefix: prefix as u32,
                    shape: shape as u32,
                    row: row as u32,
                    col: col as u32,
                    leaf: (shape, stride),
                });
                prefix *= shape;
            }
            Ok(out)
        };
        let thread_terms = leaf_terms(&thread_layout)?;
        let value_terms = leaf_terms(&value_layout)?;
        let values = (0..acc.values_per_thread())
            .map(|v| {
                value_terms.iter().fold((0, 0), |(r, c), term| {
                    let k = v / term.prefix % term.shape;
                    (r + k * term.row, c + k * term.col)
                })
            })
            .collect();
        let terms = FragmentTerms {
            acc: *acc,
            thread_layout,
            value_layout,
            thread_terms,
            values,
        };
        for thread in 0..acc.threads() {
            let (row_t, col_t) = terms.thread_origin(thread);
            for value in 0..acc.values_per_thread() {
                let (row_v, col_v) = terms.values[value as usize];
                let ours = (row_t + row_v, col_t + col_v);
                let truth = acc.coord(thread, value)?;
                if ours != truth || ours.0 >= acc.block_m() || ours.1 >= acc.block_n() {
                    return Err(CodegenError::NotSeparable(format!(
                        "thread {thread} value {value}: terms give {ours:?}, the TV layout {truth:?}"
                    )));
                }
            }
        }
        Ok(terms)
    }

    /// The tile configuration.
    pub fn accumulator(&self) -> &TiledAccumulator {
        &self.acc
    }

    /// The thread mode, as the comments name it.
    pub fn thread_layout(&self) -> &Layout {
        &self.thread_layout
    }

    /// The value mode (the per-thread fragment `((2,2,V),MMA_M,MMA_N)`).
    pub fn value_layout(&self) -> &Layout {
        &self.value_layout
    }

    /// The leaves of the thread mode.
    pub fn thread_terms(&self) -> &[ThreadTerm] {
        &self.thread_terms
    }

    /// `(row_t, col_t)`: the tile coordinate of the thread's value 0.
    pub fn thread_origin(&self, thread: u32) -> (u32, u32) {
        self.thread_terms.iter().fold((0, 0), |(r, c), term| {
            let k = thread / term.prefix % term.shape;
            (r + k * term.row, c + k * term.col)
        })
    }

    /// `(row_v, col_v)`: the offset of value `value` from the thread's value 0.
    pub fn value_offset(&self, value: u32) -> (u32, u32) {
        self.values[value as usize]
    }

    /// The coordinate of leaf `term` for the running thread: `(thread / prefix) % shape`,
    /// without the `%` on the outermost leaf (threads never exceed it).
    fn coordinate(&self, term: &ThreadTerm) -> Expr {
        let e = Expr::Thread.div_by(term.prefix);
        if term.prefix * term.shape >= self.acc.threads() {
            e
        } else {
            e.rem_by(term.shape)
        }
    }

    fn sum(&self, pick: impl Fn(&ThreadTerm) -> u32) -> Expr {
        self.thread_terms
            .iter()
            .filter(|t| pick(t) != 0)
            .fold(Expr::lit(0), |acc, t| {
                acc.plus(self.coordinate(t).times(Expr::lit(pick(t))))
            })
    }

    /// `row_t` as an expression of the thread: one term per row leaf of the thread mode.
    pub fn thread_row(&self) -> Expr {
        self.sum(|t| t.row)
    }

    /// `col_t` as an expression of the thread: one term per column leaf.
    pub fn thread_col(&self) -> Expr {
        self.sum(|t| t.col)
    }

    /// The quad lane (`thread % 4`, gmma-frag's `quad_lane`): the coordinate of leaf 0
    /// of the thread mode, the atom's 4 lanes of a quad. Errors if that leaf is not the
    /// 4-lane leaf.
    pub fn quad_lane(&self) -> Result<Expr, CodegenError> {
        match self.thread_terms.first() {
            Some(t) if t.prefix == 1 && t.shape == 4 => Ok(self.coordinate(t)),
            _ => Err(CodegenError::NotSeparable(format!(
                "{}: leaf 0 of the thread mode is not the 4 lanes of a quad",
                self.thread_layout
            ))),
        }
    }

    /// A comment naming the thread mode, e.g.
    /// `tv_layout thread mode ((4,8,4),2):((256,1,16),64)`.
    pub fn thread_comment(&self) -> String {
        format!("tv_layout thread mode {}", self.thread_layout)
    }

    /// A comment naming the value mode.
    pub fn value_comment(&self) -> String {
        format!("tv_layout value mode {}", self.value_layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_reproduce_coord_for_fa3_configs() {
        for (bm, bn, w, swap) in [
            (128, 128, 2, false),
            (128, 128, 1, false),
            (192, 128, 3, false),
            (128, 64, 2, false),
            (64, 256, 1, false),
            (128, 128, 2, true),
            (64, 128, 1, true),
        ] {
            let acc = TiledAccumulator::new(bm, bn, w, swap).unwrap();
            let terms = FragmentTerms::derive(&acc).unwrap();
            let row = terms.thread_row();
            let col = terms.thread_col();
            for t in 0..acc.threads() {
                let (r, c) = terms.thread_origin(t);
                assert_eq!(row.eval(t, &[]), Some(r));
                assert_eq!(col.eval(t, &[]), Some(c));
            }
        }
    }

    #[test]
    fn thread_row_is_printed_from_the_leaves() {
        let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
        let terms = FragmentTerms::derive(&acc).unwrap();
        assert_eq!(
            terms.thread_row().cuda(&[]),
            "(((thread / 4u) % 8u) + (((thread / 32u) % 4u) * 16u)) + ((thread / 128u) * 64u)"
        );
        assert_eq!(terms.thread_col().cuda(&[]), "(thread % 4u) * 2u");
        assert_eq!(terms.quad_lane().unwrap().cuda(&[]), "thread % 4u");
    }
}
