//! Every hardware probe compiles for sm_90a through NVRTC, and its SASS holds
//! the expected tensor-core instructions with no spills. No GPU needed.

#[path = "../../host/tests/common/mod.rs"]
mod common;

use fragmask_check::sass::{self, KernelSass};
use fragmask_host::kernels::probe::{
    mma_sync_probe, wgmma_accumulator_probe, MMA_SYNC_PROBE_KERNEL, WGMMA_PROBE_KERNEL,
};
use fragmask_host::{Arch, CompileOptions, Compiler};

fn compile_and_inspect(source: &str, kernel: &str) -> KernelSass {
    let cubin = Compiler::uncached()
        .compile_cubin(source, &CompileOptions::new(Arch::sm90a()))
        .unwrap_or_else(|e| panic!("NVRTC failed: {e}"));
    // Generated CUDA declares nothing it does not use (NVRTC's #177-D and the like).
    assert!(
        !cubin.log.contains("warning #"),
        "NVRTC warnings:\n{}",
        cubin.log
    );
    let report = sass::inspect(&cubin).unwrap_or_else(|e| panic!("SASS inspection failed: {e}"));
    report
        .kernel(kernel)
        .unwrap_or_else(|| panic!("kernel {kernel} missing from the SASS"))
        .clone()
}

fn assert_no_spills(k: &KernelSass, what: &str) {
    assert_eq!(k.spill_bytes(), Some(0), "{what}: ptxas spill bytes");
    assert_eq!(k.local_bytes(), Some(0), "{what}: local memory bytes");
    let c = k.classes();
    assert_eq!((c.ldl, c.stl), (0, 0), "{what}: LDL/STL instructions");
    assert!(!k.spills(), "{what}");
}

#[test]
fn wgmma_probe_emits_one_hgmma_without_spills() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    for (n, warpgroups) in [
        (8, 1),
        (16, 2),
        (64, 1),
        (64, 2),
        (128, 3),
        (256, 1),
        (256, 3),
    ] {
        let what = format!("wgmma probe n={n} warpgroups={warpgroups}");
        let src = wgmma_accumulator_probe(n, warpgroups).unwrap();
        let k = compile_and_inspect(&src, WGMMA_PROBE_KERNEL);
        let opcode = format!("HGMMA.64x{n}x16.F32.BF16");
        assert_eq!(k.count("HGMMA"), 1, "{what}: {:?}", k.mnemonic_counts());
        assert_eq!(
            k.opcode_counts().get(&opcode),
            Some(&1),
            "{what}: {:?}",
            k.opcode_counts()
        );
        assert_no_spills(&k, &what);
        let regs = k.registers().expect("register count");
        assert!(
            regs >= n / 2,
            "{what}: {regs} registers cannot hold {} accumulators",
            n / 2
        );
        // Every thread stores its N/2 accumulators.
        assert!(k.classes().stg >= 1, "{what}: no global stores");
    }
}

#[test]
fn wgmma_probe_compiles_for_every_legal_n() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    for n in (8..=256).step_by(8) {
        let src = wgmma_accumulator_probe(n, 1).unwrap();
        let k = compile_and_inspect(&src, WGMMA_PROBE_KERNEL);
        let opcode = format!("HGMMA.64x{n}x16.F32.BF16");
        assert_eq!(
            k.opcode_counts().get(&opcode),
            Some(&1),
            "n={n}: {:?}",
            k.opcode_counts()
        );
        assert_no_spills(&k, &format!("n={n}"));
    }
}

#[test]
fn mma_sync_probe_emits_four_hmma_without_spills() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    let k = compile_and_inspect(&mma_sync_probe(), MMA_SYNC_PROBE_KERNEL);
    // C probe, A probe (two k halves), B probe.
    assert_eq!(k.count("HMMA"), 4, "{:?}", k.mnemonic_counts());
    assert_eq!(
        k.opcode_counts().get("HMMA.16816.F32.BF16"),
        Some(&4),
        "{:?}",
        k.opcode_counts()
    );
    assert_eq!(k.count("HGMMA"), 0);
    assert_no_spills(&k, "mma.sync probe");
}
