//! The generated split-KV decode kernels compile to sm_90a through NVRTC for every head
//! size, dtype and cache layout (with and without a block-sparse mask), with no spills or local memory, and move K and V with
//! 16-byte cp.async copies and 16-byte shared loads only (no GPU needed; needs NVRTC and
//! cuobjdump).

use fragmask::check::sass;
use fragmask::host::nvrtc::{Arch, CompileOptions, Compiler};
use fragmask::kernels::decode::{
    source::source, DecodeConfig, KvLayout, COMBINE_KERNEL, SPLIT_KERNEL,
};
use fragmask::kernels::family::dtype::ActDtype;

#[path = "support/nvrtc.rs"]
mod nvrtc;
use nvrtc::nvrtc_or_skip;

#[test]
fn every_decode_geometry_compiles_without_spills_with_16_byte_copies() {
    if !nvrtc_or_skip() {
        return;
    }
    let compiler = Compiler::new();
    let layouts = [
        KvLayout::Contiguous,
        KvLayout::Paged { page_size: 1 },
        KvLayout::Paged { page_size: 16 },
        KvLayout::Paged { page_size: 64 },
        KvLayout::Paged { page_size: 256 },
    ];
    let cases = [64u32, 128, 256]
        .into_iter()
        .flat_map(|d| layouts.map(|kv| (d, ActDtype::Bf16, kv, 0, false)))
        .chain([
            (128, ActDtype::F16, KvLayout::Contiguous, 0, false),
            (
                128,
                ActDtype::F16,
                KvLayout::Paged { page_size: 16 },
                0,
                false,
            ),
            // Block-sparse masks (64- and 128-key mask tiles), D = 256 included.
            (128, ActDtype::Bf16, KvLayout::Contiguous, 64, false),
            (
                128,
                ActDtype::Bf16,
                KvLayout::Paged { page_size: 16 },
                128,
                false,
            ),
            (
                64,
                ActDtype::F16,
                KvLayout::Paged { page_size: 1 },
                64,
                false,
            ),
            // Shared K/V CTAs (64 rows), masked and not.
            (64, ActDtype::Bf16, KvLayout::Contiguous, 0, true),
            (128, ActDtype::Bf16, KvLayout::Contiguous, 0, true),
            (
                256,
                ActDtype::Bf16,
                KvLayout::Paged { page_size: 16 },
                0,
                true,
            ),
            (128, ActDtype::Bf16, KvLayout::Contiguous, 64, true),
            (
                128,
                ActDtype::F16,
                KvLayout::Paged { page_size: 1 },
                128,
                true,
            ),
            (
                64,
                ActDtype::Bf16,
                KvLayout::Paged { page_size: 64 },
                64,
                true,
            ),
            (256, ActDtype::Bf16, KvLayout::Contiguous, 64, true),
            (
                256,
                ActDtype::Bf16,
                KvLayout::Paged { page_size: 16 },
                32,
                true,
            ),
        ]);
    let cases = cases
        .map(|(d, t, kv, m, shared)| (d, t, kv, m, shared, 0u32))
        .chain([
            // Masked D = 256 with few rows: one shared-K/V warp (16 rows).
            (256, ActDtype::Bf16, KvLayout::Contiguous, 64, false, 1),
            (
                256,
                ActDtype::F16,
                KvLayout::Paged { page_size: 1 },
                128,
                false,
                1,
            ),
        ]);
    for (d, dtype, kv, mask_block_n, shared, one_warp) in cases {
        let config = DecodeConfig::new(d, dtype, kv)
            .unwrap()
            .with_mask_block_n(mask_block_n)
            .unwrap();
        let config = if shared {
            config.with_shared_kv().unwrap()
        } else if one_warp == 1 {
            config.with_shared_kv_warps(1).unwrap()
        } else {
            config
        };
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
        let k = report.kernel(SPLIT_KERNEL).expect("split kernel in SASS");
        assert!(!k.spills(), "{config:?} spills");
        assert_eq!(
            k.count("LDL") + k.count("STL"),
            0,
            "{config:?}: local memory"
        );
        let counts = k.opcode_counts();
        let copies: usize = counts
            .iter()
            .filter(|(op, _)| op.starts_with("LDGSTS"))
            .map(|(_, n)| n)
            .sum();
        let narrow_copies: usize = counts
            .iter()
            .filter(|(op, _)| op.starts_with("LDGSTS") && !op.contains(".128"))
            .map(|(_, n)| n)
            .sum();
        // K and V move in 16-byte copies; the only narrow ones are the 4-byte mask words a
        // masked shared-K/V stage copies (one per tile and row).
        let words = config.shared_kv && config.mask_block_n > 0;
        assert!(
            copies - narrow_copies > 0 && (narrow_copies > 0) == words,
            "{config:?}: {counts:?}"
        );
        assert!(
            k.count("HMMA") >= (d / 8 + d / 8) as usize,
            "{config:?}: {counts:?}"
        );
        let shared_loads: usize = counts
            .iter()
            .filter(|(op, _)| op.starts_with("LDS"))
            .map(|(_, n)| n)
            .sum();
        let wide_shared = counts.get("LDS.128").copied().unwrap_or(0);
        assert!(shared_loads > 0, "{config:?}: {counts:?}");
        eprintln!(
            "{config:?}: {} registers, {} HMMA, {wide_shared}/{shared_loads} LDS.128",
            k.registers().unwrap_or(0),
            k.count("HMMA")
        );
        let c = report
            .kernel(COMBINE_KERNEL)
            .expect("combine kernel in SASS");
        assert!(!c.spills(), "{config:?}: combine spills");
    }
}

/// Every geometry the correctness sweep (`fragmask decode --sweep`, masked cases
/// included) launches compiles to sm_90a without spills: the geometry each case's plan
/// picks (16-row or shared-K/V CTAs, masked or not), with and without the lean key loop.
#[test]
fn every_sweep_geometry_compiles_without_spills() {
    use fragmask::check::decode::check::sweep_cases;
    use fragmask::host::decode::DecodePlan;
    if !nvrtc_or_skip() {
        return;
    }
    let compiler = Compiler::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut shared = 0;
    for (i, case) in sweep_cases().iter().enumerate() {
        let plan = match case.packed_mask(i as u64).unwrap() {
            Some(mask) => DecodePlan::for_mask(case.shape, &mask, 132, case.splits),
            None => DecodePlan::new(case.shape, case.shape.cache.capacity(), 132, case.splits),
        }
        .unwrap_or_else(|e| panic!("{}: {e}", case.label));
        if !seen.insert(format!("{:?}", plan.config)) {
            continue;
        }
        shared += usize::from(plan.config.shared_kv);
        let config = plan.config;
        let cubin = compiler
            .compile_cubin(
                &source(config).unwrap(),
                &CompileOptions::new(Arch::sm90a()),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", case.label));
        assert!(
            !cubin.log.contains("warning #"),
            "{}: NVRTC warnings:\n{}",
            case.label,
            cubin.log
        );
        if let Ok(report) = sass::inspect(&cubin) {
            let k = report.kernel(SPLIT_KERNEL).expect("split kernel in SASS");
            assert!(!k.spills(), "{}: {config:?} spills", case.label);
        }
    }
    // The sweep reaches the shared-K/V CTAs (64 rows and one warp).
    assert!(shared >= 4, "{shared} shared-K/V geometries in the sweep");
}
