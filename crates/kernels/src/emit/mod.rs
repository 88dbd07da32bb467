//! Index math emitted from layouts: expression trees and the separable row/column
//! decomposition of an accumulator's TV layout.
//!
//! The generators in [`crate::apply`] and [`crate::packer`] build every run-time index
//! from these pieces; the host's CPU emulator evaluates the very same trees.

mod expr;
mod fragment;
mod layout;

pub use expr::{eval_lets, Expr, Let, Op};
pub use fragment::{FragmentTerms, ThreadTerm};
pub use layout::{layout_offset, LayoutExprError};
