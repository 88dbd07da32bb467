//! `fragmask attention` and `fragmask bench attention` on bad inputs, as a user runs
//! them (issue 10, classes 1, 2, 4 and 5): every bad input exits 2 with a message naming
//! the file or flag, before any GPU is looked for, never panics, aborts or hangs, and
//! leaves no file behind. Valid inputs without a GPU exit 3.
//!
//! The GPU is hidden from the child (`CUDA_VISIBLE_DEVICES=""`), so exit 3 is what a
//! valid input gets here on machines with and without one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fragmask::masks::io::{write_npy, write_safetensors, DType};

/// Exit code of a bad input.
const BAD_INPUT: i32 = 2;
/// Exit code of valid inputs and no GPU (src/cli/verify.rs).
const NO_GPU: i32 = 3;
/// A bad input must be refused well within this (a hang fails the test).
const TIMEOUT: Duration = Duration::from_secs(60);

/// A fresh directory per test case, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fragmask-rel-attn-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs fragmask without a visible GPU; (exit code, stdout + stderr). Fails on a hang.
fn run(args: &[String]) -> (Option<i32>, String) {
    let out_dir = std::env::temp_dir();
    let so = out_dir.join(format!(
        "fragmask-rel-attn-out-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let stdout = std::fs::File::create(&so).unwrap();
    let stderr = stdout.try_clone().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&so);
            panic!("hang: fragmask {args:?} ran longer than {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&so).unwrap_or_default();
    let _ = std::fs::remove_file(&so);
    (status.code(), text)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Asserts exit 2, every `needles` in the message, no panic, and that `dir` holds
/// exactly the files it held before (no output, no temporary).
fn refused(dir: &Dir, args: &[String], needles: &[&str]) {
    let before = dir.files();
    let (code, text) = run(args);
    assert_eq!(code, Some(BAD_INPUT), "{args:?}: {text}");
    assert!(!text.contains("panicked"), "{args:?}: {text}");
    assert!(
        !text.contains("no GPU"),
        "{args:?} reached the GPU check: {text}"
    );
    for n in needles {
        assert!(text.contains(n), "{args:?}: message lacks {n:?}: {text}");
    }
    assert_eq!(dir.files(), before, "{args:?} left a file behind");
}

/// Both commands with `args`: `attention` with outputs into `dir`, and `bench attention`.
fn refused_by_both(dir: &Dir, args: &[&str], needles: &[&str]) {
    let o = dir.path("o.safetensors").display().to_string();
    let lse = dir.path("lse.npy").display().to_string();
    let mut a = strings(&["attention"]);
    a.extend(strings(args));
    a.extend(["--out".to_string(), o, "--lse-out".to_string(), lse]);
    refused(dir, &a, needles);
    let mut b = strings(&["bench", "attention", "--iters", "1"]);
    b.extend(strings(args));
    refused(dir, &b, needles);
}

fn f32_bytes(n: usize, value: f32) -> Vec<u8> {
    (0..n).flat_map(|_| value.to_le_bytes()).collect()
}

/// q, k, v as float32 .npy files of shape `[1, 2, s, 64]`; returns the three paths.
fn qkv_npy(dir: &Dir, s: usize) -> [String; 3] {
    let shape = [1, 2, s, 64];
    let bytes = write_npy(DType::F32, &shape, &f32_bytes(2 * s * 64, 0.5));
    [
        dir.write("q.npy", &bytes),
        dir.write("k.npy", &bytes),
        dir.write("v.npy", &bytes),
    ]
}

/// `.npy` bytes with a hand-written header (any shape claim) and `data`.
fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn truncated_and_corrupt_npy_inputs_exit_2_naming_the_file() {
    let dir = Dir::new("trunc");
    let [q, k, v] = qkv_npy(&dir, 128);
    let full = std::fs::read(&q).unwrap();
    // 11 bytes: the preamble and one header byte (io.rs:143 of the old reader panicked).
    let eleven = dir.write("eleven.npy", &full[..11]);
    refused_by_both(
        &dir,
        &["--q", &eleven, "--k", &k, "--v", &v],
        &["eleven.npy (--q)", "truncated"],
    );
    // A header length longer than the file (io.rs:148).
    let mut long = full[..64].to_vec();
    long[8..10].copy_from_slice(&0x7fffu16.to_le_bytes());
    let long = dir.write("long-header.npy", &long);
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &long, "--v", &v],
        &["long-header.npy (--k)", "truncated"],
    );
    // Data cut short.
    let cut = dir.write("cut.npy", &full[..full.len() - 5]);
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k, "--v", &cut],
        &["cut.npy (--v)", "truncated"],
    );
    // Not an array file at all.
    let text = dir.write("text.npy", b"this is not an array\n");
    refused_by_both(
        &dir,
        &["--q", &text, "--k", &k, "--v", &v],
        &["text.npy (--q)", "neither a .npy file"],
    );
    // An integer tensor where a float one is needed.
    let ints = dir.write(
        "ints.npy",
        &write_npy(DType::I32, &[1, 2, 128, 64], &[0; 4 * 2 * 128 * 64]),
    );
    refused_by_both(
        &dir,
        &["--q", &ints, "--k", &k, "--v", &v],
        &["ints.npy (--q)", "wrong dtype int32"],
    );
}

#[test]
fn corrupt_safetensors_inputs_exit_2_naming_the_file() {
    let dir = Dir::new("st");
    let header = br#"{"q":{"dtype":"F32","shape":[1],"data_offsets":[]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 4]);
    // "data_offsets": [] (io.rs:252 of the old reader panicked).
    let empty = dir.write("empty-offsets.safetensors", &bytes);
    refused_by_both(
        &dir,
        &["--inputs", &empty],
        &["empty-offsets.safetensors (--inputs)", "safetensors"],
    );
    // A header length past the end of the file.
    let mut past = u64::MAX.to_le_bytes().to_vec();
    past.extend_from_slice(b"{}");
    let past = dir.write("past.safetensors", &past);
    refused_by_both(&dir, &["--inputs", &past], &["past.safetensors (--inputs)"]);
    // Valid file without k and v.
    let shape = [1usize, 1, 128, 64];
    let data = vec![0u8; 2 * 128 * 64];
    let only_q = dir.path("only-q.safetensors");
    write_safetensors(&only_q, &[("q", DType::BF16, &shape, &data)]).unwrap();
    let only_q = only_q.display().to_string();
    refused_by_both(
        &dir,
        &["--inputs", &only_q],
        &["only-q.safetensors (--inputs)", "missing tensor 'k'"],
    );
    // A .npy given where a safetensors mask is needed.
    let [q, k, v] = qkv_npy(&dir, 128);
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k, "--v", &v, "--mask", &q],
        &["q.npy (--mask)", "safetensors file is needed"],
    );
}

#[test]
fn missing_files_exit_2_naming_the_flag_and_file() {
    let dir = Dir::new("missing");
    let [q, k, _] = qkv_npy(&dir, 128);
    let none = dir.path("no-such.npy").display().to_string();
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k, "--v", &none],
        &["--v", "no-such.npy"],
    );
    refused_by_both(&dir, &["--inputs", &none], &["--inputs", "no-such.npy"]);
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,128,64", "--mask", &none],
        &["--mask", "no-such.npy"],
    );
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,128,64", "--dense-mask", &none],
        &["--dense-mask", "no-such.npy"],
    );
    // A directory is not an input file.
    let d = dir.0.display().to_string();
    refused_by_both(&dir, &["--inputs", &d], &["--inputs", "not a regular file"]);
    refused_by_both(&dir, &[], &["no inputs", "--random"]);
}

#[test]
fn bad_random_window_and_synthetic_mask_flags_exit_2_naming_the_flag() {
    let dir = Dir::new("flags");
    for random in [
        "1,2,3",
        "1,1,1,128,128,64,7",
        "0,1,1,128,128,64",
        "1,3,2,128,128,64",
        "1,1,1,128,128,96",
        "1,x,1,1,1,64",
        "1,1,1,-128,1,64",
    ] {
        refused_by_both(&dir, &["--random", random], &["--random"]);
    }
    let r = ["--random", "1,1,1,128,128,64"];
    for window in ["3", "1,2,3", "-5,2", "0,4294967296", "a,b", ""] {
        let w = format!("--window={window}");
        refused_by_both(&dir, &[r[0], r[1], &w], &["--window"]);
    }
    for spec in [
        "foo:1",
        "random",
        "random:2",
        "random:-0.1",
        "random:nan",
        "blocksparse:0.5",
        "topk:0.1:1",
        "",
    ] {
        let s = format!("--synthetic-mask={spec}");
        refused_by_both(&dir, &[r[0], r[1], &s], &["--synthetic-mask"]);
    }
    refused_by_both(&dir, &[r[0], r[1], "--iters", "100000000"], &["--iters"]);
    refused_by_both(&dir, &[r[0], r[1], "--scale", "inf"], &["--scale"]);
    refused_by_both(&dir, &[r[0], r[1], "--stages", "9"], &["stages"]);
    for splits in ["0", "129", "-1", "x"] {
        let s = format!("--splits={splits}");
        refused_by_both(&dir, &[r[0], r[1], &s], &["--splits"]);
    }
    // Conflicting flags are refused, not silently ignored.
    refused_by_both(
        &dir,
        &[r[0], r[1], "--synthetic-mask", "random:0.5", "--causal"],
        &["--synthetic-mask", "--causal"],
    );
    refused_by_both(
        &dir,
        &[r[0], r[1], "--causal", "--window", "4,0"],
        &["--causal", "--window"],
    );
    refused_by_both(&dir, &[r[0], r[1], "--q", "q.npy"], &["--random", "--q"]);
    for layout in ["bsdh", "BSHD", ""] {
        let l = format!("--out-layout={layout}");
        refused_by_both(&dir, &[r[0], r[1], &l], &["--out-layout"]);
    }
    // The selftests choose their own layouts: the flag is refused there, not ignored.
    refused(
        &dir,
        &strings(&["attention", "--selftest", "--out-layout", "bshd"]),
        &["--out-layout"],
    );
}

#[test]
fn mismatched_shapes_exit_2_naming_the_inputs() {
    let dir = Dir::new("shapes");
    let [q, k, _] = qkv_npy(&dir, 128);
    // v with another length than k.
    let v = dir.write(
        "v200.npy",
        &write_npy(DType::F32, &[1, 2, 200, 64], &f32_bytes(2 * 200 * 64, 1.0)),
    );
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k, "--v", &v],
        &["v200.npy (--v)", "differ"],
    );
    // k with another head dim than q.
    let k128 = dir.write(
        "k128.npy",
        &write_npy(
            DType::F32,
            &[1, 2, 128, 128],
            &f32_bytes(2 * 128 * 128, 1.0),
        ),
    );
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k128, "--v", &k128],
        &["q.npy (--q)", "disagree"],
    );
    // Rank 3 q.
    let r3 = dir.write(
        "rank3.npy",
        &write_npy(DType::F32, &[2, 128, 64], &f32_bytes(2 * 128 * 64, 1.0)),
    );
    refused_by_both(
        &dir,
        &["--q", &r3, "--k", &k, "--v", &k],
        &["rank3.npy (--q)", "[B, H, S, D]"],
    );
    // A dense mask for another length, and one with 3 heads for a 2-head call.
    let bits = vec![1u8; 3 * 100 * 128];
    let m = dir.write(
        "m100.npy",
        &write_npy(DType::Bool, &[1, 1, 100, 128], &bits[..100 * 128]),
    );
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &k, "--v", &k, "--dense-mask", &m],
        &["m100.npy (--dense-mask)", "dense mask is 100x128"],
    );
    let bits = vec![1u8; 3 * 128 * 128];
    let m3 = dir.write("m3.npy", &write_npy(DType::Bool, &[1, 3, 128, 128], &bits));
    refused_by_both(
        &dir,
        &["--random", "1,2,1,128,128,64", "--dense-mask", &m3],
        &["m3.npy (--dense-mask)", "must be 1 or equal"],
    );
}

#[test]
fn unsupported_tiles_and_tile_options_are_exit_2_naming_the_flag() {
    let dir = Dir::new("tiles");
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,128,128", "--block", "96x64"],
        &["--block 96x64", "not supported", "64x64 (1 wg)"],
    );
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,128,128", "--block", "64-64"],
        &["--block 64-64", "not MxN"],
    );
    refused_by_both(
        &dir,
        &[
            "--random",
            "1,1,1,128,128,128",
            "--block",
            "64x64",
            "--pingpong",
            "true",
        ],
        &[
            "--pingpong true",
            "--block 64x64",
            "ping-pong needs 2 or 3 consumer warpgroups, this tile has 1",
        ],
    );
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,128,256", "--block", "64x64"],
        &["head dim 256 does not fit", "64x64"],
    );
}

#[test]
fn packed_masks_are_checked_against_the_call() {
    let dir = Dir::new("packed");
    let mask = dir.path("causal256.safetensors").display().to_string();
    let (code, text) = run(&strings(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "256",
        "--seqlen-k",
        "256",
        "-q",
        "-o",
        &mask,
    ]));
    assert_eq!(code, Some(0), "{text}");
    refused_by_both(
        &dir,
        &["--random", "1,1,1,128,256,64", "--mask", &mask],
        &["causal256.safetensors (--mask)", "mask built for Sq=256"],
    );
    // Another tile configuration than the kernel's.
    let other = dir.path("64x128.safetensors").display().to_string();
    let (code, text) = run(&strings(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "256",
        "--seqlen-k",
        "256",
        "--block",
        "64x128",
        "--warpgroups",
        "1",
        "-q",
        "-o",
        &other,
    ]));
    assert_eq!(code, Some(0), "{text}");
    refused_by_both(
        &dir,
        &["--random", "1,1,1,256,256,64", "--mask", &other],
        &[
            "64x128.safetensors (--mask)",
            "tile 64x128",
            "not supported",
            "64x64 (1 wg)",
        ],
    );
}

#[test]
fn huge_claimed_shapes_exit_2_quickly_without_allocating() {
    let dir = Dir::new("huge");
    let [q, k, v] = qkv_npy(&dir, 128);
    // The element count wraps in 64 bits (the old reader hung on it).
    let wrap = dir.write(
        "wrap.npy",
        &npy_with_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (8192, 8192, 1073741824, 256), }",
            &[0; 64],
        ),
    );
    refused_by_both(
        &dir,
        &["--q", &wrap, "--k", &k, "--v", &v],
        &["wrap.npy (--q)", "too large"],
    );
    // Large but representable: the claim exceeds the file.
    let claim = dir.write(
        "claim.npy",
        &npy_with_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1073741824, 256), }",
            &[0; 64],
        ),
    );
    refused_by_both(
        &dir,
        &["--q", &q, "--k", &claim, "--v", &claim],
        &["claim.npy (--k)", "truncated"],
    );
    // --random is checked against the documented limit before anything is generated.
    refused_by_both(
        &dir,
        &["--random", "1,1,1,1073741824,1,256"],
        &["--random", "the limit is"],
    );
    refused_by_both(
        &dir,
        &["--random", "65535,65535,65535,1073741824,1073741824,256"],
        &["--random"],
    );
    refused_by_both(
        &dir,
        &["--random", "18446744073709551615,1,1,128,128,64"],
        &["--random"],
    );
    // A synthetic mask beyond the packer's limit (within the call limit).
    refused_by_both(
        &dir,
        &[
            "--random",
            "1,1,1,1048576,1048576,64",
            "--synthetic-mask",
            "random:0.5",
        ],
        &["--synthetic-mask", "the limit is"],
    );
    let _ = q;
}

/// Valid inputs on a machine where the GPU is hidden: exit 3 and nothing written.
fn no_gpu(dir: &Dir, args: &[String]) {
    let before = dir.files();
    let (code, text) = run(args);
    if code == Some(0) && text.contains("device:") {
        // CUDA_VISIBLE_DEVICES="" did not hide the GPU on this driver.
        println!("SKIPPED {args:?}: a GPU ran it: {text}");
        return;
    }
    assert_eq!(code, Some(NO_GPU), "{args:?}: {text}");
    assert!(text.contains("no GPU"), "{args:?}: {text}");
    assert!(!text.contains("panicked"), "{args:?}: {text}");
    assert_eq!(dir.files(), before, "{args:?} wrote a file without a GPU");
}

#[test]
fn valid_inputs_without_a_gpu_exit_3_after_validation() {
    let dir = Dir::new("valid");
    let [q, k, v] = qkv_npy(&dir, 130);
    let o = dir.path("o.safetensors").display().to_string();
    let lse = dir.path("lse.npy").display().to_string();
    let bits: Vec<u8> = (0..130 * 130).map(|i| (i % 3 == 0) as u8).collect();
    let m = dir.write(
        "m.npy",
        &write_npy(DType::Bool, &[1, 2, 130, 130], &bits.repeat(2)),
    );
    let mut a = strings(&[
        "attention",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v,
        "--dense-mask",
        &m,
    ]);
    a.extend(strings(&["--out", &o, "--lse-out", &lse]));
    no_gpu(&dir, &a);
    let t = run(&a).1;
    assert!(
        t.contains("inputs are valid") || t.contains("device:"),
        "{t}"
    );
    // bf16 q, k, v in one safetensors file, with a mask from `fragmask pack`.
    let data = vec![0u8; 2 * 4 * 256 * 64];
    let kv = vec![0u8; 2 * 2 * 256 * 64];
    let inputs = dir.path("qkv.safetensors");
    write_safetensors(
        &inputs,
        &[
            ("q", DType::BF16, &[1, 4, 256, 64], &data),
            ("k", DType::BF16, &[1, 2, 256, 64], &kv),
            ("v", DType::BF16, &[1, 2, 256, 64], &kv),
        ],
    )
    .unwrap();
    let mask = dir.path("causal.safetensors").display().to_string();
    let (code, text) = run(&strings(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "256",
        "--seqlen-k",
        "256",
        "-q",
        "-o",
        &mask,
    ]));
    assert_eq!(code, Some(0), "{text}");
    let i = inputs.display().to_string();
    no_gpu(
        &dir,
        &strings(&["attention", "--inputs", &i, "--mask", &mask, "--out", &o]),
    );
    no_gpu(
        &dir,
        &strings(&["bench", "attention", "--inputs", &i, "--mask", &mask]),
    );
    for extra in [
        &["--causal"][..],
        &["--window=-1,0"],
        &["--window", "40,10", "--diag-offset", "3"],
        &["--synthetic-mask", "blocksparse:0.5:0.5"],
        &["--causal", "--out-layout", "bshd"],
        &["--backward", "--causal", "--out-layout", "bshd"],
        &[],
    ] {
        let mut a = strings(&["attention", "--random", "1,2,1,200,300,128", "--out", &o]);
        a.extend(strings(extra));
        no_gpu(&dir, &a);
    }
}

#[test]
fn an_output_path_is_never_created_when_an_input_is_bad() {
    let dir = Dir::new("noout");
    let out = dir.path("out.npy");
    let args = strings(&[
        "attention",
        "--random",
        "1,1,1,128,128,64",
        "--window",
        "1",
        "--out",
        &out.display().to_string(),
    ]);
    refused(&dir, &args, &["--window"]);
    assert!(!Path::new(&out).exists());
}
