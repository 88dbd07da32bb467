//! Files: the packed safetensors round-trips, readers reject bad files with typed
//! errors and never panic.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{acc, random_mask};
use fragmask_masks::io::{read_array, read_npy, write_atomically, write_npy, DType};
use fragmask_masks::{pack, DenseMask, Encoding, MaskError, PackOptions, PackedMask};
use proptest::prelude::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fragmask-masks-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sample(i: usize, encoding: Encoding) -> PackedMask {
    let a = acc(i);
    let mask = random_mask(
        i as u64,
        2,
        1,
        3 * a.block_m() as usize - 5,
        2 * a.block_n() as usize + 9,
        a.block_m() as usize,
        a.block_n() as usize,
    );
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    pack(&dense, &a, encoding, &PackOptions::default()).unwrap()
}

#[test]
fn packed_file_round_trips_for_every_config_and_encoding() {
    for i in 0..common::CONFIGS.len() {
        for encoding in Encoding::ALL {
            let packed = sample(i, encoding);
            let bytes = packed.to_safetensors().unwrap();
            assert_eq!(PackedMask::from_safetensors(&bytes).unwrap(), packed);
        }
    }
}

#[test]
fn packed_file_has_the_documented_tensors_and_metadata() {
    let packed = sample(0, Encoding::FragmentNative);
    let dir = temp_dir("layout");
    let path = dir.join("mask.safetensors");
    packed.write_safetensors(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (m, n, p) = (
        packed.grid().m_blocks,
        packed.grid().n_blocks,
        packed.partial_tiles(),
    );
    let expect = [
        ("kv_num_blocks", safetensors::Dtype::I32, vec![2, 1, m]),
        ("kv_indices", safetensors::Dtype::I32, vec![2, 1, m, n]),
        ("full_kv_num_blocks", safetensors::Dtype::I32, vec![2, 1, m]),
        ("full_kv_indices", safetensors::Dtype::I32, vec![2, 1, m, n]),
        ("kv_tile_offsets", safetensors::Dtype::I32, vec![2, 1, m, n]),
        ("words", safetensors::Dtype::U32, vec![p, 256, 2]),
    ];
    assert_eq!(st.len(), expect.len());
    for (name, dtype, shape) in expect {
        let t = st.tensor(name).unwrap();
        assert_eq!((t.dtype(), t.shape()), (dtype, shape.as_slice()), "{name}");
    }
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta: &HashMap<String, String> = meta.metadata().as_ref().unwrap();
    for (k, v) in [
        ("format", "fragmask-masks"),
        ("format_version", "2"),
        ("transposed", "false"),
        ("block_m", "128"),
        ("block_n", "128"),
        ("warpgroups", "2"),
        ("swap_ab", "false"),
        ("encoding", "fragment-native"),
        ("seqlen_q", "379"),
        ("seqlen_k", "265"),
    ] {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "{k}");
    }
    // No temporary file is left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn failed_write_leaves_no_file() {
    let dir = temp_dir("nowrite");
    let path = dir.join("out.safetensors");
    let err = write_atomically(&path, |tmp| {
        std::fs::write(tmp, b"half").unwrap();
        Err(MaskError::Corrupt {
            what: "test",
            detail: "fail after writing",
        })
    });
    assert!(err.is_err());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let missing = dir.join("no/such/dir/out.safetensors");
    // A missing directory is refused before anything is written.
    assert!(matches!(
        sample(1, Encoding::RowMajor).write_safetensors(&missing),
        Err(MaskError::OutputRefused { .. })
    ));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A packed file's metadata without its checksums: an older file, where the list
/// validation is all that stands between a tampered file and a wrong mask.
fn without_checksums(
    meta: Option<std::collections::HashMap<String, String>>,
) -> Option<std::collections::HashMap<String, String>> {
    meta.map(|m| {
        m.into_iter()
            .filter(|(k, _)| !k.starts_with(fragmask_masks::io::CHECKSUM_PREFIX))
            .collect()
    })
}

/// Rewrites one tensor of a packed file, dropping the checksums (an older file).
fn tamper(packed: &PackedMask, name: &str, f: impl Fn(&mut Vec<i32>)) -> Vec<u8> {
    tamper_keeping_checksums(packed, name, f, false)
}

/// Rewrites one tensor of a packed file; `keep` keeps the (now stale) checksums.
fn tamper_keeping_checksums(
    packed: &PackedMask,
    name: &str,
    f: impl Fn(&mut Vec<i32>),
    keep: bool,
) -> Vec<u8> {
    let bytes = packed.to_safetensors().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let mut tensors: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (n, t) in st.iter() {
        let mut data = t.data().to_vec();
        if n == name {
            let mut v: Vec<i32> = data
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            f(&mut v);
            data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        }
        tensors.push((n.to_string(), t.dtype(), t.shape().to_vec(), data));
    }
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    let meta = meta.metadata().clone();
    let meta = if keep { meta } else { without_checksums(meta) };
    safetensors::serialize(views, meta).unwrap()
}

#[test]
fn packed_reader_rejects_inconsistent_lists() {
    // Every tile partial: alternating bits.
    let data: Vec<u8> = (0..256 * 384).map(|x| (x % 3 == 0) as u8).collect();
    let dense = DenseMask::new(&data, &[256, 384]).unwrap();
    let packed = pack(
        &dense,
        &acc(0),
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    assert_eq!(packed.lists().num_blocks()[0], 3);
    type Edit = fn(&mut Vec<i32>);
    let cases: [(&str, Edit); 5] = [
        ("kv_indices", |v| v.swap(0, 1)),
        ("kv_indices", |v| v[0] = 99),
        ("kv_tile_offsets", |v| v[1] = v[0]),
        ("kv_num_blocks", |v| v[0] = -1),
        ("full_kv_num_blocks", |v| v[0] = 100),
    ];
    for (name, f) in cases {
        // With its checksums, the file names the changed tensor.
        let err = PackedMask::from_safetensors(&tamper_keeping_checksums(&packed, name, f, true))
            .unwrap_err();
        assert_eq!(
            err,
            MaskError::Checksum {
                tensor: name.to_string(),
                detail: "does not match its data"
            }
        );
        let err = PackedMask::from_safetensors(&tamper(&packed, name, f)).unwrap_err();
        assert!(
            matches!(
                err,
                MaskError::Unsorted { .. }
                    | MaskError::IndexOutOfRange { .. }
                    | MaskError::Corrupt { .. }
            ),
            "{name}: {err}"
        );
    }
}

#[test]
fn packed_reader_rejects_truncated_files() {
    let bytes = sample(0, Encoding::QuadLane).to_safetensors().unwrap();
    for cut in [0, 7, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            PackedMask::from_safetensors(&bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn npy_round_trips_every_dtype() {
    let cases: [(DType, usize); 9] = [
        (DType::Bool, 1),
        (DType::U8, 1),
        (DType::I8, 1),
        (DType::U16, 2),
        (DType::I16, 2),
        (DType::U32, 4),
        (DType::I32, 4),
        (DType::U64, 8),
        (DType::I64, 8),
    ];
    for (dtype, size) in cases {
        for shape in [vec![], vec![0], vec![5], vec![2, 3], vec![1, 2, 2, 3]] {
            let n: usize = shape.iter().product();
            let data: Vec<u8> = (0..n * size).map(|x| (x % 2) as u8).collect();
            let bytes = write_npy(dtype, &shape, &data);
            assert_eq!(
                bytes.iter().position(|&b| b == b'\n').unwrap() % 64,
                63,
                "header padded to 64"
            );
            let view = read_npy(&bytes).unwrap();
            assert_eq!(
                (view.dtype, view.shape.as_slice(), view.data),
                (dtype, shape.as_slice(), data.as_slice())
            );
        }
    }
    let bytes = write_npy(DType::I16, &[3], &[0xff, 0xff, 2, 0, 0, 0x80]);
    let view = read_npy(&bytes).unwrap();
    assert_eq!(view.to_i64("x").unwrap(), vec![-1, 2, i16::MIN as i64]);
}

fn npy_with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn npy_reader_names_what_is_wrong() {
    let ok = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n";
    assert!(read_npy(&npy_with_header(ok, &[1, 0, 1, 1])).is_ok());
    type Check = fn(&MaskError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (npy_with_header(ok, &[1, 0, 1]), |e| {
            matches!(
                e,
                MaskError::Truncated {
                    needed: 4,
                    available: 3,
                    ..
                }
            )
        }),
        (npy_with_header(ok, &[1, 0, 1, 1, 1]), |e| {
            matches!(e, MaskError::Corrupt { .. })
        }),
        (
            npy_with_header(
                "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                &[0; 8],
            ),
            |e| matches!(e, MaskError::WrongDtype { .. }),
        ),
        (
            npy_with_header(
                "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                &[0; 4],
            ),
            |e| {
                matches!(
                    e,
                    MaskError::WrongDtype {
                        found: "a big-endian or unspecified-order integer or float type",
                        ..
                    }
                )
            },
        ),
        (
            npy_with_header(
                "{'descr': '|u1', 'fortran_order': True, 'shape': (1,), }",
                &[0],
            ),
            |e| matches!(e, MaskError::Unsupported { .. }),
        ),
        (
            npy_with_header("{'descr': '|u1', 'shape': (1,), }", &[0]),
            |e| {
                matches!(
                    e,
                    MaskError::Corrupt {
                        detail: "missing 'fortran_order'",
                        ..
                    }
                )
            },
        ),
        (
            npy_with_header(
                "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                &[],
            ),
            |e| matches!(e, MaskError::Overflow { detail, .. } if detail == "99999999999999999999"),
        ),
        (
            npy_with_header(
                "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                &[],
            ),
            |e| matches!(e, MaskError::Overflow { detail, .. } if detail.contains("4294967296")),
        ),
        (
            npy_with_header(
                "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                &[0; 8],
            ),
            |e| matches!(e, MaskError::WrongDtype { found, .. } if found.contains("complex")),
        ),
        (
            npy_with_header(
                "{'descr': '=i8', 'fortran_order': False, 'shape': (1,), }",
                &[0; 8],
            ),
            |e| matches!(e, MaskError::WrongDtype { found, .. } if found.contains("big-endian or unspecified")),
        ),
        (b"\x93NUMPY\x01\x00\xff\x00{".to_vec(), |e| {
            matches!(e, MaskError::Truncated { .. })
        }),
        (b"\x93NUMPX\x01\x00\x00\x00".to_vec(), |e| {
            matches!(e, MaskError::Corrupt { .. })
        }),
        (b"\x93NUMPY\x07\x00\x00\x00".to_vec(), |e| {
            matches!(e, MaskError::Unsupported { .. })
        }),
    ];
    for (bytes, check) in cases {
        let err = read_npy(&bytes).unwrap_err();
        assert!(check(&err), "{err}");
    }
}

#[test]
fn read_array_picks_npy_or_named_safetensors_tensor() {
    let npy = write_npy(DType::U8, &[2], &[3, 4]);
    assert_eq!(read_array(&npy, None).unwrap().data, &[3, 4]);
    let file = sample(0, Encoding::FragmentNative)
        .to_safetensors()
        .unwrap();
    assert_eq!(
        read_array(&file, Some("kv_num_blocks")).unwrap().dtype,
        DType::I32
    );
    assert!(matches!(
        read_array(&file, None),
        Err(MaskError::Missing { .. })
    ));
    assert!(matches!(
        read_array(&file, Some("nope")),
        Err(MaskError::Missing { .. })
    ));
    let words = read_array(&file, Some("words")).unwrap();
    assert!(matches!(
        words.mask_bytes("mask"),
        Err(MaskError::WrongDtype { .. })
    ));
}

fn readers(bytes: &[u8]) {
    let _ = read_npy(bytes);
    let _ = read_array(bytes, None);
    let _ = read_array(bytes, Some("words"));
    if let Ok(view) = read_array(bytes, None) {
        let _ = view.to_i64("x");
        let _ = view.mask_bytes("x");
    }
    let _ = PackedMask::from_safetensors(bytes);
}

proptest! {
    #![proptest_config(proptest_ci::config(256))]

    #[test]
    fn random_bytes_never_panic_the_readers(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        readers(&bytes);
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        npy.extend_from_slice(&bytes);
        readers(&npy);
    }

    #[test]
    fn corrupted_valid_files_never_panic_the_readers(which in 0usize..3, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let mut bytes = match which {
            0 => write_npy(DType::I32, &[3, 2], &[1; 24]),
            1 => sample(0, Encoding::FragmentNative).to_safetensors().unwrap(),
            _ => sample(6, Encoding::QuadLane).to_safetensors().unwrap(),
        };
        for (at, value) in flips {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        readers(&bytes);
        bytes.truncate(cut % (bytes.len() + 1));
        readers(&bytes);
    }
}

// ---- The packed reader cross-checks metadata against the tensors (issue 10). ----

/// A packed file with metadata `key` set to `value`.
fn with_metadata(packed: &PackedMask, key: &str, value: &str) -> Vec<u8> {
    let bytes = packed.to_safetensors().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut meta = without_checksums(Some(packed.metadata())).unwrap();
    meta.insert(key.to_string(), value.to_string());
    let views: Vec<(String, safetensors::tensor::TensorView)> =
        st.iter().map(|(n, t)| (n.to_string(), t)).collect();
    safetensors::serialize(views, Some(meta)).unwrap()
}

#[test]
fn packed_reader_rejects_metadata_the_tensors_contradict() {
    // One full 128 x 128 tile: Sq = Sk = 1 keeps the grid but makes the full tile
    // stick out of the mask (inspect printed "density 1638400%").
    let ones = vec![1u8; 128 * 128];
    let dense = DenseMask::new(&ones, &[128, 128]).unwrap();
    let packed = pack(
        &dense,
        &acc(0),
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    for (key, value) in [
        ("seqlen_q", "1"),
        ("seqlen_k", "1"),
        ("batch", "2"),
        ("heads", "0"),
    ] {
        let err = PackedMask::from_safetensors(&with_metadata(&packed, key, value)).unwrap_err();
        assert!(
            matches!(
                err,
                MaskError::Corrupt { .. } | MaskError::ShapeMismatch { .. }
            ),
            "{key}={value}: {err}"
        );
    }
    let err = PackedMask::from_safetensors(&with_metadata(&packed, "block_m", "99999999999"))
        .unwrap_err();
    assert!(err.to_string().contains("99999999999"), "{err}");
}

proptest! {
    #[test]
    fn accepted_packed_files_count_no_more_ones_than_elements(
        i in 0usize..4,
        key in 0usize..4,
        value in 0usize..1000,
    ) {
        let packed = sample(i, Encoding::FragmentNative);
        let key = ["seqlen_q", "seqlen_k", "batch", "heads"][key];
        let bytes = with_metadata(&packed, key, &value.to_string());
        if let Ok(read) = PackedMask::from_safetensors(&bytes) {
            let s = read.stats();
            prop_assert!(s.ones <= s.elements, "{} > {}", s.ones, s.elements);
            prop_assert!(s.full + s.partial <= s.tiles);
            // Every element outside the mask reads 0, every element inside as packed.
            let shape = read.shape();
            prop_assert!(!read.get(0, 0, shape.seqlen_q, 0));
            for q in (0..shape.seqlen_q).step_by(7) {
                for k in (0..shape.seqlen_k).step_by(5) {
                    prop_assert_eq!(read.get(0, 0, q, k), packed.get(0, 0, q, k));
                }
            }
        }
    }
}
