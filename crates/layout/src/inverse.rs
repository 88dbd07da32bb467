//! right_inverse and left_inverse.

use crate::coalesce::coalesce;
use crate::complement::{complement, sort_modes_by_stride};
use crate::error::LayoutError;
use crate::layout::Layout;
use crate::{tri, MAX_LEAVES};

/// CuTe's `right_inverse(L)`: the largest compact `R` with `L(R(i)) == i` for all
/// `i < size(R)`. Built by sorting L's modes by stride and following the chain
/// `stride == extent of the modes so far` from 1.
///
/// ```
/// use fragmask_layout::{right_inverse, Layout};
/// let l = Layout::parse("(4,8):(8,1)").unwrap();
/// let r = right_inverse(&l).unwrap();
/// assert_eq!(r, Layout::parse("(8,4):(4,1)").unwrap());
/// for i in 0..32 { assert_eq!(l.eval(r.eval(i).unwrap()), Ok(i)); }
/// ```
pub const fn right_inverse(layout: &Layout) -> Result<Layout, LayoutError> {
    let n = layout.leaf_count();
    let mut strides = [0i64; MAX_LEAVES];
    // Encode (shape, column-major index stride) of each leaf, sorted by layout stride.
    let mut shape_and_rstride = [0i64; MAX_LEAVES];
    let mut shapes = [0i64; MAX_LEAVES];
    let mut rstrides = [0i64; MAX_LEAVES];
    let mut running: i64 = 1;
    let mut i = 0;
    while i < n {
        let (s, d) = match layout.leaf_mode(i) {
            Some(m) => m,
            None => return Err(LayoutError::Incongruent),
        };
        if d < 0 {
            return Err(LayoutError::NegativeStride);
        }
        strides[i] = d;
        shapes[i] = s;
        rstrides[i] = running;
        shape_and_rstride[i] = i as i64;
        running = match running.checked_mul(s) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
        i += 1;
    }
    // Sort leaf indices by stride (ties keep leaf order).
    sort_modes_by_stride(&mut strides, &mut shape_and_rstride, n);
    let mut out_shapes = [0i64; MAX_LEAVES];
    let mut out_strides = [0i64; MAX_LEAVES];
    let mut count = 0;
    let mut current: i64 = 1;
    let mut k = 0;
    while k < n {
        let leaf = shape_and_rstride[k] as usize;
        let s = shapes[leaf];
        k += 1;
        if s == 1 {
            continue;
        }
        if strides[k - 1] != current {
            break;
        }
        out_shapes[count] = s;
        out_strides[count] = rstrides[leaf];
        count += 1;
        current = match current.checked_mul(s) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
    }
    if count == 0 {
        return Layout::leaf(1, 0);
    }
    let (out_shapes, _) = out_shapes.split_at(count);
    let (out_strides, _) = out_strides.split_at(count);
    coalesce(&tri!(Layout::from_flat(out_shapes, out_strides)))
}

/// CuTe's `left_inverse(L) = right_inverse((L, complement(L)))`: for injective `L`,
/// `left_inverse(L)(L(i)) == i` for every `i` in L's domain.
///
/// Fails with [`LayoutError::NotInjective`] when two modes of `L` overlap or a
/// broadcast (stride-0) mode has size above 1, and with [`LayoutError::Divisibility`]
/// when L's strides are not nested multiples (then no layout is its left inverse).
///
/// ```
/// use fragmask_layout::{left_inverse, Layout};
/// let l = Layout::parse("(2,4):(4,1)").unwrap();
/// let inv = left_inverse(&l).unwrap();
/// for i in 0..8 { assert_eq!(inv.eval(l.eval(i).unwrap()), Ok(i)); }
/// ```
pub const fn left_inverse(layout: &Layout) -> Result<Layout, LayoutError> {
    let mut i = 0;
    while i < layout.leaf_count() {
        if let Some((s, d)) = layout.leaf_mode(i) {
            if s > 1 && d == 0 {
                return Err(LayoutError::NotInjective);
            }
        }
        i += 1;
    }
    let comp = tri!(complement(layout, 1));
    right_inverse(&tri!(Layout::from_modes(&[*layout, comp])))
}
