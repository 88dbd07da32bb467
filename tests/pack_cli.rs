//! `fragmask pack` and `fragmask inspect` end to end: files in, files out, exit codes.

#[path = "support/python.rs"]
mod python;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fragmask::masks::io::{write_npy, DType};
use fragmask::masks::{DenseMask, MaskSource, PackedMask};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fragmask"))
}

struct Dir(PathBuf);
impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("fragmask-pack-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a pack that must fail: non-zero exit, `needle` in the message, no output file.
fn fails(args: &[&str], output: &Path, needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected '{needle}' in: {stderr}"
    );
    assert!(!output.exists(), "{args:?} left {}", output.display());
}

fn load(path: &Path) -> PackedMask {
    PackedMask::from_safetensors(&std::fs::read(path).unwrap()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn pseudo_random_mask(sq: usize, sk: usize) -> Vec<u8> {
    (0..sq * sk)
        .map(|i| {
            let (q, k) = (i / sk, i % sk);
            // Full, empty and mixed regions.
            (k < 128 || (q > 200 && k > 300 && (q * 31 + k * 17) % 7 < 3)) as u8
        })
        .collect()
}

#[test]
fn packed_dense_npy_decodes_to_the_mask_in_every_encoding() {
    let dir = Dir::new("dense");
    let (sq, sk) = (300, 500);
    let mask = pseudo_random_mask(sq, sk);
    let input = dir.write("mask.npy", &write_npy(DType::Bool, &[sq, sk], &mask));
    for encoding in ["fragment-native", "quad-lane", "row-major"] {
        for (block, wg, swap) in [
            ("128x128", "2", false),
            ("64x128", "2", true),
            ("192x128", "3", false),
        ] {
            let out = dir.path(&format!("{encoding}-{block}-{swap}.safetensors"));
            let mut args = vec![
                "pack",
                "--mask",
                s(&input),
                "--block",
                block,
                "--warpgroups",
                wg,
                "--encoding",
                encoding,
                "-o",
                s(&out),
            ];
            if swap {
                args.push("--swap-ab");
            }
            let stdout = ok(&args);
            assert!(stdout.contains("tiles:"), "{stdout}");
            let packed = load(&out);
            assert_eq!(packed.encoding().name(), encoding);
            assert_eq!(packed.accumulator().swap_ab(), swap);
            let plane = packed.decode_plane(0, 0);
            assert!(
                plane.iter().zip(&mask).all(|(&a, &b)| a == (b != 0)),
                "{encoding} {block}"
            );
        }
    }
}

#[test]
fn packed_top_k_fixed_and_csr_agree_with_the_dense_mask() {
    let dir = Dir::new("topk");
    let (sq, sk, k) = (200, 700, 5);
    let mut fixed = Vec::new();
    let (mut offsets, mut csr) = (vec![0i64], Vec::new());
    let mut dense = vec![0u8; sq * sk];
    for q in 0..sq {
        let mut keys: Vec<i64> = (0..k as i64)
            .map(|j| (q as i64 * 37 + j * 131) % sk as i64)
            .collect();
        keys.sort();
        keys.dedup();
        for &key in &keys {
            dense[q * sk + key as usize] = 1;
        }
        let mut row: Vec<i64> = keys.iter().rev().copied().collect();
        row.resize(k, -1);
        fixed.extend(row);
        csr.extend(&keys);
        offsets.push(csr.len() as i64);
    }
    let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let fixed_path = dir.write("fixed.npy", &write_npy(DType::I64, &[sq, k], &le(&fixed)));
    let idx_path = dir.write("idx.npy", &write_npy(DType::I64, &[csr.len()], &le(&csr)));
    let off_path = dir.write(
        "off.npy",
        &write_npy(DType::I64, &[offsets.len()], &le(&offsets)),
    );
    let dense_path = dir.write("dense.npy", &write_npy(DType::U8, &[sq, sk], &dense));
    let (a, b, c) = (
        dir.path("a.safetensors"),
        dir.path("b.safetensors"),
        dir.path("c.safetensors"),
    );
    ok(&[
        "pack",
        "--topk",
        s(&fixed_path),
        "--seqlen-k",
        "700",
        "-o",
        s(&a),
    ]);
    ok(&[
        "pack",
        "--topk",
        s(&idx_path),
        "--topk-offsets",
        s(&off_path),
        "--seqlen-k",
        "700",
        "-o",
        s(&b),
    ]);
    ok(&["pack", "--mask", s(&dense_path), "-o", s(&c)]);
    assert_eq!(load(&a), load(&c));
    assert_eq!(load(&b), load(&c));
}

#[test]
fn packed_per_head_csr_top_k_agrees_with_the_per_head_dense_mask() {
    let dir = Dir::new("topk-heads");
    let (heads, sq, sk) = (3, 40, 150);
    let (mut offsets, mut csr) = (vec![0i64], Vec::new());
    let mut dense = vec![0u8; heads * sq * sk];
    for head in 0..heads {
        for q in 0..sq {
            // A different key set per head: the heads are not broadcast.
            let mut keys: Vec<i64> = (0..1 + (q + head) % 4)
                .map(|j| ((q * 31 + head * 57 + j * 41) % sk) as i64)
                .collect();
            keys.sort();
            keys.dedup();
            for &key in &keys {
                dense[(head * sq + q) * sk + key as usize] = 1;
            }
            csr.extend(&keys);
            offsets.push(csr.len() as i64);
        }
    }
    let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let idx = dir.write("idx.npy", &write_npy(DType::I64, &[csr.len()], &le(&csr)));
    let off = dir.write(
        "off.npy",
        &write_npy(DType::I64, &[offsets.len()], &le(&offsets)),
    );
    let dense_path = dir.write("dense.npy", &write_npy(DType::U8, &[heads, sq, sk], &dense));
    let reference = dir.path("dense.safetensors");
    ok(&["pack", "--mask", s(&dense_path), "-o", s(&reference)]);
    let csr_args = |extra: &[&str], out: &Path| {
        let mut args = vec!["pack", "--topk", s(&idx), "--topk-offsets", s(&off)];
        args.extend_from_slice(&["--seqlen-k", "150", "-o", s(out)]);
        args.extend_from_slice(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    // H given, or derived from Sq: the same file as the dense mask.
    for extra in [
        &["--heads", "3"][..],
        &["--seqlen-q", "40"],
        &["--batch", "1", "--heads", "3", "--seqlen-q", "40"],
    ] {
        let out = dir.path("csr.safetensors");
        let args = csr_args(extra, &out);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let packed = load(&out);
        assert_eq!(packed.shape().heads, 3, "{extra:?}");
        assert_eq!(packed, load(&reference), "{extra:?}");
    }
    // Leading sizes that do not multiply to the row count are refused.
    let out = dir.path("bad.safetensors");
    let args = csr_args(&["--heads", "3", "--seqlen-q", "41"], &out);
    fails(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &out,
        "shape mismatch",
    );
}

#[test]
fn packed_block_lists_from_npy_match_the_definition() {
    let dir = Dir::new("blocks");
    // 3 query blocks x up to 2 key blocks of 64; key block 2 has 10 valid tokens.
    let index: Vec<i32> = vec![0, 2, 1, -5, 2, 0];
    let num: Vec<i32> = vec![2, 1, 2];
    let sizes: Vec<i32> = vec![64, 64, 10];
    let le = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let i = dir.write("index.npy", &write_npy(DType::I32, &[3, 2], &le(&index)));
    let n = dir.write("num.npy", &write_npy(DType::I32, &[3], &le(&num)));
    let z = dir.write("sizes.npy", &write_npy(DType::I32, &[3], &le(&sizes)));
    let out = dir.path("blocks.safetensors");
    ok(&[
        "pack",
        "--blocks",
        s(&i),
        "--blocks-num",
        s(&n),
        "--block-sizes",
        s(&z),
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "-o",
        s(&out),
    ]);
    let packed = load(&out);
    assert_eq!(
        (packed.shape().seqlen_q, packed.shape().seqlen_k),
        (192, 192)
    );
    for q in 0..192 {
        for k in 0..192 {
            let list: &[i32] = match q / 64 {
                0 => &[0, 2],
                1 => &[1],
                _ => &[2, 0],
            };
            let want = list.contains(&((k / 64) as i32)) && k % 64 < sizes[k / 64] as usize;
            assert_eq!(packed.get(0, 0, q, k), want, "({q}, {k})");
        }
    }
    let stats = packed.stats();
    assert_eq!((stats.full, stats.partial), (3, 2));
}

#[test]
fn packed_block_lists_from_safetensors_use_the_reference_names() {
    let dir = Dir::new("blocks-st");
    let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (index, num, sizes) = (le(&[1, 0, 0, 1]), le(&[1, 2]), le(&[64, 30]));
    let views = [
        ("q2k_block_sparse_index", vec![1, 2, 2], &index),
        ("q2k_block_sparse_num", vec![1, 2], &num),
        ("variable_block_sizes", vec![2], &sizes),
    ]
    .map(|(name, shape, data)| {
        (
            name,
            safetensors::tensor::TensorView::new(safetensors::Dtype::I64, shape, data).unwrap(),
        )
    });
    let input = dir.write(
        "lists.safetensors",
        &safetensors::serialize(views, None).unwrap(),
    );
    let out = dir.path("o.safetensors");
    ok(&[
        "pack",
        "--blocks",
        s(&input),
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "-o",
        s(&out),
    ]);
    let packed = load(&out);
    assert_eq!(
        (
            packed.shape().heads,
            packed.shape().seqlen_q,
            packed.shape().seqlen_k
        ),
        (1, 128, 128)
    );
    assert!(
        packed.get(0, 0, 0, 64 + 29) && !packed.get(0, 0, 0, 64 + 30) && !packed.get(0, 0, 0, 0)
    );
    assert!(packed.get(0, 0, 64, 0) && packed.get(0, 0, 127, 64 + 29));
    let missing = dir.write("bad.safetensors", &std::fs::read(&out).unwrap());
    fails(
        &[
            "pack",
            "--blocks",
            s(&missing),
            "-o",
            s(&dir.path("x.safetensors")),
        ],
        &dir.path("x.safetensors"),
        "missing tensor 'q2k_block_sparse_index'",
    );
}

#[test]
fn packed_predicates_with_document_ids_match_the_definition() {
    let dir = Dir::new("pred");
    let ids: Vec<i64> = (0..300).map(|t| (t / 70) as i64).collect();
    let le: Vec<u8> = ids.iter().flat_map(|x| x.to_le_bytes()).collect();
    let doc = dir.write("ids.npy", &write_npy(DType::I64, &[300], &le));
    let out = dir.path("p.safetensors");
    let expr = format!("causal@top-left, doc={}", s(&doc));
    ok(&[
        "pack",
        "--predicate",
        &expr,
        "--seqlen-q",
        "300",
        "-o",
        s(&out),
    ]);
    let packed = load(&out);
    for q in 0..300 {
        for k in 0..300 {
            assert_eq!(
                packed.get(0, 0, q, k),
                k <= q && ids[q] == ids[k],
                "({q}, {k})"
            );
        }
    }
}

#[test]
fn inspect_reports_density_tiles_bytes_and_loads() {
    let dir = Dir::new("inspect");
    let out = dir.path("c.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "1024",
        "-o",
        s(&out),
    ]);
    let text = ok(&["inspect", s(&out)]);
    for needle in [
        "density 50.0488%",
        "64 in all: 28 empty (43.8%), 28 full (43.8%), 8 partial (12.5%)",
        "dense bool 1.0 MiB",
        "fragment-native*",
        "tile: 128x128, 2 warpgroup(s) = 256 threads x 64 values",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
    let fn_line = text
        .lines()
        .find(|l| l.contains("fragment-native*"))
        .unwrap();
    let cols: Vec<&str> = fn_line.split_whitespace().collect();
    assert_eq!(&cols[1..5], &["2048", "8", "1", "global"], "{fn_line}");
}

#[test]
fn inspect_reports_what_the_forwards_shared_kv_pairs_load_and_which_tile_runs() {
    let dir = Dir::new("inspect-shared-kv");
    let line = |predicate: &str| {
        let out = dir.path(&format!(
            "{}.safetensors",
            predicate.replace([':', '='], "_")
        ));
        ok(&[
            "pack",
            "--predicate",
            predicate,
            "--seqlen-q",
            "1024",
            "--block",
            "64x64",
            "-o",
            s(&out),
        ]);
        let text = ok(&["inspect", s(&out)]);
        text.lines()
            .find(|l| l.starts_with("shared K/V"))
            .unwrap_or_else(|| panic!("no shared K/V line in:\n{text}"))
            .to_string()
    };
    // Causal: query blocks 2i and 2i+1 list keys 0..=2i and 0..=2i+1; a pair loads
    // 2i + 2 of their 4i + 3 entries, 72 of 136 over the 16 blocks.
    let causal = line("causal");
    assert!(
        causal.contains("load 72 K/V blocks for 136 list entries (0.529)"),
        "{causal}"
    );
    assert!(
        causal.contains("head dim 128 runs the shared-K/V tile"),
        "{causal}"
    );
    // A 64-key window: blocks of 2 entries overlap by one; 23 of 31 loads.
    let window = line("window=64:0");
    assert!(
        window.contains("load 23 K/V blocks for 31 list entries (0.742)"),
        "{window}"
    );
    assert!(
        window.contains("head dim 128 runs the one-block tile"),
        "{window}"
    );
    // Other tiles have no such line.
    let out = dir.path("c128.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "1024",
        "-o",
        s(&out),
    ]);
    assert!(!ok(&["inspect", s(&out)]).contains("shared K/V"));
}

#[test]
fn bad_inputs_exit_non_zero_with_a_typed_message_and_no_output() {
    let dir = Dir::new("bad");
    let out = dir.path("out.safetensors");
    let o = s(&out).to_string();
    let mask = dir.write(
        "m.npy",
        &write_npy(DType::Bool, &[2, 3], &[1, 0, 1, 0, 1, 1]),
    );
    // Shape mismatch.
    fails(
        &["pack", "--mask", s(&mask), "--seqlen-k", "4", "-o", &o],
        &out,
        "shape mismatch",
    );
    // Index out of range.
    let topk = dir.write(
        "t.npy",
        &write_npy(DType::I32, &[2, 1], &[3, 0, 0, 0, 9, 0, 0, 0]),
    );
    fails(
        &["pack", "--topk", s(&topk), "--seqlen-k", "5", "-o", &o],
        &out,
        "index out of range",
    );
    // Unsorted CSR.
    let idx = dir.write(
        "i.npy",
        &write_npy(DType::I32, &[2], &[3, 0, 0, 0, 1, 0, 0, 0]),
    );
    let off = dir.write(
        "o.npy",
        &write_npy(DType::I32, &[2], &[0, 0, 0, 0, 2, 0, 0, 0]),
    );
    fails(
        &[
            "pack",
            "--topk",
            s(&idx),
            "--topk-offsets",
            s(&off),
            "--seqlen-k",
            "5",
            "-o",
            &o,
        ],
        &out,
        "unsorted",
    );
    // Duplicate in fixed-k.
    let dup = dir.write(
        "d.npy",
        &write_npy(DType::I32, &[1, 2], &[1, 0, 0, 0, 1, 0, 0, 0]),
    );
    fails(
        &["pack", "--topk", s(&dup), "--seqlen-k", "5", "-o", &o],
        &out,
        "duplicate",
    );
    // Wrong dtype: int32 where a mask is expected, float header.
    let ints = dir.write("w.npy", &write_npy(DType::I32, &[1, 1], &[1, 0, 0, 0]));
    fails(&["pack", "--mask", s(&ints), "-o", &o], &out, "wrong dtype");
    let mut float = write_npy(DType::I32, &[1], &[0; 4]);
    let at = float.windows(3).position(|w| w == b"<i4").unwrap();
    float[at..at + 3].copy_from_slice(b"<f4");
    let float = dir.write("f.npy", &float);
    fails(
        &["pack", "--mask", s(&float), "-o", &o],
        &out,
        "wrong dtype",
    );
    // Truncated and corrupt files.
    let full = write_npy(DType::Bool, &[4, 4], &[1; 16]);
    let cut = dir.write("cut.npy", &full[..full.len() - 3]);
    fails(&["pack", "--mask", s(&cut), "-o", &o], &out, "truncated");
    let junk = dir.write(
        "junk.safetensors",
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all",
    );
    fails(&["pack", "--mask", s(&junk), "-o", &o], &out, "corrupt");
    // Unsupported tile configuration.
    fails(
        &["pack", "--mask", s(&mask), "--block", "100x128", "-o", &o],
        &out,
        "unsupported tile configuration",
    );
    fails(
        &["pack", "--mask", s(&mask), "--warpgroups", "4", "-o", &o],
        &out,
        "unsupported tile configuration",
    );
    // Inspect on something that is not a packed mask.
    let inspect = run(&["inspect", s(&mask)]);
    assert!(!inspect.status.success());
    // A failed pack leaves an existing output untouched.
    std::fs::write(&out, b"old").unwrap();
    assert!(!run(&["pack", "--mask", s(&cut), "-o", &o]).status.success());
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
}

#[test]
fn dense_source_reads_npy_shapes_with_heads() {
    // [H, Sq, Sk] keeps H; the CLI's file decodes per head.
    let dir = Dir::new("heads");
    let data: Vec<u8> = (0..2 * 130 * 70).map(|i| (i % 5 == 0) as u8).collect();
    let input = dir.write("h.npy", &write_npy(DType::U8, &[2, 130, 70], &data));
    let out = dir.path("h.safetensors");
    ok(&[
        "pack",
        "--mask",
        s(&input),
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "-o",
        s(&out),
    ]);
    let packed = load(&out);
    let reference = DenseMask::new(&data, &[2, 130, 70]).unwrap();
    assert_eq!(packed.shape().heads, 2);
    for h in 0..2 {
        for (i, &bit) in packed.decode_plane(0, h).iter().enumerate() {
            assert_eq!(bit, reference.get(0, h, i / 70, i % 70));
        }
    }
}

/// The numpy decoder printed in docs/masks.md decodes the packer's files (with the
/// interpreter of `support/python.rs`; fails under CI=true without numpy and safetensors).
#[test]
fn documented_python_decoder_decodes_packed_files() {
    let Some(python) = python::numpy_safetensors_python() else {
        return;
    };
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/masks.md")).unwrap();
    let section = &doc[doc.find("### Decoder (numpy)").unwrap()..];
    let start = section.find("```python\n").unwrap() + "```python\n".len();
    let code = &section[start..start + section[start..].find("```").unwrap()];
    let dir = Dir::new("python");
    let decoder = dir.write("decoder.py", code.as_bytes());
    for (sq, sk, block, wg, swap) in [
        (300, 500, "128x128", "2", false),
        (200, 260, "64x128", "2", true),
        (250, 130, "256x128", "2", false),
    ] {
        let mask = pseudo_random_mask(sq, sk);
        let input = dir.write("m.npy", &write_npy(DType::Bool, &[1, 1, sq, sk], &mask));
        let out = dir.path("m.safetensors");
        let mut args = vec![
            "pack",
            "--mask",
            s(&input),
            "--block",
            block,
            "--warpgroups",
            wg,
            "-q",
            "-o",
            s(&out),
        ];
        if swap {
            args.push("--swap-ab");
        }
        ok(&args);
        let what = format!("{block} swap={swap}");
        python::assert_decodes_to(&python, &decoder, "decode_dense", &out, &input, &what);
    }
}

#[test]
fn inspect_reports_the_checksum_status_and_refuses_a_changed_file() {
    let dir = Dir::new("inspect-checksum");
    let out = dir.path("c.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "300",
        "-o",
        s(&out),
    ]);
    let text = ok(&["inspect", s(&out)]);
    assert!(
        text.contains("checksum: SHA-256 of every tensor and of the header, verified"),
        "{text}"
    );
    let bytes = std::fs::read(&out).unwrap();
    // Written before checksums existed: the same file without its sha256.* keys.
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta: std::collections::HashMap<String, String> = meta
        .metadata()
        .clone()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| !k.starts_with(fragmask::masks::io::CHECKSUM_PREFIX))
        .collect();
    let views: Vec<_> = st.iter().map(|(n, t)| (n.to_string(), t)).collect();
    let old = dir.path("old.safetensors");
    std::fs::write(&old, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
    let text = ok(&["inspect", s(&old)]);
    assert!(text.contains("checksum: no checksum"), "{text}");
    // One bit of the words flipped: refused, naming the tensor.
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    std::fs::write(&out, flipped).unwrap();
    let o = run(&["inspect", s(&out)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("tensor 'words'"), "{err}");
}
