//! Typed errors of mask sources, encodings, packers and file readers.

use core::fmt;

use fragmask_gmma_frag::FragError;

/// Why a mask, a tile configuration or a file was rejected.
///
/// Every variant names the offending input (`what`) and the numbers involved, so the
/// message alone is enough to fix the input.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaskError {
    /// The tile configuration is not a legal tiled wgmma accumulator.
    Config(FragError),
    /// The tile configuration is legal for the MMA but not supported here.
    UnsupportedTile {
        /// What is unsupported.
        reason: &'static str,
    },
    /// A dimension that must be at least 1 is 0.
    EmptyDimension {
        /// The input and dimension.
        what: &'static str,
    },
    /// An input has the wrong number of dimensions.
    BadRank {
        /// The input.
        what: &'static str,
        /// Its number of dimensions.
        rank: usize,
        /// The ranks accepted, in words.
        expected: &'static str,
    },
    /// A length or extent disagrees with another input.
    ShapeMismatch {
        /// The input and dimension.
        what: &'static str,
        /// The extent it must have.
        expected: u64,
        /// The extent it has.
        found: u64,
    },
    /// A length or extent is outside its allowed range.
    ExtentOutOfRange {
        /// The input and dimension.
        what: &'static str,
        /// The extent found.
        found: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// An index is outside `0..bound`.
    IndexOutOfRange {
        /// The index list.
        what: &'static str,
        /// The row (query, or list) holding it.
        row: u64,
        /// The index.
        index: i64,
        /// The exclusive upper bound.
        bound: u64,
    },
    /// Indices that must be strictly ascending are not.
    Unsorted {
        /// The index list.
        what: &'static str,
        /// The row holding them.
        row: u64,
        /// The earlier index.
        previous: i64,
        /// The index that does not exceed it.
        index: i64,
    },
    /// An index appears twice in a list that must hold unique indices.
    DuplicateIndex {
        /// The index list.
        what: &'static str,
        /// The row holding it.
        row: u64,
        /// The repeated index.
        index: i64,
    },
    /// CSR offsets are not a non-decreasing sequence from 0 to the number of indices.
    BadOffsets {
        /// The offsets array.
        what: &'static str,
        /// Position of the first bad offset.
        position: u64,
        /// Its value.
        value: i64,
    },
    /// An array has an element type this input does not accept.
    WrongDtype {
        /// The input.
        what: &'static str,
        /// The element type found (numpy / safetensors spelling).
        found: &'static str,
        /// The element types accepted.
        expected: &'static str,
    },
    /// A file uses a feature this reader does not support.
    Unsupported {
        /// The part being read.
        what: &'static str,
        /// What is unsupported and what to do instead.
        detail: &'static str,
    },
    /// A file ends before the data it announces.
    Truncated {
        /// The part being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        available: u64,
    },
    /// A file is not in the expected format.
    Corrupt {
        /// The part being read.
        what: &'static str,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// A count exceeds what the format can hold (i32 tile indices) or what fits in
    /// memory.
    TooLarge {
        /// The count.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// A safetensors file the `safetensors` crate rejected.
    #[cfg(feature = "alloc")]
    Safetensors(alloc::string::String),
    /// A packed-mask file's SHA-256 of a tensor (or of its header, `__metadata__`)
    /// does not match what it holds, or is missing while others are present.
    #[cfg(feature = "alloc")]
    Checksum {
        /// The tensor, or `__metadata__` for the header's description.
        tensor: alloc::string::String,
        /// What is wrong: "does not match", "is missing", ...
        detail: &'static str,
    },
    /// A named tensor or metadata key is missing.
    #[cfg(feature = "alloc")]
    Missing {
        /// What was looked for.
        what: &'static str,
        /// Its name.
        name: alloc::string::String,
    },
    /// A syntax error in a predicate expression.
    #[cfg(feature = "alloc")]
    Syntax {
        /// The message.
        message: alloc::string::String,
    },
    /// An error in the document ids of a `doc=NAME` predicate atom.
    #[cfg(feature = "alloc")]
    Document {
        /// The atom's argument (the CLI reads it as a file name).
        name: alloc::string::String,
        /// What is wrong with them.
        error: alloc::boxed::Box<MaskError>,
    },
    /// A size computed from an input does not fit in 64 bits.
    #[cfg(feature = "alloc")]
    Overflow {
        /// The size.
        what: &'static str,
        /// Its factors or its text, as given.
        detail: alloc::string::String,
    },
    /// A packed mask has no transposed tile lists, which the backward pass needs.
    NoTransposedLists,
    /// Memory for an output could not be allocated.
    OutOfMemory {
        /// The buffer.
        what: &'static str,
        /// Bytes asked for.
        bytes: u64,
    },
    /// An I/O error reading or writing a file.
    #[cfg(feature = "std")]
    Io {
        /// What was being done, e.g. "reading" or "renaming the output".
        action: &'static str,
        /// The path involved.
        path: alloc::string::String,
        /// The operating system's message.
        message: alloc::string::String,
    },
    /// An output path that must not be written: it exists and is not a regular file,
    /// or it is one of the inputs.
    #[cfg(feature = "std")]
    OutputRefused {
        /// The output path.
        path: alloc::string::String,
        /// Why, in words.
        reason: alloc::string::String,
    },
}

impl fmt::Display for MaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaskError::Config(e) => write!(f, "unsupported tile configuration: {e}"),
            MaskError::UnsupportedTile { reason } => {
                write!(f, "unsupported tile configuration: {reason}")
            }
            MaskError::EmptyDimension { what } => write!(f, "{what} must be at least 1"),
            MaskError::BadRank {
                what,
                rank,
                expected,
            } => write!(
                f,
                "{what} has {rank} dimensions; expected {expected} (shape mismatch)"
            ),
            MaskError::ShapeMismatch {
                what,
                expected,
                found,
            } => write!(f, "shape mismatch: {what} is {found}, expected {expected}"),
            MaskError::ExtentOutOfRange {
                what,
                found,
                min,
                max,
            } => write!(
                f,
                "shape mismatch: {what} is {found}, must be in {min}..={max}"
            ),
            MaskError::IndexOutOfRange {
                what,
                row,
                index,
                bound,
            } => write!(
                f,
                "index out of range: {what}, row {row}, holds {index}, must be in 0..{bound}"
            ),
            MaskError::Unsorted {
                what,
                row,
                previous,
                index,
            } => write!(
                f,
                "unsorted indices: {what}, row {row}: {index} follows {previous}; \
                 indices must be sorted strictly ascending (unique)"
            ),
            MaskError::DuplicateIndex { what, row, index } => write!(
                f,
                "duplicate index: {what}, row {row}, holds {index} more than once"
            ),
            MaskError::BadOffsets {
                what,
                position,
                value,
            } => write!(
                f,
                "bad CSR offsets: {what}[{position}] = {value}; offsets must start at 0, \
                 never decrease and end at the number of indices"
            ),
            MaskError::WrongDtype {
                what,
                found,
                expected,
            } => write!(f, "wrong dtype: {what} is {found}, expected {expected}"),
            MaskError::Truncated {
                what,
                needed,
                available,
            } => write!(
                f,
                "truncated file: {what} needs {needed} bytes, only {available} present"
            ),
            MaskError::Unsupported { what, detail } => write!(f, "unsupported {what}: {detail}"),
            MaskError::Corrupt { what, detail } => write!(f, "corrupt file: {what}: {detail}"),
            MaskError::TooLarge { what, value, limit } => {
                write!(f, "too large: {what} is {value}, the limit is {limit}")
            }
            #[cfg(feature = "alloc")]
            MaskError::Safetensors(message) => write!(f, "corrupt safetensors file: {message}"),
            #[cfg(feature = "alloc")]
            MaskError::Checksum { tensor, detail } => write!(
                f,
                "corrupt file: the SHA-256 of tensor '{tensor}' {detail} (the file was \
                 changed after it was written)"
            ),
            #[cfg(feature = "alloc")]
            MaskError::Missing { what, name } => write!(f, "missing {what} '{name}'"),
            #[cfg(feature = "alloc")]
            MaskError::Syntax { message } => write!(f, "predicate syntax: {message}"),
            #[cfg(feature = "alloc")]
            MaskError::Document { name, error } => write!(f, "doc={name}: {error}"),
            #[cfg(feature = "alloc")]
            MaskError::Overflow { what, detail } => {
                write!(f, "too large: {what} ({detail}) does not fit in 64 bits")
            }
            MaskError::NoTransposedLists => write!(
                f,
                "the packed mask has no transposed tile lists (q_num_blocks, q_indices, \
                 full_q_num_blocks, full_q_indices), which the backward pass needs; run \
                 `fragmask pack --transposed ...` on the mask's source, or `fragmask pack \
                 --transposed --packed FILE -o OUT` on this file"
            ),
            MaskError::OutOfMemory { what, bytes } => {
                write!(f, "out of memory: {what} needs {bytes} bytes")
            }
            #[cfg(feature = "std")]
            MaskError::Io {
                action,
                path,
                message,
            } => write!(f, "{action} {path}: {message}"),
            #[cfg(feature = "std")]
            MaskError::OutputRefused { path, reason } => {
                write!(f, "refusing to write {path}: {reason}")
            }
        }
    }
}

impl core::error::Error for MaskError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            MaskError::Config(e) => Some(e),
            #[cfg(feature = "alloc")]
            MaskError::Document { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

impl From<FragError> for MaskError {
    fn from(e: FragError) -> Self {
        MaskError::Config(e)
    }
}
