//! The tiling of the state `[D, E]` (row-major, fp32) among one CTA's threads, as a
//! thread–value layout in the CuTe sense: `(thread, value) → offset` in the row-major
//! state, offset `row * E + col`.
//!
//! ```text
//! thread: (col_vectors, row_threads) : (4, E)          thread t starts at row t / cv, col 4 (t % cv)
//! value:  (4, rows_per_thread)       : (1, row_threads·E)   a float4 per row, rows row_threads apart
//! split:  (splits)                   : (4 cv)               the CTA's first column
//! ```
//!
//! A warp covers `32 / cv` whole rows of `4 cv` consecutive floats, so each state
//! load and store of a warp is `32 / cv` fully used segments of `16 cv` bytes
//! (coalesced), and no shared memory holds the state (no bank conflicts).

use fragmask_layout::Layout;

use super::config::{ConfigError, LightningConfig, VECTOR};
use crate::emit::{layout_offset, Expr, LayoutExprError};

/// The thread–value layout of the state among a CTA's threads.
#[derive(Clone, Debug)]
pub struct StateTiling {
    config: LightningConfig,
    thread: Layout,
    value: Layout,
    split: Layout,
}

fn flat(shapes: &[i64], strides: &[i64]) -> Result<Layout, ConfigError> {
    Layout::from_flat(shapes, strides).map_err(|e| ConfigError(format!("tiling layout: {e}")))
}

impl StateTiling {
    /// The tiling of `config`.
    pub fn new(config: LightningConfig) -> Result<StateTiling, ConfigError> {
        let config = config.validate()?;
        let e = i64::from(config.dim_v);
        let cv = i64::from(config.col_vectors);
        let rt = i64::from(config.row_threads());
        Ok(StateTiling {
            config,
            thread: flat(&[cv, rt], &[i64::from(VECTOR), e])?,
            value: flat(
                &[i64::from(VECTOR), i64::from(config.rows_per_thread())],
                &[1, rt * e],
            )?,
            split: flat(
                &[i64::from(config.splits())],
                &[i64::from(config.cols_per_cta())],
            )?,
        })
    }

    /// `thread → offset` of the thread's first element.
    pub fn thread_layout(&self) -> &Layout {
        &self.thread
    }

    /// `value → offset` from the thread's first element.
    pub fn value_layout(&self) -> &Layout {
        &self.value
    }

    /// `split → column` of a CTA's first column.
    pub fn split_layout(&self) -> &Layout {
        &self.split
    }

    /// The row and column layouts of a row-major offset layout: each leaf moves either
    /// the column (stride < E) or the row (stride a multiple of E).
    fn separate(&self, layout: &Layout) -> Result<(Layout, Layout), ConfigError> {
        let e = i64::from(self.config.dim_v);
        let (mut shapes, mut rows, mut cols) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..layout.leaf_count() {
            if let Some((shape, stride)) = layout.leaf_mode(i) {
                shapes.push(shape);
                let (r, c) = if stride % e == 0 {
                    (stride / e, 0)
                } else {
                    (0, stride)
                };
                rows.push(r);
                cols.push(c);
            }
        }
        Ok((flat(&shapes, &rows)?, flat(&shapes, &cols)?))
    }

    /// The thread's first row and column as expressions of `thread`.
    pub fn thread_row_col(&self) -> Result<(Expr, Expr), ConfigError> {
        let (rows, cols) = self.separate(&self.thread)?;
        let expr = |l: &Layout| {
            layout_offset(l, Expr::Thread).map_err(|e: LayoutExprError| ConfigError(e.to_string()))
        };
        Ok((expr(&rows)?, expr(&cols)?))
    }

    /// The row offset of each of the thread's `float4` rows (value index `4 i`).
    pub fn value_rows(&self) -> Vec<u32> {
        let e = i64::from(self.config.dim_v);
        (0..self.config.rows_per_thread())
            .map(|i| {
                let offset = self.value.eval(i64::from(VECTOR * i)).unwrap_or(0);
                (offset / e) as u32
            })
            .collect()
    }

    /// Every `(row, col)` of a CTA's `D × cols_per_cta` tile, by `(thread, value)`.
    pub fn coords(&self) -> Vec<(u32, u32)> {
        let e = i64::from(self.config.dim_v);
        let values = i64::from(VECTOR * self.config.rows_per_thread());
        let mut out = Vec::new();
        for t in 0..i64::from(self.config.threads) {
            for v in 0..values {
                let off = self.thread.eval(t).unwrap_or(0) + self.value.eval(v).unwrap_or(0);
                out.push(((off / e) as u32, (off % e) as u32));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::dtype::ActDtype;

    #[test]
    fn tiling_covers_each_element_of_the_cta_tile_once() {
        for (d, e) in [(96, 96), (128, 128), (64, 64), (256, 256)] {
            for config in LightningConfig::candidates(d, e, ActDtype::Bf16) {
                let tiling = StateTiling::new(config).unwrap();
                let mut seen = vec![0u32; (d * config.cols_per_cta()) as usize];
                for (row, col) in tiling.coords() {
                    assert!(
                        row < d && col < config.cols_per_cta(),
                        "{config:?}: ({row},{col})"
                    );
                    seen[(row * config.cols_per_cta() + col) as usize] += 1;
                }
                assert!(seen.iter().all(|&n| n == 1), "{config:?}");
            }
        }
    }

    #[test]
    fn row_and_column_expressions_match_the_thread_layout() {
        let config = LightningConfig::new(96, 96, ActDtype::Bf16, 8).unwrap();
        let tiling = StateTiling::new(config).unwrap();
        let (row, col) = tiling.thread_row_col().unwrap();
        for t in 0..config.threads {
            let off = tiling.thread_layout().eval(t.into()).unwrap();
            let (r, c) = (row.eval(t, &[]).unwrap(), col.eval(t, &[]).unwrap());
            assert_eq!(i64::from(r * 96 + c), off);
        }
        assert_eq!(tiling.value_rows(), vec![0, 16, 32, 48, 64, 80]);
    }

    #[test]
    fn a_warp_touches_whole_segments_of_consecutive_floats() {
        let config = LightningConfig::new(96, 96, ActDtype::Bf16, 8).unwrap();
        let tiling = StateTiling::new(config).unwrap();
        // Warp 0, value 0: lanes cover rows 0..4, each 32 consecutive floats (128 bytes).
        let mut rows = std::collections::BTreeMap::<u32, Vec<u32>>::new();
        for lane in 0..32 {
            let (r, c) = tiling.coords()[(lane * 4 * config.rows_per_thread()) as usize];
            rows.entry(r).or_default().push(c);
        }
        assert_eq!(rows.len(), 4);
        for cols in rows.values() {
            assert_eq!(cols, &(0..8).map(|i| 4 * i).collect::<Vec<_>>());
        }
    }
}
