//! Products: reproduce a block layout over a tiler layout.

use crate::complement::complement;
use crate::compose::composition;
use crate::error::LayoutError;
use crate::layout::{Layout, LEAF_ONE};
use crate::{tri, MAX_LEAVES};

/// CuTe's `logical_product(A, B) = (A, complement(A, size(A)·cosize(B)) ∘ B)`:
/// mode 0 is the block, mode 1 places copies of it as B describes.
///
/// An integer tiler `n` means the layout `n:1` (CuTe). pycute's
/// `logical_product(A, int)` calls `logical_divide` instead, a known bug we do not
/// follow.
///
/// ```
/// use fragmask_layout::{logical_product, Layout};
/// let a = Layout::parse("(2,2):(4,1)").unwrap();
/// let b = Layout::parse("6:1").unwrap();
/// assert_eq!(logical_product(&a, &b), Ok(Layout::parse("((2,2),(2,3)):((4,1),(2,8))").unwrap()));
/// ```
pub const fn logical_product(a: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    let cotarget = match tri!(a.size()).checked_mul(tri!(tiler.cosize())) {
        Some(v) => v,
        None => return Err(LayoutError::Overflow),
    };
    let rest = tri!(composition(&tri!(complement(a, cotarget)), tiler));
    Layout::from_modes(&[*a, rest])
}

/// `logical_product` of each top-level mode of `a` with the matching tiler; modes of
/// `a` past the tilers are kept.
pub const fn logical_product_by_mode(a: &Layout, tilers: &[Layout]) -> Result<Layout, LayoutError> {
    if tilers.is_empty() || tilers.len() > a.rank() {
        return Err(LayoutError::Incongruent);
    }
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < a.rank() {
        let mode = tri!(a.mode(m));
        modes[m] = if m < tilers.len() {
            tri!(logical_product(&mode, &tilers[m]))
        } else {
            mode
        };
        m += 1;
    }
    let (modes, _) = modes.split_at(a.rank());
    Layout::from_modes(modes)
}

/// CuTe's `blocked_product(block, tiler)`: with `R = max(rank)`, both padded to rank
/// R, `(P0, P1) = logical_product(block, tiler)` and the result is
/// `zip(P0, P1) = ((block_0, tiler_0'), (block_1, tiler_1'), ...)`. Each block stays
/// contiguous; copies are laid out as the tiler says.
///
/// ```
/// use fragmask_layout::{blocked_product, Layout};
/// let block = Layout::parse("(2,5):(5,1)").unwrap();
/// let tiler = Layout::parse("(3,4):(1,3)").unwrap();
/// assert_eq!(
///     blocked_product(&block, &tiler),
///     Ok(Layout::parse("((2,3),(5,4)):((5,10),(1,30))").unwrap())
/// );
/// ```
pub const fn blocked_product(block: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    zip_product(block, tiler, false)
}

/// CuTe's `raked_product(block, tiler)`: like [`blocked_product`] but zipped the other
/// way, `((tiler_0', block_0), ...)`, so the copies interleave element by element.
///
/// ```
/// use fragmask_layout::{raked_product, Layout};
/// let block = Layout::parse("(2,5):(5,1)").unwrap();
/// let tiler = Layout::parse("(3,4):(1,3)").unwrap();
/// assert_eq!(
///     raked_product(&block, &tiler),
///     Ok(Layout::parse("((3,2),(4,5)):((10,5),(30,1))").unwrap())
/// );
/// ```
pub const fn raked_product(block: &Layout, tiler: &Layout) -> Result<Layout, LayoutError> {
    zip_product(block, tiler, true)
}

const fn zip_product(
    block: &Layout,
    tiler: &Layout,
    tiler_first: bool,
) -> Result<Layout, LayoutError> {
    let rank = if block.rank() > tiler.rank() {
        block.rank()
    } else {
        tiler.rank()
    };
    let block = tri!(block.append_to_rank(rank));
    let tiler = tri!(tiler.append_to_rank(rank));
    let product = tri!(logical_product(&block, &tiler));
    let blocks = tri!(product.mode(0));
    let copies = tri!(product.mode(1));
    let mut modes = [LEAF_ONE; MAX_LEAVES];
    let mut m = 0;
    while m < rank {
        let (first, second) = if tiler_first {
            (tri!(copies.mode(m)), tri!(blocks.mode(m)))
        } else {
            (tri!(blocks.mode(m)), tri!(copies.mode(m)))
        };
        modes[m] = tri!(Layout::from_modes(&[first, second]));
        m += 1;
    }
    let (modes, _) = modes.split_at(rank);
    Layout::from_modes(modes)
}
