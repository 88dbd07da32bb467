//! The error type of the source generators.

use core::fmt;

/// Why a generator refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The wgmma `N` extent is not one the instruction accepts
    /// (for `.f32.bf16.bf16` that is a multiple of 8 in `8..=256`).
    InvalidWgmmaN {
        /// The rejected `N`.
        n: u32,
    },
    /// The number of warpgroups per block is outside the supported range.
    InvalidWarpgroups {
        /// The rejected count.
        warpgroups: u32,
        /// The largest supported count.
        max: u32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidWgmmaN { n } => write!(
                f,
                "invalid wgmma N = {n}: m64nNk16 with bf16 inputs needs N a multiple of 8 in 8..=256"
            ),
            Error::InvalidWarpgroups { warpgroups, max } => write!(
                f,
                "invalid warpgroup count {warpgroups}: the probe supports 1..={max} warpgroups per block"
            ),
        }
    }
}

impl std::error::Error for Error {}
