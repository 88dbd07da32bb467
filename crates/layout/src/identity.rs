//! Identity (coordinate) layouts: evaluation yields the coordinate itself.

use crate::compose::composition;
use crate::error::LayoutError;
use crate::layout::Layout;
use crate::tri;
use crate::tuple::IntTuple;

/// CuTe's `make_identity_layout(shape)`: `I(i)` is the colexicographic coordinate of
/// `i` in `shape` (CuTe represents it with basis strides `E<0>, E<1>, ...`).
///
/// ```
/// use fragmask_layout::{IdentityLayout, IntTuple};
/// let id = IdentityLayout::new(IntTuple::parse("(4,8)").unwrap()).unwrap();
/// assert_eq!(id.eval(9), Ok(IntTuple::parse("(1,2)").unwrap()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentityLayout {
    compact: Layout,
}

impl IdentityLayout {
    /// The identity layout over `shape`.
    pub const fn new(shape: IntTuple) -> Result<IdentityLayout, LayoutError> {
        Ok(IdentityLayout {
            compact: tri!(Layout::compact(shape)),
        })
    }

    /// The shape of the domain and of the coordinates.
    pub const fn shape(&self) -> IntTuple {
        self.compact.shape()
    }

    /// Number of coordinates.
    pub const fn size(&self) -> Result<i64, LayoutError> {
        self.compact.size()
    }

    /// The coordinate of `index`, congruent with the shape.
    pub const fn eval(&self, index: i64) -> Result<IntTuple, LayoutError> {
        let size = tri!(self.size());
        if index < 0 || index >= size {
            return Err(LayoutError::Incongruent);
        }
        Ok(self.compact.idx2crd(index))
    }

    /// The coordinates visited by `I ∘ layout`: `(I ∘ L)(i) = crd(L(i))`, the way CuTe
    /// partitions an identity tensor to learn which coordinates a thread owns.
    pub const fn compose_eval(&self, layout: &Layout, index: i64) -> Result<IntTuple, LayoutError> {
        let composed = tri!(composition(&self.compact, layout));
        self.eval(tri!(composed.eval(index)))
    }
}
