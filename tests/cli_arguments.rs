//! Every argument of every subcommand, walked from clap's own description of the
//! program: clap's `debug_assert` holds for each subcommand, and in each mode of each
//! subcommand (the minimal invocations below) every argument is either read by that mode
//! or refused with an error naming it (exit 2), never silently ignored. A new argument
//! without a sample value in [`SAMPLES`] fails [`every_argument_has_a_sample_value`].

#[path = "../src/cli/mod.rs"]
#[allow(dead_code, unused_imports)]
mod cli;

use std::collections::BTreeSet;

/// Every subcommand path and its arguments (long name or id), positionals excluded.
fn subcommands() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(prefix: Vec<String>, cmd: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let mut path = prefix.clone();
            path.push(sub.get_name().to_string());
            if sub.has_subcommands() {
                walk(path, sub, out);
            } else {
                out.push((path, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    walk(Vec::new(), &cli::command(), &mut out);
    out
}

fn options(cmd: &clap::Command) -> Vec<clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_positional() && !matches!(a.get_id().as_str(), "help" | "version"))
        .cloned()
        .collect()
}

/// A value clap parses for each argument, by id (the value is used where the argument
/// takes one; flags take none). Every argument of every subcommand needs an entry.
const SAMPLES: &[(&str, &str)] = &[
    ("backward", ""),
    ("batch", "1"),
    ("bench", ""),
    ("block", "128x128"),
    ("block_m", "128"),
    ("block_n", "128"),
    ("block_sizes", "s.npy"),
    ("blocks", "b.safetensors"),
    ("blocks_num", "n.npy"),
    ("bwd_stages", "2"),
    ("bwd_step", "128"),
    ("cases", "documents"),
    ("causal", ""),
    ("check", ""),
    ("col_vectors", "8"),
    ("compile_only", ""),
    ("d_o", "do.npy"),
    ("dense_mask", "m.npy"),
    ("density", "0.5"),
    ("deterministic", ""),
    ("deterministic_walks", "off"),
    ("diag_offset", "0"),
    ("dim", "128"),
    ("dim_v", "128"),
    ("distinct_tiles", "16"),
    ("dq_reduce", "atomics"),
    ("dq_writer", "off"),
    ("dtype", "bf16"),
    ("emit_source", ""),
    ("encoding", "row-major"),
    ("graph", ""),
    ("group_slices", "2"),
    ("head_dim", "128"),
    ("head_major", ""),
    ("head_section", "4"),
    ("tail", "3,2"),
    ("tail_split", "on"),
    ("heads", "1"),
    ("inputs", "i.safetensors"),
    ("inspect", ""),
    ("iters", "1"),
    ("json", "o.json"),
    ("k", "k.npy"),
    ("kv_heads", "1"),
    ("lazy_rescale", "true"),
    ("q_registers", "true"),
    ("lengths", "full"),
    ("lookahead", "true"),
    ("lse_out", "lse.npy"),
    ("mask", "m.safetensors"),
    ("no_cpu", ""),
    ("no_dependent_launch", ""),
    ("no_overlap", ""),
    ("npy", "m.npy"),
    ("out", "o.safetensors"),
    ("out_layout", "bshd"),
    ("output", "o.safetensors"),
    ("packed", "p.safetensors"),
    ("packer_only", ""),
    ("page_size", "16"),
    ("paired_keys", "off"),
    ("pattern", "random"),
    ("persistent", "on"),
    ("persistent_ctas", "2"),
    ("shared_kv", "on"),
    ("pingpong", "true"),
    ("planes", "1"),
    ("predicate", "causal"),
    ("preset", "vsa"),
    ("q", "q.npy"),
    ("quiet", ""),
    ("random", "1,1,1,128,128,64"),
    ("rotate_mb", "1"),
    ("runs", "1"),
    ("sanitizer_friendly", ""),
    ("scale", "0.5"),
    ("seed", "2"),
    ("selftest", ""),
    ("seqlen_k", "128"),
    ("seqlen_q", "128"),
    ("seqlens_q", "random"),
    ("shuffle_pages", ""),
    ("slope", "slope.npy"),
    ("sparse_block", "64"),
    ("splits", "2"),
    ("stages", "2"),
    ("state", "state.npy"),
    ("steps", "2"),
    ("svg", "f.svg"),
    ("swap_ab", ""),
    ("sweep", ""),
    ("tile_order", "off"),
    ("sweep_only", "mask"),
    ("synthetic_mask", "random:0.5"),
    ("table", ""),
    ("tensor", "mask"),
    ("thread", "1"),
    ("threads", "1"),
    ("tiles_per_cta", "16"),
    ("tokens", "1"),
    ("topk", "4"),
    ("topk_offsets", "o.npy"),
    ("transposed", ""),
    ("transposed_no_swap_ab", ""),
    ("transposed_warpgroups", "1"),
    ("v", "v.npy"),
    ("warmup", "1"),
    ("warmup_ms", "100"),
    ("warpgroups", "1"),
    ("window", "1,1"),
    ("window_left", "8"),
    ("window_right", "0"),
];

/// A minimal invocation of each mode of each subcommand (each accepted as it stands).
const INVOCATIONS: &[&[&str]] = &[
    &["demo"],
    &["layout", "4:1"],
    &["frag"],
    &["inspect", "p.safetensors"],
    &["codegen"],
    &["verify"],
    &["pack", "--mask", "m.npy", "-o", "o.safetensors"],
    &[
        "pack",
        "--topk",
        "t.npy",
        "--seqlen-k",
        "8",
        "-o",
        "o.safetensors",
    ],
    &["pack", "--blocks", "b.safetensors", "-o", "o.safetensors"],
    &[
        "pack",
        "--blocks",
        "b.npy",
        "--blocks-num",
        "n.npy",
        "-o",
        "o.safetensors",
    ],
    &[
        "pack",
        "--topk",
        "t.npy",
        "--topk-offsets",
        "o.npy",
        "--seqlen-k",
        "8",
        "-o",
        "o.safetensors",
    ],
    &[
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "8",
        "--seqlen-k",
        "8",
        "-o",
        "o.safetensors",
    ],
    &[
        "pack",
        "--packed",
        "p.safetensors",
        "--transposed",
        "-o",
        "o.safetensors",
    ],
    &["attention", "--random", "1,1,1,128,128,64"],
    &["attention", "--inputs", "i.safetensors"],
    &["attention", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy"],
    &["attention", "--random", "1,1,1,128,128,64", "--bench"],
    &["attention", "--random", "1,1,1,128,128,64", "--backward"],
    &[
        "attention",
        "--random",
        "1,1,1,128,128,64",
        "--backward",
        "--bench",
    ],
    &["attention", "--selftest"],
    &["attention", "--selftest", "--backward"],
    &["attention", "--emit-source"],
    &["attention", "--inspect"],
    &["lightning", "--random", "1,1,1,64"],
    &[
        "lightning",
        "--inputs",
        "i.safetensors",
        "--out",
        "o.safetensors",
    ],
    &[
        "lightning",
        "--q",
        "q.npy",
        "--k",
        "k.npy",
        "--v",
        "v.npy",
        "--state",
        "s.npy",
        "--slope",
        "l.npy",
        "--out",
        "o.safetensors",
    ],
    &["decode", "--random", "1,1,1,1,128,64"],
    &["decode", "--random", "1,1,1,1,128,64", "--page-size", "16"],
    &[
        "decode",
        "--inputs",
        "i.safetensors",
        "--out",
        "o.safetensors",
    ],
    &["decode", "--sweep"],
    &["bench", "sass"],
    &["bench", "apply"],
    &["bench", "packer"],
    &["bench", "attention", "--random", "1,1,1,128,128,64"],
    &[
        "bench",
        "attention",
        "--q",
        "q.npy",
        "--k",
        "k.npy",
        "--v",
        "v.npy",
    ],
    &["bench", "attention", "--inputs", "i.safetensors"],
    &["bench", "backward", "--random", "1,1,1,128,128,64"],
    &[
        "bench", "backward", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
    ],
    &["bench", "backward", "--inputs", "i.safetensors"],
    &["bench", "lightning"],
    &["bench", "decode"],
    &["bench", "decode", "--page-size", "16"],
    &["bench", "decode", "--preset", "vsa"],
];

fn sample(id: &str) -> Option<&'static str> {
    SAMPLES.iter().find(|(i, _)| *i == id).map(|(_, v)| *v)
}

/// The long flag of an argument as typed.
fn flag(a: &clap::Arg) -> String {
    match (a.get_long(), a.get_short()) {
        (Some(l), _) => format!("--{l}"),
        (None, Some(s)) => format!("-{s}"),
        _ => a.get_id().to_string(),
    }
}

#[test]
fn every_subcommand_passes_clap_debug_assert() {
    let cmd = cli::command();
    cmd.clone().debug_assert();
    for (path, sub) in subcommands() {
        let mut sub = sub.clone();
        sub.build();
        sub.debug_assert();
        assert!(
            INVOCATIONS.iter().any(
                |inv| inv.starts_with(&path.iter().map(String::as_str).collect::<Vec<_>>()[..])
            ),
            "fragmask {} has no minimal invocation in INVOCATIONS",
            path.join(" ")
        );
    }
}

#[test]
fn every_argument_has_a_sample_value() {
    let mut missing = BTreeSet::new();
    for (path, cmd) in subcommands() {
        for a in options(&cmd) {
            if sample(a.get_id().as_str()).is_none() {
                missing.insert(format!("{}: {}", path.join(" "), a.get_id()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no sample value in SAMPLES for:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn every_argument_is_read_by_the_mode_or_refused_naming_it() {
    let mut failures = Vec::new();
    for (path, cmd) in subcommands() {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let invocations: Vec<&&[&str]> = INVOCATIONS
            .iter()
            .filter(|inv| inv.starts_with(&path))
            .collect();
        let mut read_somewhere: BTreeSet<String> = BTreeSet::new();
        for inv in invocations {
            let base = cli::check_args(inv)
                .unwrap_or_else(|e| panic!("the minimal invocation {inv:?} is refused: {e}"));
            if let Some(uses) = base.uses {
                for id in uses {
                    if !options(&cmd).iter().any(|a| a.get_id().as_str() == *id) {
                        failures.push(format!(
                            "{inv:?}: mode {:?} lists {id:?}, which is no argument of fragmask {}",
                            base.name,
                            path.join(" ")
                        ));
                    }
                }
            }
            for a in options(&cmd) {
                let id = a.get_id().as_str();
                let f = flag(&a);
                let short = a.get_short().map(|c| format!("-{c}"));
                if inv.contains(&f.as_str()) || short.is_some_and(|s| inv.contains(&s.as_str())) {
                    read_somewhere.insert(id.to_string());
                    continue;
                }
                let Some(value) = sample(id) else { continue };
                let mut argv: Vec<&str> = inv.to_vec();
                argv.push(&f);
                if a.get_action().takes_values() {
                    argv.push(value);
                }
                match cli::check_args(&argv) {
                    Ok(mode) => {
                        if mode.uses.is_some_and(|u| !u.contains(&id)) {
                            failures.push(format!(
                                "{argv:?}: accepted, but mode {:?} does not read {id}",
                                mode.name
                            ));
                        }
                        read_somewhere.insert(id.to_string());
                    }
                    Err(message) if message.contains(f.as_str()) => {}
                    Err(message) => {
                        failures.push(format!("{argv:?}: refused without naming {f}: {message}"))
                    }
                }
            }
        }
        for a in options(&cmd) {
            if !read_somewhere.contains(a.get_id().as_str()) {
                failures.push(format!(
                    "fragmask {}: {} is read by none of its modes' invocations",
                    path.join(" "),
                    flag(&a)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
