//! `fragmask attention`: masked attention forward on an H100, from files or random
//! inputs, with a CUDA-event benchmark mode and the GPU correctness sweep.

mod io;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use fragmask::host::attention::selftest::{self, block_sparse, random_tokens};
use fragmask::host::attention::{
    self as attn, compile, AttentionOptions, AttentionRunner, AttentionShape, BlockMask, Mask,
    Window,
};
use fragmask::host::Device;
use fragmask::kernels::attention::{AttentionKernel, MaskMode, BLOCK_M, BLOCK_N};

use super::verify::NO_GPU_EXIT;
use super::CmdResult;

/// The inputs and masks paragraph shared by both commands' help.
macro_rules! inputs_help {
    () => {
        "\
Inputs: --inputs FILE.safetensors holding q, k, v ([B,H,S,D], BF16/F16/F32), or --q/--k/--v \
(.npy float32/float16, or .safetensors with one tensor), or --random B,H,HKV,SQ,SK,D.
Masks: --mask PACK.safetensors (FragmentNative, from `fragmask pack`: kv_num_blocks, kv_indices, \
full_kv_num_blocks, full_kv_indices, kv_tile_offsets, words), --dense-mask MASK.npy (bool \
[B|1,H|1,Sq,Sk], packed here), --synthetic-mask random:P | blocksparse:T:P | topk:F, --causal, \
--window LEFT,RIGHT (-1 = unbounded) with --diag-offset."
    };
}

/// Inputs, masks, outputs and exit codes of `fragmask attention` (shown after the options).
const AFTER_HELP: &str = concat!(
    inputs_help!(),
    "
Output: --out O.safetensors (o BF16 + lse F32) or O.npy (float32) and --lse-out LSE.npy. \
lse is the natural-log log-sum-exp; rows with no visible key give O = 0, lse = -inf.
Exit codes: 0 done, 1 a selftest case failed, 2 bad arguments or a failure, 3 no GPU."
);

/// Inputs, masks and exit codes of `fragmask bench attention`.
pub const BENCH_AFTER_HELP: &str = concat!(
    inputs_help!(),
    "
Reports the median and minimum time, TFLOP/s dense-equivalent and on visited tiles, tiles \
visited and mask bytes (--json: one JSON object).
Exit codes: 0 done, 2 bad arguments or a failure, 3 no GPU."
);

/// What one attention forward needs: inputs, mask, kernel configuration and timing.
/// Shared by `fragmask attention` and `fragmask bench attention`.
#[derive(Args, Debug)]
pub struct ForwardArgs {
    /// Safetensors file with tensors q, k, v.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Query tensor file.
    #[arg(long)]
    q: Option<PathBuf>,
    /// Key tensor file.
    #[arg(long)]
    k: Option<PathBuf>,
    /// Value tensor file.
    #[arg(long)]
    v: Option<PathBuf>,
    /// Random bf16 inputs: B,H,HKV,SQ,SK,D.
    #[arg(long, value_delimiter = ',')]
    random: Option<Vec<usize>>,
    /// Seed of --random and synthetic masks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// FragmentNative block mask (safetensors from `fragmask pack`).
    #[arg(long)]
    mask: Option<PathBuf>,
    /// Dense bool mask .npy [B|1, H|1, Sq, Sk], packed with the reference packer.
    #[arg(long)]
    dense_mask: Option<PathBuf>,
    /// Synthetic block mask, packed here: random:P, blocksparse:T:P, topk:F.
    #[arg(long)]
    synthetic_mask: Option<String>,
    /// Causal (top-left aligned, as torch SDPA is_causal).
    #[arg(long)]
    causal: bool,
    /// Sliding window LEFT,RIGHT around the diagonal (-1: unbounded).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    window: Option<Vec<i64>>,
    /// Diagonal offset of --causal/--window (Sk-Sq: bottom-right alignment).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    diag_offset: i32,
    /// Softmax scale (default 1/sqrt(D)).
    #[arg(long)]
    scale: Option<f32>,
    /// Warm-up launches before timing.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Timed launches.
    #[arg(long, default_value_t = 50)]
    iters: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// K/V pipeline stages.
    #[arg(long)]
    stages: Option<u32>,
    /// Turn off the intra-warpgroup GEMM/softmax overlap.
    #[arg(long)]
    no_overlap: bool,
    /// Inter-warpgroup ping-pong (FlashAttention-3 named barriers): true or false.
    #[arg(long)]
    pingpong: Option<bool>,
    /// Producer reads the tile list one tile ahead: true or false.
    #[arg(long)]
    lookahead: Option<bool>,
}

/// Arguments of `fragmask attention`.
#[derive(Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct AttentionArgs {
    #[command(flatten)]
    forward: ForwardArgs,
    /// Output file for O (.safetensors also gets lse; .npy is float32).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Output .npy for lse.
    #[arg(long)]
    lse_out: Option<PathBuf>,
    /// Time the kernel with CUDA events (median over --iters after --warmup); the same
    /// code path as `fragmask bench attention`.
    #[arg(long)]
    bench: bool,
    /// Run the correctness sweep against the CPU f64 reference and exit.
    #[arg(long)]
    selftest: bool,
    /// Print the generated CUDA source for --head-dim and the mask mode, then exit.
    #[arg(long)]
    emit_source: bool,
    /// Compile (no GPU needed) and print ptxas' report and the SASS summary, then exit.
    #[arg(long)]
    inspect: bool,
    /// Head dim for --emit-source / --inspect.
    #[arg(long, default_value_t = 128)]
    head_dim: u32,
}

fn opts(args: &ForwardArgs) -> AttentionOptions {
    AttentionOptions {
        scale: args.scale,
        stages: args.stages,
        overlap: if args.no_overlap { Some(false) } else { None },
        pingpong: args.pingpong,
        lookahead: args.lookahead,
    }
}

fn mode_of(args: &ForwardArgs) -> MaskMode {
    if args.mask.is_some() || args.dense_mask.is_some() || args.synthetic_mask.is_some() {
        MaskMode::Blocks
    } else {
        MaskMode::Window
    }
}

/// Runs `fragmask attention`.
pub fn run(args: AttentionArgs) -> CmdResult {
    if args.emit_source || args.inspect {
        let fwd = &args.forward;
        let default =
            AttentionKernel::default_for(args.head_dim, mode_of(fwd)).map_err(|e| e.to_string())?;
        let k = AttentionKernel::new(
            args.head_dim,
            mode_of(fwd),
            fwd.stages.unwrap_or(default.stages()),
            !fwd.no_overlap,
        )
        .map_err(|e| e.to_string())?
        .with_pingpong(fwd.pingpong.unwrap_or(default.pingpong()))
        .with_lookahead(fwd.lookahead.unwrap_or(default.lookahead()));
        if args.emit_source {
            print!("{}", k.source().map_err(|e| e.to_string())?);
            return Ok(ExitCode::SUCCESS);
        }
        let c = compile::compile_kernel(&k).map_err(|e| e.to_string())?;
        println!("{k:?}");
        println!(
            "registers {} (entry cap; consumers setmaxnreg 240), spill bytes {}, stack bytes {}",
            c.registers, c.spill_bytes, c.stack_bytes
        );
        match compile::sass_summary(&c.cubin) {
            Ok(s) => println!(
                "SASS: {} instructions, {} HGMMA, {} UTMALDG, {} local-memory ops",
                s.instructions, s.hgmma, s.tma_loads, s.local_memory_ops
            ),
            Err(e) => println!("SASS: not inspected ({e})"),
        }
        for line in c
            .log
            .lines()
            .filter(|l| l.contains("ptxas") || l.contains("warning"))
        {
            println!("  {line}");
        }
        return Ok(ExitCode::SUCCESS);
    }

    let device = match Device::first() {
        Ok(d) => d,
        Err(e) if e.is_no_gpu() => {
            println!("no GPU: {e}; the attention kernel needs an SM90 GPU, nothing ran.");
            return Ok(ExitCode::from(NO_GPU_EXIT));
        }
        Err(e) => return Err(format!("GPU discovery failed: {e}")),
    };
    if args.selftest {
        let runner = AttentionRunner::new(&device).map_err(|e| e.to_string())?;
        return run_selftest(&runner, &args.forward, device.name());
    }
    forward(
        &device,
        &args.forward,
        args.bench,
        args.out.as_deref(),
        args.lse_out.as_deref(),
    )
}

/// One attention forward on `device`: loads the inputs and the mask, runs the kernel
/// once, times it with CUDA events when `timed` (median over `--iters` after `--warmup`),
/// writes O / lse when asked and prints the report (text or `--json`). The one code path
/// behind `fragmask attention [--bench]` and `fragmask bench attention`.
pub fn forward(
    device: &Device,
    args: &ForwardArgs,
    timed: bool,
    out_path: Option<&Path>,
    lse_path: Option<&Path>,
) -> CmdResult {
    let runner = AttentionRunner::new(device).map_err(|e| e.to_string())?;

    // ---- inputs ----
    let (q_bits, k_bits, v_bits, q_shape, kv_shape) = load_inputs(args)?;
    let shape =
        AttentionShape::from_tensors(q_shape, kv_shape, kv_shape).map_err(|e| e.to_string())?;
    let q = runner
        .upload_bf16(&q_bits, q_shape)
        .map_err(|e| e.to_string())?;
    let k = runner
        .upload_bf16(&k_bits, kv_shape)
        .map_err(|e| e.to_string())?;
    let v = runner
        .upload_bf16(&v_bits, kv_shape)
        .map_err(|e| e.to_string())?;

    // ---- mask ----
    let pack_start = Instant::now();
    let block_mask = load_block_mask(args, &shape)?;
    let pack_ms = pack_start.elapsed().as_secs_f64() * 1e3;
    let device_mask = match &block_mask {
        Some(m) => Some(runner.upload_block_mask(m).map_err(|e| e.to_string())?),
        None => None,
    };
    let window = window_of(args)?;
    let mask = match &device_mask {
        Some(m) => Mask::Blocks(m),
        None => Mask::Window(window),
    };
    let (visited, partial) = match &block_mask {
        Some(m) => block_tiles(m, &shape),
        None => window_tiles(&window, &shape),
    };

    // ---- run ----
    let o = opts(args);
    let mut out = runner.alloc_output(&shape).map_err(|e| e.to_string())?;
    let launch = runner
        .prepare(&q, &k, &v, &mask, &o, &mut out)
        .map_err(|e| e.to_string())?;
    let kernel = launch.kernel;
    launch.launch().map_err(|e| e.to_string())?;
    runner
        .stream()
        .synchronize()
        .map_err(|e| format!("attention kernel failed: {e}"))?;
    let mut times = Vec::new();
    if timed {
        times = attn::time_launches(&launch, args.warmup, args.iters).map_err(|e| e.to_string())?;
    }
    drop(launch);

    // ---- outputs ----
    if out_path.is_some() || lse_path.is_some() {
        let o_bits = runner
            .stream()
            .clone_dtoh(&out.o.data)
            .map_err(|e| e.to_string())?;
        let lse = runner
            .stream()
            .clone_dtoh(&out.lse)
            .map_err(|e| e.to_string())?;
        let lse_shape = vec![shape.batch, shape.heads, shape.seqlen_q];
        if let Some(path) = out_path {
            if is_safetensors(path) {
                io::write_safetensors(
                    path,
                    &[
                        ("o", shape.q_shape().to_vec(), io::Out::Bf16(&o_bits)),
                        ("lse", lse_shape.clone(), io::Out::F32(&lse)),
                    ],
                )?;
            } else {
                io::write_npy_f32(path, &shape.q_shape(), &io::bf16_to_f32_vec(&o_bits))?;
            }
        }
        if let Some(path) = lse_path {
            io::write_npy_f32(path, &lse_shape, &lse)?;
        }
    }

    let tile_flops = 4.0 * f64::from(BLOCK_M * BLOCK_N) * shape.head_dim as f64;
    let median = attn::median(&times);
    let min = times.iter().copied().fold(f32::INFINITY, f32::min);
    let dense_tf = shape.dense_flops() / (f64::from(median) * 1e-3) / 1e12;
    let kept_tf = visited as f64 * tile_flops / (f64::from(median) * 1e-3) / 1e12;
    let mask_bytes = block_mask.as_ref().map_or(0, |m| m.bytes());
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "device": device.name(),
                "shape": [shape.batch, shape.heads, shape.kv_heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim],
                "kernel": format!("{kernel:?}"),
                "iters": times.len(),
                "ms_median": if times.is_empty() { None } else { Some(median) },
                "ms_min": if times.is_empty() { None } else { Some(min) },
                "tflops_dense_equiv": if times.is_empty() { None } else { Some(dense_tf) },
                "tflops_kept_tiles": if times.is_empty() { None } else { Some(kept_tf) },
                "visited_tiles": visited,
                "partial_tiles": partial,
                "mask_bytes": mask_bytes,
                "mask_pack_ms_cpu": if block_mask.is_some() { Some(pack_ms) } else { None },
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
        println!("kernel: {kernel:?}");
        println!("tiles visited {visited} (partial {partial}), mask bytes {mask_bytes}");
        if !times.is_empty() {
            println!(
                "median {median:.4} ms (min {min:.4}, {} iters): {dense_tf:.1} TFLOP/s dense-equivalent, {kept_tf:.1} on visited tiles",
                times.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn is_safetensors(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "safetensors")
}

type Inputs = (Vec<u16>, Vec<u16>, Vec<u16>, [usize; 4], [usize; 4]);

fn shape4(shape: &[usize], name: &str) -> Result<[usize; 4], String> {
    shape
        .try_into()
        .map_err(|_| format!("{name} must be [B, H, S, D], got {shape:?}"))
}

fn load_inputs(args: &ForwardArgs) -> Result<Inputs, String> {
    if let Some(r) = &args.random {
        let [b, h, hkv, sq, sk, d]: [usize; 6] = r
            .as_slice()
            .try_into()
            .map_err(|_| "--random takes B,H,HKV,SQ,SK,D".to_string())?;
        let mut state = args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut gen = |n: usize| -> Vec<u16> {
            (0..n)
                .map(|_| {
                    // xorshift + Irwin-Hall(4): roughly standard normal, exact in bf16 after rounding.
                    let mut acc = 0.0f32;
                    for _ in 0..4 {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        acc += (state >> 40) as f32 / (1u64 << 24) as f32;
                    }
                    attn::numeric::f32_to_bf16((acc - 2.0) * 1.732)
                })
                .collect()
        };
        let (qs, ks) = ([b, h, sq, d], [b, hkv, sk, d]);
        return Ok((
            gen(qs.iter().product()),
            gen(ks.iter().product()),
            gen(ks.iter().product()),
            qs,
            ks,
        ));
    }
    let read_one = |path: &Path, name: &str| -> Result<io::Tensor, String> {
        if is_safetensors(path) {
            let (mut m, _) = io::read_safetensors(path)?;
            if let Some(t) = m.remove(name) {
                return Ok(t);
            }
            if m.len() == 1 {
                return Ok(m.into_values().next().unwrap());
            }
            Err(format!("{}: no tensor named {name}", path.display()))
        } else {
            io::read_npy(path)
        }
    };
    let (q, k, v) = if let Some(path) = &args.inputs {
        let (mut m, _) = io::read_safetensors(path)?;
        let mut take = |n: &str| {
            m.remove(n)
                .ok_or_else(|| format!("{}: no tensor {n}", path.display()))
        };
        (take("q")?, take("k")?, take("v")?)
    } else {
        match (&args.q, &args.k, &args.v) {
            (Some(q), Some(k), Some(v)) => {
                (read_one(q, "q")?, read_one(k, "k")?, read_one(v, "v")?)
            }
            _ => return Err("give --inputs, or --q/--k/--v, or --random".into()),
        }
    };
    let qs = shape4(&q.shape, "q")?;
    let ks = shape4(&k.shape, "k")?;
    if shape4(&v.shape, "v")? != ks {
        return Err(format!(
            "v shape {:?} differs from k {:?}",
            v.shape, k.shape
        ));
    }
    Ok((q.to_bf16()?, k.to_bf16()?, v.to_bf16()?, qs, ks))
}

fn window_of(args: &ForwardArgs) -> Result<Window, String> {
    let bound = |x: i64| {
        if x < 0 {
            None
        } else {
            Some(x.min(u32::MAX as i64) as u32)
        }
    };
    if let Some(w) = &args.window {
        let [l, r]: [i64; 2] = w
            .as_slice()
            .try_into()
            .map_err(|_| "--window takes LEFT,RIGHT".to_string())?;
        return Ok(Window {
            left: bound(l),
            right: bound(r),
            diag_offset: args.diag_offset,
        });
    }
    if args.causal {
        return Ok(Window {
            diag_offset: args.diag_offset,
            ..Window::causal()
        });
    }
    Ok(Window::NONE)
}

fn load_block_mask(
    args: &ForwardArgs,
    shape: &AttentionShape,
) -> Result<Option<BlockMask>, String> {
    let (sq, sk) = (shape.seqlen_q, shape.seqlen_k);
    if let Some(path) = &args.mask {
        let (m, meta) = io::read_safetensors(path)?;
        // `fragmask pack` metadata (docs/masks.md); absent keys are accepted (older/other writers).
        for (key, want) in [
            ("encoding", "fragment-native"),
            ("block_m", "128"),
            ("block_n", "128"),
            ("warpgroups", "2"),
            ("swap_ab", "false"),
        ] {
            if let Some(got) = meta.get(key) {
                if got != want {
                    return Err(format!(
                        "{}: {key} = {got}; the attention kernel needs {key} = {want} (pack with --block 128x128 --warpgroups 2, FragmentNative)",
                        path.display()
                    ));
                }
            }
        }
        let get = |n: &str| {
            m.get(n)
                .ok_or_else(|| format!("{}: no tensor {n}", path.display()))
        };
        let num = get("kv_num_blocks")?;
        if num.shape.len() != 3 {
            return Err(format!(
                "kv_num_blocks must be [B, H, Mb], got {:?}",
                num.shape
            ));
        }
        let meta_len =
            |k: &str, default: usize| meta.get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
        let mask = BlockMask {
            batch: num.shape[0],
            heads: num.shape[1],
            seqlen_q: meta_len("seqlen_q", sq),
            seqlen_k: meta_len("seqlen_k", sk),
            kv_num_blocks: num.to_i32()?,
            kv_indices: get("kv_indices")?.to_i32()?,
            full_kv_num_blocks: get("full_kv_num_blocks")?.to_i32()?,
            full_kv_indices: get("full_kv_indices")?.to_i32()?,
            kv_tile_offsets: get("kv_tile_offsets")?.to_i32()?,
            words: get("words")?.to_u32()?,
        };
        mask.validate().map_err(|e| e.to_string())?;
        return Ok(Some(mask));
    }
    if let Some(path) = &args.dense_mask {
        let t = io::read_npy(path)?;
        let [b, h, s1, s2]: [usize; 4] = t
            .shape
            .as_slice()
            .try_into()
            .map_err(|_| "dense mask must be 4-D".to_string())?;
        if s1 != sq || s2 != sk {
            return Err(format!("dense mask is {s1}x{s2}, attention is {sq}x{sk}"));
        }
        return BlockMask::from_dense(b, h, sq, sk, &t.to_bool()?)
            .map(Some)
            .map_err(|e| e.to_string());
    }
    if let Some(spec) = &args.synthetic_mask {
        let parts: Vec<&str> = spec.split(':').collect();
        let num = |i: usize| -> Result<f64, String> {
            parts
                .get(i)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("bad --synthetic-mask {spec}"))
        };
        let pred = match parts[0] {
            "random" | "topk" => random_tokens(num(1)?, args.seed),
            "blocksparse" => block_sparse(num(1)?, num(2)?, args.seed),
            _ => return Err(format!("unknown --synthetic-mask {spec}")),
        };
        return BlockMask::from_fn(1, 1, sq, sk, |b, h, i, j| pred(b, h, i, j))
            .map(Some)
            .map_err(|e| e.to_string());
    }
    Ok(None)
}

/// (visited tiles, partial tiles) over the whole call for a block mask.
fn block_tiles(m: &BlockMask, s: &AttentionShape) -> (usize, usize) {
    let repeat = (s.batch / m.batch) * (s.heads / m.heads);
    let partial: usize = m.kv_num_blocks.iter().map(|&x| x as usize).sum();
    let full: usize = m.full_kv_num_blocks.iter().map(|&x| x as usize).sum();
    ((partial + full) * repeat, partial * repeat)
}

/// (visited tiles, partial tiles) for a window mask, mirroring the kernel's schedule.
fn window_tiles(w: &Window, s: &AttentionShape) -> (usize, usize) {
    let (bm, bn) = (BLOCK_M as i64, BLOCK_N as i64);
    let nb = (s.seqlen_k as i64 + bn - 1) / bn;
    let (mut visited, mut partial) = (0usize, 0usize);
    for m in 0..(s.seqlen_q as i64 + bm - 1) / bm {
        let m0 = m * bm;
        let m_end = (m0 + bm).min(s.seqlen_q as i64) - 1;
        for n in 0..nb {
            let n0 = n * bn;
            let lo_ok = w
                .left
                .is_none_or(|l| n0 + bn > m0 + i64::from(w.diag_offset) - i64::from(l));
            let hi_ok = w
                .right
                .is_none_or(|r| n0 <= m_end + i64::from(w.diag_offset) + i64::from(r));
            if !(lo_ok && hi_ok) {
                continue;
            }
            visited += 1;
            let full = w
                .left
                .is_none_or(|l| n0 >= m_end + i64::from(w.diag_offset) - i64::from(l))
                && w.right
                    .is_none_or(|r| n0 + bn - 1 <= m0 + i64::from(w.diag_offset) + i64::from(r))
                && n0 + bn <= s.seqlen_k as i64;
            if !full {
                partial += 1;
            }
        }
    }
    let heads = s.batch * s.heads;
    (visited * heads, partial * heads)
}

fn run_selftest(runner: &AttentionRunner, args: &ForwardArgs, device: &str) -> CmdResult {
    println!(
        "attention selftest on {device}: GPU vs CPU f64 reference (tolerance {})",
        selftest::O_TOLERANCE
    );
    let mut failures = 0;
    for (i, case) in selftest::default_cases().iter().enumerate() {
        let mut case = case.clone();
        if args.no_overlap {
            case.opts.overlap = Some(false);
        }
        if args.pingpong.is_some() {
            case.opts.pingpong = args.pingpong;
        }
        if args.lookahead.is_some() {
            case.opts.lookahead = args.lookahead;
        }
        match selftest::run_case(runner, &case, args.seed.wrapping_add(i as u64)) {
            Ok(r) => {
                if !r.passed {
                    failures += 1;
                }
                println!(
                    "{} {:<52} rel_err {:.2e}  lse_err {:.2e}  bad {}  empty-row errors {}  partial tiles {}",
                    if r.passed { "PASS" } else { "FAIL" },
                    r.name,
                    r.rel_err,
                    r.lse_err,
                    r.bad_values,
                    r.empty_row_errors,
                    r.partial_tiles
                );
            }
            Err(e) => {
                failures += 1;
                println!("FAIL {:<52} error: {e}", case.name);
            }
        }
    }
    println!("selftest: {failures} failure(s)");
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
