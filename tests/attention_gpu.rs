//! GPU correctness sweep of the attention forward against the CPU f64 reference
//! (odd lengths, GQA/MQA, causal/window, random and block-sparse FragmentNative
//! masks, fully masked rows, empty and full masks). Needs an SM90 GPU.
//!
//! `#[ignore]`d so that a machine without a GPU reports it as ignored, not passed. On
//! an SM90 machine with a Rust toolchain run `cargo test --test attention_gpu --
//! --include-ignored`; the lent H100 has no Rust, so there the same sweep runs as
//! `fragmask attention --selftest`.

use fragmask::check::attention::selftest::{default_cases, run_case};
use fragmask::host::attention::AttentionRunner;
use fragmask::host::Device;

#[test]
#[ignore = "needs an SM90 GPU: run with --include-ignored on the GPU machine"]
fn gpu_attention_matches_the_f64_reference_on_every_sweep_case() {
    let device = match Device::first() {
        Ok(d) if d.compute_capability().major == 9 => d,
        Ok(d) => {
            eprintln!(
                "SKIPPED: no SM90 GPU ({} is {})",
                d.name(),
                d.compute_capability()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: no GPU ({e})");
            return;
        }
    };
    let runner = AttentionRunner::new(&device).expect("runner");
    let mut failed = Vec::new();
    for (i, case) in default_cases().iter().enumerate() {
        let r = run_case(&runner, case, 1000 + i as u64).expect("case ran");
        eprintln!(
            "{} {} rel_err {:.2e} lse_err {:.2e}",
            if r.passed { "PASS" } else { "FAIL" },
            r.name,
            r.rel_err,
            r.lse_err
        );
        if !r.passed {
            failed.push(r);
        }
    }
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
}

#[test]
#[ignore = "needs an SM90 GPU: run with --include-ignored on the GPU machine"]
fn gpu_attention_backward_matches_the_f64_reference_on_every_sweep_case() {
    use fragmask::check::attention::backward_selftest as selftest;
    let device = match Device::first() {
        Ok(d) if d.compute_capability().major == 9 => d,
        Ok(d) => {
            eprintln!(
                "SKIPPED: no SM90 GPU ({} is {})",
                d.name(),
                d.compute_capability()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: no GPU ({e})");
            return;
        }
    };
    let runner = AttentionRunner::new(&device).expect("runner");
    let mut failed = Vec::new();
    for (i, case) in selftest::default_cases().iter().enumerate() {
        let r = selftest::run_case(&runner, case, 2000 + i as u64).expect("case ran");
        eprintln!(
            "{} {} dq {:.2e} dk {:.2e} dv {:.2e} nondeterministic runs {}",
            if r.passed { "PASS" } else { "FAIL" },
            r.name,
            r.rel_err[0],
            r.rel_err[1],
            r.rel_err[2],
            r.nondeterministic_runs
        );
        if !r.passed {
            failed.push(r);
        }
    }
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
}
