//! Packed-mask files carry a SHA-256 of every tensor and of their header: every
//! mutation of a file is detected or loads the identical mask; files without
//! checksums (older ones) still load; the reader looks at the header before the body.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{acc, random_mask};
use fragmask_masks::io::{
    read_packed_file, verify_checksums, Checksums, SafetensorsFile, CHECKSUM_PREFIX,
    HEADER_CHECKSUM,
};
use fragmask_masks::{pack, DenseMask, Encoding, MaskError, PackOptions, PackedMask};
use proptest::prelude::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "fragmask-checksums-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small mask with every class of tile; `transposed` adds the backward lists.
fn sample(i: usize, transposed: bool) -> PackedMask {
    let a = acc(i);
    let mask = random_mask(
        i as u64,
        2,
        1,
        2 * a.block_m() as usize - 3,
        2 * a.block_n() as usize + 5,
        a.block_m() as usize,
        a.block_n() as usize,
    );
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    let mut packed = pack(
        &dense,
        &a,
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    if transposed {
        let backward = fragmask_gmma_frag::TiledAccumulator::new(a.block_m(), a.block_n(), 1, true);
        if let Ok(backward) = backward {
            if packed
                .add_transposed(&backward, &PackOptions::default())
                .is_ok()
            {
                return packed;
            }
        }
    }
    packed
}

/// The file rewritten with `metadata` (tensors unchanged).
fn with_metadata(bytes: &[u8], metadata: HashMap<String, String>) -> Vec<u8> {
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let views: Vec<(String, safetensors::tensor::TensorView)> =
        st.iter().map(|(n, t)| (n.to_string(), t)).collect();
    safetensors::serialize(views, Some(metadata)).unwrap()
}

fn metadata_of(bytes: &[u8]) -> HashMap<String, String> {
    let (_, m) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    m.metadata().clone().unwrap()
}

fn without_checksums(bytes: &[u8]) -> Vec<u8> {
    let m = metadata_of(bytes)
        .into_iter()
        .filter(|(k, _)| !k.starts_with(CHECKSUM_PREFIX))
        .collect();
    with_metadata(bytes, m)
}

#[test]
fn written_files_state_a_checksum_for_every_tensor_and_the_header() {
    for transposed in [false, true] {
        let packed = sample(0, transposed);
        assert_eq!(packed.transposed().is_ok(), transposed);
        let bytes = packed.to_safetensors().unwrap();
        let meta = metadata_of(&bytes);
        let file = SafetensorsFile::parse(&bytes).unwrap();
        for name in file.names() {
            let sum = &meta[&format!("{CHECKSUM_PREFIX}{name}")];
            assert_eq!(sum.len(), 64, "{name}");
        }
        assert!(meta.contains_key(&format!("{CHECKSUM_PREFIX}{HEADER_CHECKSUM}")));
        assert_eq!(verify_checksums(&file), Ok(Checksums::Verified));
        assert_eq!(PackedMask::from_safetensors(&bytes).unwrap(), packed);
        // The safetensors crate (what PyTorch's loader uses) reads the same tensors.
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(st.names().len(), file.names().len());
    }
}

#[test]
fn files_without_checksums_still_load_the_same_mask() {
    for transposed in [false, true] {
        let packed = sample(1, transposed);
        let old = without_checksums(&packed.to_safetensors().unwrap());
        let file = SafetensorsFile::parse(&old).unwrap();
        assert_eq!(verify_checksums(&file), Ok(Checksums::Absent));
        assert_eq!(PackedMask::from_safetensors(&old).unwrap(), packed);
        let dir = TempDir::new("old");
        let path = dir.0.join("old.safetensors");
        std::fs::write(&path, &old).unwrap();
        let read = read_packed_file(&path).unwrap();
        assert_eq!(read.checksums, Checksums::Absent);
        assert_eq!(read.mask, packed);
    }
}

#[test]
fn a_changed_tensor_is_refused_naming_it() {
    let packed = sample(2, true);
    let bytes = packed.to_safetensors().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for name in st.names() {
        let info = st.tensor(name).unwrap();
        if info.data().is_empty() {
            continue;
        }
        // The tensor's first byte, found by its offset in the data section.
        let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let start = info.data().as_ptr() as usize - bytes.as_ptr() as usize;
        assert!(start >= header);
        let mut bad = bytes.clone();
        bad[start] ^= 1;
        assert_eq!(
            PackedMask::from_safetensors(&bad).unwrap_err(),
            MaskError::Checksum {
                tensor: name.to_string(),
                detail: "does not match its data"
            }
        );
    }
}

#[test]
fn changed_metadata_or_a_missing_checksum_is_refused() {
    let packed = sample(3, false);
    let bytes = packed.to_safetensors().unwrap();
    let mut meta = metadata_of(&bytes);
    let seqlen_q: usize = meta["seqlen_q"].parse().unwrap();
    meta.insert("seqlen_q".into(), (seqlen_q + 1).to_string());
    let err = PackedMask::from_safetensors(&with_metadata(&bytes, meta)).unwrap_err();
    assert!(
        matches!(&err, MaskError::Checksum { tensor, .. } if tensor == HEADER_CHECKSUM),
        "{err}"
    );
    let mut meta = metadata_of(&bytes);
    meta.remove(&format!("{CHECKSUM_PREFIX}words"));
    let err = PackedMask::from_safetensors(&with_metadata(&bytes, meta)).unwrap_err();
    assert!(
        matches!(&err, MaskError::Checksum { tensor, detail } if tensor == "words" && detail.contains("missing")),
        "{err}"
    );
    let mut meta = metadata_of(&bytes);
    meta.insert(format!("{CHECKSUM_PREFIX}q_words"), "0".repeat(64));
    let err = PackedMask::from_safetensors(&with_metadata(&bytes, meta)).unwrap_err();
    assert!(
        matches!(&err, MaskError::Checksum { tensor, .. } if tensor == "q_words"),
        "{err}"
    );
    assert!(err.to_string().contains("'q_words'"), "{err}");
}

#[test]
fn the_header_is_read_before_the_body() {
    let dir = TempDir::new("header");
    let packed = sample(4, false);
    let bytes = packed.to_safetensors().unwrap();
    let path = dir.0.join("m.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    let read = read_packed_file(&path).unwrap();
    assert_eq!(read.mask, packed);
    assert_eq!(read.checksums, Checksums::Verified);
    assert_eq!(read.file_bytes, bytes.len() as u64);
    assert_eq!(read.format_version, "2");
    // A 5 GiB sparse file: zero header length, refused after its first bytes.
    let huge = dir.0.join("huge.safetensors");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(5 << 30)
        .unwrap();
    let err = read_packed_file(&huge).unwrap_err();
    assert!(err.to_string().contains("header"), "{err}");
    // A valid file extended to 5 GiB: its header describes far less.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(5 << 30).unwrap();
    let err = read_packed_file(&path).unwrap_err();
    assert!(err.to_string().contains("truncated or extended"), "{err}");
    // Truncated.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let err = read_packed_file(&path).unwrap_err();
    assert!(err.to_string().contains("truncated or extended"), "{err}");
    // Not a regular file.
    for special in ["/dev/zero", "/dev/null"] {
        let err = read_packed_file(std::path::Path::new(special)).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
    let err = read_packed_file(&dir.0).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

proptest! {
    #![proptest_config(proptest_ci::config(300))]

    /// Any 1 to 4 bytes of a checksummed file changed at random: the file is refused,
    /// or it loads as exactly the mask that was written (a change only in the header's
    /// whitespace, say).
    #[test]
    fn every_mutation_is_detected_or_loads_the_identical_mask(
        which in 0usize..4,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
    ) {
        let packed = sample(which % 2, which >= 2);
        let mut bytes = packed.to_safetensors().unwrap();
        for (at, value) in edits {
            let at = at.index(bytes.len());
            bytes[at] = value;
        }
        if let Ok(read) = PackedMask::from_safetensors(&bytes) {
            prop_assert_eq!(read, packed);
        }
    }

    /// The same for single bit flips, which a byte overwrite rarely hits.
    #[test]
    fn every_bit_flip_is_detected_or_loads_the_identical_mask(
        which in 0usize..4,
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let packed = sample(which % 2, which >= 2);
        let mut bytes = packed.to_safetensors().unwrap();
        let at = at.index(bytes.len());
        bytes[at] ^= 1 << bit;
        if let Ok(read) = PackedMask::from_safetensors(&bytes) {
            prop_assert_eq!(read, packed);
        }
    }
}
