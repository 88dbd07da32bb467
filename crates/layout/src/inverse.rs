//! right_inverse and left_inverse.

use crate::coalesce::coalesce;
use crate::complement::sort_modes_by_stride;
use crate::error::LayoutError;
use crate::layout::{Layout, LEAF_ONE};
use crate::{tri, MAX_LEAVES};

/// CuTe's `right_inverse(L)`: the largest compact `R` with `L(R(i)) == i` for all
/// `i < size(R)`. Built by sorting L's modes by stride and following the chain
/// `stride == extent of the modes so far` from 1; modes whose stride is below the
/// chain (broadcast stride-0 modes, overlaps) are skipped. Negative strides give
/// [`LayoutError::NegativeStride`] (CuTe would use their absolute value).
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
        // As in CuTe's right_inverse: strides below the chain (stride 0, overlaps) are
        // skipped, the first stride above it ends the chain.
        if s == 1 || strides[k - 1] < current {
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

/// CuTe's `left_inverse(L)` (`include/cute/layout.hpp`): for injective `L`,
/// `left_inverse(L)(L(i)) == i` for every `i` in L's domain.
///
/// With L's non-trivial leaves sorted by stride `d_0 < d_1 < ... < d_k` (shapes `s_j`,
/// column-major index strides `p_j`), the result is
/// `(d_0, d_1/d_0, ..., d_k/d_(k-1), s_k) : (0, p_0, ..., p_(k-1), p_k)`: it reads the
/// offset's digits in the mixed radix of L's strides. Offsets L does not reach map to
/// some index too; only L's image is specified. This is CuTe C++'s result since CUTLASS
/// v3.9; pycute and older CuTe return `right_inverse((L, complement(L)))`, which agrees
/// on L's image only (docs/calculator.md).
///
/// Fails with [`LayoutError::Divisibility`] when a stride does not divide the next one
/// (CuTe's "left inverse divisibility condition"), with [`LayoutError::NotInjective`]
/// when a broadcast (stride-0) mode has size above 1 or a mode reaches the next stride
/// (`s_j * d_j > d_(j+1)`, which then repeats an offset), and with
/// [`LayoutError::NegativeStride`].
///
/// ```
/// use fragmask_layout::{left_inverse, Layout};
/// let l = Layout::parse("(2,4):(4,1)").unwrap();
/// let inv = left_inverse(&l).unwrap();
/// assert_eq!(inv, Layout::parse("(4,2):(2,1)").unwrap());
/// for i in 0..8 { assert_eq!(inv.eval(l.eval(i).unwrap()), Ok(i)); }
/// // Strides need only divide each other, not be multiples of the extents below.
/// let l = Layout::parse("(2,2):(1,3)").unwrap();
/// let inv = left_inverse(&l).unwrap();
/// for i in 0..4 { assert_eq!(inv.eval(l.eval(i).unwrap()), Ok(i)); }
/// ```
pub const fn left_inverse(layout: &Layout) -> Result<Layout, LayoutError> {
    let flat = tri!(coalesce(layout));
    let n = flat.leaf_count();
    let mut strides = [0i64; MAX_LEAVES];
    let mut leaf_of = [0i64; MAX_LEAVES];
    let mut shapes = [0i64; MAX_LEAVES];
    let mut prefix = [0i64; MAX_LEAVES];
    let mut count = 0;
    let mut running: i64 = 1;
    let mut i = 0;
    while i < n {
        let (s, d) = match flat.leaf_mode(i) {
            Some(m) => m,
            None => return Err(LayoutError::Incongruent),
        };
        if d < 0 {
            return Err(LayoutError::NegativeStride);
        }
        if s > 1 {
            if d == 0 {
                return Err(LayoutError::NotInjective);
            }
            strides[count] = d;
            shapes[count] = s;
            prefix[count] = running;
            leaf_of[count] = count as i64;
            count += 1;
        }
        running = match running.checked_mul(s) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
        i += 1;
    }
    if count == 0 {
        return Ok(LEAF_ONE);
    }
    sort_modes_by_stride(&mut strides, &mut leaf_of, count);
    let mut out_shapes = [0i64; MAX_LEAVES];
    let mut out_strides = [0i64; MAX_LEAVES];
    // Offsets below the smallest stride read as 0; a size-1 mode is left out so that
    // 16 leaves still fit.
    let mut written = 0;
    if strides[0] > 1 {
        out_shapes[0] = strides[0];
        out_strides[0] = 0;
        written = 1;
    }
    if written + count > MAX_LEAVES {
        return Err(LayoutError::Capacity);
    }
    let mut k = 1;
    while k < count {
        let below = leaf_of[k - 1] as usize;
        let reach = match strides[k - 1].checked_mul(shapes[below]) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
        // Divisibility first: with it, a mode reaching past the next stride repeats an
        // offset, so NotInjective is only reported for a layout that is not injective.
        if strides[k] % strides[k - 1] != 0 {
            return Err(LayoutError::Divisibility);
        }
        if reach > strides[k] {
            return Err(LayoutError::NotInjective);
        }
        out_shapes[written] = strides[k] / strides[k - 1];
        out_strides[written] = prefix[below];
        written += 1;
        k += 1;
    }
    let top = leaf_of[count - 1] as usize;
    out_shapes[written] = shapes[top];
    out_strides[written] = prefix[top];
    written += 1;
    let (out_shapes, _) = out_shapes.split_at(written);
    let (out_strides, _) = out_strides.split_at(written);
    coalesce(&tri!(Layout::from_flat(out_shapes, out_strides)))
}
