//! Small const helpers for building nested layouts.

use fragmask_layout::{IntTuple, Layout, LayoutError};

/// `?` for `const fn` on `Result<_, LayoutError>`.
macro_rules! tryl {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}
pub(crate) use tryl;

/// A flat tuple, or a bare integer for one entry.
pub(crate) const fn flat_or_int(values: &[i64]) -> Result<IntTuple, LayoutError> {
    if values.len() == 1 {
        Ok(IntTuple::int(values[0]))
    } else {
        IntTuple::flat(values)
    }
}

/// The rank-2 layout `(shape0, shape1):(stride0, stride1)` whose modes are flat
/// tuples (or integers for one entry).
pub(crate) const fn layout2(
    shape0: &[i64],
    shape1: &[i64],
    stride0: &[i64],
    stride1: &[i64],
) -> Result<Layout, LayoutError> {
    let shape = tryl!(IntTuple::tuple(&[
        tryl!(flat_or_int(shape0)),
        tryl!(flat_or_int(shape1))
    ]));
    let stride = tryl!(IntTuple::tuple(&[
        tryl!(flat_or_int(stride0)),
        tryl!(flat_or_int(stride1))
    ]));
    Layout::new(shape, stride)
}

/// Unwraps a layout built from a literal in a `const` item. Evaluated at compile time,
/// so a failure is a build error, never a runtime panic.
pub(crate) const fn literal(layout: Result<Layout, LayoutError>) -> Layout {
    match layout {
        Ok(l) => l,
        Err(_) => panic!("invalid layout literal"),
    }
}
