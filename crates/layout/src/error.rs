//! Typed errors of the layout algebra.

use core::fmt;

/// Why a layout operation could not produce a result.
///
/// Every operation of this crate reports failure through this type; nothing wraps,
/// truncates or panics on user input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// A result would need more than [`crate::MAX_LEAVES`] leaves or a nesting depth
    /// above [`crate::MAX_DEPTH`].
    Capacity,
    /// An integer result does not fit in `i64`.
    Overflow,
    /// CuTe's divisibility condition does not hold (composition, complement).
    Divisibility,
    /// The operation needs an injective layout and this one is not.
    NotInjective,
    /// Shape, stride or coordinate trees do not have the same structure, or a mode
    /// index is out of range.
    Incongruent,
    /// A shape entry is below 1.
    NonPositiveShape,
    /// The operation needs non-negative strides (complement, inverses, composition's
    /// right-hand side).
    NegativeStride,
    /// The text is not CuTe notation.
    Parse {
        /// Byte offset in the input where parsing failed.
        position: usize,
        /// What the parser expected there.
        expected: &'static str,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Capacity => write!(
                f,
                "capacity exceeded: at most {} leaves and depth {}",
                crate::MAX_LEAVES,
                crate::MAX_DEPTH
            ),
            LayoutError::Overflow => write!(f, "integer overflow in a layout computation"),
            LayoutError::Divisibility => write!(f, "CuTe's divisibility condition does not hold"),
            LayoutError::NotInjective => write!(f, "the layout is not injective"),
            LayoutError::Incongruent => write!(f, "incongruent tuples or mode index out of range"),
            LayoutError::NonPositiveShape => write!(f, "shape entries must be at least 1"),
            LayoutError::NegativeStride => {
                write!(f, "this operation needs non-negative strides")
            }
            LayoutError::Parse { position, expected } => {
                write!(f, "parse error at byte {position}: expected {expected}")
            }
        }
    }
}

impl core::error::Error for LayoutError {}

/// `?` for `const fn`: unwraps `Ok` or returns the `Err`.
#[macro_export]
#[doc(hidden)]
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}
