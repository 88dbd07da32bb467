//! `fragmask attention --backward` and `fragmask bench backward`: the attention backward
//! (dQ, dK, dV) on an H100 from the same inputs and masks as the forward, and its GPU
//! correctness sweep (`fragmask attention --selftest --backward`).

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use fragmask::check::attention::{backward_selftest as bwd_selftest, time_backward};
use fragmask::host::attention::backward::{
    self as bwd, BackwardOptions, BackwardWorkspace, GradStrides,
};
use fragmask::host::attention::{choice, AttentionRunner, Mask, PackedMask};
use fragmask::host::Device;
use fragmask::inputs::attention::{self as inputs, MaskInput};
use fragmask::kernels::attention::Geometry;
use fragmask::masks::io::{read_file_limited, write_safetensors, DType};
use fragmask::masks::{PackOptions, TransposedLists};

use super::{block_tiles, geometry_flag, opts, ForwardArgs, OutLayout, Source, Validated};
use crate::cli::CmdResult;

/// `--dq-reduce`: the values of [`bwd::DqReduce`].
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DqReduceFlag {
    Bulk,
    Atomics,
    FragmentAtomics,
}

/// The backward's own flags, beside the forward's inputs and masks.
#[derive(Args, Debug, Default, Clone)]
pub struct BackwardFlags {
    /// Order the dQ reductions (bit-identical gradients run to run).
    #[arg(long)]
    pub deterministic: bool,
    /// The output gradient dO: .npy or .safetensors ([B,H,Sq,D]; a safetensors file's tensor
    /// `do`, or its only tensor). Default: random (seeded by --seed).
    #[arg(long = "d-o")]
    pub d_o: Option<std::path::PathBuf>,
    /// How dQ is reduced (for A/B measurements): `bulk` (default: TMA bulk reductions of
    /// staged chunks), `atomics` (red.global.add from registers, row-major accumulator),
    /// `fragment-atomics` (red.global.add from registers, in the bulk accumulator's order).
    #[arg(long, value_enum)]
    pub dq_reduce: Option<DqReduceFlag>,
    /// Q/dO pipeline stages of the backward (default 2).
    #[arg(long)]
    pub bwd_stages: Option<u32>,
    /// Whether a writer warp starts the bulk dQ reductions (for A/B measurements): `on`
    /// (an error where the configuration does not take it) or `off`. Default: on where it fits.
    #[arg(long, value_parser = super::parse_on_off)]
    pub dq_writer: Option<bool>,
    /// Queries per backward step (for A/B measurements): 64, or 128 for head dim 64's
    /// window walk (no mask, causal, sliding window). Default: the head dim's.
    #[arg(long)]
    pub bwd_step: Option<u32>,
    /// CTAs per key tile that share each KV head's query heads, adding dK and dV into f32
    /// accumulators (for A/B measurements): a power of two up to 16 dividing the query heads
    /// per KV head; 1 walks them all in one CTA. Default: two query heads per CTA under a
    /// causal mask with 4 or more query heads per KV head, else 1.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub group_slices: Option<u32>,
    /// Whether a mask packed at 64x64 pairs its key blocks, two per CTA walking the union of
    /// their query tiles (for A/B measurements): `on` (an error where they do not run) or
    /// `off`. Default: on where they run.
    #[arg(long, value_parser = super::parse_on_off)]
    pub paired_keys: Option<bool>,
    /// Whether the deterministic mode walks each key tile's query tiles by when their dQ turns
    /// are expected to be free (for A/B measurements; host-held tile lists and paired key
    /// blocks only): `on` (paired blocks: on every plane) or `off` (ascending). Default: on
    /// where it applies (paired blocks: on planes sparse enough to gain).
    #[arg(long, value_parser = super::parse_on_off)]
    pub deterministic_walks: Option<bool>,
}

/// Arguments of `fragmask bench backward`.
#[derive(Args, Debug)]
pub struct BenchBackwardArgs {
    #[command(flatten)]
    pub forward: ForwardArgs,
    #[command(flatten)]
    pub backward: BackwardFlags,
}

/// The tile a mask built here is packed at for the backward: `--block`, else 128x128 (the
/// backward reads the mask's transposed lists at that tile).
fn backward_tile(args: &ForwardArgs) -> Result<Geometry, String> {
    Ok(geometry_flag(args)?.unwrap_or(Geometry::TILE_128X128))
}

/// dO as bf16 bits, read and checked before any GPU is looked for.
pub fn read_d_o(flags: &BackwardFlags, v: &Validated) -> Result<Option<Vec<u16>>, String> {
    let Some(path) = &flags.d_o else {
        return Ok(None);
    };
    read_do_file(path, v)
}

/// dO from `--inputs` when that file holds a tensor `do` (bench/backward_bench.py writes q,
/// k, v and do together), else `None` (random).
pub fn d_o_from_inputs(args: &ForwardArgs, v: &Validated) -> Result<Option<Vec<u16>>, String> {
    let Some(path) = &args.inputs else {
        return Ok(None);
    };
    let bytes =
        read_file_limited(path, inputs::MAX_FILE_BYTES).map_err(|e| format!("--inputs: {e}"))?;
    match fragmask::masks::io::SafetensorsFile::parse(&bytes) {
        Ok(f) if f.names().iter().any(|n| n == "do") => read_do_file(path, v),
        _ => Ok(None),
    }
}

fn read_do_file(path: &std::path::Path, v: &Validated) -> Result<Option<Vec<u16>>, String> {
    let bytes =
        read_file_limited(path, inputs::MAX_FILE_BYTES).map_err(|e| format!("--d-o: {e}"))?;
    let what = format!("{} (--d-o)", path.display());
    let view = inputs::tensor_from_bytes(&bytes, "do", &what).map_err(|e| e.to_string())?;
    if view.shape != v.shape.q_shape() {
        return Err(format!(
            "--d-o: {what} has shape {:?}, q is {:?}",
            view.shape,
            v.shape.q_shape()
        ));
    }
    Ok(Some(
        inputs::to_bf16(&view, &what).map_err(|e| e.to_string())?,
    ))
}

/// Checks the backward configuration of validated inputs (a mask file must carry the
/// transposed lists) before any GPU is looked for.
pub fn validate(args: &ForwardArgs, flags: &BackwardFlags, v: &Validated) -> Result<(), String> {
    let packed = match &v.mask {
        Some(MaskInput::Packed(m)) => Some(m.as_ref()),
        _ => None,
    };
    if packed.is_none() && v.mask.is_some() {
        // Built here at --block: the backward must read that tile at this head dim.
        let g = backward_tile(args)?;
        let d = u32::try_from(v.shape.head_dim).unwrap_or(0);
        choice::check_backward_mask_tile(d, g.block_m(), g.block_n())
            .map_err(|e| format!("--block {}: {e}", g.name()))?;
    }
    if flags.bwd_stages == Some(0) {
        return Err("--bwd-stages 0: the backward needs at least 1 Q/dO stage".into());
    }
    if let Some(n) = flags.group_slices {
        bwd::check_group_slices(&v.shape, n).map_err(|e| format!("--group-slices {n}: {e}"))?;
    }
    if flags.paired_keys == Some(true) {
        // The mask's tile: a packed file's, or the one a mask built here is packed at.
        let tile = match (packed, &v.mask) {
            (Some(m), _) => Some((m.accumulator().block_m(), m.accumulator().block_n())),
            (None, Some(_)) => backward_tile(args).ok().map(|g| (g.block_m(), g.block_n())),
            (None, None) => None,
        };
        if tile != Some((64, 64)) {
            return Err(
                "--paired-keys on: paired key blocks run on a mask packed at 64x64 (--block 64x64)"
                    .into(),
            );
        }
    }
    if flags.deterministic_walks == Some(true) && !flags.deterministic {
        return Err(
            "--deterministic-walks on: the walk orders are the deterministic mode's (add \
             --deterministic)"
                .into(),
        );
    }
    if args.tile_order == Some(true) && flags.deterministic {
        return Err(
            "--tile-order on: the deterministic mode runs the key tiles in index \
             order (its CTAs wait for the ones before them)"
                .into(),
        );
    }
    // A mask built here is not packed yet (its kernel is checked at launch): refuse the
    // options only the window walk takes before any GPU is looked for.
    if v.mask.is_some() {
        if let Some(n) = flags.group_slices.filter(|&n| n > 1) {
            return Err(format!(
                "--group-slices {n}: GQA group slices take the backward's window walk (no mask, \
                 causal, sliding windows), not a mask"
            ));
        }
        if let Some(n) = args.head_section.filter(|&n| n > 1 && !flags.deterministic) {
            return Err(format!(
                "--head-section {n}: the backward's launch sections take its window walk (no \
                 mask, causal, sliding windows) or, with --deterministic, a mask's tile lists; \
                 not a mask outside the deterministic mode"
            ));
        }
    }
    bwd::backward_kernel(v.shape.head_dim, packed, &backward_opts(args, flags)).map_err(|e| {
        let stages = flags
            .bwd_stages
            .map_or(String::new(), |n| format!("--bwd-stages {n}: "))
            + &flags
                .bwd_step
                .map_or(String::new(), |n| format!("--bwd-step {n}: "));
        match &args.mask {
            Some(p) => format!("{stages}--mask {}: {e}", p.display()),
            None => format!("{stages}{e}"),
        }
    })?;
    Ok(())
}

pub(super) fn backward_opts(args: &ForwardArgs, flags: &BackwardFlags) -> BackwardOptions {
    BackwardOptions {
        scale: args.scale,
        deterministic: flags.deterministic,
        dq_reduce: flags.dq_reduce.map(|f| match f {
            DqReduceFlag::Bulk => bwd::DqReduce::Bulk,
            DqReduceFlag::Atomics => bwd::DqReduce::Atomics,
            DqReduceFlag::FragmentAtomics => bwd::DqReduce::FragmentAtomics,
        }),
        stages: flags.bwd_stages,
        step_m: flags.bwd_step,
        dq_writer: flags.dq_writer,
        head_section: args.head_section,
        group_slices: flags.group_slices,
        paired_keys: flags.paired_keys,
        deterministic_walks: flags.deterministic_walks,
        tile_order: args.tile_order,
        ..BackwardOptions::default()
    }
}

/// One backward on `device`: the forward (for O and lse) then the backward, timed with CUDA
/// events when `timed` (the three backward kernels together), gradients written to
/// `out_path` (safetensors dq, dk, dv) when given.
pub fn backward(
    device: &Device,
    args: &ForwardArgs,
    flags: &BackwardFlags,
    inputs_v: Validated,
    d_o: Option<Vec<u16>>,
    timed: bool,
    out_path: Option<&Path>,
) -> CmdResult {
    let e = |x: fragmask::host::attention::AttentionError| x.to_string();
    let runner = AttentionRunner::new(device).map_err(e)?;
    let shape = inputs_v.shape;
    let qkv = match inputs_v.source {
        Source::Files(qkv) => qkv,
        Source::Random(s, seed) => inputs::random_qkv(s, seed).map_err(|x| x.to_string())?,
    };
    let d_o = match d_o {
        Some(d) => d,
        None => {
            inputs::random_qkv(shape, args.seed.wrapping_add(0x6D6F))
                .map_err(|x| x.to_string())?
                .q
        }
    };
    let q = runner.upload_bf16(&qkv.q, shape.q_shape()).map_err(e)?;
    let k = runner.upload_bf16(&qkv.k, shape.kv_shape()).map_err(e)?;
    let v = runner.upload_bf16(&qkv.v, shape.kv_shape()).map_err(e)?;
    let d_o = runner.upload_bf16(&d_o, shape.q_shape()).map_err(e)?;
    drop(qkv);

    // ---- mask: packed at the backward's tile, with the transposed lists ----
    let packed_in = match &inputs_v.mask {
        Some(MaskInput::Packed(m)) => Some(m.as_ref()),
        _ => None,
    };
    let geometry = match packed_in {
        Some(m) => fragmask::host::attention::blockmask::mask_geometry(m).map_err(e)?,
        None => backward_tile(args)?,
    };
    let block_mask: Option<PackedMask> = match inputs_v.mask {
        Some(m) => {
            let mut packed = m.build(&shape, &geometry).map_err(e)?;
            if packed.transposed().is_err() {
                let acc = TransposedLists::default_accumulator(packed.accumulator())
                    .map_err(|x| x.to_string())?;
                packed
                    .add_transposed(&acc, &PackOptions::default())
                    .map_err(|x| x.to_string())?;
            }
            Some(packed)
        }
        None => None,
    };
    let device_mask = match &block_mask {
        Some(m) => Some(runner.upload_block_mask(m).map_err(e)?),
        None => None,
    };
    let mask = match &device_mask {
        Some(m) => Mask::Blocks(m),
        None => Mask::Window(inputs_v.window),
    };
    let (visited, _) = match &block_mask {
        Some(m) => block_tiles(m, &shape),
        None => inputs::window_tiles(&inputs_v.window, &shape, &geometry),
    };

    // ---- forward for O and lse, then the backward ----
    let mut fwd_opts = opts(args);
    if block_mask.is_some() {
        fwd_opts.geometry = Some(geometry);
    }
    let fwd = runner.forward(&q, &k, &v, &mask, &fwd_opts).map_err(e)?;
    let bopts = BackwardOptions {
        grad_strides: (args.out_layout == OutLayout::Bshd).then(|| GradStrides::bshd(&shape)),
        ..backward_opts(args, flags)
    };
    let mut ws = BackwardWorkspace::new(runner.stream(), &shape).map_err(e)?;
    let mut grads = runner.alloc_gradients(&shape).map_err(e)?;
    let launch = runner
        .prepare_backward(
            &q, &k, &v, &fwd.o, &fwd.lse, &d_o, &mask, &bopts, &mut ws, &mut grads,
        )
        .map_err(e)?;
    let kernel = launch.kernel();
    launch.launch().map_err(e)?;
    runner
        .stream()
        .synchronize()
        .map_err(|x| format!("backward kernels failed: {x}"))?;
    let mut timing = None;
    if timed && args.iters > 0 {
        timing = Some(time_backward(&launch, super::bench_timing(args)).map_err(e)?);
    }
    drop(launch);

    if let Some(path) = out_path {
        let s = runner.stream();
        let read = |t: &fragmask::host::attention::DeviceTensor<u16>| {
            s.clone_dtoh(&t.data).map_err(|x| x.to_string())
        };
        let layout = args.out_layout;
        let dq = layout.gather(read(&grads.dq)?, shape.q_shape())?;
        let dk = layout.gather(read(&grads.dk)?, shape.kv_shape())?;
        let dv = layout.gather(read(&grads.dv)?, shape.kv_shape())?;
        let b = fragmask::check::numeric::u16_le_bytes;
        write_safetensors(
            path,
            &[
                ("dq", DType::BF16, &shape.q_shape(), &b(&dq)),
                ("dk", DType::BF16, &shape.kv_shape(), &b(&dk)),
                ("dv", DType::BF16, &shape.kv_shape(), &b(&dv)),
            ],
        )
        .map_err(|x| format!("--out: {x}"))?;
    }

    // 2.5x the forward's FLOPs (the five GEMMs of the backward against the forward's two).
    let tile_flops =
        4.0 * f64::from(geometry.block_m() * geometry.block_n()) * shape.head_dim as f64;
    let (median, min, iters) = timing.as_ref().map_or((f64::NAN, f64::NAN, 0), |t| {
        (t.median_ms, t.min_ms, t.samples_ms.len())
    });
    let dense_tf = 2.5 * shape.dense_flops() / (median * 1e-3) / 1e12;
    let kept_tf = 2.5 * visited as f64 * tile_flops / (median * 1e-3) / 1e12;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "device": device.name(),
                "shape": [shape.batch, shape.heads, shape.kv_heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim],
                "kernel": kernel.label(),
                "iters": iters,
                "ms_median": timing.as_ref().map(|_| median),
                "ms_min": timing.as_ref().map(|_| min),
                "tflops_dense_equiv": timing.as_ref().map(|_| dense_tf),
                "tflops_visible_tiles": timing.as_ref().map(|_| kept_tf),
                "visited_tiles": visited,
                "deterministic": flags.deterministic,
                "out_layout": args.out_layout.name(),
            })
        );
    } else {
        println!("device: {}", device.name());
        println!(
            "shape B={} H={} Hkv={} Sq={} Sk={} D={}",
            shape.batch,
            shape.heads,
            shape.kv_heads,
            shape.seqlen_q,
            shape.seqlen_k,
            shape.head_dim
        );
        println!("kernel: {}", kernel.label());
        println!("out layout: {}", args.out_layout.name());
        println!(
            "tiles visited {visited} ({}x{})",
            geometry.block_m(),
            geometry.block_n()
        );
        if timing.is_some() {
            println!(
                "backward median {median:.4} ms (min {min:.4}, {iters} iters): {dense_tf:.1} TFLOP/s dense-equivalent (2.5x forward FLOPs), {kept_tf:.1} on visited tiles"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `fragmask attention --selftest --backward`: the backward sweep.
pub fn run_selftest(
    runner: &AttentionRunner,
    seed: u64,
    only: Option<&str>,
    device: &str,
) -> CmdResult {
    println!(
        "attention backward selftest on {device}: GPU vs CPU f64 reference (tolerance {})",
        bwd_selftest::GRAD_TOLERANCE
    );
    let mut failures = 0;
    // Each case keeps its index in the default sweep (and so its seed) under --cases.
    let cases: Vec<(usize, bwd_selftest::BackwardCase)> = bwd_selftest::default_cases()
        .into_iter()
        .enumerate()
        .filter(|(_, c)| only.is_none_or(|o| c.name.contains(o)))
        .collect();
    if cases.is_empty() {
        return Err(format!(
            "--cases {}: no backward selftest case matches",
            only.unwrap_or_default()
        ));
    }
    for (i, case) in &cases {
        let i = *i;
        match bwd_selftest::run_case(runner, case, seed.wrapping_add(i as u64)) {
            Ok(r) => {
                if !r.passed {
                    failures += 1;
                }
                println!(
                    "{} {:<52} dq {:.2e} dk {:.2e} dv {:.2e}  bad {}  empty-row errors {}  nondeterministic runs {}{}",
                    if r.passed { "PASS" } else { "FAIL" },
                    r.name,
                    r.rel_err[0],
                    r.rel_err[1],
                    r.rel_err[2],
                    r.bad_values,
                    r.empty_row_errors,
                    r.nondeterministic_runs,
                    if r.documents_grid { "  (documents grid)" } else { "" }
                );
            }
            Err(x) => {
                failures += 1;
                println!("FAIL {:<52} error: {x}", case.name);
            }
        }
    }
    println!("backward selftest: {failures} failure(s)");
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
