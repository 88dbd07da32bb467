//! `fragmask lightning` and `fragmask bench lightning` as a user runs them: every bad
//! input is exit 2 with a message naming the flag or file, checked before the GPU; valid
//! inputs on a machine without a GPU are exit 3; no file is left behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use fragmask::masks::io::{write_npy, DType};

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir;

fn npy_f32(d: &Path, name: &str, shape: &[usize], value: f32) -> PathBuf {
    let n: usize = shape.iter().product();
    let data: Vec<u8> = (0..n).flat_map(|_| value.to_le_bytes()).collect();
    let path = d.join(name);
    std::fs::write(&path, write_npy(DType::F32, shape, &data)).unwrap();
    path
}

fn npy_f16(d: &Path, name: &str, shape: &[usize]) -> PathBuf {
    let n: usize = shape.iter().product();
    let path = d.join(name);
    std::fs::write(&path, write_npy(DType::F16, shape, &vec![0u8; 2 * n])).unwrap();
    path
}

/// Runs the CLI with no GPU visible; returns (exit code, stderr + stdout).
fn run(d: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .current_dir(d)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code().unwrap_or(-1), text)
}

struct Files {
    q: PathBuf,
    k: PathBuf,
    v: PathBuf,
    state: PathBuf,
    slope: PathBuf,
}

fn valid_files(d: &Path) -> Files {
    Files {
        q: npy_f32(d, "q.npy", &[1, 2, 1, 96], 0.5),
        k: npy_f32(d, "k.npy", &[1, 2, 1, 96], 0.25),
        v: npy_f32(d, "v.npy", &[1, 2, 1, 96], 1.0),
        state: npy_f32(d, "state.npy", &[1, 2, 96, 96], 0.0),
        slope: npy_f32(d, "slope.npy", &[2, 1, 1], 0.1),
    }
}

fn file_args<'a>(f: &'a Files, out: &'a str) -> Vec<String> {
    let s = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    vec![
        "lightning".into(),
        "--q".into(),
        s(&f.q),
        "--k".into(),
        s(&f.k),
        "--v".into(),
        s(&f.v),
        "--state".into(),
        s(&f.state),
        "--slope".into(),
        s(&f.slope),
        "--out".into(),
        out.into(),
    ]
}

fn with(args: &[String], flag: &str, value: &str) -> Vec<String> {
    let mut a = args.to_vec();
    let i = a.iter().position(|x| x == flag).unwrap();
    a[i + 1] = value.into();
    a
}

fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

#[test]
fn bad_input_files_are_exit_2_naming_the_input_and_leave_nothing() {
    let tmp = TempDir::new("lightning-files");
    let d = tmp.0.as_path();
    let f = valid_files(d);
    npy_f32(d, "state_bad.npy", &[1, 2, 96, 95], 0.0);
    npy_f16(d, "state_f16.npy", &[1, 2, 96, 96]);
    npy_f32(d, "slope_short.npy", &[1], 0.1);
    npy_f32(d, "slope_nan.npy", &[2], f32::NAN);
    npy_f32(d, "k_other.npy", &[1, 2, 1, 64], 0.0);
    std::fs::write(d.join("junk.npy"), b"not an array").unwrap();
    let before = tmp.entries();
    let base = file_args(&f, "o.safetensors");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with(&base, "--state", "state_bad.npy"),
            "--state state_bad.npy",
        ),
        (with(&base, "--state", "state_f16.npy"), "float32"),
        (
            with(&base, "--slope", "slope_short.npy"),
            "--slope slope_short.npy",
        ),
        (with(&base, "--slope", "slope_nan.npy"), "finite"),
        (with(&base, "--k", "k_other.npy"), "--k k_other.npy"),
        (with(&base, "--q", "missing.npy"), "missing.npy"),
        (with(&base, "--v", "junk.npy"), "junk.npy"),
        (with(&base, "--out", "q.npy"), "--out"),
        (with(&base, "--out", "."), "--out"),
    ];
    for (args, needle) in cases {
        let (code, text) = run(d, &strs(&args));
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains(needle),
            "{args:?}: expected `{needle}` in: {text}"
        );
        assert!(
            !text.contains("no GPU"),
            "{args:?} reached the GPU check: {text}"
        );
        assert_eq!(tmp.entries(), before, "{args:?} left a file");
    }
}

#[test]
fn valid_files_without_a_gpu_are_exit_3_after_validation() {
    let tmp = TempDir::new("lightning-valid");
    let d = tmp.0.as_path();
    let f = valid_files(d);
    let before = tmp.entries();
    let (code, text) = run(d, &strs(&file_args(&f, "o.safetensors")));
    if code == 0 {
        eprintln!("SKIPPED: a GPU is visible; this test checks the no-GPU path");
        return;
    }
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("the inputs are valid"), "{text}");
    assert_eq!(tmp.entries(), before);
}

#[test]
fn bad_flags_are_exit_2_before_the_gpu() {
    let tmp = TempDir::new("lightning-flags");
    let d = tmp.0.as_path();
    let cases: [(&[&str], &str); 9] = [
        (&["lightning", "--random", "1,64,1,95"], "--random"),
        (&["lightning", "--random", "1,64,1"], "--random"),
        (&["lightning", "--random", "0,64,1,96"], "batch"),
        (
            &["lightning", "--random", "1,64,1,96", "--steps", "0"],
            "--steps",
        ),
        (
            &["lightning", "--random", "1,64,1,96", "--dtype", "int8"],
            "--dtype",
        ),
        (
            &["lightning", "--random", "1,64,1,96", "--col-vectors", "3"],
            "--col-vectors",
        ),
        (&["bench", "lightning", "--batch", "1,70000"], "--batch"),
        (
            &["bench", "lightning", "--col-vectors", "16"],
            "--col-vectors",
        ),
        (
            &["bench", "lightning", "--rotate-mb", "99999999999"],
            "--rotate-mb",
        ),
    ];
    for (args, needle) in cases {
        let (code, text) = run(d, args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains(needle),
            "{args:?}: expected `{needle}` in: {text}"
        );
        assert!(!text.contains("no GPU"), "{args:?}: {text}");
    }
    assert!(tmp.entries().is_empty());
}
