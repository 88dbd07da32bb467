//! Structural checks of the generated probe sources (no compiler needed; the
//! host crate's tests compile them with NVRTC and inspect the SASS).

use fragmask_kernels::probe::{
    mma_sync_probe, wgmma_accumulator_probe, WgmmaProbe, MMA_SYNC_PROBE_KERNEL,
    WGMMA_MAX_WARPGROUPS, WGMMA_PROBE_KERNEL,
};
use fragmask_kernels::Error;

fn assert_header_free_and_balanced(src: &str) {
    assert!(
        !src.lines().any(|l| l.trim_start().starts_with("#include")),
        "generated code must not include headers"
    );
    let opens = src.matches('{').count();
    let closes = src.matches('}').count();
    assert_eq!(opens, closes, "unbalanced braces");
    assert!(src.contains("typedef unsigned short fm_bf16"));
}

#[test]
fn wgmma_source_for_every_legal_n() {
    for n in (8..=256).step_by(8) {
        for warpgroups in 1..=WGMMA_MAX_WARPGROUPS {
            let src = wgmma_accumulator_probe(n, warpgroups).unwrap();
            assert_header_free_and_balanced(&src);
            assert!(src.contains(&format!("extern \"C\" __global__ void __launch_bounds__({}, 1) {WGMMA_PROBE_KERNEL}(float* out)", 128 * warpgroups)));
            assert!(src.contains(&format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"
            )));
            // One "+f" output operand per accumulator register, in order.
            let nreg = n / 2;
            assert_eq!(src.matches("\"+f\"(d[").count() as u32, nreg);
            assert!(src.contains(&format!("\"+f\"(d[{}])", nreg - 1)));
            assert!(!src.contains(&format!("\"+f\"(d[{nreg}])")));
            // Descriptors are operands nreg and nreg+1, scale-d is nreg+2.
            assert!(src.contains(&format!(" %{}, %{}, p, 1, 1, 0, 0;", nreg, nreg + 1)));
            assert!(src.contains(&format!("setp.ne.b32 p, %{}, 0;", nreg + 2)));
            for needle in [
                "wgmma.fence.sync.aligned;",
                "wgmma.commit_group.sync.aligned;",
                "wgmma.wait_group.sync.aligned 0;",
                "fence.proxy.async.shared::cta;",
                "#define FM_LBO_BYTES 128",
                "#define FM_SBO_BYTES 256",
            ] {
                assert!(src.contains(needle), "n={n}: missing {needle}");
            }
        }
    }
}

#[test]
fn wgmma_rejects_invalid_configurations() {
    assert_eq!(
        wgmma_accumulator_probe(100, 1),
        Err(Error::InvalidWgmmaN { n: 100 })
    );
    let e = wgmma_accumulator_probe(64, WGMMA_MAX_WARPGROUPS + 1).unwrap_err();
    assert!(e.to_string().contains("warpgroup"), "{e}");
}

#[test]
fn wgmma_shared_memory_fits_the_default_limit() {
    // Static shared memory must stay under the 48 KiB default.
    let p = WgmmaProbe::new(256, WGMMA_MAX_WARPGROUPS).unwrap();
    assert!(p.shared_bytes() <= 48 * 1024);
}

#[test]
fn mma_sync_source() {
    let src = mma_sync_probe();
    assert_header_free_and_balanced(&src);
    assert!(src.contains(MMA_SYNC_PROBE_KERNEL));
    assert!(src.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    // C probe, two A probes (in a loop), B probe: three call sites.
    assert_eq!(src.matches("fm_mma_m16n8k16(d, a, b);").count(), 3);
}
