//! `Layout`: a shape and a congruent stride, a function from indices to offsets.

use crate::error::LayoutError;
use crate::notation;
use crate::tuple::IntTuple;
use crate::{tri, MAX_LEAVES};

/// A CuTe layout `shape:stride`: the function `L(i) = Σ crd(i)_k · stride_k`, where
/// `crd(i)` is the colexicographic coordinate of `i` in `shape`.
///
/// ```
/// use fragmask_layout::Layout;
/// // FlashAttention-3's wgmma 64x16 accumulator (CuTe CLayout_64x16).
/// let acc = Layout::parse("((4,8,4),(2,2,2)):((128,1,16),(64,8,512))").unwrap();
/// assert_eq!(acc.size(), Ok(128 * 8));
/// assert_eq!(acc.eval(1), Ok(128)); // thread 1, value 0 -> (row 0, col 2) = 0 + 64*2
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: IntTuple,
    stride: IntTuple,
}

impl Layout {
    /// `shape:stride`. Fails with [`LayoutError::Incongruent`] if the two trees differ
    /// and [`LayoutError::NonPositiveShape`] if a shape entry is below 1.
    pub const fn new(shape: IntTuple, stride: IntTuple) -> Result<Layout, LayoutError> {
        if !shape.congruent(&stride) {
            return Err(LayoutError::Incongruent);
        }
        let mut i = 0;
        while i < shape.leaf_count() {
            if shape.leaves()[i] < 1 {
                return Err(LayoutError::NonPositiveShape);
            }
            i += 1;
        }
        tri!(shape.product());
        Ok(Layout { shape, stride })
    }

    /// The rank-0-free leaf layout `shape:stride` of integers.
    pub const fn leaf(shape: i64, stride: i64) -> Result<Layout, LayoutError> {
        Layout::new(IntTuple::int(shape), IntTuple::int(stride))
    }

    /// A compact column-major layout of `shape` (CuTe's `make_layout(shape)`).
    pub const fn compact(shape: IntTuple) -> Result<Layout, LayoutError> {
        let leaves = shape.leaves();
        let mut strides = [0i64; MAX_LEAVES];
        let mut running: i64 = 1;
        let mut i = 0;
        while i < shape.leaf_count() {
            strides[i] = running;
            running = match running.checked_mul(leaves[i]) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            i += 1;
        }
        Layout::new(shape, shape.with_leaves(&strides))
    }

    /// Flat layout from parallel arrays of shapes and strides (one mode gives a leaf
    /// layout, more give a flat tuple).
    pub const fn from_flat(shapes: &[i64], strides: &[i64]) -> Result<Layout, LayoutError> {
        if shapes.len() != strides.len() {
            return Err(LayoutError::Incongruent);
        }
        if shapes.len() == 1 {
            return Layout::leaf(shapes[0], strides[0]);
        }
        Layout::new(tri!(IntTuple::flat(shapes)), tri!(IntTuple::flat(strides)))
    }

    /// The layout whose top-level modes are `modes` (CuTe's `make_layout(L0, L1, ...)`).
    pub const fn from_modes(modes: &[Layout]) -> Result<Layout, LayoutError> {
        let mut shapes = [IntTuple::int(0); MAX_LEAVES];
        let mut strides = [IntTuple::int(0); MAX_LEAVES];
        if modes.len() > MAX_LEAVES || modes.is_empty() {
            return Err(LayoutError::Capacity);
        }
        let mut i = 0;
        while i < modes.len() {
            shapes[i] = modes[i].shape;
            strides[i] = modes[i].stride;
            i += 1;
        }
        let (shapes, _) = shapes.split_at(modes.len());
        let (strides, _) = strides.split_at(modes.len());
        Layout::new(
            tri!(IntTuple::tuple(shapes)),
            tri!(IntTuple::tuple(strides)),
        )
    }

    /// Parses CuTe notation `shape:stride`; a bare shape gets a compact column-major
    /// stride. Errors carry the byte position and what was expected.
    ///
    /// ```
    /// use fragmask_layout::{Layout, LayoutError};
    /// assert!(Layout::parse("(4,8):(8,1)").is_ok());
    /// assert_eq!(
    ///     Layout::parse("(4,8):(8"),
    ///     Err(LayoutError::Parse { position: 8, expected: "',' or ')'" })
    /// );
    /// ```
    pub const fn parse(text: &str) -> Result<Layout, LayoutError> {
        let bytes = text.as_bytes();
        let (layout, end) = tri!(Layout::parse_prefix(bytes, 0));
        let end = notation::skip_ws(bytes, end);
        if end != bytes.len() {
            return Err(LayoutError::Parse {
                position: end,
                expected: "end of input",
            });
        }
        Ok(layout)
    }

    /// Parses a layout at the start of `bytes[pos..]`; returns it and the end position.
    pub const fn parse_prefix(bytes: &[u8], pos: usize) -> Result<(Layout, usize), LayoutError> {
        let (shape, stride, end, stride_pos) = tri!(notation::parse_layout_parts(bytes, pos));
        let layout = match stride {
            Some(stride) => {
                if !shape.congruent(&stride) {
                    return Err(LayoutError::Parse {
                        position: stride_pos,
                        expected: "a stride congruent with the shape",
                    });
                }
                tri!(Layout::new(shape, stride))
            }
            None => tri!(Layout::compact(shape)),
        };
        Ok((layout, end))
    }

    /// The shape tree.
    pub const fn shape(&self) -> IntTuple {
        self.shape
    }

    /// The stride tree.
    pub const fn stride(&self) -> IntTuple {
        self.stride
    }

    /// Number of leaf modes.
    pub const fn leaf_count(&self) -> usize {
        self.shape.leaf_count()
    }

    /// Leaf `i` as `(shape, stride)`.
    pub const fn leaf_mode(&self, i: usize) -> Option<(i64, i64)> {
        match (self.shape.leaf(i), self.stride.leaf(i)) {
            (Some(s), Some(d)) => Some((s, d)),
            _ => None,
        }
    }

    /// Size of the domain: the product of the shape.
    pub const fn size(&self) -> Result<i64, LayoutError> {
        self.shape.product()
    }

    /// Size of the codomain, `L(size-1) + 1` as in CuTe.
    pub const fn cosize(&self) -> Result<i64, LayoutError> {
        let last = tri!(self.eval(tri!(self.size()) - 1));
        match last.checked_add(1) {
            Some(v) => Ok(v),
            None => Err(LayoutError::Overflow),
        }
    }

    /// Number of top-level modes.
    pub const fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Nesting depth of the shape.
    pub const fn depth(&self) -> usize {
        self.shape.depth()
    }

    /// Whether the shape is a bare integer.
    pub const fn is_leaf(&self) -> bool {
        self.shape.is_int()
    }

    /// Top-level mode `mode` (CuTe's `get<mode>` / `layout<mode>`).
    pub const fn mode(&self, mode: usize) -> Result<Layout, LayoutError> {
        Ok(Layout {
            shape: tri!(self.shape.mode(mode)),
            stride: tri!(self.stride.mode(mode)),
        })
    }

    /// The layout of the chosen top-level modes, in the given order (CuTe's `select`).
    pub const fn select(&self, modes: &[usize]) -> Result<Layout, LayoutError> {
        let mut picked = [LEAF_ONE; MAX_LEAVES];
        if modes.len() > MAX_LEAVES {
            return Err(LayoutError::Capacity);
        }
        let mut i = 0;
        while i < modes.len() {
            picked[i] = tri!(self.mode(modes[i]));
            i += 1;
        }
        let (picked, _) = picked.split_at(modes.len());
        Layout::from_modes(picked)
    }

    /// All leaves as one flat tuple of modes.
    pub const fn flatten(&self) -> Layout {
        Layout {
            shape: self.shape.flatten(),
            stride: self.stride.flatten(),
        }
    }

    /// Pads with `1:0` modes up to rank `rank` (CuTe's `append<R>`). A bare leaf layout
    /// becomes a tuple.
    pub const fn append_to_rank(&self, rank: usize) -> Result<Layout, LayoutError> {
        let mut modes = [LEAF_ONE; MAX_LEAVES];
        if rank > MAX_LEAVES {
            return Err(LayoutError::Capacity);
        }
        let own = self.rank();
        let mut i = 0;
        while i < own {
            modes[i] = tri!(self.mode(i));
            i += 1;
        }
        if own >= rank && !self.is_leaf() {
            return Ok(*self);
        }
        let total = if own > rank { own } else { rank };
        let (modes, _) = modes.split_at(total);
        Layout::from_modes(modes)
    }

    /// Evaluates `L(index)`: the index's colexicographic coordinate dotted with the
    /// strides. As in CuTe, the last leaf absorbs any index beyond the size.
    pub const fn eval(&self, index: i64) -> Result<i64, LayoutError> {
        let shapes = self.shape.leaves();
        let strides = self.stride.leaves();
        let n = self.leaf_count();
        let mut rest = index;
        let mut offset: i64 = 0;
        let mut i = 0;
        while i < n {
            let coord = if i + 1 == n { rest } else { rest % shapes[i] };
            rest /= shapes[i];
            let term = match coord.checked_mul(strides[i]) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            offset = match offset.checked_add(term) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            i += 1;
        }
        Ok(offset)
    }

    /// The coordinate of `index`, congruent with the shape (CuTe's `idx2crd`).
    pub const fn idx2crd(&self, index: i64) -> IntTuple {
        let shapes = self.shape.leaves();
        let n = self.leaf_count();
        let mut coords = [0i64; MAX_LEAVES];
        let mut rest = index;
        let mut i = 0;
        while i < n {
            coords[i] = if i + 1 == n { rest } else { rest % shapes[i] };
            rest /= shapes[i];
            i += 1;
        }
        self.shape.with_leaves(&coords)
    }

    /// Maps a coordinate to an offset (CuTe's `crd2idx`). The coordinate may be an
    /// integer (a 1-D index), congruent with the shape, or any mix: an integer at a
    /// mode stands for a 1-D index into that mode.
    pub const fn crd2idx(&self, coord: &IntTuple) -> Result<i64, LayoutError> {
        if coord.is_int() {
            return self.eval(coord.leaves()[0]);
        }
        if self.is_leaf() || coord.rank() != self.rank() {
            return Err(LayoutError::Incongruent);
        }
        let mut sum: i64 = 0;
        let mut m = 0;
        while m < self.rank() {
            let part = tri!(tri!(self.mode(m)).crd2idx(&tri!(coord.mode(m))));
            sum = match sum.checked_add(part) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            m += 1;
        }
        Ok(sum)
    }

    /// Whether the two layouts are equal (usable in `const` contexts).
    pub const fn const_eq(&self, other: &Layout) -> bool {
        self.shape.const_eq(&other.shape) && self.stride.const_eq(&other.stride)
    }
}

/// `1:0`, the neutral layout used as a filler.
pub(crate) const LEAF_ONE: Layout = Layout {
    shape: IntTuple::int(1),
    stride: IntTuple::int(0),
};

impl core::fmt::Display for Layout {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}:{}", self.shape, self.stride)
    }
}
