//! `fragmask lightning` (check the lightning decode kernel against the f64 reference over
//! many steps) and `fragmask bench lightning` (time it beside a device copy).
//!
//! Every flag is parsed and every problem validated before the GPU is looked for.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fragmask::check::lightning::bench::{bench, copy_roof};
use fragmask::check::lightning::check::check;
use fragmask::check::timing::TimingConfig;
use fragmask::host::lightning::{LightningDecode, LightningTensors};
use fragmask::host::{Compiler, Device};
use fragmask::inputs::attention::{tensor_from_bytes, MAX_FILE_BYTES};
use fragmask::inputs::lightning::{lightning_inputs, LightningInputs};
use fragmask::kernels::family::dtype::ActDtype;
use fragmask::kernels::lightning::{LightningConfig, LightningProblem};
use fragmask::masks::io::{check_output, read_file_limited, write_safetensors, DType};
use serde_json::json;

use super::verify::NO_GPU_EXIT;
use super::CmdResult;

/// Options of `fragmask lightning`.
#[derive(Args)]
pub struct LightningArgs {
    /// Random inputs of sizes B,H,N,D[,E]: batch, heads, tokens per step, head sizes
    /// (E = D when omitted), or named in any order (b=2,h=64,n=1,d=96), checked against
    /// the f64 reference over --steps steps (state, inputs and reference at most 4 GiB of
    /// host memory). q, k,
    /// v are uniform in [-1, 1); the state starts uniform too; slopes are MiniMax-01's
    /// 2^(-8(h+1)/H).
    #[arg(long, value_name = "B,H,N,D[,E]", allow_hyphen_values = true, conflicts_with_all = ["inputs", "q", "out"],
          required_unless_present_any = ["inputs", "q"])]
    random: Option<String>,
    /// A safetensors file holding q, k, v (bf16, f16 or f32, [B,H,N,D] / [B,H,N,E]),
    /// state (float32 [B,H,D,E]) and slope (float32 [H] or [H,1,1]).
    #[arg(long, conflicts_with = "q", requires = "out")]
    inputs: Option<PathBuf>,
    /// q file (.npy or single-tensor safetensors); needs --k, --v, --state, --slope.
    #[arg(long, requires_all = ["k", "v", "state", "slope", "out"])]
    q: Option<PathBuf>,
    /// k file.
    #[arg(long, requires = "q")]
    k: Option<PathBuf>,
    /// v file.
    #[arg(long, requires = "q")]
    v: Option<PathBuf>,
    /// State file (float32 [B,H,D,E]).
    #[arg(long, requires = "q")]
    state: Option<PathBuf>,
    /// Slope file (float32 [H] or [H,1,1]).
    #[arg(long, requires = "q")]
    slope: Option<PathBuf>,
    /// Output safetensors: o (q's dtype) and the new state (float32).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Consecutive decode steps on one state, each compared with the f64 reference
    /// (with --random).
    #[arg(long, default_value_t = 1000)]
    steps: usize,
    /// Element type of q, k, v and o with --random: bf16, f16 or f32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Threads along the state's columns per CTA (the geometry); default: chosen from
    /// the SM count.
    #[arg(long)]
    col_vectors: Option<u32>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `fragmask bench lightning`.
#[derive(Args)]
pub struct BenchLightningArgs {
    /// Batch sizes, comma-separated.
    #[arg(long, default_value = "1,16,64,128")]
    batch: String,
    /// Heads.
    #[arg(long, default_value_t = 64)]
    heads: usize,
    /// D, the head size of q and k.
    #[arg(long, default_value_t = 96)]
    dim: usize,
    /// E, the head size of v (default D).
    #[arg(long)]
    dim_v: Option<usize>,
    /// Tokens per call.
    #[arg(long, default_value_t = 1)]
    tokens: usize,
    /// Element type of q, k, v and o: bf16, f16 or f32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Geometries to time: `auto` (the one the host chooses), `all`, or a list of
    /// col_vectors values.
    #[arg(long, default_value = "auto")]
    col_vectors: String,
    /// Untimed launches first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timed samples (each a pass over the rotated state sets).
    #[arg(long, default_value_t = 50)]
    iters: usize,
    /// Launch without programmatic dependent launch (the kernel then starts only when
    /// the previous one has finished), for comparison.
    #[arg(long)]
    no_dependent_launch: bool,
    /// Bytes of state rotated through per sample, in MB (keeps the state out of L2).
    #[arg(long, default_value_t = 256)]
    rotate_mb: usize,
    /// Also write the rows as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The mode of a `fragmask lightning` command line and the flags it reads.
pub fn mode(args: &LightningArgs) -> super::Mode {
    if args.random.is_some() {
        super::Mode {
            name: "--random",
            uses: Some(&["random", "steps", "dtype", "col_vectors", "seed"]),
        }
    } else {
        super::Mode {
            name: "input files (they give the shapes, element type and state; one step)",
            uses: Some(&[
                "inputs",
                "q",
                "k",
                "v",
                "state",
                "slope",
                "out",
                "col_vectors",
            ]),
        }
    }
}

fn parse_dtype(text: &str) -> Result<ActDtype, String> {
    ActDtype::parse(text).ok_or_else(|| format!("--dtype {text}: expected bf16, f16 or f32"))
}

fn parse_list(flag: &str, text: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|p| {
            p.trim()
                .parse::<usize>()
                .map_err(|_| format!("{flag} {text}: `{p}` is not a non-negative integer"))
        })
        .collect()
}

fn problem(
    batch: usize,
    heads: usize,
    tokens: usize,
    d: usize,
    e: usize,
    dtype: ActDtype,
) -> Result<LightningProblem, String> {
    LightningProblem {
        batch,
        heads,
        tokens,
        dim_k: d,
        dim_v: e,
        dtype,
    }
    .validate()
    .map_err(|e| e.to_string())
}

fn geometry(
    d: usize,
    e: usize,
    dtype: ActDtype,
    col_vectors: u32,
) -> Result<LightningConfig, String> {
    LightningConfig::new(d as u32, e as u32, dtype, col_vectors)
        .map_err(|e| format!("--col-vectors {col_vectors}: {e}"))
}

fn device() -> Result<Result<Device, ExitCode>, String> {
    match Device::first() {
        Ok(d) => Ok(Ok(d)),
        Err(e) if e.is_no_gpu() => {
            eprintln!("no GPU: {e}; the inputs are valid, nothing ran.");
            Ok(Err(ExitCode::from(NO_GPU_EXIT)))
        }
        Err(e) => Err(format!("GPU discovery failed: {e}")),
    }
}

/// Reads and checks the input files of `fragmask lightning` (no GPU).
fn file_inputs(args: &LightningArgs) -> Result<(LightningInputs, Vec<PathBuf>), String> {
    let read = |path: &PathBuf, flag: &str| {
        read_file_limited(path, MAX_FILE_BYTES)
            .map_err(|e| format!("{flag} {}: {e}", path.display()))
    };
    let tensors = ["q", "k", "v", "state", "slope"];
    if let Some(path) = &args.inputs {
        let what = format!("--inputs {}", path.display());
        let bytes = read(path, "--inputs")?;
        let views = tensors
            .iter()
            .map(|t| {
                tensor_from_bytes(&bytes, t, &format!("{what} (tensor {t})"))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<String> = tensors
            .iter()
            .map(|t| format!("{what} (tensor {t})"))
            .collect();
        let inputs = lightning_inputs(
            [&views[0], &views[1], &views[2], &views[3], &views[4]],
            [&names[0], &names[1], &names[2], &names[3], &names[4]],
        )
        .map_err(|e| e.to_string())?;
        return Ok((inputs, vec![path.clone()]));
    }
    let paths = [&args.q, &args.k, &args.v, &args.state, &args.slope];
    let mut files = Vec::new();
    let mut names = Vec::new();
    for (path, t) in paths.iter().zip(tensors) {
        let path = path
            .as_ref()
            .ok_or_else(|| format!("--{t} is required with --q"))?;
        files.push((path.clone(), read(path, &format!("--{t}"))?));
        names.push(format!("--{t} {}", path.display()));
    }
    let views = files
        .iter()
        .zip(&names)
        .zip(tensors)
        .map(|(((_, bytes), what), t)| tensor_from_bytes(bytes, t, what).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = lightning_inputs(
        [&views[0], &views[1], &views[2], &views[3], &views[4]],
        [&names[0], &names[1], &names[2], &names[3], &names[4]],
    )
    .map_err(|e| e.to_string())?;
    Ok((inputs, files.into_iter().map(|(p, _)| p).collect()))
}

/// Runs `fragmask lightning`.
pub fn run(args: LightningArgs) -> CmdResult {
    let Some(random) = args.random.clone() else {
        return run_files(&args);
    };
    let dtype = parse_dtype(&args.dtype)?;
    let dims = super::parse_sizes(&random, &["B", "H", "N", "D", "E"], 1)?;
    let (b, h, n, d, e) = match dims[..] {
        [Some(b), Some(h), Some(n), Some(d), e] => (b, h, n, d, e.unwrap_or(d)),
        _ => return Err(format!("--random {random}: expected B,H,N,D or B,H,N,D,E")),
    };
    let problem = problem(b, h, n, d, e, dtype).map_err(|m| format!("--random {random}: {m}"))?;
    // The f64 reference runs steps x B x H x n x D x E multiply-adds on the CPU.
    let work = problem
        .elements("state")
        .ok()
        .and_then(|s| s.checked_mul(n))
        .and_then(|w| w.checked_mul(args.steps));
    if args.steps == 0 || work.is_none_or(|w| w > 20_000_000_000) {
        return Err(format!(
            "--steps {} with --random {random}: the check needs 1 <= steps and steps x B x H x N x D x E <= 2e10 \
             (the CPU reference does that many multiply-adds)",
            args.steps
        ));
    }
    fragmask::check::lightning::check::check_host_budget(&problem)
        .map_err(|e| format!("--random {random}: {e}"))?;
    let config = args
        .col_vectors
        .map(|cv| geometry(d, e, dtype, cv))
        .transpose()?;
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let decode = LightningDecode::new(&device, &Compiler::new(), d as u32, e as u32, dtype)
        .map_err(|e| e.to_string())?;
    eprintln!("checking {} steps on {} ...", args.steps, device.name());
    let report =
        check(&decode, &problem, args.steps, args.seed, config).map_err(|e| e.to_string())?;
    println!(
        "lightning decode B={b} H={h} n={n} D={d} E={e} {}: {} steps, geometry {} col vectors x {} threads ({} CTAs per state)\n\
         state rel. error {:.3e} (bound {:.0e}), worst o rel. error {:.3e} (bound {:.0e}): {}",
        dtype.name(),
        report.steps,
        report.config.col_vectors,
        report.config.threads,
        report.config.splits(),
        report.state_error,
        report.state_tolerance,
        report.o_error,
        report.o_tolerance,
        if report.passed() { "PASS" } else { "FAIL" }
    );
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `fragmask lightning` on files: one call, o and the new state written to --out.
fn run_files(args: &LightningArgs) -> CmdResult {
    let (inputs, files) = file_inputs(args)?;
    let out = args
        .out
        .as_ref()
        .ok_or("--out is required with input files")?;
    check_output(out, &files).map_err(|e| format!("--out: {e}"))?;
    let p = inputs.problem;
    let config = args
        .col_vectors
        .map(|cv| geometry(p.dim_k, p.dim_v, p.dtype, cv))
        .transpose()?;
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let decode = LightningDecode::new(
        &device,
        &Compiler::new(),
        p.dim_k as u32,
        p.dim_v as u32,
        p.dtype,
    )
    .map_err(|e| e.to_string())?;
    let s = decode.stream().clone();
    let mut t = LightningTensors::zeros(&s, &p).map_err(|e| e.to_string())?;
    let up = |r: Result<(), _>| {
        r.map_err(|e: fragmask::host::cudarc::driver::DriverError| {
            format!("uploading the inputs: {e}")
        })
    };
    up(s.memcpy_htod(&inputs.q, &mut t.q))?;
    up(s.memcpy_htod(&inputs.k, &mut t.k))?;
    up(s.memcpy_htod(&inputs.v, &mut t.v))?;
    up(s.memcpy_htod(&inputs.state, &mut t.state))?;
    up(s.memcpy_htod(&inputs.slopes, &mut t.slope))?;
    decode
        .launch(&p, &mut t, config)
        .map_err(|e| e.to_string())?;
    let o = s
        .clone_dtoh(&t.o)
        .map_err(|e| format!("reading o back: {e}"))?;
    let state = s
        .clone_dtoh(&t.state)
        .map_err(|e| format!("reading the state back: {e}"))?;
    let state_bytes: Vec<u8> = state.iter().flat_map(|x| x.to_le_bytes()).collect();
    let o_dtype = match p.dtype {
        ActDtype::Bf16 => DType::BF16,
        ActDtype::F16 => DType::F16,
        ActDtype::F32 => DType::F32,
    };
    write_safetensors(
        out,
        &[
            ("o", o_dtype, &p.shape("o"), &o),
            ("state", DType::F32, &p.shape("state"), &state_bytes),
        ],
    )
    .map_err(|e| e.to_string())?;
    println!(
        "lightning decode B={} H={} n={} D={} E={} {}: wrote o and state to {}",
        p.batch,
        p.heads,
        p.tokens,
        p.dim_k,
        p.dim_v,
        p.dtype.name(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `fragmask bench lightning`.
pub fn bench_run(args: BenchLightningArgs) -> CmdResult {
    let dtype = parse_dtype(&args.dtype)?;
    let (d, e) = (args.dim, args.dim_v.unwrap_or(args.dim));
    let batches = parse_list("--batch", &args.batch)?;
    let problems = batches
        .iter()
        .map(|&b| {
            problem(b, args.heads, args.tokens, d, e, dtype).map_err(|m| {
                format!(
                    "--batch {b} --heads {} --tokens {} --dim {d} --dim-v {e}: {m}",
                    args.heads, args.tokens
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let geometries: Option<Vec<LightningConfig>> = match args.col_vectors.as_str() {
        "auto" => None,
        "all" => Some(LightningConfig::candidates(d as u32, e as u32, dtype)),
        list => Some(
            parse_list("--col-vectors", list)?
                .into_iter()
                .map(|cv| geometry(d, e, dtype, u32::try_from(cv).unwrap_or(u32::MAX)))
                .collect::<Result<_, _>>()?,
        ),
    };
    super::bench::check_launches("--iters", args.iters, 1)?;
    super::bench::check_launches("--warmup", args.warmup, 0)?;
    super::bench::check_json(&args.json)?;
    let rotate_bytes = args
        .rotate_mb
        .checked_mul(1 << 20)
        .filter(|&b| b <= 16 << 30)
        .ok_or_else(|| format!("--rotate-mb {}: at most 16384", args.rotate_mb))?;
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let decode = LightningDecode::new(&device, &Compiler::new(), d as u32, e as u32, dtype)
        .map_err(|e| e.to_string())?
        .with_dependent_launch(!args.no_dependent_launch);
    let timing = TimingConfig {
        warmup: args.warmup,
        warmup_ms: 0,
        runs: args.iters,
    };
    let (copy_ms, roof) = copy_roof(&decode, 1 << 30, timing).map_err(|e| e.to_string())?;
    println!(
        "device: {}; device-copy roof (1 GiB, read + write): {copy_ms:.3} ms, {roof:.0} GB/s",
        device.name()
    );
    println!("| B | H | n | D | E | dtype | geometry (col vectors, CTAs/state) | sets | ms | GB/s | of roof | graph ms | graph of roof |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for p in &problems {
        let configs: Vec<Option<LightningConfig>> = match &geometries {
            None => vec![None],
            Some(list) => list.iter().copied().map(Some).collect(),
        };
        for config in configs {
            let row = bench(&decode, p, config, timing, rotate_bytes).map_err(|e| e.to_string())?;
            println!(
                "| {} | {} | {} | {} | {} | {} | {}, {} | {} | {:.4} | {:.0} | {:.2} | {:.4} | {:.2} |",
                p.batch,
                p.heads,
                p.tokens,
                p.dim_k,
                p.dim_v,
                dtype.name(),
                row.config.col_vectors,
                row.config.splits(),
                row.sets,
                row.ms,
                row.gbps,
                row.gbps / roof,
                row.graph_ms,
                row.state_bytes as f64 / (row.graph_ms * 1e6) / roof
            );
            rows.push(json!({
                "batch": p.batch, "heads": p.heads, "tokens": p.tokens, "dim_k": p.dim_k,
                "dim_v": p.dim_v, "dtype": dtype.name(), "col_vectors": row.config.col_vectors,
                "splits": row.config.splits(), "sets": row.sets, "ms": row.ms,
                "state_bytes": row.state_bytes, "gbps": row.gbps, "roof_gbps": roof,
                "graph_ms": row.graph_ms,
                "roof_fraction": row.gbps / roof,
            }));
        }
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(
            &json!({ "device": device.name(), "roof_gbps": roof, "rows": rows }),
        )
        .map_err(|e| e.to_string())?;
        fragmask::masks::io::write_file_atomically(path, text.as_bytes())
            .map_err(|e| format!("--json: {e}"))?;
    }
    Ok(ExitCode::SUCCESS)
}
