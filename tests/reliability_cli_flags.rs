//! `fragmask` on flags that were ignored, sizes that were allocated before they were
//! checked, and messages that named no flag: every bad command line exits 2 naming the
//! flag (or the file) well before a GPU is looked for, never panics or aborts; valid
//! ones exit 3 here, with the "no GPU" line on standard error.
//!
//! The GPU is hidden from the child (`CUDA_VISIBLE_DEVICES=""`), so exit 3 is what a
//! valid command gets here on machines with and without one.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fragmask::masks::io::{write_npy, write_safetensors, DType};

/// Exit code of a bad command line.
const BAD_INPUT: i32 = 2;
/// Exit code of a valid command line and no GPU (src/cli/verify.rs).
const NO_GPU: i32 = 3;
/// A refusal must come well within this: it is a check, not a computation.
const QUICK: Duration = Duration::from_secs(20);

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir as Dir;

/// What one run gave.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    seconds: f64,
}

/// Runs fragmask without a visible GPU, under a 2 GiB address-space limit where the
/// platform has `prlimit` semantics (a size allocated before it is checked aborts).
fn run(args: &[&str]) -> Outcome {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// Asserts exit 2 within [`QUICK`], each of `needles` in the message, no panic, and no
/// GPU lookup.
fn refused(args: &[&str], needles: &[&str]) {
    let o = run(args);
    let text = format!("{}{}", o.stdout, o.stderr);
    assert_eq!(o.code, Some(BAD_INPUT), "{args:?}: {text}");
    assert!(!text.contains("panicked"), "{args:?}: {text}");
    assert!(
        !text.contains("no GPU"),
        "{args:?} reached the GPU check: {text}"
    );
    assert!(
        o.seconds < QUICK.as_secs_f64(),
        "{args:?} took {:.1} s to refuse",
        o.seconds
    );
    for n in needles {
        assert!(text.contains(n), "{args:?}: message lacks {n:?}: {text}");
    }
}

/// Asserts exit 3 (valid, no GPU), the "no GPU" line on standard error only.
fn valid_without_gpu(args: &[&str]) {
    let o = run(args);
    assert_eq!(o.code, Some(NO_GPU), "{args:?}: {}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("no GPU"), "{args:?}: {}", o.stderr);
    assert!(
        !o.stdout.contains("no GPU"),
        "{args:?}: no-GPU line on stdout: {}",
        o.stdout
    );
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// ---- sizes checked before anything is drawn or allocated

#[test]
fn decode_refuses_a_query_larger_than_the_host_budget_before_allocating_it() {
    refused(
        &["decode", "--random", "1,65536,1024,4,1,64"],
        &["--random", "host memory"],
    );
    refused(
        &["decode", "--random", "1,65536,256,1,1,64"],
        &["--random", "host memory"],
    );
}

#[test]
fn decode_checks_the_top_k_shape_before_drawing_the_keys() {
    refused(
        &[
            "decode",
            "--random",
            "65535,1,1,1,1073741824,128",
            "--topk",
            "1073741824",
        ],
        &["--topk"],
    );
    refused(
        &[
            "decode",
            "--random",
            "1,1,8,8,1073741824,128",
            "--topk",
            "100000000",
        ],
        &["--topk"],
    );
}

#[test]
fn lightning_refuses_states_and_references_beyond_the_memory_limits() {
    refused(
        &[
            "bench",
            "lightning",
            "--batch",
            "65535",
            "--heads",
            "65535",
            "--dim",
            "256",
            "--dim-v",
            "256",
        ],
        &["--batch", "--heads"],
    );
    refused(
        &["lightning", "--random", "4768,64,1,256,256"],
        &["--random"],
    );
    refused(
        &["lightning", "--random", "4768,64,1,256,256", "--steps", "1"],
        &["--random"],
    );
    // Under the device limit, over the host budget of the f64 reference.
    refused(
        &["lightning", "--random", "512,64,1,256,256", "--steps", "1"],
        &["--random", "host memory"],
    );
}

// ---- panics

#[test]
fn a_zero_head_dim_is_an_error_naming_the_flag() {
    refused(
        &["attention", "--emit-source", "--head-dim", "0"],
        &["--head-dim", "head dim 0"],
    );
    refused(
        &["attention", "--inspect", "--head-dim", "0"],
        &["--head-dim", "head dim 0"],
    );
}

// ---- ignored flags

#[test]
fn decode_refuses_flags_its_file_mode_ignores() {
    let dir = Dir::new("decode-files");
    let inputs = dir.path("in.safetensors");
    let out = dir.path("out.safetensors");
    for extra in [
        &["--head-major"][..],
        &["--seqlens-q", "random"],
        &["--topk", "4"],
        &["--sweep-only", "mask"],
        &["--lengths", "full"],
        &["--dtype", "f16"],
        &["--seed", "3"],
    ] {
        let mut args = vec!["decode", "--inputs", &inputs, "--out", &out];
        args.extend_from_slice(extra);
        refused(&args, &[extra[0], "--inputs"]);
    }
    refused(
        &["decode", "--random", "1,1,1,1,128,64", "--check"],
        &["--check"],
    );
    refused(
        &["decode", "--sweep", "--splits", "4"],
        &["--splits", "--sweep"],
    );
}

#[test]
fn pack_refuses_source_flags_with_a_packed_file() {
    let dir = Dir::new("pack-packed");
    let packed = dir.path("p.safetensors");
    let out = dir.path("o.safetensors");
    for extra in [
        &["--topk-offsets", "o.npy"][..],
        &["--blocks-num", "n.npy"],
        &["--sparse-block", "64"],
    ] {
        let mut args = vec!["pack", "--packed", &packed, "--transposed", "-o", &out];
        args.extend_from_slice(extra);
        refused(&args, &[extra[0], "--packed"]);
    }
}

#[test]
fn lightning_refuses_random_flags_with_input_files() {
    let dir = Dir::new("lightning-files");
    let inputs = dir.path("in.safetensors");
    let out = dir.path("out.safetensors");
    for extra in [&["--steps", "0"][..], &["--dtype", "f64"], &["--seed", "2"]] {
        let mut args = vec!["lightning", "--inputs", &inputs, "--out", &out];
        args.extend_from_slice(extra);
        refused(&args, &[extra[0]]);
    }
}

#[test]
fn emit_source_and_inspect_refuse_flags_they_ignore_and_read_the_mask() {
    for mode in ["--emit-source", "--inspect"] {
        // With --backward they show the backward kernels: the forward's run flags, a bad
        // backward configuration and a --block without a mask kind are refused.
        refused(
            &["attention", mode, "--backward", "--causal"],
            &["--causal", mode],
        );
        refused(
            &["attention", mode, "--backward", "--bwd-stages", "0"],
            &["--bwd-stages 0", "stages"],
        );
        refused(
            &["attention", mode, "--backward", "--block", "64x64"],
            &["--block", "--synthetic-mask"],
        );
        refused(&["attention", mode, "--splits", "0"], &["--splits"]);
        refused(&["attention", mode, "--bwd-stages", "0"], &["--bwd-stages"]);
        refused(
            &["attention", mode, "--random", "1,1,1,128,128,64"],
            &["--random"],
        );
        refused(
            &["attention", mode, "--mask", "/nonexistent/missing.st"],
            &["--mask", "missing.st"],
        );
    }
    // The forward ignores --head-dim (the inputs give it) and, without --bench, --iters.
    refused(
        &[
            "attention",
            "--random",
            "1,1,1,128,128,64",
            "--head-dim",
            "64",
        ],
        &["--head-dim"],
    );
    refused(
        &["attention", "--random", "1,1,1,128,128,64", "--iters", "5"],
        &["--iters", "--bench"],
    );
    refused(
        &["attention", "--selftest", "--random", "1,1,1,128,128,64"],
        &["--random", "--selftest"],
    );
}

#[test]
fn a_scale_of_zero_or_below_is_refused_as_decode_refuses_it() {
    for v in ["0", "-1", "-inf", "nan"] {
        refused(
            &["attention", "--random", "1,1,1,128,128,64", "--scale", v],
            &["--scale"],
        );
        refused(
            &[
                "bench",
                "attention",
                "--random",
                "1,1,1,128,128,64",
                "--scale",
                v,
            ],
            &["--scale"],
        );
        refused(
            &["decode", "--random", "1,1,1,1,128,64", "--scale", v],
            &["--scale"],
        );
    }
}

#[test]
fn lightning_refuses_a_negative_slope() {
    let dir = Dir::new("slope");
    let act = write_npy(DType::F32, &[1, 1, 1, 64], &f32_bytes(&[0.5; 64]));
    let q = dir.write("q.npy", &act);
    let k = dir.write("k.npy", &act);
    let v = dir.write("v.npy", &act);
    let state = dir.write(
        "state.npy",
        &write_npy(DType::F32, &[1, 1, 64, 64], &f32_bytes(&[0.0; 64 * 64])),
    );
    let out = dir.path("out.safetensors");
    let slope = dir.write(
        "slope.npy",
        &write_npy(DType::F32, &[1], &f32_bytes(&[-0.5])),
    );
    let args = [
        "lightning",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v,
        "--state",
        &state,
        "--slope",
        &slope,
        "--out",
        &out,
    ];
    refused(&args, &["--slope", "non-negative"]);
    let slope = dir.write(
        "slope.npy",
        &write_npy(DType::F32, &[1], &f32_bytes(&[0.5])),
    );
    let args = [
        "lightning",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v,
        "--state",
        &state,
        "--slope",
        &slope,
        "--out",
        &out,
    ];
    valid_without_gpu(&args);
}

#[test]
fn decode_compares_the_masks_key_length_with_the_cache() {
    let dir = Dir::new("decode-mask");
    let mask = dir.path("m.safetensors");
    let o = run(&[
        "pack",
        "--predicate",
        "all",
        "--seqlen-q",
        "1",
        "--seqlen-k",
        "256",
        "--block",
        "64x64",
        "-q",
        "-o",
        &mask,
    ]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    refused(
        &["decode", "--random", "1,1,1,1,128,64", "--mask", &mask],
        &["--mask", "256 key columns"],
    );
    refused(
        &["decode", "--random", "1,1,1,1,300,64", "--mask", &mask],
        &["--mask", "key columns"],
    );
    valid_without_gpu(&["decode", "--random", "1,1,1,1,256,64", "--mask", &mask]);
}

// ---- messages name the flag

#[test]
fn values_beginning_with_a_hyphen_are_reported_against_their_flag() {
    let dir = Dir::new("hyphen");
    let out = dir.path("o.safetensors");
    refused(
        &["decode", "--random", "2,1,1,1,128,64", "--lengths", "-1,5"],
        &["--lengths"],
    );
    refused(&["decode", "--random", "-1,1,1,1,128,64"], &["--random"]);
    refused(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "64",
            "--seqlen-k",
            "64",
            "--block",
            "-128x128",
            "-o",
            &out,
        ],
        &["--block"],
    );
    refused(&["codegen", "--block", "-128x128", "-o", "-"], &["--block"]);
}

#[test]
fn a_zero_backward_stage_count_names_the_flag() {
    refused(
        &[
            "attention",
            "--random",
            "1,1,1,128,128,64",
            "--backward",
            "--bwd-stages",
            "0",
        ],
        &["--bwd-stages"],
    );
}

#[test]
fn group_slices_are_checked_against_the_group_and_the_mask_before_any_gpu() {
    let gqa = ["attention", "--random", "1,8,2,256,256,128", "--backward"];
    let with = |extra: &[&'static str]| [&gqa[..], extra].concat();
    // Not dividing the group of 4 query heads per KV head.
    refused(
        &with(&["--causal", "--group-slices", "3"]),
        &["--group-slices 3", "divide"],
    );
    refused(
        &with(&["--causal", "--group-slices", "8"]),
        &["--group-slices 8"],
    );
    // Only the window walk takes them (and the backward's launch sections).
    refused(
        &with(&["--synthetic-mask", "random:0.5", "--group-slices", "2"]),
        &["--group-slices 2", "window walk"],
    );
    refused(
        &with(&["--synthetic-mask", "random:0.5", "--head-section", "2"]),
        &["--head-section 2", "window walk"],
    );
    // The deterministic mode's tile lists take launch sections (their planes interleaved),
    // and a section of 0 is refused there as everywhere.
    valid_without_gpu(&with(&[
        "--synthetic-mask",
        "random:0.5",
        "--deterministic",
        "--head-section",
        "2",
    ]));
    refused(
        &with(&[
            "--synthetic-mask",
            "random:0.5",
            "--deterministic",
            "--head-section",
            "0",
        ]),
        &["--head-section", "not in 1.."],
    );
    // The deterministic mode does not take them (the accumulators' sums are unordered).
    refused(
        &with(&["--causal", "--deterministic", "--group-slices", "2"]),
        &["GQA group slices"],
    );
    // Valid: reaches the GPU check.
    valid_without_gpu(&with(&["--causal", "--group-slices", "2"]));
    valid_without_gpu(&with(&["--causal", "--group-slices", "4"]));
    valid_without_gpu(&with(&[
        "--synthetic-mask",
        "random:0.5",
        "--group-slices",
        "1",
    ]));
}

#[test]
fn paired_key_blocks_are_checked_against_the_mask_tile_before_any_gpu() {
    let call = ["attention", "--random", "1,2,2,256,256,128", "--backward"];
    let with = |extra: &[&'static str]| [&call[..], extra].concat();
    // No mask, or a mask at the default 128x128 tile: nothing to pair.
    refused(
        &with(&["--paired-keys", "on"]),
        &["--paired-keys on", "64x64"],
    );
    refused(
        &with(&["--synthetic-mask", "random:0.5", "--paired-keys", "on"]),
        &["--paired-keys on", "64x64"],
    );
    // Not on/off; and the forward has no key pairs.
    refused(
        &with(&[
            "--block",
            "64x64",
            "--synthetic-mask",
            "random:0.5",
            "--paired-keys",
            "yes",
        ]),
        &["--paired-keys"],
    );
    refused(
        &[
            "attention",
            "--random",
            "1,2,2,256,256,128",
            "--paired-keys",
            "on",
        ],
        &["--paired-keys", "need --backward"],
    );
    // Valid: reaches the GPU check.
    for on_off in ["on", "off"] {
        valid_without_gpu(&with(&[
            "--block",
            "64x64",
            "--synthetic-mask",
            "random:0.5",
            "--paired-keys",
            on_off,
        ]));
    }
    valid_without_gpu(&with(&["--paired-keys", "off"]));
}

#[test]
fn the_largest_first_tile_order_is_checked_against_the_mask_and_mode_before_any_gpu() {
    let forward = ["attention", "--random", "1,2,2,256,256,128"];
    let call = ["attention", "--random", "1,2,2,256,256,128", "--backward"];
    let with = |base: &[&'static str], extra: &[&'static str]| [base, extra].concat();
    for base in [&forward[..], &call[..]] {
        // No mask: nothing to order.
        refused(
            &with(base, &["--tile-order", "on"]),
            &["--tile-order on", "mask"],
        );
        // Not on/off.
        refused(
            &with(
                base,
                &["--synthetic-mask", "random:0.5", "--tile-order", "yes"],
            ),
            &["--tile-order"],
        );
        // The forward's row order runs on the one-tile grid.
        refused(
            &with(
                base,
                &[
                    "--synthetic-mask",
                    "random:0.5",
                    "--persistent",
                    "on",
                    "--tile-order",
                    "on",
                ],
            ),
            &["--tile-order on", "--persistent on"],
        );
        for on_off in ["on", "off"] {
            valid_without_gpu(&with(
                base,
                &["--synthetic-mask", "random:0.5", "--tile-order", on_off],
            ));
        }
        valid_without_gpu(&with(base, &["--tile-order", "off"]));
    }
    // The backward's deterministic mode keeps the index order.
    refused(
        &with(
            &call,
            &[
                "--synthetic-mask",
                "random:0.5",
                "--deterministic",
                "--tile-order",
                "on",
            ],
        ),
        &["--tile-order on", "deterministic"],
    );
}

#[test]
fn the_deterministic_walks_need_the_deterministic_mode_and_a_backward_before_any_gpu() {
    let call = [
        "attention",
        "--random",
        "1,2,2,256,256,128",
        "--backward",
        "--synthetic-mask",
        "blocksparse:0.3:0.5",
    ];
    let with = |extra: &[&'static str]| [&call[..], extra].concat();
    refused(
        &with(&["--deterministic-walks", "on"]),
        &["--deterministic-walks on", "--deterministic"],
    );
    refused(
        &with(&["--deterministic", "--deterministic-walks", "yes"]),
        &["--deterministic-walks"],
    );
    refused(
        &[
            "attention",
            "--random",
            "1,2,2,256,256,128",
            "--deterministic-walks",
            "off",
        ],
        &["--deterministic-walks", "need --backward"],
    );
    for on_off in ["on", "off"] {
        valid_without_gpu(&with(&["--deterministic", "--deterministic-walks", on_off]));
    }
    valid_without_gpu(&with(&["--deterministic-walks", "off"]));
}

#[test]
fn an_empty_block_table_is_reported_against_the_block_table() {
    let dir = Dir::new("block-table");
    let path = dir.path("in.safetensors");
    let act = vec![0u8; 64 * 2];
    let cache = vec![0u8; 16 * 64 * 2];
    write_safetensors(
        std::path::Path::new(&path),
        &[
            ("q", DType::BF16, &[1, 1, 1, 64], &act),
            ("k_cache", DType::BF16, &[1, 16, 1, 64], &cache),
            ("v_cache", DType::BF16, &[1, 16, 1, 64], &cache),
            ("block_table", DType::I32, &[1, 0], &[]),
        ],
    )
    .unwrap();
    let out = dir.path("out.safetensors");
    refused(
        &["decode", "--inputs", &path, "--out", &out],
        &["tensor block_table", "max_pages"],
    );
}

// ---- the first hour

#[test]
fn a_64_row_tile_picks_one_warpgroup_and_a_wrong_count_is_explained() {
    let dir = Dir::new("warpgroups");
    let out = dir.path("o.safetensors");
    let o = run(&[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "128",
        "--seqlen-k",
        "128",
        "--block",
        "64x64",
        "-q",
        "-o",
        &out,
    ]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    refused(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "128",
            "--seqlen-k",
            "128",
            "--block",
            "64x64",
            "--warpgroups",
            "2",
            "-q",
            "-o",
            &out,
        ],
        &["--warpgroups", "try --warpgroups 1"],
    );
    let o = run(&["codegen", "--block", "64x64", "-o", "-"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
}

#[test]
fn random_sizes_may_be_named_in_either_command() {
    valid_without_gpu(&["decode", "--random", "b=1,sq=1,h=2,hkv=1,sk=128,d=64"]);
    valid_without_gpu(&["attention", "--random", "sk=128,d=64,b=1,h=1,hkv=1,sq=128"]);
    valid_without_gpu(&["lightning", "--random", "b=1,h=1,n=1,d=64", "--steps", "1"]);
    refused(
        &["decode", "--random", "b=1,sq=1,h=2,hkv=1,sk=128"],
        &["--random", "D is missing"],
    );
    refused(
        &[
            "attention",
            "--random",
            "b=1,b=1,h=1,hkv=1,sq=128,sk=128,d=64",
        ],
        &["--random", "twice"],
    );
    for cmd in ["attention", "decode"] {
        let o = run(&[cmd, "--help"]);
        assert!(
            o.stdout.contains("B,H,HKV,SQ,SK,D") && o.stdout.contains("B,SQ,H,HKV,SK,D"),
            "{cmd} --help: {}",
            o.stdout
        );
    }
}

#[test]
fn bench_help_lists_every_benchmark() {
    let o = run(&["bench", "--help"]);
    assert_eq!(o.code, Some(0));
    for sub in [
        "sass",
        "apply",
        "packer",
        "attention",
        "backward",
        "lightning",
        "decode",
    ] {
        assert!(
            o.stdout.contains(&format!("  {sub}")),
            "bench --help lacks {sub}: {}",
            o.stdout
        );
    }
    let o = run(&["--help"]);
    for sub in [
        "sass",
        "apply",
        "packer",
        "attention",
        "backward",
        "lightning",
        "decode",
    ] {
        assert!(
            o.stdout.contains(&format!("(`{sub}`)")),
            "--help's bench line lacks {sub}: {}",
            o.stdout
        );
    }
}

#[test]
fn the_no_gpu_line_goes_to_standard_error() {
    valid_without_gpu(&["decode", "--random", "1,1,1,1,128,64"]);
    valid_without_gpu(&["attention", "--random", "1,1,1,128,128,64", "--json"]);
    valid_without_gpu(&[
        "bench",
        "attention",
        "--random",
        "1,1,1,128,128,64",
        "--json",
    ]);
    valid_without_gpu(&["lightning", "--random", "1,1,1,64", "--steps", "1"]);
    valid_without_gpu(&["bench", "lightning"]);
    valid_without_gpu(&["verify", "--packer-only"]);
}

#[test]
fn help_and_presets_name_workloads_not_internal_documents() {
    fn help_texts(path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let o = run(&args);
        out.push((path.clone(), o.stdout.clone()));
        // Subcommand names: the lines of the "Commands:" section.
        let commands = o
            .stdout
            .split("Commands:")
            .nth(1)
            .unwrap_or("")
            .split("\n\n")
            .next()
            .unwrap_or("")
            .to_string();
        for line in commands.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                let mut p = path.clone();
                p.push(name.to_string());
                help_texts(p, out);
            }
        }
    }
    let mut texts = Vec::new();
    help_texts(Vec::new(), &mut texts);
    assert!(texts.len() >= 18, "walked {} help pages", texts.len());
    for (path, text) in &texts {
        for internal in ["write-up", "writeup", "issue", "GPU machine"] {
            assert!(
                !text.to_lowercase().contains(&internal.to_lowercase()),
                "fragmask {} --help says {internal:?}: {text}",
                path.join(" ")
            );
        }
    }
    // The presets by their names, and by their former ones.
    for preset in ["serving", "vsa", "issue11", "writeup002"] {
        valid_without_gpu(&["bench", "decode", "--preset", preset]);
    }
}

#[test]
fn forced_shared_kv_and_persistent_ctas_the_call_cannot_take_are_refused_before_the_gpu() {
    let shape = ["attention", "--random", "1,2,2,512,512,128"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        shape.iter().copied().chain(extra.iter().copied()).collect()
    };
    // Shared K/V on a causal (window-mode) call: no 64-token tile lists.
    refused(&with(&["--causal", "--shared-kv", "on"]), &["shared K/V"]);
    // The shared-K/V tile named with persistent CTAs.
    refused(
        &with(&[
            "--block",
            "64x64/2x2",
            "--synthetic-mask",
            "random:0.5",
            "--persistent",
            "on",
        ]),
        &["persistent"],
    );
    // Persistent CTAs with split-KV asked for.
    refused(
        &with(&[
            "--synthetic-mask",
            "random:0.5",
            "--persistent",
            "on",
            "--splits",
            "2",
        ]),
        &["persistent", "split"],
    );
    // What the kernels can take stays valid.
    valid_without_gpu(&with(&[
        "--block",
        "64x64",
        "--synthetic-mask",
        "random:0.5",
        "--shared-kv",
        "on",
    ]));
    valid_without_gpu(&with(&["--causal", "--persistent", "on"]));
    valid_without_gpu(&with(&["--causal", "--head-section", "4000000000"]));
    // The 128x128 list kernel runs 3 K/V stages; persistent it takes the 2 that fit beside
    // the second Q tile, unless the call names 3.
    valid_without_gpu(&with(&[
        "--synthetic-mask",
        "random:0.5",
        "--persistent",
        "on",
    ]));
    refused(
        &with(&[
            "--synthetic-mask",
            "random:0.5",
            "--persistent",
            "on",
            "--stages",
            "3",
        ]),
        &["persistent", "3 K/V stages"],
    );
}

#[test]
fn q_registers_the_call_cannot_take_are_refused_before_the_gpu() {
    // Head dim 64's 192x128 tile has no room for Q's registers.
    refused(
        &[
            "attention",
            "--random",
            "1,2,2,256,256,64",
            "--q-registers",
            "true",
        ],
        &["--q-registers true", "does not fit the 192x128 tile"],
    );
    // The serial loop refuses them (ptxas gave P their registers there).
    refused(
        &[
            "attention",
            "--random",
            "1,2,2,256,256,128",
            "--no-overlap",
            "--q-registers",
            "true",
        ],
        &["overlapped loop only"],
    );
    // Without asking for them, --no-overlap keeps Q in shared memory and the call is valid.
    valid_without_gpu(&["attention", "--random", "1,2,2,256,256,128", "--no-overlap"]);
    valid_without_gpu(&[
        "attention",
        "--random",
        "1,2,2,256,256,128",
        "--q-registers",
        "true",
    ]);
}

#[test]
fn a_timed_warm_up_is_bounded_and_needs_a_benchmark() {
    let shape = "1,2,2,256,256,128";
    refused(
        &[
            "bench",
            "attention",
            "--random",
            shape,
            "--warmup-ms",
            "60001",
        ],
        &["--warmup-ms 60001", "at most 60000"],
    );
    refused(
        &[
            "bench",
            "backward",
            "--random",
            shape,
            "--warmup-ms",
            "70000",
        ],
        &["--warmup-ms 70000", "at most 60000"],
    );
    refused(
        &["attention", "--random", shape, "--warmup-ms", "100"],
        &["--warmup-ms"],
    );
    valid_without_gpu(&[
        "bench",
        "backward",
        "--random",
        shape,
        "--warmup-ms",
        "1000",
    ]);
    valid_without_gpu(&[
        "attention",
        "--random",
        shape,
        "--bench",
        "--warmup-ms",
        "0",
    ]);
}

#[test]
fn split_tail_flags_out_of_range_or_against_the_one_tile_grid_are_refused_before_the_gpu() {
    let call = ["attention", "--random", "1,3,3,1000,1100,64"];
    let with = |extra: &[&'static str]| [&call[..], extra].concat();
    valid_without_gpu(&with(&["--tail", "3,2"]));
    valid_without_gpu(&with(&["--tail-split", "on", "--splits", "1"]));
    refused(&with(&["--tail", "0,2"]), &["--tail 0,2", "TILES"]);
    refused(&with(&["--tail", "3,1"]), &["--tail 3,1", "SPLITS"]);
    refused(&with(&["--tail", "3"]), &["--tail", "TILES,SPLITS"]);
    refused(
        &with(&["--tail", "3,2", "--tail-split", "off"]),
        &["--tail", "--tail-split off"],
    );
    for (flags, named) in [
        (&["--splits", "2"][..], "--splits above 1"),
        (&["--persistent", "on"][..], "--persistent on"),
        (&["--head-section", "4"][..], "--head-section above 1"),
        (&["--shared-kv", "on"][..], "--shared-kv on"),
    ] {
        refused(&with(&[&["--tail", "3,2"][..], flags].concat()), &[named]);
        refused(
            &with(&[&["--tail-split", "on"][..], flags].concat()),
            &[named],
        );
    }
}
