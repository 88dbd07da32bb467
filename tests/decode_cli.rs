//! `fragmask decode` and `fragmask bench decode` as a user runs them: every bad input
//! (head ratio, head size, page size, lengths above capacity, block table entries past
//! the pool, flags) is exit 2 with a message naming the flag or file, checked before the
//! GPU; valid inputs on a machine without a GPU are exit 3; no file is left behind.

use std::path::Path;
use std::process::Command;

use fragmask::masks::io::{write_safetensors, DType};

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir;

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

fn bf16_zeros(shape: &[usize]) -> Vec<u8> {
    vec![0x3f; 2 * shape.iter().product::<usize>()]
}

fn i32s(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A paged call: q [1,1,8,64], pages [2,16,2,64], block_table [1,2], seqlens_k [1].
fn paged_file(d: &TempDir, name: &str, table: &[i32], len: i32) {
    let (q, kv) = ([1usize, 1, 8, 64], [2usize, 16, 2, 64]);
    write_safetensors(
        &d.join(name),
        &[
            ("q", DType::BF16, &q, &bf16_zeros(&q)),
            ("k_cache", DType::BF16, &kv, &bf16_zeros(&kv)),
            ("v_cache", DType::BF16, &kv, &bf16_zeros(&kv)),
            ("block_table", DType::I32, &[1, 2], &i32s(table)),
            ("seqlens_k", DType::I32, &[1], &i32s(&[len])),
        ],
    )
    .unwrap();
}

#[test]
fn bad_random_shapes_are_exit_2_naming_the_flag_before_the_gpu() {
    let d = TempDir::new("decode-random");
    for (args, needle) in [
        (
            vec!["--random", "4,1,30,8,300,128"],
            "not a multiple of Hkv = 8",
        ),
        (
            vec!["--random", "4,1,32,8,300,96"],
            "head size D = 96 is not supported",
        ),
        (
            vec!["--random", "4,1,32,8,300,128", "--page-size", "24"],
            "page size 24 is not supported",
        ),
        (
            vec!["--random", "4,1,32,8,300,128", "--page-size", "0"],
            "--page-size 0",
        ),
        (
            vec!["--random", "4,1,32,8,300,128", "--lengths", "1,2,3,301"],
            "--lengths",
        ),
        (
            vec!["--random", "4,1,32,8,300,128", "--splits", "0"],
            "--splits 0",
        ),
        (
            vec!["--random", "4,1,32,8,300,128", "--dtype", "f32"],
            "--dtype f32",
        ),
        (vec!["--random", "0,1,32,8,300,128"], "batch = 0"),
        (vec!["--random", "4,1,32,8"], "expected B,SQ,H,HKV,SK,D"),
        (
            vec!["--random", "64,64,64,8,65536,256"],
            "CPU f64 reference",
        ),
        (
            vec!["--random", "1,1,1,1,100000000,64"],
            "KV cache holds 6400000000 elements",
        ),
    ] {
        let mut all = vec!["decode"];
        all.extend(args.iter());
        let (code, text) = run(&d.0, &all);
        assert_eq!(code, 2, "{all:?}: {text}");
        assert!(text.contains(needle), "{all:?}: {text}");
        assert!(!text.contains("no GPU"), "{all:?} looked for a GPU: {text}");
    }
    assert!(d.entries().is_empty());
}

#[test]
fn valid_random_inputs_without_a_gpu_are_exit_3() {
    let d = TempDir::new("decode-random-ok");
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--random",
            "2,3,8,2,200,64",
            "--page-size",
            "16",
            "--shuffle-pages",
            "--causal",
        ],
    );
    if code == 0 {
        eprintln!("a GPU is visible: the check ran and passed ({text})");
    } else {
        assert_eq!(code, 3, "{text}");
        assert!(text.contains("the inputs are valid"), "{text}");
    }
    let (code, text) = run(&d.0, &["decode", "--sweep"]);
    assert!(code == 3 || code == 0, "{text}");
    assert!(d.entries().is_empty());
}

#[test]
fn head_major_caches_take_random_contiguous_inputs_only() {
    let d = TempDir::new("decode-head-major");
    // A head-major cache is contiguous: no pages, no top-k gather, no input file.
    for args in [
        vec![
            "decode",
            "--random",
            "2,1,8,2,200,64",
            "--head-major",
            "--page-size",
            "16",
        ],
        vec![
            "decode",
            "--random",
            "2,1,8,2,200,64",
            "--head-major",
            "--topk",
            "5",
        ],
        vec!["decode", "--inputs", "missing.safetensors", "--head-major"],
        vec!["bench", "decode", "--head-major", "--page-size", "16"],
        vec!["bench", "decode", "--head-major", "--topk", "5"],
    ] {
        let (code, text) = run(&d.0, &args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains("--head-major"), "{args:?}: {text}");
    }
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--random",
            "2,3,8,2,200,64",
            "--head-major",
            "--causal",
        ],
    );
    if code == 0 {
        eprintln!("a GPU is visible: the check ran and passed ({text})");
    } else {
        assert_eq!(code, 3, "{text}");
        assert!(text.contains("the inputs are valid"), "{text}");
    }
    assert!(d.entries().is_empty());
}

#[test]
fn block_tables_past_the_pool_and_lengths_above_capacity_are_refused_naming_the_file() {
    let d = TempDir::new("decode-files");
    // seqlens_k = 20 reads slots 0 and 1; slot 1 holds page 5 of a pool of 2.
    paged_file(&d, "past.safetensors", &[0, 5], 20);
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--inputs",
            "past.safetensors",
            "--out",
            "o.safetensors",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("past.safetensors"), "{text}");
    assert!(
        text.contains("block_table[0][1] = 5 points outside the pool of 2 pages"),
        "{text}"
    );
    // 33 keys in 2 slots of 16: above the capacity of 32.
    paged_file(&d, "long.safetensors", &[0, 1], 33);
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--inputs",
            "long.safetensors",
            "--out",
            "o.safetensors",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("holds 33 keys, outside 0..=32"), "{text}");
    // An unused slot may hold -1 (16 keys read slot 0 only): valid, so exit 3 here.
    paged_file(&d, "ok.safetensors", &[1, -1], 16);
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--inputs",
            "ok.safetensors",
            "--out",
            "o.safetensors",
        ],
    );
    if code != 0 {
        assert_eq!(code, 3, "{text}");
    }
    let mut left = d.entries();
    left.retain(|n| n != "o.safetensors" || code == 0);
    assert_eq!(
        left,
        ["long.safetensors", "ok.safetensors", "past.safetensors"]
    );
    // The output may not overwrite an input.
    let (code, text) = run(
        &d.0,
        &[
            "decode",
            "--inputs",
            "ok.safetensors",
            "--out",
            "ok.safetensors",
        ],
    );
    assert_eq!(code, 2, "{text}");
}

#[test]
fn bad_bench_flags_are_exit_2_before_the_gpu() {
    let d = TempDir::new("decode-bench");
    for (args, needle) in [
        (vec!["--preset", "nope"], "--preset nope"),
        (vec!["--batch", "0"], "batch = 0"),
        (vec!["--kv-heads", "7"], "not a multiple of Hkv = 7"),
        (vec!["--dim", "80"], "D = 80"),
        (vec!["--page-size", "3"], "page size 3"),
        (vec!["--iters", "0"], "--iters 0"),
        (vec!["--splits", "999"], "--splits 999"),
        (
            vec!["--batch", "64", "--seqlen-k", "1000000"],
            "the benchmark takes at most",
        ),
    ] {
        let mut all = vec!["bench", "decode"];
        all.extend(args.iter());
        let (code, text) = run(&d.0, &all);
        assert_eq!(code, 2, "{all:?}: {text}");
        assert!(text.contains(needle), "{all:?}: {text}");
    }
    assert!(d.entries().is_empty());
}

#[test]
fn masks_and_top_k_that_do_not_fit_are_exit_2_and_valid_ones_exit_3() {
    let d = TempDir::new("decode-mask");
    let (code, text) = run(
        &d.0,
        &[
            "pack",
            "--predicate",
            "window=100:0",
            "--seqlen-q",
            "8",
            "--seqlen-k",
            "300",
            "--block",
            "64x64",
            "--warpgroups",
            "1",
            "-q",
            "-o",
            "m.safetensors",
        ],
    );
    assert_eq!(code, 0, "{text}");
    for (args, needle) in [
        // The mask has 8 rows; the call 4 tokens.
        (
            vec!["--random", "2,4,8,2,300,64", "--mask", "m.safetensors"],
            "rows",
        ),
        (
            vec![
                "--random",
                "2,8,8,2,300,64",
                "--mask",
                "missing.safetensors",
            ],
            "missing.safetensors",
        ),
        (
            vec!["--random", "2,1,8,2,300,64", "--topk", "301"],
            "--topk 301",
        ),
        (
            vec!["--random", "2,1,8,2,300,64", "--topk", "8", "--causal"],
            "--causal",
        ),
        (
            vec![
                "--random",
                "2,1,8,2,300,64",
                "--topk",
                "8",
                "--page-size",
                "16",
            ],
            "--page-size",
        ),
    ] {
        let mut all = vec!["decode"];
        all.extend(args.iter().copied());
        let (code, text) = run(&d.0, &all);
        assert_eq!(code, 2, "{all:?}: {text}");
        assert!(text.contains(needle), "{all:?}: {text}");
    }
    for args in [
        vec!["--random", "2,8,8,2,300,64", "--mask", "m.safetensors"],
        // Masked D = 256 (one shared-K/V warp per 16 rows; refused before).
        vec!["--random", "2,8,8,2,300,256", "--mask", "m.safetensors"],
        vec![
            "--random",
            "2,8,8,2,300,64",
            "--mask",
            "m.safetensors",
            "--page-size",
            "16",
            "--shuffle-pages",
            "--causal",
        ],
        vec!["--random", "2,1,8,2,300,64", "--topk", "40"],
    ] {
        let mut all = vec!["decode"];
        all.extend(args.iter().copied());
        let (code, text) = run(&d.0, &all);
        assert!(code == 3 || code == 0, "{all:?}: {text}");
    }
    let (code, text) = run(
        &d.0,
        &[
            "bench",
            "decode",
            "--seqlen-q",
            "8",
            "--seqlen-k",
            "300",
            "--mask",
            "m.safetensors",
        ],
    );
    assert!(code == 3 || code == 0, "{text}");
    let (code, text) = run(&d.0, &["bench", "decode", "--topk", "0"]);
    assert_eq!(code, 2, "{text}");
    // Mixed batches: B values in 0..=SEQLEN_Q.
    let (code, text) = run(&d.0, &["bench", "decode", "--seqlens-q", "1,2"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--seqlens-q"), "{text}");
    let (code, text) = run(
        &d.0,
        &[
            "bench",
            "decode",
            "--batch",
            "2",
            "--seqlen-q",
            "4",
            "--seqlens-q",
            "4,1",
        ],
    );
    assert!(code == 3 || code == 0, "{text}");
    for bad in ["5,1", "4"] {
        let (code, text) = run(
            &d.0,
            &["decode", "--random", "2,4,8,2,300,64", "--seqlens-q", bad],
        );
        assert_eq!(code, 2, "{bad}: {text}");
    }
}

#[test]
fn split_counts_the_forward_cannot_take_drop_its_rows_and_keep_the_decode_rows() {
    // Decode takes up to 256 splits, the split-KV forward 128: the preset's forward rows
    // are left out with a note, checked before any GPU is looked for.
    let d = TempDir::new("decode-forward-rows");
    let (code, text) = run(
        &d.0,
        &["bench", "decode", "--preset", "vsa", "--splits", "200"],
    );
    assert!(code == 3 || code == 0, "{text}");
    assert!(
        text.contains("no wgmma forward row: --splits 200"),
        "{text}"
    );
    let (code, text) = run(
        &d.0,
        &["bench", "decode", "--preset", "vsa", "--splits", "12"],
    );
    assert!(code == 3 || code == 0, "{text}");
    assert!(!text.contains("no wgmma forward row"), "{text}");
}
