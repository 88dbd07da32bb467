//! coalesce and filter: simplify a layout while keeping its function.

use crate::error::LayoutError;
use crate::layout::{Layout, LEAF_ONE};
use crate::{tri, MAX_LEAVES};

/// Flattens and merges modes while preserving the function `i -> L(i)` on the domain
/// (CuTe's `coalesce(layout)`). Size-1 modes are dropped; mode `j` merges into the
/// previous mode `i` when `shape_i * stride_i == stride_j`.
///
/// ```
/// use fragmask_layout::{coalesce, Layout};
/// let l = Layout::parse("(2,(1,6)):(1,(6,2))").unwrap();
/// assert_eq!(coalesce(&l), Ok(Layout::parse("12:1").unwrap()));
/// ```
pub const fn coalesce(layout: &Layout) -> Result<Layout, LayoutError> {
    let mut shapes = [0i64; MAX_LEAVES];
    let mut strides = [0i64; MAX_LEAVES];
    shapes[0] = 1;
    let mut n = 1usize;
    let mut i = 0;
    while i < layout.leaf_count() {
        let (s, d) = match layout.leaf_mode(i) {
            Some(m) => m,
            None => return Err(LayoutError::Incongruent),
        };
        i += 1;
        if s == 1 {
            continue;
        } else if shapes[n - 1] == 1 {
            shapes[n - 1] = s;
            strides[n - 1] = d;
        } else if matches!(shapes[n - 1].checked_mul(strides[n - 1]), Some(e) if e == d) {
            shapes[n - 1] *= s;
        } else {
            shapes[n] = s;
            strides[n] = d;
            n += 1;
        }
    }
    let (shapes, _) = shapes.split_at(n);
    let (strides, _) = strides.split_at(n);
    Layout::from_flat(shapes, strides)
}

/// Coalesces each top-level mode separately, keeping the rank (CuTe's
/// `coalesce(layout, profile)` with a flat profile of the layout's rank).
///
/// ```
/// use fragmask_layout::{coalesce_modes, Layout};
/// let l = Layout::parse("((2,4),(1,8)):((1,2),(0,8))").unwrap();
/// assert_eq!(coalesce_modes(&l), Ok(Layout::parse("(8,8):(1,8)").unwrap()));
/// ```
pub const fn coalesce_modes(layout: &Layout) -> Result<Layout, LayoutError> {
    if layout.is_leaf() {
        return coalesce(layout);
    }
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < layout.rank() {
        modes[m] = tri!(coalesce(&tri!(layout.mode(m))));
        m += 1;
    }
    let (modes, _) = modes.split_at(layout.rank());
    Layout::from_modes(modes)
}

/// Drops stride-0 and size-1 modes, then coalesces (CuTe's `filter`). The result's
/// image is the set of distinct offsets of `layout` reached without repetition from
/// broadcast modes; all-broadcast layouts give `1:0`.
///
/// ```
/// use fragmask_layout::{filter, Layout};
/// let l = Layout::parse("(4,2,3):(1,0,4)").unwrap();
/// assert_eq!(filter(&l), Ok(Layout::parse("12:1").unwrap()));
/// ```
pub const fn filter(layout: &Layout) -> Result<Layout, LayoutError> {
    let mut shapes = [0i64; MAX_LEAVES];
    let mut strides = [0i64; MAX_LEAVES];
    let mut n = 0usize;
    let mut i = 0;
    while i < layout.leaf_count() {
        if let Some((s, d)) = layout.leaf_mode(i) {
            if s != 1 && d != 0 {
                shapes[n] = s;
                strides[n] = d;
                n += 1;
            }
        }
        i += 1;
    }
    if n == 0 {
        return Ok(LEAF_ONE);
    }
    let (shapes, _) = shapes.split_at(n);
    let (strides, _) = strides.split_at(n);
    coalesce(&tri!(Layout::from_flat(shapes, strides)))
}
