//! Functional composition `R = A ∘ B`, `R(i) = A(B(i))`.

use crate::coalesce::coalesce;
use crate::error::LayoutError;
use crate::layout::{Layout, LEAF_ONE};
use crate::{tri, MAX_LEAVES};

/// `A ∘ B` with CuTe's semantics: the result has B's shape structure (each leaf of B
/// may expand into a tuple) and `R(i) == A(B(i))` for every `i` in B's domain.
///
/// As in CuTe, `R` is `(A ∘ B_0, A ∘ B_1, ...)` over B's modes, which is `A ∘ B` when B
/// is injective apart from broadcast (stride-0) modes ("when B is injective,
/// composition is left-distributive with concatenation", CuTe's layout-algebra
/// notes). If B's modes overlap, e.g. `(2,2):(2,2)`, `R` agrees with `A ∘ B` along
/// each leaf of B but not where A's modes carry. Indices B maps past `size(A)` are
/// evaluated in `coalesce(A)`, whose last mode extends.
///
/// Fails with [`LayoutError::Divisibility`] when the strong divisibility condition of
/// CuTe's layout-algebra notes does not hold (each of A's coalesced mode sizes must
/// divide, or be divided by, the remaining stride, and the remaining shape must divide
/// accordingly), because then no layout represents `A ∘ B` exactly. B needs
/// non-negative strides.
///
/// ```
/// use fragmask_layout::{composition, Layout};
/// let a = Layout::parse("(6,2):(8,2)").unwrap();
/// let b = Layout::parse("(4,3):(3,1)").unwrap();
/// let r = composition(&a, &b).unwrap();
/// assert_eq!(r, Layout::parse("((2,2),3):((24,2),8)").unwrap());
/// ```
pub const fn composition(a: &Layout, b: &Layout) -> Result<Layout, LayoutError> {
    if b.is_leaf() {
        let (s, d) = match b.leaf_mode(0) {
            Some(m) => m,
            None => return Err(LayoutError::Incongruent),
        };
        return compose_leaf(a, s, d);
    }
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < b.rank() {
        modes[m] = tri!(composition(a, &tri!(b.mode(m))));
        m += 1;
    }
    let (modes, _) = modes.split_at(b.rank());
    Layout::from_modes(modes)
}

/// Composes each top-level mode of `a` with the matching entry of `tilers`
/// (CuTe's composition with a tuple tiler); modes of `a` past the tilers are kept.
pub const fn composition_by_mode(a: &Layout, tilers: &[Layout]) -> Result<Layout, LayoutError> {
    if tilers.len() > a.rank() || tilers.is_empty() {
        return Err(LayoutError::Incongruent);
    }
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < a.rank() {
        let mode = tri!(a.mode(m));
        modes[m] = if m < tilers.len() {
            tri!(composition(&mode, &tilers[m]))
        } else {
            mode
        };
        m += 1;
    }
    let (modes, _) = modes.split_at(a.rank());
    Layout::from_modes(modes)
}

/// `A ∘ (shape:stride)` for one leaf of B.
const fn compose_leaf(a: &Layout, shape: i64, stride: i64) -> Result<Layout, LayoutError> {
    if stride < 0 {
        return Err(LayoutError::NegativeStride);
    }
    if stride == 0 {
        return Layout::leaf(shape, 0);
    }
    let flat = tri!(coalesce(a));
    let n = flat.leaf_count();
    let mut shapes = [0i64; MAX_LEAVES];
    let mut strides = [0i64; MAX_LEAVES];
    let mut count = 0usize;
    let mut rest_shape = shape;
    let mut rest_stride = stride;
    let mut k = 0;
    while k + 1 < n {
        let (curr_shape, curr_stride) = match flat.leaf_mode(k) {
            Some(m) => m,
            None => return Err(LayoutError::Incongruent),
        };
        k += 1;
        if rest_shape == 1 {
            // B is exhausted; later modes of A cannot affect the result.
            break;
        }
        // Stride divisibility: curr_shape % rest_stride == 0 or rest_stride % curr_shape == 0.
        if curr_shape % rest_stride != 0 && rest_stride % curr_shape != 0 {
            return Err(LayoutError::Divisibility);
        }
        let mut new_shape = curr_shape / rest_stride;
        if new_shape < 1 {
            new_shape = 1;
        }
        if new_shape > rest_shape {
            new_shape = rest_shape;
        }
        // Shape divisibility.
        if rest_shape % new_shape != 0 {
            return Err(LayoutError::Divisibility);
        }
        if new_shape != 1 {
            shapes[count] = new_shape;
            strides[count] = match rest_stride.checked_mul(curr_stride) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            count += 1;
        }
        rest_shape /= new_shape;
        // ceil(rest_stride / curr_shape) without the `+ curr_shape - 1` that can overflow.
        rest_stride = rest_stride / curr_shape + (rest_stride % curr_shape != 0) as i64;
    }
    if rest_shape != 1 || count == 0 {
        let last_stride = match flat.leaf_mode(n - 1) {
            Some((_, d)) => d,
            None => return Err(LayoutError::Incongruent),
        };
        shapes[count] = rest_shape;
        strides[count] = match rest_stride.checked_mul(last_stride) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
        count += 1;
    }
    let (shapes, _) = shapes.split_at(count);
    let (strides, _) = strides.split_at(count);
    Layout::from_flat(shapes, strides)
}
