//! Files: `.npy` and safetensors arrays in, packed safetensors out.
//!
//! Readers take the whole file as bytes and return zero-copy [`ArrayView`]s; every
//! malformed input is a typed [`MaskError`] (they are fuzzed: `fuzz/` and the
//! `random_bytes_never_panic_the_readers` test). Writers go through [`write_atomically`]
//! (module `output`): a temporary file beside the destination and a rename, so a failed
//! or interrupted write never leaves a partial file.

use std::path::Path;
use std::string::{String, ToString};
use std::vec::Vec;

use crate::MaskError;

mod checksum;
mod npy;
mod output;
mod packed;

pub use checksum::{verify_checksums, Checksums, CHECKSUM_PREFIX, HEADER_CHECKSUM};

pub use npy::{read_npy, write_npy};
pub use output::{
    check_output, remove_live_temporaries, remove_stale_temporaries, write_atomically,
    write_file_atomically, TEMP_PREFIX,
};
pub use packed::{FORMAT_NAME, FORMAT_VERSION, FORMAT_VERSIONS_READ};

/// Element type of an array read from a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// bool (one byte, 0 or 1).
    Bool,
    /// uint8.
    U8,
    /// int8.
    I8,
    /// uint16.
    U16,
    /// int16.
    I16,
    /// uint32.
    U32,
    /// int32.
    I32,
    /// uint64.
    U64,
    /// int64.
    I64,
    /// IEEE half (attention inputs; not a mask type).
    F16,
    /// bfloat16 (safetensors only: numpy has no such type).
    BF16,
    /// float32.
    F32,
    /// float64.
    F64,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The numpy name.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
}

/// An array borrowed from a file's bytes: little-endian, C order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayView<'a> {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// `shape.product() × dtype.size()` bytes.
    pub data: &'a [u8],
}

impl<'a> ArrayView<'a> {
    /// Elements (product of the shape).
    pub fn elements(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// The bytes of a mask array: bool, uint8 or int8 (nonzero = 1); `what` names the
    /// input in the error.
    pub fn mask_bytes(&self, what: &'static str) -> Result<&'a [u8], MaskError> {
        match self.dtype {
            DType::Bool | DType::U8 | DType::I8 => Ok(self.data),
            other => Err(MaskError::WrongDtype {
                what,
                found: other.name(),
                expected: "bool, uint8 or int8",
            }),
        }
    }

    /// Integer elements as i64 (u64 above `i64::MAX` saturates, and is then out of
    /// range wherever it is used). Bool is not an index type.
    pub fn to_i64(&self, what: &'static str) -> Result<Vec<i64>, MaskError> {
        let d = self.data;
        Ok(match self.dtype {
            DType::U8 => d.iter().map(|&b| b as i64).collect(),
            DType::I8 => d.iter().map(|&b| b as i8 as i64).collect(),
            DType::U16 => d
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as i64)
                .collect(),
            DType::I16 => d
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as i64)
                .collect(),
            DType::U32 => d
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            DType::I32 => d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            DType::U64 => d
                .chunks_exact(8)
                .map(|c| {
                    i64::try_from(u64::from_le_bytes(c.try_into().unwrap_or([0xff; 8])))
                        .unwrap_or(i64::MAX)
                })
                .collect(),
            DType::I64 => d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            DType::Bool | DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                return Err(MaskError::WrongDtype {
                    what,
                    found: self.dtype.name(),
                    expected: "an integer type",
                })
            }
        })
    }
}

/// Opens `path` for reading without blocking: a plain open of a FIFO waits for a
/// writer, possibly forever, before the caller can see that it is no regular file.
/// `O_NONBLOCK` changes nothing for regular files (open(2), read(2)).
fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Reads a whole regular file (an I/O error names the path). Anything else (a
/// directory, a device such as /dev/zero, a pipe) is refused: its length is unknown
/// and may be endless.
pub fn read_file(path: &Path) -> Result<Vec<u8>, MaskError> {
    let error = |message: String| MaskError::Io {
        action: "reading",
        path: path.display().to_string(),
        message,
    };
    let mut file = open_for_reading(path).map_err(|e| error(e.to_string()))?;
    let metadata = file.metadata().map_err(|e| error(e.to_string()))?;
    if !metadata.is_file() {
        return Err(error("not a regular file".to_string()));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(metadata.len()).unwrap_or(usize::MAX))
        .map_err(|_| {
            error(std::format!(
                "out of memory for its {} bytes",
                metadata.len()
            ))
        })?;
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| error(e.to_string()))?;
    Ok(bytes)
}

/// Reads a whole file of at most `limit` bytes: a larger file is refused before it is
/// read (its length from the file system), so no input can make the reader allocate
/// more than `limit`.
pub fn read_file_limited(path: &Path, limit: u64) -> Result<Vec<u8>, MaskError> {
    use std::io::Read;
    let err = |message: String| MaskError::Io {
        action: "reading",
        path: path.display().to_string(),
        message,
    };
    let file = open_for_reading(path).map_err(|e| err(e.to_string()))?;
    let meta = file.metadata().map_err(|e| err(e.to_string()))?;
    if !meta.is_file() {
        return Err(err("not a regular file".to_string()));
    }
    let too_large = |len: u64| err(std::format!("{len} bytes; the limit is {limit} bytes"));
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    // The file may grow while it is read: never take more than limit + 1 bytes.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The longest safetensors header a packed-mask file may have. Ours are a few KiB
/// (metadata and at most 12 tensor entries); the `safetensors` crate allows 100 MB.
pub const MAX_PACKED_HEADER_BYTES: u64 = 1 << 20;

/// A packed-mask file read by [`read_packed_file`].
#[derive(Debug)]
pub struct PackedFile {
    /// The validated mask.
    pub mask: crate::PackedMask,
    /// The file's length in bytes.
    pub file_bytes: u64,
    /// Its `format_version` metadata value.
    pub format_version: String,
    /// Whether its checksums were checked, or it has none (an older file).
    pub checksums: Checksums,
}

/// Reads a packed-mask file header first: a regular file only (never blocking on a
/// FIFO or reading a device), the 8-byte header length and the JSON header (at most
/// [`MAX_PACKED_HEADER_BYTES`]), its `format` and `format_version`, and the file's
/// length against the data the header describes, all before the body is read; then
/// the body, bounded by that length, and the full validation of
/// [`PackedMask::from_safetensors`](crate::PackedMask::from_safetensors) (checksums
/// included). A 5 GiB file of garbage is refused after reading 8 bytes.
pub fn read_packed_file(path: &Path) -> Result<PackedFile, MaskError> {
    use std::io::Read;
    let io = |message: String| MaskError::Io {
        action: "reading",
        path: path.display().to_string(),
        message,
    };
    let mut file = open_for_reading(path).map_err(|e| io(e.to_string()))?;
    let meta = file.metadata().map_err(|e| io(e.to_string()))?;
    if !meta.is_file() {
        return Err(io("not a regular file".to_string()));
    }
    let file_bytes = meta.len();
    let corrupt = |detail: &'static str| MaskError::Corrupt {
        what: "packed mask file",
        detail,
    };
    let mut prefix = [0u8; 8];
    if file_bytes < 9 {
        return Err(corrupt("shorter than a safetensors header"));
    }
    file.read_exact(&mut prefix)
        .map_err(|e| io(e.to_string()))?;
    let mut first = [0u8; 1];
    file.read_exact(&mut first).map_err(|e| io(e.to_string()))?;
    // Told by its first bytes, as SafetensorsFile::parse does (with its messages).
    let mut start = prefix.to_vec();
    start.push(first[0]);
    if start.starts_with(npy::MAGIC) || first[0] != b'{' {
        return Err(SafetensorsFile::parse(&start)
            .err()
            .unwrap_or(corrupt("not a safetensors file")));
    }
    let header_len = u64::from_le_bytes(prefix);
    if header_len == 0 {
        return Err(corrupt("its header is empty"));
    }
    if header_len > MAX_PACKED_HEADER_BYTES {
        return Err(MaskError::TooLarge {
            what: "packed mask file header length (bytes)",
            value: header_len,
            limit: MAX_PACKED_HEADER_BYTES,
        });
    }
    if 8 + header_len > file_bytes {
        return Err(corrupt("its header length runs past the end of the file"));
    }
    let mut header = std::vec![0u8; header_len as usize];
    header[0] = first[0];
    file.read_exact(&mut header[1..])
        .map_err(|e| io(e.to_string()))?;
    let described: safetensors::tensor::Metadata = serde_json::from_slice(&header)
        .map_err(|e| MaskError::Safetensors(std::format!("header: {e}")))?;
    let fields = described.metadata().clone().unwrap_or_default();
    if fields.get("format").map(String::as_str) != Some(packed::FORMAT_NAME) {
        return Err(MaskError::Corrupt {
            what: "packed mask metadata",
            detail: "format is not fragmask-masks",
        });
    }
    let format_version = fields.get("format_version").cloned().unwrap_or_default();
    if !packed::FORMAT_VERSIONS_READ
        .iter()
        .any(|v| v.to_string() == format_version)
    {
        return Err(MaskError::Unsupported {
            what: "packed mask format_version",
            detail: "this reader reads versions 1 and 2",
        });
    }
    let expected = (8 + header_len).checked_add(described.data_len() as u64);
    if expected != Some(file_bytes) {
        return Err(corrupt(
            "its length differs from what its header describes (truncated or extended)",
        ));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(file_bytes).unwrap_or(usize::MAX))
        .map_err(|_| io(std::format!("out of memory for its {file_bytes} bytes")))?;
    bytes.extend_from_slice(&prefix);
    bytes.extend_from_slice(&header);
    // Never more than the length checked above, even if the file grows meanwhile.
    file.take(file_bytes - 8 - header_len)
        .read_to_end(&mut bytes)
        .map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 != file_bytes {
        return Err(corrupt("it changed while it was read"));
    }
    let (mask, checksums) = crate::PackedMask::from_safetensors_checked(&bytes)?;
    Ok(PackedFile {
        mask,
        file_bytes,
        format_version,
        checksums,
    })
}

/// Reads an array from `.npy` or safetensors bytes, choosing by the file's magic:
/// `.npy` starts with `\x93NUMPY`; anything else is parsed as safetensors, where
/// `tensor` names the tensor (default: the only tensor in the file).
pub fn read_array<'a>(bytes: &'a [u8], tensor: Option<&str>) -> Result<ArrayView<'a>, MaskError> {
    if bytes.starts_with(npy::MAGIC) {
        return read_npy(bytes);
    }
    let file = SafetensorsFile::parse(bytes)?;
    match tensor {
        Some(name) => file.tensor(name),
        None => {
            let names = file.names();
            match names.as_slice() {
                [only] => file.tensor(only),
                _ => Err(MaskError::Missing {
                    what: "tensor name (the file does not hold exactly one tensor; name one of)",
                    name: names.join(", "),
                }),
            }
        }
    }
}

/// A parsed safetensors file (the `safetensors` crate validates the header, offsets
/// and total length).
pub struct SafetensorsFile<'a> {
    inner: safetensors::SafeTensors<'a>,
    metadata: std::collections::HashMap<String, String>,
}

impl<'a> SafetensorsFile<'a> {
    /// Parses `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<SafetensorsFile<'a>, MaskError> {
        // The format by its first bytes, not the file's name: safetensors is an 8-byte
        // little-endian header length, then the header, a JSON object.
        if bytes.starts_with(npy::MAGIC) {
            return Err(MaskError::Corrupt {
                what: "safetensors file",
                detail: "this is a .npy file (it starts with \\x93NUMPY); a safetensors file is expected here",
            });
        }
        if bytes.get(8) != Some(&b'{') {
            return Err(MaskError::Corrupt {
                what: "input file",
                detail: "neither .npy (which starts with \\x93NUMPY) nor safetensors (an 8-byte \
                         header length, then a JSON header starting with '{')",
            });
        }
        let (_, metadata) = safetensors::SafeTensors::read_metadata(bytes)
            .map_err(|e| MaskError::Safetensors(e.to_string()))?;
        let inner = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| MaskError::Safetensors(e.to_string()))?;
        Ok(SafetensorsFile {
            inner,
            metadata: metadata.metadata().clone().unwrap_or_default(),
        })
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .names()
            .into_iter()
            .map(|n| n.to_string())
            .collect();
        names.sort();
        names
    }

    /// The `__metadata__` string map.
    pub fn metadata(&self) -> &std::collections::HashMap<String, String> {
        &self.metadata
    }

    /// The tensor `name` (bool, integer or float dtype).
    pub fn tensor(&self, name: &str) -> Result<ArrayView<'a>, MaskError> {
        let view = self.inner.tensor(name).map_err(|_| MaskError::Missing {
            what: "tensor",
            name: name.to_string(),
        })?;
        let dtype = from_safetensors_dtype(view.dtype(), "safetensors tensor")?;
        let expected = view
            .shape()
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
        if expected != Some(view.data().len()) {
            return Err(MaskError::Corrupt {
                what: "safetensors tensor",
                detail: "data length does not match shape and dtype",
            });
        }
        Ok(ArrayView {
            dtype,
            shape: view.shape().to_vec(),
            data: view.data(),
        })
    }
}

fn from_safetensors_dtype(d: safetensors::Dtype, what: &'static str) -> Result<DType, MaskError> {
    use safetensors::Dtype as S;
    Ok(match d {
        S::BOOL => DType::Bool,
        S::U8 => DType::U8,
        S::I8 => DType::I8,
        S::U16 => DType::U16,
        S::I16 => DType::I16,
        S::U32 => DType::U32,
        S::I32 => DType::I32,
        S::U64 => DType::U64,
        S::I64 => DType::I64,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::F32 => DType::F32,
        S::F64 => DType::F64,
        _ => {
            return Err(MaskError::WrongDtype {
                what,
                found: "an 8-bit float or packed type",
                expected: "bool, an integer or a 16/32/64-bit float type",
            })
        }
    })
}

/// Writes one array as a `.npy` file (see [`write_npy`]), through [`write_atomically`].
/// `data` must be `shape.product() × dtype.size()` bytes (checked).
pub fn write_npy_file(
    path: &Path,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
) -> Result<(), MaskError> {
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    if expected != Some(data.len()) {
        return Err(MaskError::Corrupt {
            what: "npy output",
            detail: "data length does not match shape and dtype",
        });
    }
    write_file_atomically(path, &write_npy(dtype, shape, data))
}

/// A tensor to write: name, element type, shape and little-endian C-order bytes.
pub type NamedTensor<'a> = (&'a str, DType, &'a [usize], &'a [u8]);

/// Writes named tensors as one safetensors file, through [`write_atomically`]. Each
/// tensor's bytes must be `shape.product() × dtype.size()` long (checked).
pub fn write_safetensors(path: &Path, tensors: &[NamedTensor<'_>]) -> Result<(), MaskError> {
    use safetensors::Dtype as S;
    let mut views = Vec::with_capacity(tensors.len());
    for &(name, dtype, shape, data) in tensors {
        let st = match dtype {
            DType::Bool => S::BOOL,
            DType::U8 => S::U8,
            DType::I8 => S::I8,
            DType::U16 => S::U16,
            DType::I16 => S::I16,
            DType::U32 => S::U32,
            DType::I32 => S::I32,
            DType::U64 => S::U64,
            DType::I64 => S::I64,
            DType::F16 => S::F16,
            DType::BF16 => S::BF16,
            DType::F32 => S::F32,
            DType::F64 => S::F64,
        };
        let view = safetensors::tensor::TensorView::new(st, shape.to_vec(), data)
            .map_err(|e| MaskError::Safetensors(std::format!("tensor {name}: {e}")))?;
        views.push((name, view));
    }
    // Serialised in memory and written to our own temporary: serialize_to_file would
    // make a temporary of its own (mode 0600, invisible to the signal clean-up).
    let bytes = safetensors::serialize(views, None)
        .map_err(|e| MaskError::Safetensors(std::format!("{}: {e}", path.display())))?;
    write_file_atomically(path, &bytes)
}
