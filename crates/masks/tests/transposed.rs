//! The transposed lists (issue 13): the forward lists transposed as FlexAttention
//! transposes them, for every source; the file stores them (format version 2), reads
//! version 1 files, and rejects corrupt transposed data with typed errors.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use std::collections::HashMap;

use common::{acc, config, random_mask, Rng};
use fragmask_masks::io::{FORMAT_VERSION, FORMAT_VERSIONS_READ};
use fragmask_masks::{
    pack, pack_transposed, BlockLists, BlockSparseMask, BlockSparseOptions, DenseMask, Encoding,
    ListDirection, MaskError, MaskShape, MaskSource, PackOptions, PackedMask, Predicate,
    PredicateMask, TileClass, TiledAccumulator, TopKMask, TransposedLists,
};
use proptest::prelude::*;

fn options(threads: usize) -> PackOptions<'static> {
    PackOptions {
        threads,
        progress: None,
    }
}

/// The backward accumulator of config `i` used here: SwapAB where legal, else the
/// forward's own tiling.
fn backward(i: usize) -> TiledAccumulator {
    let a = acc(i);
    TransposedLists::default_accumulator(&a).unwrap_or(a)
}

/// FlexAttention's `_transpose_ordered`, spelled out on the forward classification:
/// key block `n`'s partial (full) query blocks are the `m` whose tile `(m, n)` is
/// partial (full), ascending. Checks counts, indices, padding (0 past the count, -1 in
/// the offsets) and that `get` from the transposed data equals the forward's.
fn assert_is_transpose(packed: &PackedMask) {
    let t = packed.transposed().unwrap();
    let g = *packed.grid();
    let s = g.shape;
    let (mb, nb) = (g.m_blocks, g.n_blocks);
    let mut seen = vec![false; t.partial_tiles()];
    assert_eq!(t.partial_tiles(), packed.partial_tiles());
    for b in 0..s.batch {
        for h in 0..s.heads {
            for n in 0..nb {
                let row = (b * s.heads + h) * nb + n;
                let (mut partial, mut full) = (Vec::new(), Vec::new());
                for m in 0..mb {
                    match packed.tile_class(b, h, m, n) {
                        TileClass::Partial(_) => partial.push(m as i32),
                        TileClass::Full => full.push(m as i32),
                        TileClass::Empty => {}
                    }
                    let class = |c: TileClass| match c {
                        TileClass::Partial(_) => 2,
                        TileClass::Full => 1,
                        TileClass::Empty => 0,
                    };
                    assert_eq!(
                        class(t.tile_class(b, h, n, m)),
                        class(packed.tile_class(b, h, m, n))
                    );
                }
                let count = t.lists().num_blocks()[row] as usize;
                let full_count = t.lists().full_num_blocks()[row] as usize;
                let at = row * mb;
                assert_eq!(&t.lists().indices()[at..at + count], partial.as_slice());
                assert_eq!(
                    &t.lists().full_indices()[at..at + full_count],
                    full.as_slice()
                );
                assert!(t.lists().indices()[at + count..at + mb]
                    .iter()
                    .all(|&x| x == 0));
                assert!(t.lists().full_indices()[at + full_count..at + mb]
                    .iter()
                    .all(|&x| x == 0));
                assert!(t.lists().tile_offsets()[at + count..at + mb]
                    .iter()
                    .all(|&x| x == -1));
                for &tile in &t.lists().tile_offsets()[at..at + count] {
                    assert!(!std::mem::replace(&mut seen[tile as usize], true));
                }
            }
            for q in 0..s.seqlen_q {
                for k in 0..s.seqlen_k {
                    assert_eq!(
                        t.get(b, h, q, k),
                        packed.get(b, h, q, k),
                        "({b}, {h}, {q}, {k})"
                    );
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&x| x),
        "a transposed tile is never referenced"
    );
    // The words follow the backward's walk: key block by key block, query blocks up.
    let offsets: Vec<i32> = t
        .lists()
        .tile_offsets()
        .iter()
        .copied()
        .filter(|&x| x >= 0)
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] + 1 == w[1]));
}

/// Packs `source` with and without the transposed lists; the forward parts agree.
fn packed_both(source: &dyn MaskSource, i: usize, encoding: Encoding) -> PackedMask {
    let a = acc(i);
    let plain = pack(source, &a, encoding, &options(0)).unwrap();
    let with = pack_transposed(source, &a, encoding, &backward(i), &options(0)).unwrap();
    let mut dropped = with.clone();
    dropped.drop_transposed();
    assert_eq!(dropped, plain);
    assert!(matches!(
        plain.transposed(),
        Err(MaskError::NoTransposedLists)
    ));
    with
}

#[test]
fn the_error_without_transposed_lists_names_the_command_that_adds_them() {
    let message = MaskError::NoTransposedLists.to_string();
    assert!(message.contains("fragmask pack --transposed"), "{message}");
    assert!(message.contains("q_indices"), "{message}");
}

#[test]
fn transposed_lists_of_a_causal_mask_are_the_lower_triangle_read_by_columns() {
    let causal = PredicateMask::new(1024, 1024, Predicate::causal()).unwrap();
    let packed = packed_both(&causal, 0, Encoding::FragmentNative);
    let t = packed.transposed().unwrap();
    // 8 x 8 tiles of 128; the diagonal is partial, below it full.
    assert_eq!(t.lists().num_blocks(), &[1; 8]);
    assert_eq!(t.lists().full_num_blocks(), &[7, 6, 5, 4, 3, 2, 1, 0]);
    for n in 0..8 {
        assert_eq!(t.lists().indices()[n * 8], n as i32);
        let full: Vec<i32> = ((n + 1) as i32..8).collect();
        assert_eq!(
            &t.lists().full_indices()[n * 8..n * 8 + 7 - n],
            full.as_slice()
        );
    }
    assert_is_transpose(&packed);
}

#[test]
fn add_transposed_refuses_a_backward_tile_of_another_size() {
    let causal = PredicateMask::new(256, 256, Predicate::causal()).unwrap();
    let mut packed = pack(&causal, &acc(0), Encoding::FragmentNative, &options(1)).unwrap();
    let other = TiledAccumulator::new(64, 128, 2, true).unwrap();
    let err = packed.add_transposed(&other, &options(1)).unwrap_err();
    assert!(
        matches!(
            err,
            MaskError::ShapeMismatch {
                expected: 128,
                found: 64,
                ..
            }
        ),
        "{err}"
    );
    assert!(!packed.has_transposed());
}

#[test]
fn default_backward_accumulator_is_swap_ab_with_the_warpgroups_block_n_allows() {
    for ((bm, bn), expected) in [
        ((128, 128), Some(2)),
        ((64, 128), Some(2)),
        ((64, 64), Some(1)),
        ((128, 192), Some(1)),
        ((128, 256), Some(2)),
        ((128, 96), None),
    ] {
        let fwd = TiledAccumulator::with_atom_n(bm, bn, 1, 8, false).unwrap();
        let got = TransposedLists::default_accumulator(&fwd).ok();
        assert_eq!(
            got.map(|a| (a.warpgroups(), a.swap_ab())),
            expected.map(|w| (w, true))
        );
    }
}

proptest! {
    #![proptest_config(proptest_ci::config(24))]

    #[test]
    fn transposed_lists_of_dense_masks_are_the_forward_lists_transposed(i in config(), e in 0usize..3, b in 1usize..=2, h in 1usize..=2, rows in 1usize..=300, cols in 1usize..=400, seed in any::<u64>()) {
        let a = acc(i);
        let mask = random_mask(seed, b, h, rows, cols, a.block_m() as usize, a.block_n() as usize);
        let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
        assert_is_transpose(&packed_both(&dense, i, Encoding::ALL[e]));
    }

    #[test]
    fn transposed_lists_do_not_depend_on_the_thread_count(i in config(), seed in any::<u64>(), threads in 2usize..=5) {
        let a = acc(i);
        let (bm, bn) = (a.block_m() as usize, a.block_n() as usize);
        // Enough partial tiles for several work items of the transcoder.
        let mask = random_mask(seed, 1, 2, 9 * bm + 3, 40 * bn, bm, bn);
        let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
        let one = pack_transposed(&dense, &a, Encoding::FragmentNative, &backward(i), &options(1)).unwrap();
        let many = pack_transposed(&dense, &a, Encoding::FragmentNative, &backward(i), &options(threads)).unwrap();
        prop_assert_eq!(one, many);
    }

    #[test]
    fn transposed_lists_of_top_k_lists_are_the_forward_lists_transposed(i in config(), sq in 1usize..=300, sk in 1usize..=500, k in 0usize..24, seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let mut fixed = Vec::with_capacity(sq * k);
        for _ in 0..sq {
            let mut row: Vec<i64> = Vec::new();
            for _ in 0..k {
                let key = rng.below(sk as u64) as i64;
                row.push(if row.contains(&key) { -1 } else { key });
            }
            fixed.extend(row);
        }
        let topk = TopKMask::from_fixed_k(MaskShape::new(1, 1, sq, sk).unwrap(), k, &fixed).unwrap();
        assert_is_transpose(&packed_both(&topk, i, Encoding::FragmentNative));
    }

    #[test]
    fn transposed_lists_of_variable_size_block_lists_are_the_forward_lists_transposed(i in config(), qb in 1usize..=6, kb in 1usize..=8, seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let max_kv = kb;
        let mut index = vec![0i64; 2 * qb * max_kv];
        let mut num = vec![0i64; 2 * qb];
        for row in 0..2 * qb {
            let mut keys: Vec<i64> = (0..kb as i64).collect();
            for j in (1..keys.len()).rev() {
                keys.swap(j, rng.below(j as u64 + 1) as usize);
            }
            let count = rng.below(kb as u64 + 1) as usize;
            num[row] = count as i64;
            index[row * max_kv..row * max_kv + count].copy_from_slice(&keys[..count]);
        }
        let sizes: Vec<i64> = (0..kb).map(|_| 1 + rng.below(64) as i64).collect();
        let blocks = BlockSparseMask::new(
            &[2, qb, max_kv],
            &index,
            &[2, qb],
            &num,
            Some(&sizes),
            BlockSparseOptions { block_size: 64, seqlen_q: None, seqlen_k: None },
        )
        .unwrap();
        assert_is_transpose(&packed_both(&blocks, i, Encoding::FragmentNative));
    }

    #[test]
    fn transposed_lists_of_predicates_are_the_forward_lists_transposed(i in config(), sq in 1usize..=400, sk in 1usize..=400, left in 0usize..300, which in 0usize..4) {
        let predicate = match which {
            0 => Predicate::causal(),
            1 => Predicate::window(Some(left), Some(left / 3)),
            2 => Predicate::prefix_lm(left),
            _ => Predicate::window(None, Some(left)),
        };
        let source = PredicateMask::new(sq, sk, predicate).unwrap();
        assert_is_transpose(&packed_both(&source, i, Encoding::RowMajor));
    }
}

// ---- The file: format version 2 stores them; version 1 files still load. ----

fn sample(i: usize) -> PackedMask {
    let a = acc(i);
    let mask = random_mask(
        i as u64 + 11,
        2,
        1,
        3 * a.block_m() as usize - 5,
        2 * a.block_n() as usize + 9,
        a.block_m() as usize,
        a.block_n() as usize,
    );
    let dense = DenseMask::new(&mask.data, &mask.dims()).unwrap();
    pack_transposed(
        &dense,
        &a,
        Encoding::FragmentNative,
        &backward(i),
        &options(0),
    )
    .unwrap()
}

/// A file's tensors and metadata, editable.
struct FileParts {
    tensors: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>,
    meta: HashMap<String, String>,
}

impl FileParts {
    fn of(bytes: &[u8]) -> FileParts {
        let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
        let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
        FileParts {
            tensors: st
                .iter()
                .map(|(n, t)| {
                    (
                        n.to_string(),
                        t.dtype(),
                        t.shape().to_vec(),
                        t.data().to_vec(),
                    )
                })
                .collect(),
            // Without the checksums: these tests edit files to reach the list
            // validation, which is what guards older files (written without them).
            meta: meta
                .metadata()
                .clone()
                .unwrap()
                .into_iter()
                .filter(|(k, _)| !k.starts_with(fragmask_masks::io::CHECKSUM_PREFIX))
                .collect(),
        }
    }

    fn edit_i32(mut self, name: &str, f: impl Fn(&mut Vec<i32>)) -> FileParts {
        let t = self.tensors.iter_mut().find(|t| t.0 == name).unwrap();
        let mut v: Vec<i32> =
            t.3.chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
        f(&mut v);
        t.3 = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let views: Vec<(String, safetensors::tensor::TensorView)> = self
            .tensors
            .iter()
            .map(|(n, d, s, b)| {
                (
                    n.clone(),
                    safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize(views, Some(self.meta.clone())).unwrap()
    }
}

#[test]
fn file_with_transposed_lists_round_trips_for_every_config() {
    for i in 0..common::CONFIGS.len() {
        let packed = sample(i);
        let bytes = packed.to_safetensors().unwrap();
        let read = PackedMask::from_safetensors(&bytes).unwrap();
        assert!(read.has_transposed());
        assert_eq!(read, packed, "config {i}");
    }
}

#[test]
fn file_has_the_documented_transposed_tensors_and_metadata() {
    let packed = sample(0);
    let parts = FileParts::of(&packed.to_safetensors().unwrap());
    let g = packed.grid();
    let (m, n, p) = (g.m_blocks, g.n_blocks, packed.partial_tiles());
    let i32 = safetensors::Dtype::I32;
    for (name, dtype, shape) in [
        ("q_num_blocks", i32, vec![2, 1, n]),
        ("q_indices", i32, vec![2, 1, n, m]),
        ("full_q_num_blocks", i32, vec![2, 1, n]),
        ("full_q_indices", i32, vec![2, 1, n, m]),
        ("q_tile_offsets", i32, vec![2, 1, n, m]),
        ("q_words", safetensors::Dtype::U32, vec![p, 256, 2]),
        ("words", safetensors::Dtype::U32, vec![p, 256, 2]),
    ] {
        let t = parts.tensors.iter().find(|t| t.0 == name).unwrap();
        assert_eq!((t.1, &t.2), (dtype, &shape), "{name}");
    }
    assert_eq!(parts.tensors.len(), 12);
    for (k, v) in [
        ("format_version", "2"),
        ("transposed", "true"),
        ("transposed_warpgroups", "2"),
        ("transposed_swap_ab", "true"),
        ("transposed_encoding", "fragment-native"),
    ] {
        assert_eq!(parts.meta.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(FORMAT_VERSION, 2);
    assert_eq!(FORMAT_VERSIONS_READ, [1, 2]);
    // Without them: the forward's six tensors and transposed = false.
    let mut forward = packed.clone();
    forward.drop_transposed();
    let parts = FileParts::of(&forward.to_safetensors().unwrap());
    assert_eq!(parts.tensors.len(), 6);
    assert_eq!(parts.meta["transposed"], "false");
    assert!(!parts.meta.contains_key("transposed_warpgroups"));
}

/// The v1 fixtures (tests/fixtures, written by the version-1 writer at commit 29430b2)
/// and the sources they were packed from.
fn v1_fixtures() -> Vec<(&'static str, Vec<u8>, Vec<usize>, TiledAccumulator)> {
    let small: Vec<u8> = (0..2 * 100 * 70)
        .map(|i: usize| u8::from(i % 7 < 3 || (i / 70) % 100 < 20))
        .collect();
    let large: Vec<u8> = (0..300 * 260)
        .map(|i: usize| u8::from((i * 2654435761usize) % 97 < 40 || (i / 260) >= (i % 260)))
        .collect();
    vec![
        (
            "v1_fragment_native_64x32.safetensors",
            small,
            vec![2, 100, 70],
            TiledAccumulator::new(64, 32, 1, false).unwrap(),
        ),
        (
            "v1_fragment_native_128x128.safetensors",
            large,
            vec![300, 260],
            TiledAccumulator::new(128, 128, 2, false).unwrap(),
        ),
    ]
}

#[test]
fn version_1_files_still_load_and_have_no_transposed_lists() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (name, data, dims, a) in v1_fixtures() {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(FileParts::of(&bytes).meta["format_version"], "1", "{name}");
        let mut read = PackedMask::from_safetensors(&bytes).unwrap();
        let dense = DenseMask::new(&data, &dims).unwrap();
        let packed = pack(&dense, &a, Encoding::FragmentNative, &options(0)).unwrap();
        assert_eq!(read, packed, "{name}");
        assert!(matches!(
            read.transposed(),
            Err(MaskError::NoTransposedLists)
        ));
        // The forward still works, and the lists can be added to the file's mask.
        read.add_transposed(
            &TransposedLists::default_accumulator(&a).unwrap_or(a),
            &options(0),
        )
        .unwrap();
        assert_is_transpose(&read);
        let again = PackedMask::from_safetensors(&read.to_safetensors().unwrap()).unwrap();
        assert_eq!(again, read);
    }
}

/// The v2 fixtures (tests/fixtures): the v1 fixtures with the transposed lists added
/// by the writer before the tile lists became one `BlockLists` type (`fragmask pack
/// --packed v1_... --transposed`, plus `--transposed-no-swap-ab` for the 64x32 tile),
/// and their backward accumulators.
fn v2_fixtures() -> Vec<(&'static str, &'static str, TiledAccumulator)> {
    vec![
        (
            "v2_transposed_64x32.safetensors",
            "v1_fragment_native_64x32.safetensors",
            TiledAccumulator::new(64, 32, 1, false).unwrap(),
        ),
        (
            "v2_transposed_128x128.safetensors",
            "v1_fragment_native_128x128.safetensors",
            TiledAccumulator::new(128, 128, 2, true).unwrap(),
        ),
    ]
}

#[test]
fn version_2_files_load_and_are_written_back_byte_for_byte() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let out = std::env::temp_dir().join(format!("fragmask-v2-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for (name, v1, bwd) in v2_fixtures() {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(FileParts::of(&bytes).meta["format_version"], "2", "{name}");
        let read = PackedMask::from_safetensors(&bytes).unwrap();
        // The same lists and words as the transposition built today.
        let mut built =
            PackedMask::from_safetensors(&std::fs::read(dir.join(v1)).unwrap()).unwrap();
        built.add_transposed(&bwd, &options(0)).unwrap();
        assert_eq!(read, built, "{name}");
        assert_is_transpose(&read);
        // The writer's tensors, names, shapes, metadata and order are unchanged.
        let path = out.join(name);
        read.write_safetensors(&path).unwrap();
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "{name} is written back byte for byte"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn corrupt_transposed_data_is_a_typed_error() {
    // Every tile partial and no two alike: 3 x 3 tiles of 128, 2 heads.
    let data: Vec<u8> = (0..2 * 300 * 384usize)
        .map(|x| ((x * 2654435761) % 7 < 3) as u8)
        .collect();
    let dense = DenseMask::new(&data, &[2, 300, 384]).unwrap();
    let packed = pack_transposed(
        &dense,
        &acc(0),
        Encoding::FragmentNative,
        &backward(0),
        &options(0),
    )
    .unwrap();
    let good = FileParts::of(&packed.to_safetensors().unwrap());
    let fresh = || FileParts::of(&good.bytes());
    type Check = fn(&MaskError) -> bool;
    let corrupt: Check = |e| matches!(e, MaskError::Corrupt { .. });
    let cases: Vec<(&str, FileParts, Check)> = vec![
        (
            "q_indices out of order",
            fresh().edit_i32("q_indices", |v| v.swap(0, 1)),
            corrupt,
        ),
        (
            "q_indices past m_blocks",
            fresh().edit_i32("q_indices", |v| v[0] = 99),
            corrupt,
        ),
        (
            "q_num_blocks too large",
            fresh().edit_i32("q_num_blocks", |v| v[0] = 4),
            corrupt,
        ),
        (
            "q_num_blocks negative",
            fresh().edit_i32("q_num_blocks", |v| v[0] = -1),
            corrupt,
        ),
        (
            "full_q_num_blocks",
            fresh().edit_i32("full_q_num_blocks", |v| v[0] = 1),
            corrupt,
        ),
        (
            "q_tile_offsets shared",
            fresh().edit_i32("q_tile_offsets", |v| v[1] = v[0]),
            corrupt,
        ),
        (
            "q_tile_offsets swapped",
            fresh().edit_i32("q_tile_offsets", |v| v.swap(0, 1)),
            corrupt,
        ),
        (
            "q_tile_offsets out of range",
            fresh().edit_i32("q_tile_offsets", |v| v[0] = 1 << 20),
            |e| {
                matches!(
                    e,
                    MaskError::IndexOutOfRange {
                        what: "q_tile_offsets",
                        ..
                    }
                )
            },
        ),
        (
            "q_words bit flipped",
            fresh().edit_i32("q_words", |v| v[77] ^= 1 << 5),
            |e| {
                matches!(
                    e,
                    MaskError::Corrupt {
                        what: "packed mask transposed words",
                        ..
                    }
                )
            },
        ),
        (
            "q_indices wrong dtype",
            {
                let mut p = fresh();
                p.tensors.iter_mut().find(|t| t.0 == "q_indices").unwrap().1 =
                    safetensors::Dtype::U32;
                p
            },
            |e| {
                matches!(
                    e,
                    MaskError::WrongDtype {
                        what: "q_indices",
                        ..
                    }
                )
            },
        ),
        (
            "q_words wrong shape",
            {
                let mut p = fresh();
                let t = p.tensors.iter_mut().find(|t| t.0 == "q_words").unwrap();
                t.2 = vec![t.2[0] * 2, 128, 2];
                p
            },
            |e| matches!(e, MaskError::ShapeMismatch { .. }),
        ),
        (
            "q_words missing",
            {
                let mut p = fresh();
                p.tensors.retain(|t| t.0 != "q_words");
                p
            },
            |e| matches!(e, MaskError::Missing { name, .. } if name == "q_words"),
        ),
        (
            "transposed tensors with transposed = false",
            {
                let mut p = fresh();
                p.meta.insert("transposed".into(), "false".into());
                p
            },
            corrupt,
        ),
        (
            "transposed = maybe",
            {
                let mut p = fresh();
                p.meta.insert("transposed".into(), "maybe".into());
                p
            },
            corrupt,
        ),
        (
            "transposed key missing in version 2",
            {
                let mut p = fresh();
                p.meta.remove("transposed");
                p
            },
            |e| matches!(e, MaskError::Missing { name, .. } if name == "transposed"),
        ),
        (
            "transposed_warpgroups illegal",
            {
                let mut p = fresh();
                p.meta.insert("transposed_warpgroups".into(), "3".into());
                p
            },
            |e| matches!(e, MaskError::Config(_)),
        ),
        (
            "transposed_warpgroups not a number",
            {
                let mut p = fresh();
                p.meta.insert("transposed_warpgroups".into(), "-1".into());
                p
            },
            corrupt,
        ),
        (
            "transposed_swap_ab flipped",
            {
                let mut p = fresh();
                p.meta.insert("transposed_swap_ab".into(), "false".into());
                p
            },
            |e| {
                matches!(
                    e,
                    MaskError::Corrupt { .. } | MaskError::ShapeMismatch { .. }
                )
            },
        ),
        (
            "transposed_encoding",
            {
                let mut p = fresh();
                p.meta
                    .insert("transposed_encoding".into(), "row-major".into());
                p
            },
            |e| matches!(e, MaskError::Unsupported { .. }),
        ),
        (
            "format_version 3",
            {
                let mut p = fresh();
                p.meta.insert("format_version".into(), "3".into());
                p
            },
            |e| matches!(e, MaskError::Unsupported { .. }),
        ),
    ];
    assert!(PackedMask::from_safetensors(&good.bytes()).is_ok());
    for (what, parts, check) in cases {
        match PackedMask::from_safetensors(&parts.bytes()) {
            Ok(_) => panic!("{what}: accepted"),
            Err(err) => assert!(check(&err), "{what}: {err:?}"),
        }
    }
}

#[test]
fn transposed_lists_stored_in_the_forward_shape_are_a_shape_mismatch() {
    // 8 query blocks, 3 key blocks: q_indices is [1, 1, 3, 8].
    let causal = PredicateMask::new(1000, 300, Predicate::causal()).unwrap();
    let packed = packed_both(&causal, 0, Encoding::FragmentNative);
    let mut parts = FileParts::of(&packed.to_safetensors().unwrap());
    let t = parts
        .tensors
        .iter_mut()
        .find(|t| t.0 == "q_indices")
        .unwrap();
    assert_eq!(t.2, vec![1, 1, 3, 8]);
    t.2 = vec![1, 1, 8, 3];
    let err = PackedMask::from_safetensors(&parts.bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            MaskError::ShapeMismatch {
                what: "transposed tile list n_blocks dimension (ceil(seqlen_k / block_n))",
                expected: 3,
                found: 8,
            }
        ),
        "{err}"
    );
}

proptest! {
    #![proptest_config(proptest_ci::config(128))]

    #[test]
    fn corrupted_files_with_transposed_lists_never_panic_the_reader(i in 0usize..4, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let mut bytes = sample(i).to_safetensors().unwrap();
        for (at, value) in flips {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        if let Ok(read) = PackedMask::from_safetensors(&bytes) {
            // Whatever was accepted is self-consistent.
            if let Ok(t) = read.transposed() {
                prop_assert_eq!(t.partial_tiles(), read.partial_tiles());
            }
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = PackedMask::from_safetensors(&bytes);
    }
}

// ---- Transposed lists another builder produced (the GPU packer): attach_transposed. ----

/// A mask's transposed lists and words, as the GPU packer hands them over.
fn parts(t: &TransposedLists) -> (BlockLists, Vec<u32>) {
    (t.lists().clone(), t.words().to_vec())
}

#[test]
fn attached_transposed_parts_equal_the_built_ones_for_every_config() {
    for i in 0..common::CONFIGS.len() {
        let built = sample(i);
        let (lists, words) = parts(built.transposed().unwrap());
        let mut bare = built.clone();
        bare.drop_transposed();
        bare.attach_transposed(&backward(i), lists, words).unwrap();
        assert_eq!(bare, built, "config {i}");
    }
}

#[test]
fn attached_transposed_parts_that_are_wrong_are_typed_errors() {
    let built = sample(0);
    let mut bare = built.clone();
    bare.drop_transposed();
    let (lists, words) = parts(built.transposed().unwrap());
    // A list one entry short: a shape mismatch naming it, not a panic.
    let mut short = lists.clone().into_parts();
    short[1].pop();
    let (rows, row_len) = (lists.rows(), lists.row_len());
    let e = BlockLists::new(ListDirection::Transposed, rows, row_len, short).unwrap_err();
    assert!(
        matches!(e, MaskError::ShapeMismatch { what, .. } if what.starts_with("q_indices")),
        "{e}"
    );
    // Lists of one row fewer than the mask has: a shape mismatch naming the counts.
    let mut fewer = lists.clone().into_parts();
    fewer[0].pop();
    fewer[2].pop();
    for list in &mut fewer[1..=1] {
        list.truncate(list.len() - row_len);
    }
    for list in &mut fewer[3..] {
        list.truncate(list.len() - row_len);
    }
    let fewer = BlockLists::new(ListDirection::Transposed, rows - 1, row_len, fewer).unwrap();
    let e = bare
        .clone()
        .attach_transposed(&backward(0), fewer, words.clone())
        .unwrap_err();
    assert!(
        matches!(e, MaskError::ShapeMismatch { what, .. } if what.starts_with("q_num_blocks")),
        "{e}"
    );
    // Forward lists in place of transposed ones: refused.
    let e = bare
        .clone()
        .attach_transposed(&backward(0), built.lists().clone(), words.clone())
        .unwrap_err();
    assert!(matches!(e, MaskError::Unsupported { .. }), "{e}");
    // One flipped bit of the words: the words' check against the forward tiles.
    let mut flipped = words.clone();
    if let Some(w) = flipped.iter_mut().find(|w| **w != 0) {
        *w ^= *w & w.wrapping_neg();
    }
    let e = bare
        .clone()
        .attach_transposed(&backward(0), lists.clone(), flipped)
        .unwrap_err();
    assert!(matches!(e, MaskError::Corrupt { .. }), "{e}");
    // Words one tile short.
    let per_tile = built.transposed().unwrap().layout().words_per_tile();
    let e = bare
        .clone()
        .attach_transposed(&backward(0), lists, words[per_tile..].to_vec())
        .unwrap_err();
    assert!(matches!(e, MaskError::ShapeMismatch { .. }), "{e}");
    assert!(!bare.has_transposed());
}
