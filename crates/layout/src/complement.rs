//! complement(L, cotarget): the layout of the offsets L does not reach.

use crate::coalesce::filter;
use crate::error::LayoutError;
use crate::layout::Layout;
use crate::{tri, MAX_LEAVES};

/// CuTe's `complement(L, cotarget)`: a layout `C`, ordered (strictly increasing image)
/// and disjoint from `L` except at 0, such that `(L, C)` covers `[0, cotarget)` when
/// `L` is compact enough; `size(C)` rounds up so that `cosize((L, C)) >= cotarget`.
///
/// Modes of `L` are sorted by stride; each stride must be a multiple of the extent of
/// the modes below it ([`LayoutError::Divisibility`]), and no two modes may overlap
/// ([`LayoutError::NotInjective`]).
///
/// ```
/// use fragmask_layout::{complement, Layout};
/// let l = Layout::parse("(2,2):(1,6)").unwrap();
/// assert_eq!(complement(&l, 24), Ok(Layout::parse("(3,2):(2,12)").unwrap()));
/// ```
pub const fn complement(layout: &Layout, cotarget: i64) -> Result<Layout, LayoutError> {
    let filtered = tri!(filter(layout));
    // Collect (stride, shape) of the non-trivial modes and sort by stride.
    let mut strides = [0i64; MAX_LEAVES];
    let mut shapes = [0i64; MAX_LEAVES];
    let mut n = 0;
    let mut i = 0;
    while i < filtered.leaf_count() {
        if let Some((s, d)) = filtered.leaf_mode(i) {
            if d < 0 {
                return Err(LayoutError::NegativeStride);
            }
            if s != 1 && d != 0 {
                strides[n] = d;
                shapes[n] = s;
                n += 1;
            }
        }
        i += 1;
    }
    sort_modes_by_stride(&mut strides, &mut shapes, n);
    let mut out_shapes = [0i64; MAX_LEAVES];
    let mut out_strides = [0i64; MAX_LEAVES];
    let mut count = 0;
    let mut current: i64 = 1;
    let mut k = 0;
    while k < n {
        if strides[k] < current {
            return Err(LayoutError::NotInjective);
        }
        if strides[k] % current != 0 {
            return Err(LayoutError::Divisibility);
        }
        // A hole of size 1 (stride == extent so far) adds no mode; keeping it could
        // exceed the capacity for layouts whose result fits.
        let hole = strides[k] / current;
        if hole != 1 {
            if count >= MAX_LEAVES - 1 {
                return Err(LayoutError::Capacity);
            }
            out_shapes[count] = hole;
            out_strides[count] = current;
            count += 1;
        }
        current = match strides[k].checked_mul(shapes[k]) {
            Some(v) => v,
            None => return Err(LayoutError::Overflow),
        };
        k += 1;
    }
    // ceil(cotarget / current); `cotarget + current - 1` could overflow.
    let rest = if cotarget <= current {
        1
    } else {
        (cotarget - 1) / current + 1
    };
    out_shapes[count] = rest;
    out_strides[count] = current;
    count += 1;
    let (out_shapes, _) = out_shapes.split_at(count);
    let (out_strides, _) = out_strides.split_at(count);
    crate::coalesce::coalesce(&tri!(Layout::from_flat(out_shapes, out_strides)))
}

/// Insertion sort of the first `n` entries by stride (stable; n <= MAX_LEAVES).
pub(crate) const fn sort_modes_by_stride(
    strides: &mut [i64; MAX_LEAVES],
    shapes: &mut [i64; MAX_LEAVES],
    n: usize,
) {
    let mut i = 1;
    while i < n {
        let mut j = i;
        while j > 0 && strides[j - 1] > strides[j] {
            let (d, s) = (strides[j - 1], shapes[j - 1]);
            strides[j - 1] = strides[j];
            shapes[j - 1] = shapes[j];
            strides[j] = d;
            shapes[j] = s;
            j -= 1;
        }
        i += 1;
    }
}
