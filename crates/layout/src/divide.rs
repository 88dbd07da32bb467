//! Divides: split a layout into tiles (first mode) and the tiling of those tiles.

use crate::complement::complement;
use crate::compose::composition;
use crate::error::LayoutError;
use crate::layout::{Layout, LEAF_ONE};
use crate::{tri, MAX_LEAVES};

/// CuTe's `logical_divide(A, B) = A ∘ (B, complement(B, size(A)))`: mode 0 of the
/// result is the tile B selects, mode 1 iterates over the tiles.
///
/// ```
/// use fragmask_layout::{logical_divide, Layout};
/// let a = Layout::parse("(4,2,3):(2,1,8)").unwrap();
/// let b = Layout::parse("4:2").unwrap();
/// assert_eq!(logical_divide(&a, &b), Ok(Layout::parse("((2,2),(2,3)):((4,1),(2,8))").unwrap()));
/// ```
pub const fn logical_divide(a: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    let rest = tri!(complement(tiler, tri!(a.size())));
    composition(a, &tri!(Layout::from_modes(&[*tiler, rest])))
}

/// `logical_divide` applied to each top-level mode of `a` with the matching tiler
/// (CuTe's divide by a tuple tiler). Modes of `a` past the tilers are kept whole.
pub const fn logical_divide_by_mode(a: &Layout, tilers: &[Layout]) -> Result<Layout, LayoutError> {
    if tilers.is_empty() || tilers.len() > a.rank() {
        return Err(LayoutError::Incongruent);
    }
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < a.rank() {
        let mode = tri!(a.mode(m));
        modes[m] = if m < tilers.len() {
            tri!(logical_divide(&mode, &tilers[m]))
        } else {
            mode
        };
        m += 1;
    }
    let (modes, _) = modes.split_at(a.rank());
    Layout::from_modes(modes)
}

/// CuTe's `zipped_divide` by one layout tiler: `(tile, rest)`, the same as
/// [`logical_divide`].
pub const fn zipped_divide(a: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    logical_divide(a, tiler)
}

/// CuTe's `zipped_divide` by a tuple of tilers, one per leading mode of `a`:
/// `((tile0, tile1, ...), (rest0, rest1, ..., untiled modes...))`.
///
/// ```
/// use fragmask_layout::{zipped_divide_by_mode, Layout};
/// let a = Layout::parse("(8,16):(1,8)").unwrap();
/// let tilers = [Layout::parse("4:1").unwrap(), Layout::parse("8:1").unwrap()];
/// assert_eq!(
///     zipped_divide_by_mode(&a, &tilers),
///     Ok(Layout::parse("((4,8),(2,2)):((1,8),(4,64))").unwrap())
/// );
/// ```
pub const fn zipped_divide_by_mode(a: &Layout, tilers: &[Layout]) -> Result<Layout, LayoutError> {
    let (tiles, rests, n_rests) = tri!(split_tiles(a, tilers));
    let (rests, _) = rests.split_at(n_rests);
    Layout::from_modes(&[tiles, tri!(Layout::from_modes(rests))])
}

/// CuTe's `tiled_divide` by one layout tiler: `(tile, rest0, rest1, ...)` where the
/// rests are the top-level modes of the rest.
pub const fn tiled_divide(a: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    let divided = tri!(logical_divide(a, tiler));
    let rest = tri!(divided.mode(1));
    let mut rests = [LEAF_ONE; MAX_LEAVES];
    let mut i = 0;
    while i < rest.rank() {
        rests[i] = tri!(rest.mode(i));
        i += 1;
    }
    tile_then_rests(tri!(divided.mode(0)), &rests, rest.rank())
}

/// CuTe's `tiled_divide` by a tuple of tilers: `((tile0, tile1, ...), rest0, rest1, ...)`.
///
/// ```
/// use fragmask_layout::{tiled_divide_by_mode, Layout};
/// let a = Layout::parse("(8,16):(1,8)").unwrap();
/// let tilers = [Layout::parse("4:1").unwrap(), Layout::parse("8:1").unwrap()];
/// assert_eq!(
///     tiled_divide_by_mode(&a, &tilers),
///     Ok(Layout::parse("((4,8),2,2):((1,8),4,64)").unwrap())
/// );
/// ```
pub const fn tiled_divide_by_mode(a: &Layout, tilers: &[Layout]) -> Result<Layout, LayoutError> {
    let (tiles, rests, n_rests) = tri!(split_tiles(a, tilers));
    tile_then_rests(tiles, &rests, n_rests)
}

const fn tile_then_rests(
    tile: Layout,
    rests: &[Layout; MAX_LEAVES],
    n_rests: usize,
) -> Result<Layout, LayoutError> {
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    if n_rests + 1 > MAX_LEAVES {
        return Err(LayoutError::Capacity);
    }
    modes[0] = tile;
    let mut i = 0;
    while i < n_rests {
        modes[i + 1] = rests[i];
        i += 1;
    }
    let (modes, _) = modes.split_at(n_rests + 1);
    Layout::from_modes(modes)
}

/// Divides mode by mode and returns (tile modes as one layout, rest modes, count).
const fn split_tiles(
    a: &Layout,
    tilers: &[Layout],
) -> Result<(Layout, [Layout; MAX_LEAVES], usize), LayoutError> {
    let divided = tri!(logical_divide_by_mode(a, tilers));
    let mut tiles = [LEAF_ONE; MAX_LEAVES];
    let mut rests = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < a.rank() {
        let mode = tri!(divided.mode(m));
        if m < tilers.len() {
            tiles[m] = tri!(mode.mode(0));
            rests[m] = tri!(mode.mode(1));
        } else {
            rests[m] = mode;
        }
        m += 1;
    }
    let (tiles, _) = tiles.split_at(tilers.len());
    Ok((tri!(Layout::from_modes(tiles)), rests, a.rank()))
}
