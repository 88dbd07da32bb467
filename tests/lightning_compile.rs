//! The generated lightning decode kernels compile to sm_90a through NVRTC for every
//! candidate geometry, head size and dtype, with no spills or local memory, and move
//! the state with 16-byte loads and stores only (no GPU needed; needs NVRTC and
//! cuobjdump).

use fragmask::check::sass;
use fragmask::host::nvrtc::{Arch, CompileOptions, Compiler};
use fragmask::kernels::family::dtype::ActDtype;
use fragmask::kernels::lightning::{source::source, LightningConfig, KERNEL_NAME};

#[path = "support/nvrtc.rs"]
mod nvrtc;
use nvrtc::nvrtc_or_skip;

#[test]
fn every_lightning_geometry_compiles_without_spills_with_vector_state_access() {
    if !nvrtc_or_skip() {
        return;
    }
    let compiler = Compiler::new();
    // Every head size in bf16; the other dtypes (only the load/store helpers differ) at
    // MiniMax-01's 96.
    let cases = [64u32, 96, 128, 256]
        .map(|d| (d, ActDtype::Bf16))
        .into_iter()
        .chain([(96, ActDtype::F16), (96, ActDtype::F32)]);
    for (d, dtype) in cases {
        {
            for config in LightningConfig::candidates(d, d, dtype) {
                let src = source(config).unwrap();
                let cubin = compiler
                    .compile_cubin(&src, &CompileOptions::new(Arch::sm90a()))
                    .unwrap_or_else(|e| panic!("{config:?}: {e}"));
                // Generated CUDA declares nothing it does not use (NVRTC's #177-D and the like).
                assert!(
                    !cubin.log.contains("warning #"),
                    "{config:?}: NVRTC warnings:\n{}",
                    cubin.log
                );
                let Some(report) = nvrtc::sass_or_skip(sass::inspect(&cubin)) else {
                    continue;
                };
                let k = report.kernel(KERNEL_NAME).expect("kernel in SASS");
                assert!(!k.spills(), "{config:?} spills");
                assert_eq!(
                    k.count("LDL") + k.count("STL"),
                    0,
                    "{config:?}: local memory"
                );
                let counts = k.opcode_counts();
                let wide_loads = counts.get("LDG.E.128").copied().unwrap_or(0)
                    + counts.get("LDG.E.128.CONSTANT").copied().unwrap_or(0);
                let wide_stores = counts.get("STG.E.128").copied().unwrap_or(0);
                let rows = config.rows_per_thread() as usize;
                assert_eq!(wide_loads, rows, "{config:?}: {counts:?}");
                assert_eq!(wide_stores, rows, "{config:?}: {counts:?}");
            }
        }
    }
}
