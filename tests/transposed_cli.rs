//! `fragmask pack --transposed`, `fragmask pack --packed FILE --transposed` and
//! `fragmask inspect` on the backward pass's transposed lists (issue 13), run as a user
//! would: exit codes, messages, files left behind.

#[path = "support/python.rs"]
mod python;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fragmask::masks::io::{write_npy, DType};
use fragmask::masks::{
    pack, pack_transposed, DenseMask, Encoding, MaskError, PackOptions, PackedMask, Predicate,
    PredicateMask, TiledAccumulator,
};
use temp_dir::TempDir;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .output()
        .unwrap()
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

/// Exit 2, `needle` in standard error.
fn fails(args: &[&str], needle: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
}

fn load(path: &Path) -> PackedMask {
    PackedMask::from_safetensors(&std::fs::read(path).unwrap()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/masks/tests/fixtures")
        .join(name)
}

fn forward() -> TiledAccumulator {
    TiledAccumulator::new(128, 128, 2, false).unwrap()
}

fn options() -> PackOptions<'static> {
    PackOptions::default()
}

#[test]
fn pack_transposed_stores_the_lists_the_library_builds() {
    let dir = TempDir::new("transposed-predicate");
    let out = dir.join("causal.safetensors");
    let text = ok(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "1000",
        "--seqlen-k",
        "700",
        "--transposed",
        "-o",
        s(&out),
    ]);
    assert!(text.contains("transposed:"), "{text}");
    let source = PredicateMask::new(1000, 700, Predicate::causal()).unwrap();
    let backward = TiledAccumulator::new(128, 128, 2, true).unwrap();
    let expected = pack_transposed(
        &source,
        &forward(),
        Encoding::FragmentNative,
        &backward,
        &options(),
    )
    .unwrap();
    assert_eq!(load(&out), expected);
    assert_eq!(dir.entries(), ["causal.safetensors"]);
    let text = ok(&["inspect", s(&out)]);
    for needle in [
        "format: fragmask-masks v2",
        "transposed: yes, for the backward tile 128x128 (S^T = K Q^T, MMA rows = keys), \
         2 warpgroup(s) = 256 threads x 64 values, swap_ab true",
        "8 bytes per thread per tile in 1 load(s)",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
}

#[test]
fn packed_file_gets_its_transposed_lists_added() {
    let dir = TempDir::new("transposed-packed");
    let (sq, sk) = (300, 200);
    let bits: Vec<u8> = (0..sq * sk)
        .map(|i: usize| u8::from((i * 2654435761) % 5 < 2))
        .collect();
    let npy = dir.join("m.npy");
    std::fs::write(&npy, write_npy(DType::U8, &[sq, sk], &bits)).unwrap();
    let plain = dir.join("plain.safetensors");
    ok(&[
        "pack",
        "--mask",
        s(&npy),
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "-q",
        "-o",
        s(&plain),
    ]);
    let text = ok(&["inspect", s(&plain)]);
    assert!(
        text.contains("transposed: no") && text.contains("--transposed"),
        "{text}"
    );
    assert!(matches!(
        load(&plain).transposed(),
        Err(MaskError::NoTransposedLists)
    ));
    let added = dir.join("added.safetensors");
    ok(&[
        "pack",
        "--packed",
        s(&plain),
        "--transposed",
        "-q",
        "-o",
        s(&added),
    ]);
    let dense = DenseMask::new(&bits, &[sq, sk]).unwrap();
    let a = TiledAccumulator::new(64, 64, 1, false).unwrap();
    let backward = TiledAccumulator::new(64, 64, 1, true).unwrap();
    let expected =
        pack_transposed(&dense, &a, Encoding::FragmentNative, &backward, &options()).unwrap();
    assert_eq!(load(&added), expected);
    // Straight from the mask, the same file.
    let direct = dir.join("direct.safetensors");
    ok(&[
        "pack",
        "--mask",
        s(&npy),
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "--transposed",
        "-q",
        "-o",
        s(&direct),
    ]);
    assert_eq!(
        std::fs::read(&direct).unwrap(),
        std::fs::read(&added).unwrap()
    );
    assert_eq!(
        dir.entries(),
        [
            "added.safetensors",
            "direct.safetensors",
            "m.npy",
            "plain.safetensors"
        ]
    );
}

#[test]
fn version_1_file_is_inspected_and_upgraded() {
    let dir = TempDir::new("transposed-v1");
    let v1 = fixture("v1_fragment_native_128x128.safetensors");
    let text = ok(&["inspect", s(&v1)]);
    assert!(text.contains("format: fragmask-masks v1"), "{text}");
    assert!(text.contains("transposed: no"), "{text}");
    let out = dir.join("v2.safetensors");
    ok(&[
        "pack",
        "--packed",
        s(&v1),
        "--transposed",
        "--transposed-warpgroups",
        "1",
        "-q",
        "-o",
        s(&out),
    ]);
    let upgraded = load(&out);
    let t = upgraded.transposed().unwrap();
    assert_eq!(
        *t.accumulator(),
        TiledAccumulator::new(128, 128, 1, true).unwrap()
    );
    let mut forward_only = upgraded.clone();
    forward_only.drop_transposed();
    assert_eq!(forward_only, load(&v1));
    assert!(ok(&["inspect", s(&out)]).contains("format: fragmask-masks v2"));
    assert_eq!(dir.entries(), ["v2.safetensors"]);
}

#[test]
fn direct_backward_tile_without_swap_ab() {
    let dir = TempDir::new("transposed-direct");
    let out = dir.join("w.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "window=100:0",
        "--seqlen-q",
        "500",
        "--block",
        "128x96",
        "--warpgroups",
        "1",
        "--transposed",
        "--transposed-no-swap-ab",
        "-q",
        "-o",
        s(&out),
    ]);
    let packed = load(&out);
    let t = packed.transposed().unwrap();
    assert_eq!(
        *t.accumulator(),
        TiledAccumulator::new(128, 96, 1, false).unwrap()
    );
    let plain = pack(
        &PredicateMask::new(500, 500, Predicate::window(Some(100), Some(0))).unwrap(),
        &TiledAccumulator::new(128, 96, 1, false).unwrap(),
        Encoding::FragmentNative,
        &options(),
    )
    .unwrap();
    // Same accumulator both ways: the transposed words are the forward words reordered.
    assert_eq!(t.partial_tiles(), plain.partial_tiles());
    assert!(ok(&["inspect", s(&out)]).contains("S = Q K^T, MMA rows = queries"));
}

#[test]
fn bad_transposed_flags_and_files_exit_2_and_leave_nothing() {
    let dir = TempDir::new("transposed-bad");
    let out = dir.join("out.safetensors");
    let o = s(&out);
    let causal = [
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "256",
        "--transposed",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        causal
            .iter()
            .chain(extra)
            .map(|x| x.to_string())
            .chain(["-o".to_string(), o.to_string()])
            .collect()
    };
    let call = |args: Vec<String>, needle: &str| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&refs, needle);
    };
    call(
        with(&["--transposed-warpgroups", "3"]),
        "--transposed-warpgroups",
    );
    call(
        with(&["--transposed-warpgroups", "0"]),
        "--transposed-warpgroups",
    );
    call(
        with(&["--block", "128x96", "--warpgroups", "1"]),
        "--transposed-no-swap-ab",
    );
    fails(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "256",
            "--transposed-warpgroups",
            "2",
            "-o",
            o,
        ],
        "--transposed",
    );
    let v1 = fixture("v1_fragment_native_64x32.safetensors");
    fails(&["pack", "--packed", s(&v1), "-o", o], "--transposed");
    fails(
        &[
            "pack",
            "--packed",
            s(&v1),
            "--transposed",
            "--block",
            "64x64",
            "-o",
            o,
        ],
        "--block",
    );
    fails(
        &[
            "pack",
            "--packed",
            s(&v1),
            "--transposed",
            "--predicate",
            "causal",
            "-o",
            o,
        ],
        "--predicate",
    );
    // A file that is not a packed mask, named in the message.
    let npy = dir.join("m.npy");
    std::fs::write(&npy, write_npy(DType::U8, &[2, 2], &[1, 0, 1, 1])).unwrap();
    fails(
        &["pack", "--packed", s(&npy), "--transposed", "-o", o],
        "m.npy",
    );
    // The output may not be the input.
    let copy = dir.join("copy.safetensors");
    std::fs::copy(&v1, &copy).unwrap();
    fails(
        &["pack", "--packed", s(&copy), "--transposed", "-o", s(&copy)],
        "refusing to write",
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&v1).unwrap(),
        "the input was not touched"
    );
    assert_eq!(dir.entries(), ["copy.safetensors", "m.npy"]);
}

#[test]
fn inspect_rejects_a_corrupt_transposed_file_naming_it() {
    let dir = TempDir::new("transposed-corrupt");
    let good = dir.join("good.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "512",
        "--transposed",
        "-q",
        "-o",
        s(&good),
    ]);
    // Flip one bit in the last word of q_words (stored last).
    let mut bytes = std::fs::read(&good).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    let bad = dir.join("bad.safetensors");
    std::fs::write(&bad, &bytes).unwrap();
    let out = run(&["inspect", s(&bad)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.safetensors") && err.contains("transposed"),
        "{err}"
    );
    assert_eq!(dir.entries(), ["bad.safetensors", "good.safetensors"]);
}

/// `decode_dense_transposed` in docs/masks.md decodes the transposed lists and words of
/// `fragmask pack --transposed` files to the mask (with the interpreter of
/// `support/python.rs`, as `tests/pack_cli.rs` runs `decode_dense`).
#[test]
fn documented_python_transposed_decoder_decodes_packed_files() {
    let Some(python) = python::numpy_safetensors_python() else {
        return;
    };
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/masks.md")).unwrap();
    let section = &doc[doc.find("### Decoder (numpy)").unwrap()..];
    let start = section.find("```python\n").unwrap() + "```python\n".len();
    let code = &section[start..start + section[start..].find("```").unwrap()];
    let dir = TempDir::new("transposed-python");
    let decoder = dir.join("decoder.py");
    std::fs::write(&decoder, code).unwrap();
    for (sq, sk, block, extra) in [
        (300, 500, "128x128", vec![]),
        (200, 260, "64x128", vec!["--swap-ab"]),
        (250, 130, "256x128", vec!["--transposed-no-swap-ab"]),
        (190, 77, "64x64", vec!["--warpgroups", "1"]),
    ] {
        let bits: Vec<u8> = (0..sq * sk)
            .map(|i: usize| u8::from((i * 2654435761) % 7 < 3))
            .collect();
        let input = dir.join("m.npy");
        std::fs::write(&input, write_npy(DType::Bool, &[1, 1, sq, sk], &bits)).unwrap();
        let out = dir.join("m.safetensors");
        let mut args = vec![
            "pack",
            "--mask",
            s(&input),
            "--block",
            block,
            "--transposed",
        ];
        args.extend(extra.iter().copied());
        args.extend(["-q", "-o", s(&out)]);
        ok(&args);
        let what = format!("{block} {extra:?}");
        python::assert_decodes_to(
            &python,
            &decoder,
            "decode_dense_transposed",
            &out,
            &input,
            &what,
        );
    }
}

#[test]
fn inspect_reports_what_paired_key_blocks_load_on_a_64x64_mask() {
    // A causal window of 300 over 1000 tokens at 64x64: each key block's query tiles are a
    // run of 5 or 6, its neighbour's mostly the same, so the pairs' union walks load about
    // half of what the key blocks' own lists do (docs/backward.md, "Paired key blocks").
    let dir = TempDir::new("transposed-paired");
    let out = dir.join("window64.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "window=300:0",
        "--seqlen-q",
        "1000",
        "--seqlen-k",
        "1000",
        "--block",
        "64x64",
        "--warpgroups",
        "1",
        "--transposed",
        "-q",
        "-o",
        s(&out),
    ]);
    let text = ok(&["inspect", s(&out)]);
    let needle =
        "paired key blocks (the backward's default on this tile): 47 union steps for 81 list \
                  entries (0.580 of the Q/dO loads and dQ reductions)";
    assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    // A 128x128 mask's backward is not paired: no such line.
    let wide = dir.join("window128.safetensors");
    ok(&[
        "pack",
        "--predicate",
        "window=300:0",
        "--seqlen-q",
        "1000",
        "--seqlen-k",
        "1000",
        "--transposed",
        "-q",
        "-o",
        s(&wide),
    ]);
    assert!(!ok(&["inspect", s(&wide)]).contains("paired key blocks"));
}
