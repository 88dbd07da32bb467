//! `fragmask bench attention` and `fragmask attention --bench` without a GPU: they say
//! so and exit 3, like `fragmask verify` and the other GPU benchmarks.
//!
//! The GPU is hidden from the child process (`CUDA_VISIBLE_DEVICES=""`: the driver
//! reports no device), so these tests run, and check the same thing, on machines with
//! and without one.

use std::process::{Command, Output};

/// The exit code of every GPU command when there is no GPU (src/cli/verify.rs).
const NO_GPU_EXIT: i32 = 3;

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
fn bench_attention_without_a_gpu_says_no_gpu_and_exits_3() {
    for mask in [
        &["--causal"][..],
        &["--window", "64,-1"],
        &["--synthetic-mask", "random:0.5"],
        &[],
    ] {
        let mut args = vec![
            "bench",
            "attention",
            "--random",
            "1,2,2,256,256,128",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--json",
        ];
        args.extend_from_slice(mask);
        let o = run_without_gpu(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(NO_GPU_EXIT), "{args:?}: {t}");
        assert!(t.contains("no GPU"), "{args:?}: {t}");
        assert!(t.contains("nothing was timed"), "{args:?}: {t}");
    }
}

#[test]
fn attention_bench_flag_without_a_gpu_says_no_gpu_and_exits_3() {
    let o = run_without_gpu(&["attention", "--bench", "--random", "1,2,2,256,256,128"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(NO_GPU_EXIT), "{t}");
    assert!(t.contains("no GPU"), "{t}");
}

#[test]
fn bench_attention_rejects_an_unknown_option_with_exit_2() {
    let o = run_without_gpu(&["bench", "attention", "--no-such-option"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
