//! Mask-apply device functions, generated from the fragment layouts.
//!
//! For a tile configuration ([`TiledAccumulator`]) and an [`Encoding`], an
//! [`ApplyProgram`] says what each MMA thread loads and which loaded bit masks each of
//! its accumulator values; [`emit_functions`] prints it as three device functions
//! (`load`, `apply_loaded`, `apply`), and [`header`] wraps them into a self-contained
//! drop-in header (`fragmask codegen`). A masked element becomes -inf.
//!
//! - FragmentNative reads global memory (L2) straight into registers: one 8-byte load
//!   per thread per 128×128 tile at 2 warpgroups.
//! - QuadLane and RowMajor read the tile's words from shared memory, where the kernel
//!   staged them (the baselines; RowMajor is what FlashAttention-3 forks do).
//!
//! [`kernels`] holds the measurement kernels built around these functions: the SASS
//! cost kernels, the GPU check kernel and the benchmark kernels.

mod cuda;
mod header;
pub mod kernels;
mod program;

use core::fmt;

use fragmask_gmma_frag::{FragError, TiledAccumulator};
use fragmask_masks::Encoding;

pub use cuda::{emit_functions, function_names, ident, FunctionNames, APPLY_PRELUDE};
pub use header::{header, HeaderOptions};
pub use program::{ApplyProgram, Fetch, Space, Test};

/// Why a generator refused its configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodegenError {
    /// The tile configuration is not a legal tiled wgmma accumulator.
    Config(FragError),
    /// A `--block` argument is not `<block_m>x<block_n>`.
    BadBlock(String),
    /// An encoding name is not one of `fragment-native`, `quad-lane`, `row-major`.
    BadEncoding(String),
    /// The layout cannot be written as separable row/column index expressions.
    NotSeparable(String),
    /// The configuration is legal but this generator does not support it.
    Unsupported(String),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::Config(e) => write!(f, "bad tile configuration: {e}"),
            CodegenError::BadBlock(s) => write!(
                f,
                "bad block {s:?}: expected <block_m>x<block_n>, e.g. 128x128"
            ),
            CodegenError::BadEncoding(s) => write!(
                f,
                "unknown encoding {s:?}: expected fragment-native, quad-lane or row-major"
            ),
            CodegenError::NotSeparable(s) => {
                write!(f, "layout not separable into row/column terms: {s}")
            }
            CodegenError::Unsupported(s) => write!(f, "unsupported configuration: {s}"),
        }
    }
}

impl std::error::Error for CodegenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodegenError::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FragError> for CodegenError {
    fn from(e: FragError) -> Self {
        CodegenError::Config(e)
    }
}

/// Parses `"128x128"` into `(block_m, block_n)`.
///
/// ```
/// use fragmask_kernels::apply::parse_block;
/// assert_eq!(parse_block("128x64"), Ok((128, 64)));
/// assert!(parse_block("128").is_err());
/// ```
pub fn parse_block(text: &str) -> Result<(u32, u32), CodegenError> {
    let bad = || CodegenError::BadBlock(text.to_string());
    let (m, n) = text.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let m = m.trim().parse::<u32>().map_err(|_| bad())?;
    let n = n.trim().parse::<u32>().map_err(|_| bad())?;
    Ok((m, n))
}

/// Parses an encoding name (`fragment-native`, `quad-lane`, `row-major`; `_` works
/// too).
pub fn parse_encoding(text: &str) -> Result<Encoding, CodegenError> {
    Encoding::from_name(&text.trim().replace('_', "-"))
        .ok_or_else(|| CodegenError::BadEncoding(text.to_string()))
}

/// The tiled accumulator of a `block_m × block_n` tile with `warpgroups` MMA warpgroups.
pub fn accumulator(
    block_m: u32,
    block_n: u32,
    warpgroups: u32,
    swap_ab: bool,
) -> Result<TiledAccumulator, CodegenError> {
    Ok(TiledAccumulator::new(
        block_m, block_n, warpgroups, swap_ab,
    )?)
}
