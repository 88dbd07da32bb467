//! SHA-256 checksums of a packed-mask file, kept in its safetensors `__metadata__`
//! (docs/masks.md, docs/reliability.md).
//!
//! - `sha256.<tensor>`: 64 lowercase hex digits, the SHA-256 of the tensor's bytes as
//!   stored (little-endian, C order), one per tensor.
//! - `sha256.__metadata__`: the SHA-256 of the header's description: every other
//!   metadata key and value (sorted by key), then every tensor's name, dtype and shape
//!   (sorted by name), each field length-prefixed. It covers what the tensor sums
//!   cannot: the sizes and flags the lists are read against.
//!
//! These are metadata strings only, so `safetensors` and PyTorch read the file as
//! before. A file without any `sha256.` key (written before checksums existed) still
//! loads; one with some but not all, or with one that differs, is refused, naming the
//! tensor ([`MaskError::Checksum`]).

use std::collections::HashMap;
use std::string::{String, ToString};
use std::vec::Vec;

use sha2::{Digest as _, Sha256};

use super::SafetensorsFile;
use crate::MaskError;

/// Prefix of the checksum metadata keys.
pub const CHECKSUM_PREFIX: &str = "sha256.";

/// The name under which the header's own checksum is stored (after the prefix).
pub const HEADER_CHECKSUM: &str = "__metadata__";

/// Whether a file's checksums were checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksums {
    /// Every tensor and the header matched their SHA-256.
    Verified,
    /// The file has none (written before checksums existed): nothing was checked.
    Absent,
}

/// A tensor as the header describes it, for the header checksum.
pub(crate) struct TensorInfo<'a> {
    pub name: &'a str,
    pub dtype: safetensors::Dtype,
    pub shape: &'a [usize],
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| {
            [
                DIGITS[(b >> 4) as usize] as char,
                DIGITS[(b & 15) as usize] as char,
            ]
        })
        .collect()
}

fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// The SHA-256 of a tensor's bytes, as hex.
pub(crate) fn tensor_sum(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// The SHA-256 of the header's description (see the module docs), as hex; keys with
/// [`CHECKSUM_PREFIX`] are left out.
pub(crate) fn header_sum(
    metadata: &HashMap<String, String>,
    tensors: &mut [TensorInfo<'_>],
) -> String {
    let mut h = Sha256::new();
    let mut keys: Vec<&String> = metadata
        .keys()
        .filter(|k| !k.starts_with(CHECKSUM_PREFIX))
        .collect();
    keys.sort();
    h.update((keys.len() as u64).to_le_bytes());
    for k in keys {
        field(&mut h, k.as_bytes());
        field(&mut h, metadata[k].as_bytes());
    }
    tensors.sort_by(|a, b| a.name.cmp(b.name));
    h.update((tensors.len() as u64).to_le_bytes());
    for t in tensors.iter() {
        field(&mut h, t.name.as_bytes());
        field(&mut h, std::format!("{:?}", t.dtype).as_bytes());
        h.update((t.shape.len() as u64).to_le_bytes());
        for &d in t.shape {
            h.update((d as u64).to_le_bytes());
        }
    }
    hex(&h.finalize())
}

/// Checks every checksum of `file` (see the module docs).
pub fn verify_checksums(file: &SafetensorsFile<'_>) -> Result<Checksums, MaskError> {
    let metadata = file.metadata();
    let stated: HashMap<&str, &str> = metadata
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(CHECKSUM_PREFIX)?, v.as_str())))
        .collect();
    if stated.is_empty() {
        return Ok(Checksums::Absent);
    }
    let fail = |tensor: &str, detail: &'static str| MaskError::Checksum {
        tensor: tensor.to_string(),
        detail,
    };
    let names = file.names();
    for name in stated.keys() {
        if *name != HEADER_CHECKSUM && !names.iter().any(|n| n == name) {
            return Err(fail(name, "is stated for a tensor the file does not hold"));
        }
    }
    let mut infos = Vec::with_capacity(names.len());
    for name in &names {
        let view = file
            .inner
            .tensor(name)
            .map_err(|e| MaskError::Safetensors(e.to_string()))?;
        let Some(sum) = stated.get(name.as_str()) else {
            return Err(fail(
                name,
                "is missing (the file has checksums of other tensors)",
            ));
        };
        if *sum != tensor_sum(view.data()) {
            return Err(fail(name, "does not match its data"));
        }
        infos.push((name.as_str(), view.dtype(), view.shape().to_vec()));
    }
    let mut described: Vec<TensorInfo<'_>> = infos
        .iter()
        .map(|(name, dtype, shape)| TensorInfo {
            name,
            dtype: *dtype,
            shape,
        })
        .collect();
    match stated.get(HEADER_CHECKSUM) {
        None => Err(fail(
            HEADER_CHECKSUM,
            "is missing (the file has checksums of its tensors)",
        )),
        Some(sum) if *sum != header_sum(metadata, &mut described) => Err(fail(
            HEADER_CHECKSUM,
            "does not match the header (metadata, dtypes or shapes)",
        )),
        Some(_) => Ok(Checksums::Verified),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_sums_are_standard_sha256() {
        // FIPS 180-4 test vector "abc".
        assert_eq!(
            tensor_sum(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
