//! `fragmask verify`: hardware truth on the GPU machine.
//!
//! 1. CPU: the emulator runs every generated apply program on random tiles (always).
//! 2. GPU: wgmma accumulator fragments for N ∈ {8,16,64,128,256} and 1–2 warpgroups
//!    against `fragmask_gmma_frag::WgmmaAccumulator`; the mma.sync m16n8k16 A/B/C
//!    fragments against gmma-frag's SM80 layouts; mask apply on random tiles for every
//!    encoding (GPU == emulator == dense mask); GPU packer == CPU packer.
//!
//! Exit codes: 0 all passed, 1 a check failed, 3 no GPU (the CPU checks still ran).

use std::process::ExitCode;

use clap::Args;
use fragmask::check::emulator::{mismatches_against_dense, Emulator};
use fragmask::check::random::DensePattern;
use fragmask::check::sass;
use fragmask::check::verify::{
    check_mask_apply, check_mma_sync_a, check_mma_sync_b, check_mma_sync_c, check_packer,
    check_transposed_packer, random_tiles, CheckOutcome, PackerCase, ProbeReport, Verifier,
};
use fragmask::gmma_frag::{
    TiledAccumulator, WgmmaAccumulator, SM80_A_LAYOUT, SM80_B_LAYOUT, SM80_C_LAYOUT,
};
use fragmask::host::{Arch, CompileOptions, Compiler, Device};
use fragmask::kernels::apply::kernels::{bench_source, check_source, BenchVariant};
use fragmask::kernels::packer::{PackerKernels, TransposeKernels};
use fragmask::kernels::probe::{wgmma_accumulator_probe, MmaSyncProbe};
use fragmask::layout::Layout;
use fragmask::masks::{EncodedLayout, Encoding, TransposedLists};

use super::CmdResult;

/// Exit code when no GPU is present.
pub const NO_GPU_EXIT: u8 = 3;

/// Options of `fragmask verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// Small sizes (few tiles, small masks, fewer probes) so that the run finishes
    /// quickly under `compute-sanitizer --tool memcheck` / `--tool racecheck`.
    #[arg(long)]
    pub sanitizer_friendly: bool,
    /// Seed of the random tiles and masks.
    #[arg(long, default_value_t = 0x00c0_ffee)]
    pub seed: u64,
    /// Compile every kernel the GPU checks and benchmarks use for sm_90a (filling the
    /// NVRTC cache, `FRAGMASK_CACHE_DIR`), print their registers and spills, and stop.
    /// Needs no GPU.
    #[arg(long)]
    pub compile_only: bool,
    /// Run only the GPU packer checks (forward and transposed lists against the CPU
    /// packer), skipping the CPU emulator and the fragment and apply checks.
    #[arg(long)]
    pub packer_only: bool,
}

/// The tile configurations checked: FA3's 128x128 with 2 warpgroups first.
fn configs(small: bool) -> Vec<TiledAccumulator> {
    let all: &[(u32, u32, u32, bool)] = if small {
        &[(128, 128, 2, false)]
    } else {
        &[
            (128, 128, 2, false),
            (128, 128, 1, false),
            (192, 128, 3, false),
            (128, 64, 2, false),
            (128, 128, 2, true),
        ]
    };
    all.iter()
        .filter_map(|&(m, n, w, s)| TiledAccumulator::new(m, n, w, s).ok())
        .collect()
}

/// The CPU emulator on random tiles of every configuration and encoding.
pub fn emulator_checks(small: bool, seed: u64) -> Vec<CheckOutcome> {
    let mut out = Vec::new();
    for acc in configs(small) {
        let tiles = if small { 6 } else { 24 };
        let dense = random_tiles(&acc, tiles, seed);
        let area = (acc.block_m() * acc.block_n()) as usize;
        for encoding in Encoding::ALL {
            let name = format!(
                "emulator {} {}x{} w{}{}: == dense",
                encoding.name(),
                acc.block_m(),
                acc.block_n(),
                acc.warpgroups(),
                if acc.swap_ab() { " swap" } else { "" }
            );
            let result = (|| -> Result<(), String> {
                let layout = EncodedLayout::derive(&acc, encoding).map_err(|e| e.to_string())?;
                let emu = Emulator::new(&acc, encoding).map_err(|e| e.to_string())?;
                for (i, tile) in dense.chunks(area).enumerate() {
                    let kept = emu
                        .run_tile(&layout.encode_bools(tile))
                        .map_err(|e| e.to_string())?;
                    if let Some(&(t, v)) = mismatches_against_dense(&acc, &kept, tile, 1).first() {
                        return Err(format!("tile {i}: thread {t} value {v} wrong"));
                    }
                }
                Ok(())
            })();
            out.push(CheckOutcome {
                name,
                passed: result.is_ok(),
                detail: result.err().unwrap_or_else(|| format!("{tiles} tiles")),
            });
        }
    }
    out
}

fn from_report(report: ProbeReport) -> CheckOutcome {
    CheckOutcome {
        name: report.probe.clone(),
        passed: report.passed(),
        detail: if report.passed() {
            format!("{} of {} match", report.matches, report.checked)
        } else {
            report
                .to_string()
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join(" | ")
        },
    }
}

fn failed(name: String, e: impl std::fmt::Display) -> CheckOutcome {
    CheckOutcome {
        name,
        passed: false,
        detail: e.to_string(),
    }
}

/// `(lane, value) -> (row, col)` of an SM80 layout over a column-major `rows`-row tile.
fn sm80(layout: &Layout, rows: i64, lane: u32, value: u32) -> (u32, u32) {
    let idx = layout
        .eval(i64::from(lane) + 32 * i64::from(value))
        .unwrap_or(-1);
    ((idx % rows) as u32, (idx / rows) as u32)
}

/// Every GPU check on `device`.
pub fn gpu_checks(device: &Device, small: bool, seed: u64) -> Vec<CheckOutcome> {
    let compiler = Compiler::new();
    let verifier = Verifier::new(device.clone(), compiler.clone());
    let mut out = Vec::new();
    let ns: &[u32] = if small {
        &[16, 128]
    } else {
        &[8, 16, 64, 128, 256]
    };
    for &n in ns {
        for warpgroups in [1, 2] {
            let name = format!("wgmma m64n{n}k16 x{warpgroups}: == gmma-frag");
            let atom = match WgmmaAccumulator::new(n) {
                Ok(a) => a,
                Err(e) => {
                    out.push(failed(name, e));
                    continue;
                }
            };
            let expected = |t: u32, i: u32| atom.coord(t, i).unwrap_or((u32::MAX, u32::MAX));
            match verifier.wgmma(n, warpgroups, expected) {
                Ok(r) => out.push(from_report(r)),
                Err(e) => out.push(failed(name, e)),
            }
        }
    }
    match verifier.mma_sync() {
        Ok(obs) => {
            out.push(from_report(check_mma_sync_c(&obs, |l, v| {
                sm80(&SM80_C_LAYOUT, 16, l, v)
            })));
            out.push(from_report(check_mma_sync_a(&obs, |l, v| {
                sm80(&SM80_A_LAYOUT, 16, l, v)
            })));
            // B: (lane, value) -> n + 8k over 8 x 16 (N x K); the check wants (k, n).
            out.push(from_report(check_mma_sync_b(&obs, |l, v| {
                let (n, k) = sm80(&SM80_B_LAYOUT, 8, l, v);
                (k, n)
            })));
        }
        Err(e) => out.push(failed("mma.sync m16n8k16 A/B/C: == gmma-frag".into(), e)),
    }
    let tiles = if small { 6 } else { 60 };
    for acc in configs(small) {
        match check_mask_apply(device, &compiler, &acc, tiles, seed) {
            Ok(v) => out.extend(v),
            Err(e) => out.push(failed(
                format!(
                    "apply {}x{} w{}",
                    acc.block_m(),
                    acc.block_n(),
                    acc.warpgroups()
                ),
                e,
            )),
        }
    }
    out.extend(packer_checks(device, &compiler, small, seed));
    out
}

/// The GPU packer against the CPU packer: forward lists and words for several tiles,
/// then the transposed lists (the backward pass's) for 128x128, 64x64, 128x64 and
/// 192x128 tiles with their default backward accumulators, odd lengths included.
pub fn packer_checks(
    device: &Device,
    compiler: &Compiler,
    small: bool,
    seed: u64,
) -> Vec<CheckOutcome> {
    let mut out = Vec::new();
    let cases: Vec<PackerCase> = if small {
        vec![
            case(1, 300, 500, DensePattern::Random(0.5)),
            case(2, 200, 384, DensePattern::Blocks),
            case(1, 256, 256, DensePattern::Causal),
        ]
    } else {
        vec![
            case(1, 1000, 1000, DensePattern::Random(0.5)),
            case(1, 300, 500, DensePattern::Random(0.02)),
            case(2, 512, 4096, DensePattern::Blocks),
            case(3, 200, 384, DensePattern::Causal),
            case(1, 4096, 4096, DensePattern::Random(0.3)),
            case(1, 2048, 2048, DensePattern::Random(1.0)),
            case(1, 1000, 1024, DensePattern::Random(1.0)),
        ]
    };
    let packer_configs: Vec<TiledAccumulator> = if small {
        configs(true)
    } else {
        [(128, 128, 2), (192, 128, 3), (128, 64, 2)]
            .iter()
            .filter_map(|&(m, n, w)| TiledAccumulator::new(m, n, w, false).ok())
            .collect()
    };
    for (i, acc) in packer_configs.iter().enumerate() {
        // The first configuration gets every case, the others the first two.
        let these = if i == 0 {
            &cases[..]
        } else {
            &cases[..2.min(cases.len())]
        };
        match check_packer(device, compiler, acc, these, seed) {
            Ok(v) => out.extend(v.into_iter().map(|mut o| {
                o.name = format!(
                    "{} [{}x{} w{}]",
                    o.name,
                    acc.block_m(),
                    acc.block_n(),
                    acc.warpgroups()
                );
                o
            })),
            Err(e) => out.push(failed(
                format!(
                    "packer {}x{} w{}",
                    acc.block_m(),
                    acc.block_n(),
                    acc.warpgroups()
                ),
                e,
            )),
        }
    }
    let transposed_cases: Vec<PackerCase> = if small {
        vec![
            case(1, 300, 500, DensePattern::Random(0.5)),
            case(2, 200, 384, DensePattern::Blocks),
            // Over 256 key blocks at 64x64: the tile order's second CTA and count chunk.
            case(1, 70, 17000, DensePattern::Blocks),
        ]
    } else {
        vec![
            case(1, 1000, 1000, DensePattern::Random(0.5)),
            case(1, 300, 500, DensePattern::Random(0.02)),
            case(2, 512, 4096, DensePattern::Blocks),
            case(3, 200, 384, DensePattern::Causal),
            case(2, 777, 1301, DensePattern::Blocks),
            case(1, 65, 63, DensePattern::Random(0.5)),
            case(1, 1, 1, DensePattern::Random(1.0)),
            case(1, 4096, 4096, DensePattern::Random(0.3)),
            case(1, 2048, 2048, DensePattern::Random(1.0)),
            case(1, 1000, 1024, DensePattern::Random(1.0)),
            case(1, 1024, 1024, DensePattern::Random(0.0)),
            // Over 256 key blocks at 64x64 and 128 at 128x128 (the tile order's chunks).
            case(2, 130, 20000, DensePattern::Blocks),
        ]
    };
    let transposed_configs: &[(u32, u32, u32)] = if small {
        &[(128, 128, 2), (64, 64, 1)]
    } else {
        &[(128, 128, 2), (64, 64, 1), (128, 64, 2), (192, 128, 3)]
    };
    for (i, &(m, n, w)) in transposed_configs.iter().enumerate() {
        let Ok(acc) = TiledAccumulator::new(m, n, w, false) else {
            continue;
        };
        let name = format!("transposed packer {m}x{n} w{w}");
        let backward = match TransposedLists::default_accumulator(&acc) {
            Ok(b) => b,
            Err(e) => {
                out.push(failed(name, e));
                continue;
            }
        };
        // The first two tiles get every case, the others the first four.
        let these = if i < 2 {
            &transposed_cases[..]
        } else {
            &transposed_cases[..4.min(transposed_cases.len())]
        };
        match check_transposed_packer(device, compiler, &acc, &backward, these, seed) {
            Ok(v) => out.extend(v.into_iter().map(|mut o| {
                o.name = format!(
                    "{} [{m}x{n} w{w}, backward w{} swap]",
                    o.name,
                    backward.warpgroups()
                );
                o
            })),
            Err(e) => out.push(failed(name, e)),
        }
    }
    out
}

fn case(planes: usize, seqlen_q: usize, seqlen_k: usize, pattern: DensePattern) -> PackerCase {
    PackerCase {
        planes,
        seqlen_q,
        seqlen_k,
        pattern,
    }
}

/// The pass/fail table.
pub fn table(outcomes: &[CheckOutcome]) -> String {
    let width = outcomes.iter().map(|o| o.name.len()).max().unwrap_or(10);
    let mut s = String::new();
    for o in outcomes {
        s.push_str(&format!(
            "{:<width$}  {}  {}\n",
            o.name,
            if o.passed { "PASS" } else { "FAIL" },
            o.detail
        ));
    }
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    s.push_str(&format!(
        "{} checks: {} passed, {} failed\n",
        outcomes.len(),
        outcomes.len() - failed,
        failed
    ));
    s
}

/// Every kernel source the GPU checks and `fragmask bench` compile, named.
fn all_sources() -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for n in [8, 16, 64, 128, 256] {
        for w in [1, 2] {
            let src = wgmma_accumulator_probe(n, w).map_err(|e| e.to_string())?;
            out.push((format!("wgmma probe m64n{n}k16 x{w}"), src));
        }
    }
    out.push(("mma.sync probe".into(), MmaSyncProbe::source()));
    for acc in configs(false) {
        let tag = format!(
            "{}x{} w{}{}",
            acc.block_m(),
            acc.block_n(),
            acc.warpgroups(),
            if acc.swap_ab() { " swap" } else { "" }
        );
        out.push((
            format!("apply check kernels {tag}"),
            check_source(&acc).map_err(|e| e.to_string())?,
        ));
        if !acc.swap_ab() {
            let packer = PackerKernels::new(&acc).map_err(|e| e.to_string())?;
            out.push((format!("GPU packer {tag}"), packer.source()));
            if let Ok(backward) = TransposedLists::default_accumulator(&acc) {
                let t = TransposeKernels::new(&acc, &backward).map_err(|e| e.to_string())?;
                out.push((format!("GPU packer transposed {tag}"), t.source()));
            }
        }
    }
    let fa3 = TiledAccumulator::new(128, 128, 2, false).map_err(|e| e.to_string())?;
    out.push((
        "apply benchmark kernels 128x128 w2".into(),
        bench_source(&fa3, &BenchVariant::all()).map_err(|e| e.to_string())?,
    ));
    Ok(out)
}

fn compile_only() -> CmdResult {
    let compiler = Compiler::new();
    let mut failures = 0;
    for (name, source) in all_sources()? {
        match compiler.compile_cubin(&source, &CompileOptions::new(Arch::sm90a())) {
            Ok(cubin) => {
                let regs = sass::parse_ptxas_log(&cubin.log);
                let worst = regs
                    .values()
                    .map(|r| {
                        (
                            r.registers.unwrap_or(0),
                            r.spill_store_bytes.unwrap_or(0) + r.spill_load_bytes.unwrap_or(0),
                        )
                    })
                    .fold((0, 0), |a, b| (a.0.max(b.0), a.1 + b.1));
                println!(
                    "{name:<40} OK   {} kernel(s), max {} registers, {} spill bytes, cache {:?}",
                    regs.len(),
                    worst.0,
                    worst.1,
                    cubin.cache
                );
                if worst.1 > 0 {
                    failures += 1;
                }
            }
            Err(e) => {
                failures += 1;
                println!("{name:<40} FAIL {e}");
            }
        }
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs the checks and prints the table.
pub fn run(args: VerifyArgs) -> CmdResult {
    if args.compile_only {
        return compile_only();
    }
    let cpu = if args.packer_only {
        Vec::new()
    } else {
        let cpu = emulator_checks(args.sanitizer_friendly, args.seed);
        println!("== CPU: generated apply programs on the emulator ==");
        print!("{}", table(&cpu));
        cpu
    };
    let device = match Device::first() {
        Ok(d) => d,
        Err(e) if e.is_no_gpu() && args.packer_only => {
            eprintln!("no GPU: {e}\nThe GPU packer checks did not run.");
            return Ok(ExitCode::from(NO_GPU_EXIT));
        }
        Err(e) if e.is_no_gpu() => {
            eprintln!(
                "\nno GPU: {e}\nThe GPU checks (wgmma and mma.sync fragments, mask apply on the GPU, \
                 GPU packer) did not run; only the CPU emulator checks above did."
            );
            return Ok(ExitCode::from(NO_GPU_EXIT));
        }
        Err(e) => return Err(format!("GPU discovery failed: {e}")),
    };
    println!(
        "\n== GPU: {} (compute capability {}) ==",
        device.name(),
        device.compute_capability()
    );
    let gpu = if args.packer_only {
        packer_checks(
            &device,
            &Compiler::new(),
            args.sanitizer_friendly,
            args.seed,
        )
    } else {
        gpu_checks(&device, args.sanitizer_friendly, args.seed)
    };
    print!("{}", table(&gpu));
    let failures = cpu.iter().chain(&gpu).filter(|o| !o.passed).count();
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The GPU part of `fragmask demo` (called by the demo's owner): with a GPU, the wgmma
/// probe for FlashAttention-3's m64n128k16 against gmma-frag and a FragmentNative
/// mask-apply check (GPU == emulator == dense); without one, the emulator on the same
/// tiles, saying so.
#[allow(dead_code)] // called from demo.rs, which its owner wires up
pub fn demo_gpu_section() -> Result<String, String> {
    let acc = TiledAccumulator::new(128, 128, 2, false).map_err(|e| e.to_string())?;
    let mut s = String::new();
    match Device::first() {
        Ok(device) => {
            s.push_str(&format!(
                "GPU: {} (compute capability {}).\n",
                device.name(),
                device.compute_capability()
            ));
            let verifier = Verifier::new(device.clone(), Compiler::new());
            let atom = WgmmaAccumulator::new(128).map_err(|e| e.to_string())?;
            let report = verifier
                .wgmma(128, 2, |t, i| {
                    atom.coord(t, i).unwrap_or((u32::MAX, u32::MAX))
                })
                .map_err(|e| e.to_string())?;
            s.push_str(&format!(
                "  wgmma m64n128k16, 2 warpgroups: {} of {} registers where gmma-frag says ({}).\n",
                report.matches,
                report.checked,
                if report.passed() { "PASS" } else { "FAIL" }
            ));
            let outcomes = check_mask_apply(&device, &Compiler::new(), &acc, 12, 7)
                .map_err(|e| e.to_string())?;
            for o in outcomes {
                s.push_str(&format!(
                    "  {}: {} ({})\n",
                    o.name,
                    if o.passed { "PASS" } else { "FAIL" },
                    o.detail
                ));
            }
            s.push_str(
                "  (fragmask verify runs every check; fragmask bench apply / packer time them.)\n",
            );
        }
        Err(e) if e.is_no_gpu() => {
            s.push_str(&format!(
                "No GPU here ({e}), so nothing ran on hardware. Instead the CPU emulator executed the\n\
                 generated mask-apply programs for all 256 threads of FlashAttention-3's 128x128 tile:\n"
            ));
            for o in emulator_checks(true, 7) {
                s.push_str(&format!(
                    "  {}: {} ({})\n",
                    o.name,
                    if o.passed { "PASS" } else { "FAIL" },
                    o.detail
                ));
            }
            s.push_str(
                "  (On a machine with an H100, `fragmask verify` checks the same on the GPU.)\n",
            );
        }
        Err(e) => return Err(format!("GPU discovery failed: {e}")),
    }
    Ok(s)
}
