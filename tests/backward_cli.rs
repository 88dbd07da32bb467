//! `fragmask attention --backward` and `fragmask bench backward` on bad input: exit 2 naming
//! the flag or file, before any GPU is looked for (the GPU is hidden from the child process,
//! so a check that ran after GPU discovery would exit 3 instead); valid inputs without a GPU
//! exit 3.

use std::process::{Command, Output};

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir;

fn run_without_gpu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("run fragmask")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn valid_backward_inputs_without_a_gpu_exit_3() {
    let cases: [&[&str]; 4] = [
        &[
            "attention",
            "--backward",
            "--random",
            "1,2,1,200,150,128",
            "--causal",
        ],
        // 64 keys by 128 queries, a tile the backward reads (its selftest has cases).
        &[
            "bench",
            "backward",
            "--random",
            "1,2,2,300,260,128",
            "--synthetic-mask",
            "random:0.5",
            "--block",
            "128x64",
        ],
        &[
            "bench",
            "backward",
            "--random",
            "1,2,2,256,256,64",
            "--synthetic-mask",
            "random:0.5",
        ],
        &[
            "bench",
            "backward",
            "--random",
            "1,1,1,128,128,256",
            "--deterministic",
        ],
    ];
    for args in cases {
        let o = run_without_gpu(args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
    }
}

#[test]
fn bad_backward_inputs_exit_2_naming_the_problem_before_any_gpu() {
    let dir = TempDir::new("backward-cli");
    // A packed mask without the transposed lists: the message names the command that adds them.
    let mask = dir.join("fwd.safetensors");
    let o = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args([
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "256",
            "--seqlen-k",
            "256",
            "-o",
        ])
        .arg(&mask)
        .output()
        .expect("run fragmask pack");
    assert!(o.status.success(), "{}", text(&o));
    let mask_arg = mask.to_str().expect("utf-8 path");
    let wrong_do = dir.join("do.npy");
    std::fs::write(&wrong_do, b"not an npy file").expect("write");
    let do_arg = wrong_do.to_str().expect("utf-8 path");
    for (args, needle) in [
        (
            vec![
                "bench",
                "backward",
                "--random",
                "1,2,2,256,256,128",
                "--mask",
                mask_arg,
            ],
            "fragmask pack --transposed",
        ),
        (
            vec![
                "attention",
                "--backward",
                "--random",
                "1,2,2,256,256,128",
                "--d-o",
                do_arg,
            ],
            "--d-o",
        ),
        (
            vec![
                "attention",
                "--random",
                "1,2,2,256,256,128",
                "--deterministic",
            ],
            "need --backward",
        ),
        (
            vec!["bench", "backward", "--random", "1,2,2,256,256,96"],
            "head dim 96",
        ),
        (
            vec![
                "bench",
                "backward",
                "--random",
                "1,2,2,256,256,128",
                "--bwd-stages",
                "9",
            ],
            "stages",
        ),
        (
            vec![
                "bench",
                "backward",
                "--random",
                "1,2,2,256,256,128",
                "--synthetic-mask",
                "random:0.5",
                "--block",
                "128x80",
            ],
            "--block 128x80: attention kernel: the backward does not read a 128x80 mask tile",
        ),
        (
            // Head dim 64's forward tile: its 192-row steps would run past the workspace.
            vec![
                "bench",
                "backward",
                "--random",
                "1,2,2,300,260,64",
                "--synthetic-mask",
                "random:0.5",
                "--block",
                "192x128",
            ],
            "the backward does not read a 192x128 mask tile",
        ),
    ] {
        let o = run_without_gpu(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(needle), "{args:?}: expected '{needle}' in: {t}");
    }
}
