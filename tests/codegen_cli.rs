//! `fragmask codegen`, `fragmask verify` and `fragmask bench` end to end: files,
//! messages and exit codes (no GPU needed; on a machine without one, verify and the GPU
//! benchmarks must say so and exit 3).

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fragmask"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run fragmask")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fragmask-codegen-cli-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn codegen_writes_a_header_free_header_and_leaves_no_temporary_file() {
    let dir = temp_dir("write");
    let out = dir.join("fragmask_apply.cuh");
    let o = run(&[
        "codegen",
        "--block",
        "128x128",
        "--warpgroups",
        "2",
        "--encoding",
        "fragment-native",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let header = std::fs::read_to_string(&out).unwrap();
    assert!(header.contains("fragmask_fragment_native_apply_tile("));
    assert!(header
        .contains("fragmask codegen --block 128x128 --warpgroups 2 --encoding fragment-native"));
    assert!(!header
        .lines()
        .any(|l| l.trim_start().starts_with("#include")));
    let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(entries.len(), 1, "a temporary file was left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn codegen_prints_every_encoding_to_stdout() {
    for (encoding, function) in [
        ("fragment-native", "fragmask_fragment_native_apply("),
        ("quad-lane", "fragmask_quad_lane_apply("),
        ("row-major", "fragmask_row_major_apply("),
    ] {
        let o = run(&["codegen", "--encoding", encoding, "-o", "-"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(function),
            "{encoding}"
        );
    }
}

#[test]
fn codegen_rejects_bad_configurations_with_exit_2_and_a_reason() {
    for (args, reason) in [
        (vec!["--block", "100x128"], "block_m = 100"),
        (vec!["--block", "128"], "expected <block_m>x<block_n>"),
        (vec!["--encoding", "bitmap"], "unknown encoding"),
        (vec!["--warpgroups", "4"], "warpgroups = 4"),
    ] {
        let mut all = vec!["codegen", "-o", "-"];
        all.extend(args.iter().copied());
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(reason), "{args:?}: {}", text(&o));
    }
}

fn has_gpu() -> bool {
    fragmask::host::Device::first().is_ok()
}

#[test]
fn verify_without_a_gpu_runs_the_emulator_says_so_and_exits_3() {
    if has_gpu() {
        eprintln!("SKIPPED: a GPU is present (this test checks the no-GPU path)");
        return;
    }
    let o = run(&["verify", "--sanitizer-friendly"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("no GPU"), "{t}");
    assert!(
        t.contains("emulator fragment-native 128x128 w2: == dense") && t.contains("PASS"),
        "{t}"
    );
    let o = run(&["verify", "--packer-only"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("GPU packer checks did not run") && !t.contains("== CPU"),
        "{t}"
    );
    for bench in ["apply", "packer"] {
        let o = run(&["bench", bench]);
        assert_eq!(o.status.code(), Some(3), "bench {bench}: {}", text(&o));
        assert!(text(&o).contains("no GPU"));
    }
}
