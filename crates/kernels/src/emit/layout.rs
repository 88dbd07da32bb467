//! A layout as an index expression: `layout(i) = Σ_leaves ((i / prefix) % shape) * stride`
//! (CuTe's `crd2idx` of the flat coordinate `idx2crd(i)`, CuTe `layout.hpp`).
//!
//! Generators use this for offsets that a layout owns outright (a thread's place in a
//! tile, a thread's place in global memory), so the emitted text and the layout cannot
//! drift apart: [`layout_offset`] builds the [`Expr`] tree, [`Expr::eval`] evaluates
//! the same tree, and the tests compare it with [`Layout::eval`] on every index.

use fragmask_layout::Layout;

use super::expr::Expr;

/// Why a layout has no unsigned index expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutExprError {
    /// A leaf has a negative stride, or a shape or stride beyond `u32`.
    Leaf {
        /// The layout, as written.
        layout: String,
        /// The offending leaf `shape:stride`.
        leaf: (i64, i64),
    },
}

impl core::fmt::Display for LayoutExprError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutExprError::Leaf { layout, leaf } => write!(
                f,
                "layout {layout}: leaf {}:{} has no unsigned 32-bit index expression",
                leaf.0, leaf.1
            ),
        }
    }
}

impl std::error::Error for LayoutExprError {}

/// `layout(index)` as an expression over `index`, valid for `index < size(layout)`
/// (the last leaf's `% shape` is dropped for that reason; size-1 leaves vanish).
pub fn layout_offset(layout: &Layout, index: Expr) -> Result<Expr, LayoutExprError> {
    let leaves: Vec<(i64, i64)> = (0..layout.leaf_count())
        .filter_map(|i| layout.leaf_mode(i))
        .collect();
    let mut sum = Expr::lit(0);
    let mut prefix: u32 = 1;
    for (i, &(shape, stride)) in leaves.iter().enumerate() {
        let bad = || LayoutExprError::Leaf {
            layout: layout.to_string(),
            leaf: (shape, stride),
        };
        let shape_u = u32::try_from(shape).map_err(|_| bad())?;
        let stride_u = u32::try_from(stride).map_err(|_| bad())?;
        if shape_u > 1 && stride_u != 0 {
            let mut coord = index.clone().div_by(prefix);
            if i + 1 < leaves.len() {
                coord = coord.rem_by(shape_u);
            }
            sum = sum.plus(coord.times(Expr::lit(stride_u)));
        }
        prefix = prefix.checked_mul(shape_u.max(1)).ok_or_else(bad)?;
    }
    Ok(sum)
}

#[cfg(test)]
#[path = "../../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flat(shapes: &[i64], strides: &[i64]) -> Layout {
        Layout::from_flat(shapes, strides).unwrap()
    }

    #[test]
    fn lightning_tiling_offsets_match_the_layout() {
        // ((8,16),(4,6)):((4,96),(1,1536)): 8 column vectors x 16 row threads.
        let thread = flat(&[8, 16], &[4, 96]);
        let e = layout_offset(&thread, Expr::Thread).unwrap();
        for t in 0..128 {
            assert_eq!(
                i64::from(e.eval(t, &[]).unwrap()),
                thread.eval(t.into()).unwrap()
            );
        }
        assert_eq!(e.cuda(&[]), "((thread % 8u) * 4u) + ((thread / 8u) * 96u)");
    }

    #[test]
    fn negative_strides_are_refused() {
        assert!(layout_offset(&flat(&[4], &[-1]), Expr::Thread).is_err());
    }

    proptest! {
        #![proptest_config(super::proptest_ci::config(128))]
        /// The emitted expression evaluates to `layout(i)` for every `i < size`.
        #[test]
        fn layout_offset_evaluates_as_the_layout(
            modes in proptest::collection::vec((1i64..6, 0i64..50), 1..5)
        ) {
            let shapes: Vec<i64> = modes.iter().map(|m| m.0).collect();
            let strides: Vec<i64> = modes.iter().map(|m| m.1).collect();
            let layout = flat(&shapes, &strides);
            let e = layout_offset(&layout, Expr::Thread).unwrap();
            for i in 0..layout.size().unwrap() {
                prop_assert_eq!(i64::from(e.eval(i as u32, &[]).unwrap()), layout.eval(i).unwrap());
            }
        }
    }
}
