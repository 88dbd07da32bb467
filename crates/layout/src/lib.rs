//! A layout algebra in the CuTe style (NVIDIA/cutlass `include/cute/layout.hpp`,
//! `python/pycute/layout.py`), `#![no_std]` with no allocation, every operation a
//! `const fn` so tile configurations can be checked at compile time.
//!
//! A [`Layout`] is a shape and a congruent stride, nested integer tuples
//! ([`IntTuple`]). It is the function from a 1-D index (colexicographic coordinates)
//! to an offset. The algebra: [`coalesce`], [`filter`], [`composition`],
//! [`complement`], [`right_inverse`], [`left_inverse`], the divides
//! ([`logical_divide`], [`zipped_divide`], [`tiled_divide`]) and products
//! ([`logical_product`], [`blocked_product`], [`raked_product`]), identity layouts
//! and [`Swizzle`].
//!
//! Capacity: at most [`MAX_LEAVES`] leaves and nesting depth [`MAX_DEPTH`] per tuple.
//! Every failure is a typed [`LayoutError`]; nothing wraps or truncates.
//!
//! ```
//! use fragmask_layout::{composition, Layout};
//! const ACC: Layout = match Layout::parse("((4,8,4),(2,2,16)):((128,1,16),(64,8,512))") {
//!     Ok(l) => l,
//!     Err(_) => panic!("bad layout"),
//! };
//! const SIZE: i64 = match ACC.size() { Ok(s) => s, Err(_) => 0 };
//! static_assertions::const_assert_eq!(SIZE, 128 * 64);
//! ```
#![no_std]
#![deny(missing_docs)]

mod coalesce;
mod complement;
mod compose;
mod divide;
mod error;
mod identity;
mod inverse;
mod layout;
mod notation;
mod product;
mod swizzle;
mod tuple;

pub use coalesce::{coalesce, coalesce_modes, filter};
pub use complement::complement;
pub use compose::{composition, composition_by_mode};
pub use divide::{
    logical_divide, logical_divide_by_mode, tiled_divide, tiled_divide_by_mode, zipped_divide,
    zipped_divide_by_mode,
};
pub use error::LayoutError;
pub use identity::IdentityLayout;
pub use inverse::{left_inverse, right_inverse};
pub use layout::Layout;
pub use product::{blocked_product, logical_product, logical_product_by_mode, raked_product};
pub use swizzle::{Swizzle, SwizzledLayout};
pub use tuple::IntTuple;

/// Most leaves an [`IntTuple`] (and so a [`Layout`]) can hold.
pub const MAX_LEAVES: usize = 16;
/// Deepest nesting of an [`IntTuple`]: `((((1))))` has depth 4.
pub const MAX_DEPTH: usize = 4;
