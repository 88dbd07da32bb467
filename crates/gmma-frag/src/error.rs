//! Typed errors of the fragment model.

use core::fmt;

use fragmask_layout::LayoutError;

/// Why a fragment configuration or query was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FragError {
    /// The wgmma atom's N is not one of 8, 16, ..., 256 (PTX ISA, `wgmma.mma_async`
    /// shapes for 16-bit inputs).
    IllegalN {
        /// The rejected N.
        n: u32,
    },
    /// `block_m` is not a positive multiple of `multiple_of`, or exceeds
    /// [`crate::MAX_TILE_EXTENT`].
    BlockM {
        /// The rejected block_m.
        block_m: u32,
        /// What block_m must be a multiple of (64 × warpgroups, or the atom's N under
        /// SwapAB).
        multiple_of: u32,
    },
    /// `block_n` is not a positive multiple of `multiple_of`, or exceeds
    /// [`crate::MAX_TILE_EXTENT`].
    BlockN {
        /// The rejected block_n.
        block_n: u32,
        /// What block_n must be a multiple of (the atom's N, or 64 × warpgroups under
        /// SwapAB).
        multiple_of: u32,
    },
    /// The warpgroup count is outside `1..=MAX_WARPGROUPS`.
    Warpgroups {
        /// The rejected count.
        warpgroups: u32,
    },
    /// The warp count of an SM80 tiled MMA is outside `1..=MAX_WARPS`.
    Warps {
        /// The rejected count.
        warps: u32,
    },
    /// A thread index at or past the number of threads.
    ThreadOutOfRange {
        /// The rejected thread.
        thread: u32,
        /// The number of threads.
        threads: u32,
    },
    /// A value (register) index at or past the number of values per thread.
    ValueOutOfRange {
        /// The rejected value index.
        value: u32,
        /// The number of values per thread.
        values_per_thread: u32,
    },
    /// A (row, col) outside the tile.
    OutOfTile {
        /// The rejected row.
        row: u32,
        /// The rejected column.
        col: u32,
        /// Tile rows.
        block_m: u32,
        /// Tile columns.
        block_n: u32,
    },
    /// An index into a per-thread list (rows, columns, A registers) past its length.
    IndexOutOfRange {
        /// The rejected index.
        index: u32,
        /// The list's length.
        len: u32,
    },
    /// Element width not supported by the wgmma shared-memory layouts (8, 16 or 32).
    ElementBits {
        /// The rejected width in bits.
        bits: u32,
    },
    /// A shared-memory layout or descriptor request that wgmma cannot express.
    Descriptor {
        /// What is wrong.
        reason: &'static str,
    },
    /// The layout algebra failed (a capacity limit; not expected for legal inputs).
    Layout(LayoutError),
}

impl fmt::Display for FragError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FragError::IllegalN { n } => {
                write!(
                    f,
                    "illegal wgmma N = {n}: N must be a multiple of 8 in 8..=256"
                )
            }
            FragError::BlockM {
                block_m,
                multiple_of,
            } => write!(
                f,
                "block_m = {block_m} must be a positive multiple of {multiple_of} and at most {}",
                crate::MAX_TILE_EXTENT
            ),
            FragError::BlockN {
                block_n,
                multiple_of,
            } => write!(
                f,
                "block_n = {block_n} must be a positive multiple of {multiple_of} and at most {}",
                crate::MAX_TILE_EXTENT
            ),
            FragError::Warpgroups { warpgroups } => write!(
                f,
                "warpgroups = {warpgroups} must be in 1..={}",
                crate::MAX_WARPGROUPS
            ),
            FragError::Warps { warps } => {
                write!(
                    f,
                    "warps = {warps} must be in 1..={}",
                    crate::sm80::MAX_WARPS
                )
            }
            FragError::ThreadOutOfRange { thread, threads } => {
                write!(
                    f,
                    "thread {thread} out of range: the tile has {threads} threads"
                )
            }
            FragError::ValueOutOfRange {
                value,
                values_per_thread,
            } => write!(
                f,
                "value {value} out of range: each thread holds {values_per_thread} values"
            ),
            FragError::OutOfTile {
                row,
                col,
                block_m,
                block_n,
            } => {
                write!(
                    f,
                    "(row {row}, col {col}) is outside the {block_m}x{block_n} tile"
                )
            }
            FragError::IndexOutOfRange { index, len } => {
                write!(f, "index {index} out of range: the list has {len} entries")
            }
            FragError::ElementBits { bits } => {
                write!(
                    f,
                    "element width {bits} bits: wgmma shared-memory layouts take 8, 16 or 32"
                )
            }
            FragError::Descriptor { reason } => write!(f, "wgmma descriptor: {reason}"),
            FragError::Layout(e) => write!(f, "layout algebra: {e}"),
        }
    }
}

impl core::error::Error for FragError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            FragError::Layout(e) => Some(e),
            _ => None,
        }
    }
}

impl From<LayoutError> for FragError {
    fn from(e: LayoutError) -> Self {
        FragError::Layout(e)
    }
}

/// `?` for `const fn` on `Result<_, LayoutError>`, mapping into [`FragError::Layout`].
macro_rules! lay {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err($crate::error::FragError::Layout(e)),
        }
    };
}

/// `?` for `const fn` on `Result<_, FragError>`.
#[allow(unused_macros)]
macro_rules! tryf {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}

pub(crate) use lay;
#[allow(unused_imports)]
pub(crate) use tryf;
