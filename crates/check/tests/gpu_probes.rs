//! The probes on real hardware: the wgmma accumulator (docs/architecture.md fact 1) and
//! the mma.sync m16n8k16 fragments (fact 4).
//!
//! These tests are `#[ignore]`d so that a machine without a GPU reports them
//! as ignored rather than passed. On the GPU machine run them with
//! `--include-ignored` (or `--ignored`). Run without a GPU anyway, each one
//! prints `SKIPPED: no GPU` and returns.

#[path = "../../host/tests/common/mod.rs"]
mod common;

use common::{fact1_wgmma, fact4_a, fact4_b, fact4_c};
use fragmask_check::timing::{time_on_stream, TimingConfig};
use fragmask_check::verify::{check_mma_sync_a, check_mma_sync_b, check_mma_sync_c, Verifier};
use fragmask_host::Compiler;

fn verifier() -> Option<Verifier> {
    let device = common::require_gpu()?;
    assert!(common::require_nvrtc(), "a GPU machine needs NVRTC too");
    Some(Verifier::new(device, Compiler::new()))
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored on the GPU machine"]
fn gpu_wgmma_accumulator_matches_fact1() {
    let Some(v) = verifier() else { return };
    if v.device().compute_capability().major != 9 {
        eprintln!(
            "SKIPPED: wgmma needs an SM90 GPU, found {}",
            v.device().name()
        );
        return;
    }
    for (n, warpgroups) in [
        (8, 1),
        (16, 1),
        (64, 1),
        (64, 2),
        (128, 2),
        (256, 1),
        (256, 3),
    ] {
        let report = v.wgmma(n, warpgroups, fact1_wgmma).unwrap();
        assert!(report.passed(), "{report}");
        eprintln!("{report}");
    }
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored on the GPU machine"]
fn gpu_mma_sync_fragments_match_fact4() {
    let Some(v) = verifier() else { return };
    let obs = v.mma_sync().unwrap();
    assert!(obs.conflicts.is_empty(), "{:?}", obs.conflicts);
    for report in [
        check_mma_sync_c(&obs, fact4_c),
        check_mma_sync_a(&obs, fact4_a),
        check_mma_sync_b(&obs, fact4_b),
    ] {
        assert!(report.passed(), "{report}");
        eprintln!("{report}");
    }
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored on the GPU machine"]
fn gpu_timing_measures_a_launch() {
    let Some(device) = common::require_gpu() else {
        return;
    };
    assert!(common::require_nvrtc(), "a GPU machine needs NVRTC too");
    let kernel =
        fragmask_host::launch::OutputKernel::mma_sync_probe(&device, &Compiler::new()).unwrap();
    let stream = device.default_stream();
    let mut out = stream.alloc_zeros::<f32>(kernel.out_len()).unwrap();
    let t = time_on_stream(
        &stream,
        TimingConfig {
            warmup: 2,
            warmup_ms: 0,
            runs: 11,
        },
        |s| kernel.launch(s, &mut out),
    )
    .unwrap();
    assert_eq!(t.samples_ms.len(), 11);
    assert!(t.min_ms > 0.0 && t.min_ms <= t.p10_ms && t.p10_ms <= t.median_ms);
    assert!(t.median_ms <= t.p90_ms && t.p90_ms <= t.max_ms);
}
