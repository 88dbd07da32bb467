//! `fragmask bench`: measurements.
//!
//! - `bench sass`: the per-tile instruction cost of each apply function, from SASS (no
//!   GPU needed).
//! - `bench apply`: the cost of applying a mask in a kernel whose accumulators stay in
//!   registers, alone and after a 128×128×128 wgmma QK^T tile.
//! - `bench packer`: the GPU packer on a dense bool mask, against the device's copy
//!   bandwidth (and the CPU packer).
//! - `bench attention`: the masked attention forward kernel (the same code path as
//!   `fragmask attention --bench`); `bench backward`: the attention backward.
//! - `bench lightning`, `bench decode`: lightning attention decode and split-KV decode
//!   beside a device-to-device copy.
//!
//! GPU timings: CUDA events after warm-up, medians over many launches.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Subcommand};
use fragmask::check::apply_bench::{
    measure_apply_costs, ApplyBench, ApplyBenchOptions, ApplyCost, BenchResult,
};
use fragmask::check::compare::{packed_difference, transposed_difference};
use fragmask::check::random::DensePattern;
use fragmask::check::timing::{time_on_stream, TimingConfig};
use fragmask::host::gpu_packer::{GpuPacker, GpuTransposer};
use fragmask::host::{Compiler, Device, Error as HostError};
use fragmask::kernels::apply::kernels::BENCH_HEAD_DIM;
use fragmask::kernels::apply::{accumulator, parse_block};
use fragmask::masks::{pack, DenseMask, Encoding, PackOptions, TiledAccumulator, TransposedLists};
use serde_json::json;

use super::attention::{self, ForwardArgs};
use super::verify::NO_GPU_EXIT;
use super::CmdResult;

/// Options of `fragmask bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Instructions, loads, registers and spills of each apply function per tile, read
    /// from the SASS of sm_90a cost kernels (no GPU needed).
    Sass(SassArgs),
    /// Time applying a mask tile after tile (2 warpgroups, accumulators in registers),
    /// alone and after a 128x128x128 wgmma QK^T tile, against no mask.
    Apply(ApplyArgs),
    /// Time the GPU packer on a dense bool mask against a device-to-device copy.
    Packer(PackerArgs),
    /// Time the masked attention forward kernel (SM90) with CUDA events: median over
    /// --iters launches after --warmup (same as `fragmask attention --bench`).
    #[command(after_help = attention::BENCH_AFTER_HELP)]
    Attention(Box<ForwardArgs>),
    /// Time the attention backward (dQ, dK, dV; the preprocess, main and postprocess kernels
    /// together) with CUDA events, after a forward for O and lse: median over --iters after
    /// --warmup; TFLOP/s count 2.5x the forward's FLOPs.
    #[command(after_help = attention::BENCH_AFTER_HELP)]
    Backward(Box<attention::backward::BenchBackwardArgs>),
    /// Time lightning attention decode (MiniMax-01) beside a device-to-device copy (the
    /// roof).
    Lightning(super::lightning::BenchLightningArgs),
    /// Time split-KV decode beside a device-to-device copy (the roof).
    Decode(Box<super::decode::BenchDecodeArgs>),
}

/// Options of `fragmask bench sass`.
#[derive(Args)]
pub struct SassArgs {
    /// Tile, <block_m>x<block_n>.
    #[arg(long, default_value = "128x128", allow_hyphen_values = true)]
    block: String,
    /// MMA warpgroups.
    #[arg(long, default_value_t = 2)]
    warpgroups: u32,
    /// Also write the numbers as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Options of `fragmask bench apply`.
#[derive(Args)]
pub struct ApplyArgs {
    /// Tiles each CTA (one per SM) walks per launch.
    #[arg(long, default_value_t = 2048)]
    tiles_per_cta: usize,
    /// Distinct random partial tiles the CTAs draw from (65536 x 2 KB = 128 MB: HBM, not L2).
    #[arg(long, default_value_t = 65536)]
    distinct_tiles: usize,
    /// Timed launches per kernel (after 5 warm-up launches).
    #[arg(long, default_value_t = 30)]
    runs: usize,
    /// Also write the numbers as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Options of `fragmask bench packer`.
#[derive(Args)]
pub struct PackerArgs {
    /// Query length of the generated mask.
    #[arg(long, default_value_t = 16384)]
    seqlen_q: usize,
    /// Key length of the generated mask.
    #[arg(long, default_value_t = 16384)]
    seqlen_k: usize,
    /// Planes (batch x heads).
    #[arg(long, default_value_t = 1)]
    planes: usize,
    /// random, causal or blocks.
    #[arg(long, default_value = "random")]
    pattern: String,
    /// Probability of a 1 for the random pattern.
    #[arg(long, default_value_t = 0.5)]
    density: f64,
    /// Read the mask from a .npy / safetensors file (bool or uint8, [Sq,Sk] / [H,Sq,Sk] /
    /// [B,H,Sq,Sk]) instead of generating it.
    #[arg(long)]
    npy: Option<PathBuf>,
    /// Timed runs (after 3 warm-up runs).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Skip the CPU packer's timing and bit-for-bit comparison.
    #[arg(long)]
    no_cpu: bool,
    /// Tile, <block_m>x<block_n> (MMA warpgroups: 2 for a block_m multiple of 128, else 1).
    #[arg(long, default_value = "128x128", allow_hyphen_values = true)]
    block: String,
    /// Also build the backward pass's transposed lists on the GPU (after the pack, with
    /// the default backward accumulator) and time pack + transposition beside the pack
    /// alone; the CPU side adds them with `add_transposed` (docs/masks.md).
    #[arg(long)]
    transposed: bool,
    /// Also write the numbers as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The benchmark's subcommand name.
pub fn name(args: &BenchArgs) -> &'static str {
    match args.command {
        BenchCommand::Sass(_) => "sass",
        BenchCommand::Apply(_) => "apply",
        BenchCommand::Packer(_) => "packer",
        BenchCommand::Attention(_) => "attention",
        BenchCommand::Backward(_) => "backward",
        BenchCommand::Lightning(_) => "lightning",
        BenchCommand::Decode(_) => "decode",
    }
}

/// The mode of a `fragmask bench ...` command line and the flags it reads.
pub fn mode(args: &BenchArgs) -> super::Mode {
    match &args.command {
        BenchCommand::Decode(a) => super::decode::bench_mode(a),
        _ => super::Mode::ALL,
    }
}

/// Runs the chosen benchmark.
pub fn run(args: BenchArgs) -> CmdResult {
    match args.command {
        BenchCommand::Sass(a) => sass(a),
        BenchCommand::Apply(a) => apply(a),
        BenchCommand::Packer(a) => packer(a),
        BenchCommand::Attention(a) => {
            // Every input is checked before looking for a GPU.
            let inputs = attention::validate(&a)?;
            let device = match gpu()? {
                Ok(d) => d,
                Err(code) => return Ok(code),
            };
            attention::forward(&device, &a, inputs, true, None, None)
        }
        BenchCommand::Backward(a) => {
            let inputs = attention::validate(&a.forward)?;
            attention::backward::validate(&a.forward, &a.backward, &inputs)?;
            let d_o = match attention::backward::read_d_o(&a.backward, &inputs)? {
                Some(d) => Some(d),
                None => attention::backward::d_o_from_inputs(&a.forward, &inputs)?,
            };
            let device = match gpu()? {
                Ok(d) => d,
                Err(code) => return Ok(code),
            };
            attention::backward::backward(&device, &a.forward, &a.backward, inputs, d_o, true, None)
        }
        BenchCommand::Lightning(a) => super::lightning::bench_run(a),
        BenchCommand::Decode(a) => super::decode::bench_run(*a),
    }
}

/// Most `--runs` / `--iters` / `--warmup` launches of a benchmark.
pub const MAX_LAUNCHES: usize = 1_000_000;

/// Refuses a `--json` target that exists and is not a regular file, before anything is
/// measured or a GPU is looked for (the write itself goes through `write_file_atomically`).
pub fn check_json(path: &Option<PathBuf>) -> Result<(), String> {
    match path {
        Some(p) => fragmask::masks::io::check_output::<&std::path::Path>(p, &[])
            .map_err(|e| format!("--json: {e}")),
        None => Ok(()),
    }
}

/// `n` launches for `flag`: at least `min`, at most [`MAX_LAUNCHES`].
pub fn check_launches(flag: &str, n: usize, min: usize) -> Result<(), String> {
    if n < min || n > MAX_LAUNCHES {
        return Err(format!("{flag} {n}: expected {min}..={MAX_LAUNCHES}"));
    }
    Ok(())
}

/// The tile of `--block` / `--warpgroups`; errors name both flags.
fn tile(block: &str, warpgroups: u32) -> Result<TiledAccumulator, String> {
    let named = |e: String| format!("--block {block} --warpgroups {warpgroups}: {e}");
    let (m, n) = parse_block(block).map_err(|e| named(e.to_string()))?;
    accumulator(m, n, warpgroups, false).map_err(|e| named(e.to_string()))
}

fn write_json(path: &Option<PathBuf>, value: &serde_json::Value) -> Result<(), String> {
    if let Some(p) = path {
        let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
        fragmask::masks::io::write_file_atomically(p, text.as_bytes())
            .map_err(|e| format!("--json: {e}"))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn gpu() -> Result<Result<Device, ExitCode>, String> {
    match Device::first() {
        Ok(d) => Ok(Ok(d)),
        Err(e) if e.is_no_gpu() => {
            eprintln!("no GPU: {e}; nothing was timed.");
            Ok(Err(ExitCode::from(NO_GPU_EXIT)))
        }
        Err(e) => Err(format!("GPU discovery failed: {e}")),
    }
}

/// The SASS cost table of `acc`.
pub fn sass_table(costs: &[ApplyCost]) -> String {
    let mut s = format!(
        "{:<16} {:>8} {:>6} {:>6} {:>8} {:>7} {:>6} {:>6}  {}\n",
        "encoding", "instr", "LDS", "LDG", "staging", "total", "regs", "spill", "apply loads"
    );
    for c in costs {
        s.push_str(&format!(
            "{:<16} {:>8} {:>6} {:>6} {:>8} {:>7} {:>6} {:>6}  {}\n",
            c.encoding.name(),
            c.apply.instructions,
            c.apply.shared_loads,
            c.apply.global_loads,
            c.staging.instructions,
            c.total_instructions(),
            c.registers,
            c.spill_bytes + c.local_bytes,
            c.load_opcodes.join(" ")
        ));
    }
    let get = |e: Encoding| costs.iter().find(|c| c.encoding == e);
    if let (Some(q), Some(r)) = (get(Encoding::QuadLane), get(Encoding::RowMajor)) {
        s.push_str(&format!(
            "RowMajor / QuadLane apply instructions: {:.2}x (an earlier analysis claims ~4.5x)\n",
            r.apply.instructions as f64 / q.apply.instructions.max(1) as f64
        ));
    }
    s
}

fn sass(args: SassArgs) -> CmdResult {
    let acc = tile(&args.block, args.warpgroups)?;
    check_json(&args.json)?;
    let (m, n) = (acc.block_m(), acc.block_n());
    let costs = measure_apply_costs(&Compiler::new(), &acc).map_err(|e| e.to_string())?;
    println!(
        "Apply cost per thread per {m}x{n} tile, {} warpgroup(s), sm_90a SASS (loop body minus its baseline):",
        args.warpgroups
    );
    print!("{}", sass_table(&costs));
    let rows: Vec<_> = costs
        .iter()
        .map(|c| {
            json!({
                "encoding": c.encoding.name(),
                "apply_instructions": c.apply.instructions,
                "shared_loads": c.apply.shared_loads,
                "global_loads": c.apply.global_loads,
                "staging_instructions": c.staging.instructions,
                "total_instructions": c.total_instructions(),
                "registers": c.registers,
                "spill_bytes": c.spill_bytes,
                "local_bytes": c.local_bytes,
                "load_opcodes": c.load_opcodes,
            })
        })
        .collect();
    write_json(
        &args.json,
        &json!({"block_m": m, "block_n": n, "warpgroups": args.warpgroups, "costs": rows}),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn find(results: &[BenchResult], wgmma: bool, encoding: Option<Encoding>) -> Option<&BenchResult> {
    results
        .iter()
        .find(|r| r.variant.wgmma == wgmma && r.variant.encoding == encoding)
}

/// Most `--distinct-tiles` of `bench apply` (2 KiB of words each: 2 GiB).
const MAX_DISTINCT_TILES: usize = 1 << 20;

fn apply(args: ApplyArgs) -> CmdResult {
    // Every flag is checked before a GPU is looked for.
    if args.tiles_per_cta == 0 || i32::try_from(args.tiles_per_cta).is_err() {
        return Err(format!(
            "--tiles-per-cta {}: expected 1..={}",
            args.tiles_per_cta,
            i32::MAX
        ));
    }
    if args.distinct_tiles == 0 || args.distinct_tiles > MAX_DISTINCT_TILES {
        return Err(format!(
            "--distinct-tiles {}: expected 1..={MAX_DISTINCT_TILES}",
            args.distinct_tiles
        ));
    }
    check_launches("--runs", args.runs, 1)?;
    check_json(&args.json)?;
    let device = match gpu()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let acc = TiledAccumulator::new(128, 128, 2, false).map_err(|e| e.to_string())?;
    let bench = ApplyBench::new(&device, &Compiler::new(), &acc).map_err(|e| e.to_string())?;
    let options = ApplyBenchOptions {
        tiles_per_cta: args.tiles_per_cta,
        distinct_tiles: args.distinct_tiles,
        timing: TimingConfig {
            warmup: 5,
            warmup_ms: 0,
            runs: args.runs,
        },
        ..ApplyBenchOptions::default()
    };
    let results = bench.run(&options).map_err(|e| e.to_string())?;
    let ctas = results.first().map_or(0, |r| r.ctas);
    let base = find(&results, false, None)
        .map(|r| r.ns_per_tile())
        .unwrap_or(0.0);
    let mma = find(&results, true, None)
        .map(|r| r.ns_per_tile())
        .unwrap_or(f64::NAN);
    let flops = 2.0 * 128.0 * 128.0 * f64::from(BENCH_HEAD_DIM);
    println!(
        "{}: {ctas} CTAs (one per SM) x 256 threads, {} tiles each from {} distinct 128x128 tiles; median of {} launches",
        device.name(),
        args.tiles_per_cta,
        args.distinct_tiles,
        args.runs
    );
    println!(
        "one 128x128x128 wgmma QK^T tile: {mma:.1} ns per CTA ({:.0} TFLOP/s over {ctas} SMs)",
        flops * ctas as f64 / mma / 1e3
    );
    println!(
        "{:<34} {:>10} {:>10} {:>12} {:>14}",
        "kernel", "median ms", "ns/tile", "mask ns/tile", "vs wgmma tile"
    );
    let mut rows = Vec::new();
    for r in &results {
        let ns = r.ns_per_tile();
        let reference = if r.variant.wgmma { mma } else { base };
        let mask_ns = ns - reference;
        let rel = mask_ns / mma * 100.0;
        println!(
            "{:<34} {:>10.4} {:>10.1} {:>12} {:>14}",
            r.variant.kernel_name(),
            r.timing.median_ms,
            ns,
            if r.variant.encoding.is_some() {
                format!("{mask_ns:.1}")
            } else {
                "-".into()
            },
            if r.variant.encoding.is_some() {
                format!("{rel:+.1}%")
            } else {
                "-".into()
            }
        );
        rows.push(json!({
            "kernel": r.variant.kernel_name(),
            "wgmma": r.variant.wgmma,
            "encoding": r.variant.encoding.map(|e| e.name()),
            "median_ms": r.timing.median_ms,
            "p10_ms": r.timing.p10_ms,
            "p90_ms": r.timing.p90_ms,
            "ns_per_tile": ns,
            "mask_ns_per_tile": if r.variant.encoding.is_some() { Some(mask_ns) } else { None },
            "overhead_vs_wgmma_tile_percent": if r.variant.encoding.is_some() { Some(rel) } else { None },
        }));
    }
    println!(
        "mask ns/tile: minus the same kernel without a mask; vs wgmma tile: that over one wgmma QK^T tile."
    );
    write_json(
        &args.json,
        &json!({
            "device": device.name(),
            "ctas": ctas,
            "tiles_per_cta": args.tiles_per_cta,
            "distinct_tiles": args.distinct_tiles,
            "runs": args.runs,
            "wgmma_tile_ns": mma,
            "results": rows,
        }),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn host_err(e: HostError) -> String {
    e.to_string()
}

/// Most mask elements of `bench packer` (2^36 bytes, as for attention's dense masks).
const MAX_PACKER_ELEMENTS: usize = 1 << 36;

/// A `bench packer` mask, read or described (generated once a GPU is found).
enum PackerMask {
    File(Vec<u8>, String),
    Generated(DensePattern),
}

/// Checks every `bench packer` input before a GPU is looked for: the file (read and
/// validated) or the pattern, density and extents, the run count and the JSON target.
fn packer_inputs(args: &PackerArgs) -> Result<(PackerMask, usize, usize, usize), String> {
    check_launches("--runs", args.runs, 1)?;
    check_json(&args.json)?;
    let extents = |planes: usize, sq: usize, sk: usize, what: &str| {
        let fits = |v: usize| v >= 1 && i32::try_from(v).is_ok();
        let total = planes.checked_mul(sq).and_then(|x| x.checked_mul(sk));
        if !fits(planes) || !fits(sq) || !fits(sk) || total.is_none_or(|t| t > MAX_PACKER_ELEMENTS)
        {
            return Err(format!(
                "{what}: mask {planes} x {sq} x {sk}: each extent must be in 1..={} and the \
                 mask at most 2^36 elements",
                i32::MAX
            ));
        }
        Ok((planes, sq, sk))
    };
    match &args.npy {
        Some(path) => {
            let at = |e: fragmask::masks::MaskError| format!("{}: {e}", path.display());
            let file = fragmask::masks::io::read_file(path).map_err(|e| format!("--npy: {e}"))?;
            let view = fragmask::masks::io::read_array(&file, None).map_err(at)?;
            let data = view.mask_bytes("mask").map_err(at)?.to_vec();
            let (planes, sq, sk) = match view.shape.as_slice() {
                [q, k] => (Some(1), *q, *k),
                [h, q, k] => (Some(*h), *q, *k),
                [b, h, q, k] => (b.checked_mul(*h), *q, *k),
                other => {
                    return Err(format!(
                        "{}: mask shape {other:?}: expected rank 2, 3 or 4",
                        path.display()
                    ))
                }
            };
            let what = path.display().to_string();
            let (planes, sq, sk) = extents(planes.unwrap_or(0), sq, sk, &what)?;
            Ok((PackerMask::File(data, what), planes, sq, sk))
        }
        None => {
            let pattern = match args.pattern.as_str() {
                "random" if (0.0..=1.0).contains(&args.density) => {
                    DensePattern::Random(args.density)
                }
                "random" => {
                    return Err(format!("--density {}: expected 0..=1", args.density));
                }
                "causal" => DensePattern::Causal,
                "blocks" => DensePattern::Blocks,
                other => {
                    return Err(format!(
                        "--pattern {other:?}: expected random, causal or blocks"
                    ))
                }
            };
            let (planes, sq, sk) = extents(
                args.planes,
                args.seqlen_q,
                args.seqlen_k,
                "--planes / --seqlen-q / --seqlen-k",
            )?;
            Ok((PackerMask::Generated(pattern), planes, sq, sk))
        }
    }
}

fn packer(args: PackerArgs) -> CmdResult {
    let (mask, planes, sq, sk) = packer_inputs(&args)?;
    let (bm, bn) = parse_block(&args.block).map_err(|e| format!("--block: {e}"))?;
    let acc = TiledAccumulator::new(bm, bn, if bm % 128 == 0 { 2 } else { 1 }, false)
        .map_err(|e| format!("--block {}: {e}", args.block))?;
    let backward = if args.transposed {
        Some(
            TransposedLists::default_accumulator(&acc)
                .map_err(|e| format!("--transposed with --block {}: {e}", args.block))?,
        )
    } else {
        None
    };
    let device = match gpu()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let (bytes, source) = match mask {
        PackerMask::File(bytes, name) => (bytes, name),
        PackerMask::Generated(pattern) => {
            (pattern.generate(planes, sq, sk, 0x5eed), pattern.name())
        }
    };
    let packer = GpuPacker::new(&device, &Compiler::new(), &acc).map_err(host_err)?;
    let stream = packer.stream().clone();
    let shape = packer.shape(planes, sq, sk).map_err(host_err)?;
    let dense = stream
        .clone_htod(&bytes)
        .map_err(|e| format!("uploading the mask: {e}"))?;
    let mut buffers = packer.buffers(shape).map_err(host_err)?;
    let timing = time_on_stream(
        &stream,
        TimingConfig {
            warmup: 3,
            warmup_ms: 0,
            runs: args.runs,
        },
        |_| packer.enqueue(&dense, &mut buffers),
    )
    .map_err(host_err)?;
    let packed = packer.download(&buffers).map_err(host_err)?;
    // The transposed lists after the pack: timed alone and with the pack.
    let mut transposed = None;
    if let Some(backward) = &backward {
        let transposer =
            GpuTransposer::new(&device, &Compiler::new(), &acc, backward).map_err(host_err)?;
        let mut t_buffers = transposer.buffers(shape, shape.tiles()).map_err(host_err)?;
        let config = TimingConfig {
            warmup: 3,
            warmup_ms: 0,
            runs: args.runs,
        };
        let alone = time_on_stream(&stream, config, |_| {
            transposer.enqueue_after_pack(&buffers, &mut t_buffers)
        })
        .map_err(host_err)?;
        let both = time_on_stream(&stream, config, |_| {
            packer.enqueue(&dense, &mut buffers)?;
            transposer.enqueue_after_pack(&buffers, &mut t_buffers)
        })
        .map_err(host_err)?;
        let lists = transposer.download(&t_buffers).map_err(host_err)?;
        transposed = Some((alone, both, lists, transposer.words_per_tile()));
    }
    // Device copy bandwidth, same run: 1 GiB device-to-device.
    let copy_bytes: usize = 1 << 30;
    let src = stream
        .alloc_zeros::<u8>(copy_bytes)
        .map_err(|e| format!("allocating the copy buffer: {e}"))?;
    let mut dst = stream
        .alloc_zeros::<u8>(copy_bytes)
        .map_err(|e| format!("allocating the copy buffer: {e}"))?;
    let copy = time_on_stream(
        &stream,
        TimingConfig {
            warmup: 3,
            warmup_ms: 0,
            runs: args.runs,
        },
        |s| {
            s.memcpy_dtod(&src, &mut dst)
                .map_err(|e| HostError::InvalidArgument(format!("device copy: {e}")))
        },
    )
    .map_err(host_err)?;
    let copy_gbs = 2.0 * copy_bytes as f64 / (copy.median_ms * 1e6);
    let words_bytes = packed.words.len() * 4;
    let list_bytes = 4 * (2 * shape.rows() + 3 * shape.tiles());
    let dense_bytes = shape.dense_bytes();
    let ms = timing.median_ms;
    let in_gbs = dense_bytes as f64 / (ms * 1e6);
    let moved_gbs = (dense_bytes + words_bytes + list_bytes) as f64 / (ms * 1e6);
    let partial = packed.words.len() / Encoding::FragmentNative.words_per_tile(&acc);
    println!(
        "{}: GPU packer, {planes} x {sq} x {sk} bytes ({source}), {bm}x{bn} tiles, FragmentNative words",
        device.name()
    );
    println!(
        "  {} tiles: {partial} partial, {} full; {:.1} MB words + {:.2} MB lists",
        shape.tiles(),
        packed.lists.full_tiles(),
        words_bytes as f64 / 1e6,
        list_bytes as f64 / 1e6
    );
    println!(
        "  GPU packer: {ms:.4} ms median (p10 {:.4}, p90 {:.4}, {} runs)",
        timing.p10_ms, timing.p90_ms, args.runs
    );
    println!(
        "  input {in_gbs:.0} GB/s; input + output {moved_gbs:.0} GB/s = {:.0}% of the device copy ({copy_gbs:.0} GB/s, read + write, 1 GiB cuMemcpyDtoD median {:.4} ms)",
        moved_gbs / copy_gbs * 100.0,
        copy.median_ms
    );
    let mut transposed_json = serde_json::Value::Null;
    if let Some((alone, both, lists, _)) = &transposed {
        println!(
            "  GPU pack + transposed lists: {:.4} ms median (p10 {:.4}, p90 {:.4}) = {:.2}x the pack alone; \
             the transposition alone {:.4} ms ({} MB q_words)",
            both.median_ms,
            both.p10_ms,
            both.p90_ms,
            both.median_ms / ms,
            alone.median_ms,
            lists.words.len() * 4 / 1_000_000
        );
        transposed_json = json!({
            "backward_warpgroups": backward.map(|b| b.warpgroups()),
            "pack_and_transpose_median_ms": both.median_ms, "p10_ms": both.p10_ms, "p90_ms": both.p90_ms,
            "transpose_alone_median_ms": alone.median_ms,
            "ratio_to_pack": both.median_ms / ms,
            "q_words_bytes": lists.words.len() * 4,
        });
    }
    let mut cpu_json = serde_json::Value::Null;
    if !args.no_cpu {
        let source = DenseMask::new(&bytes, &[planes, sq, sk]).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let cpu = pack(
            &source,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .map_err(|e| e.to_string())?;
        let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
        let same = packed_difference(&packed, &cpu);
        println!(
            "  CPU packer ({} threads): {cpu_ms:.1} ms, one run; GPU == CPU: {}",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            same.as_deref().unwrap_or("yes, bit for bit")
        );
        cpu_json = json!({"ms": cpu_ms, "identical": same.is_none(), "difference": same});
        if let (Some(backward), Some((_, _, lists, _))) = (&backward, &transposed) {
            let mut with = cpu;
            let start = Instant::now();
            with.add_transposed(backward, &PackOptions::default())
                .map_err(|e| e.to_string())?;
            let add_ms = start.elapsed().as_secs_f64() * 1e3;
            let t = with.transposed().map_err(|e| e.to_string())?;
            let same_t = transposed_difference(lists, t);
            println!(
                "  CPU add_transposed: {add_ms:.1} ms, one run (pack + transposed {:.1} ms); GPU == CPU: {}",
                cpu_ms + add_ms,
                same_t.as_deref().unwrap_or("yes, bit for bit")
            );
            cpu_json["add_transposed_ms"] = json!(add_ms);
            cpu_json["transposed_identical"] = json!(same_t.is_none());
            cpu_json["transposed_difference"] = json!(same_t);
        }
    }
    write_json(
        &args.json,
        &json!({
            "device": device.name(),
            "planes": planes, "seqlen_q": sq, "seqlen_k": sk, "source": source,
            "tiles": shape.tiles(), "partial_tiles": partial,
            "full_tiles": packed.lists.full_tiles(),
            "median_ms": ms, "p10_ms": timing.p10_ms, "p90_ms": timing.p90_ms, "runs": args.runs,
            "input_gb_per_s": in_gbs, "moved_gb_per_s": moved_gbs,
            "copy_gb_per_s": copy_gbs, "percent_of_copy": moved_gbs / copy_gbs * 100.0,
            "block": args.block, "transposed": transposed_json,
            "cpu": cpu_json,
        }),
    )?;
    Ok(ExitCode::SUCCESS)
}
