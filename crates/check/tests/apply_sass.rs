//! Every generated mask kernel compiles for sm_90a (apply headers, cost, check and
//! benchmark kernels, the GPU packer), and the SASS cost of each apply function at
//! FlashAttention-3's 128x128 tile with 2 warpgroups is pinned. No GPU needed; without
//! NVRTC the tests print SKIPPED (and fail under CI=true).

#[path = "../../host/tests/common/mod.rs"]
mod common;

use fragmask_check::apply_bench::{loop_body, measure_apply_costs, ApplyCost};
use fragmask_check::sass::{self, KernelSass};
use fragmask_host::{Arch, CompileOptions, Compiler};
use fragmask_kernels::apply::kernels::{
    all_cost_variants, bench_source, check_source, cost_source, BenchVariant,
};
use fragmask_kernels::apply::{header, HeaderOptions};
use fragmask_kernels::packer::{
    PackerKernels, TransposeKernels, CLASSES_KERNEL, COMPACT_KERNEL, LISTS_KERNEL,
    ROW_ORDER_KERNEL, TILES_KERNEL, TILE_ORDER_KERNEL, TRANSCODE_KERNEL, TRANSPOSED_LISTS_KERNEL,
};
use fragmask_masks::TransposedLists;
use fragmask_masks::{Encoding, TiledAccumulator};

fn compile(source: &str) -> sass::SassReport {
    let cubin = Compiler::uncached()
        .compile_cubin(source, &CompileOptions::new(Arch::sm90a()))
        .unwrap_or_else(|e| panic!("NVRTC failed: {e}"));
    // Generated CUDA declares nothing it does not use (NVRTC's #177-D and the like).
    assert!(
        !cubin.log.contains("warning #"),
        "NVRTC warnings:\n{}",
        cubin.log
    );
    sass::inspect(&cubin).unwrap_or_else(|e| panic!("SASS inspection failed: {e}"))
}

fn assert_no_spills(k: &KernelSass) {
    assert_eq!(k.spill_bytes(), Some(0), "{}: spill bytes", k.name);
    assert_eq!(k.local_bytes(), Some(0), "{}: local memory", k.name);
    let c = k.classes();
    assert_eq!((c.ldl, c.stl), (0, 0), "{}: LDL/STL", k.name);
}

const CONFIGS: [(u32, u32, u32, bool); 6] = [
    (128, 128, 2, false),
    (128, 128, 1, false),
    (192, 128, 3, false),
    (128, 64, 2, false),
    (128, 176, 2, false),
    (128, 128, 2, true),
];

#[test]
fn every_generated_header_compiles_for_sm90a() {
    if !common::require_nvrtc() {
        return;
    }
    for (m, n, w, swap) in CONFIGS {
        let acc = TiledAccumulator::new(m, n, w, swap).unwrap();
        for encoding in Encoding::ALL {
            let h = header(&acc, encoding, &HeaderOptions::default()).unwrap();
            // A header has only device functions: compile it with a kernel that calls them.
            let id = fragmask_kernels::apply::ident(encoding);
            let kernel = match encoding {
                Encoding::FragmentNative => format!(
                    "extern \"C\" __global__ void k(const unsigned* w, float* out) {{ float acc[{v}];\n\
                     for (int i = 0; i < {v}; ++i) acc[i] = 1.0f;\n\
                     fragmask_{id}_apply_tile(acc, w, blockIdx.x, threadIdx.x);\n\
                     fragmask_{id}_apply(acc, w, threadIdx.x);\n\
                     for (int i = 0; i < {v}; ++i) out[threadIdx.x * {v} + i] = acc[i]; }}",
                    v = acc.values_per_thread()
                ),
                _ => format!(
                    "extern \"C\" __global__ void k(const unsigned* w, float* out) {{ float acc[{v}];\n\
                     __shared__ unsigned s[{wpt}];\n\
                     for (int i = threadIdx.x; i < {wpt}; i += blockDim.x) s[i] = w[i];\n\
                     __syncthreads();\n\
                     for (int i = 0; i < {v}; ++i) acc[i] = 1.0f;\n\
                     fragmask_{id}_apply(acc, fm_apply_smem_u32(s), threadIdx.x);\n\
                     for (int i = 0; i < {v}; ++i) out[threadIdx.x * {v} + i] = acc[i]; }}",
                    v = acc.values_per_thread(),
                    wpt = encoding.words_per_tile(&acc)
                ),
            };
            let report = compile(&format!("{h}\n{kernel}"));
            let k = report.kernel("k").expect("kernel k");
            assert_no_spills(k);
        }
    }
}

#[test]
fn cost_check_and_bench_kernels_compile_without_spills() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    for (m, n, w, swap) in CONFIGS {
        let acc = TiledAccumulator::new(m, n, w, swap).unwrap();
        for source in [
            cost_source(&acc, &all_cost_variants()).unwrap(),
            check_source(&acc).unwrap(),
        ] {
            let report = compile(&source);
            assert!(!report.kernels.is_empty());
            report.kernels.iter().for_each(assert_no_spills);
        }
    }
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let report = compile(&bench_source(&acc, &BenchVariant::all()).unwrap());
    for v in BenchVariant::all() {
        let k = report.kernel(&v.kernel_name()).expect("bench kernel");
        assert_no_spills(k);
        let body = loop_body(k).expect("tile loop");
        let hgmma = body.iter().filter(|i| i.mnemonic() == "HGMMA").count();
        // 8 k-steps of m64n128k16 per tile (head dim 128), or none.
        assert_eq!(hgmma, if v.wgmma { 8 } else { 0 }, "{}", v.kernel_name());
    }
}

#[test]
fn packer_kernels_compile_without_spills() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    for (m, n, w, _) in CONFIGS {
        let acc = TiledAccumulator::new(m, n, w, false).unwrap();
        let report = compile(&PackerKernels::new(&acc).unwrap().source());
        for name in [TILES_KERNEL, LISTS_KERNEL, ROW_ORDER_KERNEL, COMPACT_KERNEL] {
            assert_no_spills(report.kernel(name).unwrap_or_else(|| panic!("{name}")));
        }
        // 16-byte loads of the dense bytes when block_n is a multiple of 16.
        let tiles = report.kernel(TILES_KERNEL).unwrap();
        let wide = tiles
            .instructions
            .iter()
            .any(|i| i.mnemonic() == "LDG" && i.opcode.contains(".128"));
        assert_eq!(wide, n % 16 == 0, "{m}x{n}: {:?}", tiles.opcode_counts());
    }
}

#[test]
fn transposed_packer_kernels_compile_without_spills() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    let pairs = CONFIGS
        .iter()
        .map(|&(m, n, w, _)| TiledAccumulator::new(m, n, w, false).unwrap())
        // 128x176 has no backward accumulator (its 176 keys are not whole wgmma M rows).
        .filter_map(|fwd| Some((fwd, TransposedLists::default_accumulator(&fwd).ok()?)))
        .chain([(
            TiledAccumulator::new(64, 64, 1, false).unwrap(),
            TiledAccumulator::new(64, 64, 1, true).unwrap(),
        )]);
    for (fwd, bwd) in pairs {
        let report = compile(&TransposeKernels::new(&fwd, &bwd).unwrap().source());
        for name in [
            CLASSES_KERNEL,
            TRANSPOSED_LISTS_KERNEL,
            TILE_ORDER_KERNEL,
            TRANSCODE_KERNEL,
        ] {
            assert_no_spills(
                report
                    .kernel(name)
                    .unwrap_or_else(|| panic!("{name} {fwd:?}")),
            );
        }
    }
}

fn cost(costs: &[ApplyCost], e: Encoding) -> &ApplyCost {
    costs.iter().find(|c| c.encoding == e).unwrap()
}

/// The apply functions' SASS cost per thread per 128x128 tile at 2 warpgroups (NVRTC
/// 13.0, sm_90a): (instructions, LDS, LDG, staging instructions). If a toolchain update
/// moves these, re-measure with `fragmask bench sass` and update docs/codegen.md too.
const PINNED: [(Encoding, usize, usize, usize, usize); 3] = [
    (Encoding::FragmentNative, 90, 0, 1, 0),
    (Encoding::QuadLane, 112, 2, 0, 12),
    (Encoding::RowMajor, 130, 2, 0, 12),
];

#[test]
fn apply_cost_at_fa3_tile_is_pinned_and_fragment_native_is_cheapest() {
    if !common::require_nvrtc_and_cuobjdump() {
        return;
    }
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let costs = measure_apply_costs(&Compiler::uncached(), &acc).unwrap();
    for c in &costs {
        eprintln!("{:?}", c);
        assert_eq!(
            (c.spill_bytes, c.local_bytes, c.apply.local),
            (0, 0, 0),
            "{:?}",
            c.encoding
        );
    }
    let fnat = cost(&costs, Encoding::FragmentNative);
    let quad = cost(&costs, Encoding::QuadLane);
    // The claims the encoding exists for.
    assert_eq!(
        fnat.apply.global_loads, 1,
        "FragmentNative: one load per thread per tile"
    );
    assert_eq!(
        fnat.apply.shared_loads, 0,
        "FragmentNative: no shared memory"
    );
    assert_eq!(fnat.load_opcodes.len(), 1);
    assert!(
        fnat.load_opcodes[0].starts_with("LDG.E.64"),
        "FragmentNative: one 8-byte load, got {:?}",
        fnat.load_opcodes
    );
    assert_eq!(fnat.staging.instructions, 0);
    assert!(
        fnat.apply.instructions <= quad.apply.instructions,
        "FragmentNative {} > QuadLane {} instructions",
        fnat.apply.instructions,
        quad.apply.instructions
    );
    for (e, instructions, lds, ldg, staging) in PINNED {
        let c = cost(&costs, e);
        assert_eq!(
            (
                c.apply.instructions,
                c.apply.shared_loads,
                c.apply.global_loads,
                c.staging.instructions
            ),
            (instructions, lds, ldg, staging),
            "{} (instructions, LDS, LDG, staging)",
            e.name()
        );
    }
}
