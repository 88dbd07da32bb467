//! `fragmask decode` (split-KV decode over a contiguous or paged KV cache, checked
//! against the CPU f64 reference, or on files) and `fragmask bench decode` (time it
//! beside a device copy, the roof).
//!
//! Every flag is parsed and every shape, length and block table validated before the
//! GPU is looked for.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fragmask::check::decode::bench::{bench, copy_roof, BenchExtra, MAX_BENCH_CACHE_BYTES};
use fragmask::check::decode::check::{
    check, check_host_budget, check_masked, check_varlen, compare_masked, graph_check,
    random_inputs, random_lengths, sweep_cases, Comparison,
};
use fragmask::check::decode::masks::random_topk;
use fragmask::check::timing::TimingConfig;
use fragmask::host::decode::mask::{topk_gather, topk_shape, DecodeMask, DecodeMaskDevice};
use fragmask::host::decode::{
    CacheShape, DecodeOutput, DecodePlan, DecodeRunner, DecodeShape, DecodeTensors, DecodeWorkspace,
};
use fragmask::host::{Compiler, Device};
use fragmask::inputs::attention::MAX_FILE_BYTES;
use fragmask::inputs::decode::{decode_inputs, DecodeOptions};
use fragmask::kernels::family::dtype::ActDtype;
use fragmask::masks::io::{check_output, read_file_limited, write_safetensors, DType};
use fragmask::masks::PackedMask;
use serde_json::json;

use super::verify::NO_GPU_EXIT;
use super::CmdResult;

/// Most multiply-adds the CPU f64 reference may take (B x Sq x H x Sk x D, twice).
const MAX_REFERENCE_WORK: u128 = 8_000_000_000;
/// Most elements of the k cache the reference holds as f64 (k and v: 1 GiB).
const MAX_REFERENCE_ELEMENTS: usize = 1 << 26;

/// Refuses a check whose CPU reference would take too long or too much memory.
fn check_reference_cost(shape: &DecodeShape, what: &str) -> Result<(), String> {
    let work = [
        shape.batch,
        shape.seqlen_q,
        shape.heads,
        shape.cache.capacity(),
        shape.head_dim,
    ]
    .iter()
    .fold(1u128, |acc, &x| acc.saturating_mul(x as u128));
    if work > MAX_REFERENCE_WORK {
        return Err(format!(
            "{what}: the CPU f64 reference would take {work} multiply-adds per product; \
             at most {MAX_REFERENCE_WORK} (B x SQ x H x SK x D)"
        ));
    }
    let cache = shape.elements("k").map_err(|e| format!("{what}: {e}"))?;
    if cache > MAX_REFERENCE_ELEMENTS {
        return Err(format!(
            "{what}: the KV cache holds {cache} elements per tensor; the CPU f64 reference \
             takes at most {MAX_REFERENCE_ELEMENTS}"
        ));
    }
    Ok(())
}

/// Options of `fragmask decode`.
#[derive(Args)]
pub struct DecodeArgs {
    /// Random inputs of sizes B,SQ,H,HKV,SK,D: requests, new tokens per request, query
    /// heads, KV heads, keys per request (the cache's capacity) and head size (the
    /// `[B, SQ, H, D]` order of q; `fragmask attention --random` orders its sizes
    /// B,H,HKV,SQ,SK,D). Or named, in any order: b=16,sq=1,h=32,hkv=8,sk=8192,d=128.
    /// Checked against the CPU f64 reference (inputs and reference at most 4 GiB of host
    /// memory). q, k, v are uniform in [-1, 1).
    #[arg(long, value_name = "B,SQ,H,HKV,SK,D", allow_hyphen_values = true,
          conflicts_with_all = ["inputs", "out", "sweep"], required_unless_present_any = ["inputs", "sweep"])]
    random: Option<String>,
    /// Run the built-in correctness sweep (every page size, head size, GQA ratio, split
    /// counts 1 to 64, odd lengths, empty requests, causal Sq up to 64 on 16- and 64-row
    /// CTAs, windows, f16, and block-sparse masks: per-head with GQA, D = 256),
    /// each case against the CPU f64 reference; with --graph, each case is also
    /// replayed from a CUDA graph at other lengths.
    #[arg(long, conflicts_with_all = ["inputs", "out"])]
    sweep: bool,
    /// With --sweep: run only the cases whose label contains TEXT (e.g. `mask`,
    /// `shared`), as compute-sanitizer runs do.
    #[arg(long, value_name = "TEXT", requires = "sweep")]
    sweep_only: Option<String>,
    /// A safetensors file holding q [B,Sq,H,D] (bfloat16 or float16), k_cache and v_cache
    /// ([B,Sk,Hkv,D], or pages [P,page_size,Hkv,D] with block_table int32 [B,max_pages]),
    /// and optionally seqlens_k int32 [B].
    #[arg(long, requires = "out")]
    inputs: Option<PathBuf>,
    /// Output safetensors: o (q's dtype, [B,Sq,H,D]) and lse (float32, [B,H,Sq]).
    #[arg(long)]
    out: Option<PathBuf>,
    /// With --inputs: also compare the result with the CPU f64 reference.
    #[arg(long, requires = "inputs")]
    check: bool,
    /// Paged KV cache with pages of this many keys (a power of two, 1..=1024), with
    /// --random.
    #[arg(long)]
    page_size: Option<usize>,
    /// Hand out the pages in random order (with --page-size).
    #[arg(long, requires = "page_size")]
    shuffle_pages: bool,
    /// A head-major cache `[B, Hkv, SK, D]` (the `[B, H, S, D]` order of SDPA) instead
    /// of `[B, SK, Hkv, D]`, with --random.
    #[arg(long, requires = "random", conflicts_with_all = ["page_size", "topk"])]
    head_major: bool,
    /// Keys per request with --random: `full` (SK each), `random` (the first SK, the
    /// second 0, the rest uniform in 0..=SK) or a comma-separated list of B values.
    #[arg(long, default_value = "random")]
    lengths: String,
    /// Causal, bottom-right aligned (token t of SQ sits at key position len - SQ + t).
    #[arg(long, conflicts_with = "window_right")]
    causal: bool,
    /// Keys a query sees to its left (sliding window); default all.
    #[arg(long)]
    window_left: Option<usize>,
    /// Keys a query sees to its right; default all (0 is --causal).
    #[arg(long)]
    window_right: Option<usize>,
    /// Softmax scale; default 1/sqrt(D).
    #[arg(long)]
    scale: Option<f64>,
    /// Element type of q, k, v and o with --random: bf16 or f16.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Splits of each request's keys (1..=256); default: chosen from the SM count.
    #[arg(long)]
    splits: Option<usize>,
    /// Also capture the call in a CUDA graph at the given lengths and replay it with
    /// other lengths (all 1, all SK, random, all 0), each checked (with --random).
    #[arg(long)]
    graph: bool,
    /// A block-sparse mask: a packed mask file (`fragmask pack`, any supported tile whose
    /// key columns are a multiple of 16) whose rows are the SQ new tokens and columns the
    /// keys; decode visits only its listed key blocks (with --random or --inputs).
    #[arg(long, conflicts_with_all = ["sweep", "topk", "graph"])]
    mask: Option<PathBuf>,
    /// Top-k sparse decode with --random: each request keeps K random distinct keys of its
    /// SK (every request full), read by a gather (contiguous cache, no causal / window).
    #[arg(long, value_name = "K", requires = "random", conflicts_with_all = ["page_size", "causal", "window_left", "window_right", "graph"])]
    topk: Option<usize>,
    /// Variable query lengths with --random (a mixed batch): `random` or B
    /// comma-separated token counts in 0..=SQ; q holds B x SQ rows [B*SQ, H, D] and
    /// cu_seqlens_q gives each request's. Checked launched plainly, then from one CUDA
    /// graph replayed with other lengths (all SQ, all 0, random), each against the CPU
    /// f64 reference.
    #[arg(long, value_name = "LIST", requires = "random", conflicts_with_all = ["topk", "graph"])]
    seqlens_q: Option<String>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The mode of a `fragmask decode` command line and the flags it reads.
pub fn mode(args: &DecodeArgs) -> super::Mode {
    use super::Mode;
    if args.sweep {
        Mode {
            name: "--sweep",
            uses: Some(&["sweep", "sweep_only", "graph", "seed"]),
        }
    } else if args.inputs.is_some() {
        Mode {
            name: "--inputs (the file gives the shapes, cache and lengths)",
            uses: Some(&[
                "inputs",
                "out",
                "check",
                "causal",
                "window_left",
                "window_right",
                "scale",
                "splits",
                "mask",
            ]),
        }
    } else {
        Mode {
            name: "--random",
            uses: Some(&[
                "random",
                "page_size",
                "shuffle_pages",
                "head_major",
                "lengths",
                "causal",
                "window_left",
                "window_right",
                "scale",
                "dtype",
                "splits",
                "graph",
                "mask",
                "topk",
                "seqlens_q",
                "seed",
            ]),
        }
    }
}

/// `cu_seqlens_q` of `lengths`.
fn cu_of(lengths: &[usize]) -> Vec<i32> {
    let mut cu = vec![0i32];
    for &n in lengths {
        cu.push(cu[cu.len() - 1] + n as i32);
    }
    cu
}

/// Random query lengths in 0..=sq (the first sq, the second 1 when there are two or more).
fn random_query_lengths(batch: usize, sq: usize, seed: u64) -> Vec<usize> {
    let mut state = seed ^ 0x5eed;
    (0..batch)
        .map(|b| match b {
            0 => sq,
            1 => 1.min(sq),
            _ => (fragmask::check::random::splitmix64(&mut state) % (sq as u64 + 1)) as usize,
        })
        .collect()
}

/// Reads a packed mask file and converts it to decode's form, checked against `shape`.
fn load_mask(path: &std::path::Path, shape: &DecodeShape) -> Result<DecodeMask, String> {
    let what = format!("--mask {}", path.display());
    let packed = load_packed(path)?;
    let mask = DecodeMask::from_packed(&packed).map_err(|e| format!("{what}: {e}"))?;
    mask.fit(shape).map_err(|e| format!("{what}: {e}"))?;
    Ok(mask)
}

/// The packed mask of `--mask FILE`.
fn load_packed(path: &std::path::Path) -> Result<PackedMask, String> {
    let what = format!("--mask {}", path.display());
    let bytes = read_file_limited(path, MAX_FILE_BYTES).map_err(|e| format!("{what}: {e}"))?;
    PackedMask::from_safetensors(&bytes).map_err(|e| format!("{what}: {e}"))
}

/// Options of `fragmask bench decode`.
#[derive(Args)]
pub struct BenchDecodeArgs {
    /// Preset workloads instead of one shape from the flags below. `serving`: serving
    /// decode (B=16 q=1 H=32 Hkv=8 Sk=8192; B=1 Sk=65536; B=64 Sk=4096; B=8 H=64 Hkv=8
    /// Sk=16384; the first paged with pages of 1, 16, 64 and 256 keys, shuffled). `vsa`:
    /// video block-sparse attention's decode (VSA, 64-token blocks: 64 tokens, H=12,
    /// D=128, Sk=23296, unmasked, then each head keeping a random 50% and 10% of its
    /// 64-token key blocks; both cache orders).
    #[arg(long)]
    preset: Option<String>,
    /// Requests.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// New tokens per request.
    #[arg(long, default_value_t = 1)]
    seqlen_q: usize,
    /// Query heads.
    #[arg(long, default_value_t = 32)]
    heads: usize,
    /// KV heads.
    #[arg(long, default_value_t = 8)]
    kv_heads: usize,
    /// Keys per request.
    #[arg(long, default_value_t = 8192)]
    seqlen_k: usize,
    /// Head size.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Element type: bf16 or f16.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Paged cache with pages of this many keys.
    #[arg(long)]
    page_size: Option<usize>,
    /// Hand out the pages in random order.
    #[arg(long, requires = "page_size")]
    shuffle_pages: bool,
    /// A head-major cache `[B, Hkv, SK, D]` (the `[B, H, S, D]` order of SDPA) instead
    /// of `[B, SK, Hkv, D]` (the vsa preset times both).
    #[arg(long, conflicts_with_all = ["page_size", "topk"])]
    head_major: bool,
    /// Causal (bottom-right aligned).
    #[arg(long)]
    causal: bool,
    /// Splits (default: chosen from the SM count).
    #[arg(long)]
    splits: Option<usize>,
    /// Untimed launches first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timed samples.
    #[arg(long, default_value_t = 50)]
    iters: usize,
    /// Launch without programmatic dependent launch.
    #[arg(long)]
    no_dependent_launch: bool,
    /// Bytes of KV cache rotated through per sample, in MB (keeps it out of L2).
    #[arg(long, default_value_t = 256)]
    rotate_mb: usize,
    /// Also write the rows as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A packed mask file (rows: the SEQLEN_Q tokens): time the masked call beside the
    /// same call without the mask.
    #[arg(long, conflicts_with_all = ["preset", "topk"])]
    mask: Option<PathBuf>,
    /// Top-k sparse decode: time K random keys per request read by a gather beside dense
    /// decode of the same (contiguous) cache.
    #[arg(long, value_name = "K", conflicts_with_all = ["preset", "page_size", "causal"])]
    topk: Option<usize>,
    /// A mixed batch: BATCH comma-separated token counts in 0..=SEQLEN_Q (cu_seqlens_q;
    /// q holds BATCH x SEQLEN_Q rows): time it beside the call with every request at
    /// SEQLEN_Q.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["preset", "topk", "mask"])]
    seqlens_q: Option<String>,
}

/// The mode of a `fragmask bench decode` command line and the flags it reads: a
/// preset fixes the shapes.
pub fn bench_mode(args: &BenchDecodeArgs) -> super::Mode {
    if args.preset.is_some() {
        super::Mode {
            name: "--preset (it fixes the shapes, cache and masks)",
            uses: Some(&[
                "preset",
                "dtype",
                "splits",
                "warmup",
                "iters",
                "no_dependent_launch",
                "rotate_mb",
                "json",
            ]),
        }
    } else {
        super::Mode::ALL
    }
}

/// `--scale`: finite and above 0 (as the attention forward's).
fn check_scale(scale: Option<f64>) -> Result<(), String> {
    match scale {
        Some(s) if !s.is_finite() || s <= 0.0 => {
            Err(format!("--scale {s}: expected a finite number above 0"))
        }
        _ => Ok(()),
    }
}

fn parse_dtype(text: &str) -> Result<ActDtype, String> {
    match ActDtype::parse(text) {
        Some(t @ (ActDtype::Bf16 | ActDtype::F16)) => Ok(t),
        _ => Err(format!("--dtype {text}: expected bf16 or f16")),
    }
}

fn parse_list<T: std::str::FromStr>(flag: &str, text: &str) -> Result<Vec<T>, String> {
    text.split(',')
        .map(|p| {
            p.trim()
                .parse::<T>()
                .map_err(|_| format!("{flag} {text}: `{p}` is not a non-negative integer"))
        })
        .collect()
}

/// The cache of `batch` requests of `keys` keys, paged or not.
fn cache(
    batch: usize,
    keys: usize,
    page_size: Option<usize>,
    head_major: bool,
) -> Result<CacheShape, String> {
    Ok(match page_size {
        None if head_major => CacheShape::HeadMajor { capacity: keys },
        None => CacheShape::Contiguous { capacity: keys },
        Some(0) => return Err("--page-size 0: it must be a power of two in 1..=1024".into()),
        Some(ps) => {
            let max_pages = keys.div_ceil(ps);
            CacheShape::Paged {
                page_size: ps,
                num_pages: batch
                    .checked_mul(max_pages)
                    .ok_or_else(|| format!("--page-size {ps}: the page count overflows"))?,
                max_pages,
            }
        }
    })
}

/// The runner for `shape` (compiled for the mask's tile when there is one) and its plan
/// over the whole cache capacity, or over the mask's listed blocks.
fn runner_and_plan(
    device: &Device,
    compiler: &Compiler,
    shape: &DecodeShape,
    mask: Option<&DecodeMask>,
    splits: Option<usize>,
) -> Result<(DecodeRunner, DecodePlan), String> {
    let e = |e: fragmask::host::decode::DecodeError| e.to_string();
    match mask {
        Some(m) => {
            let r = DecodeRunner::for_shape_masked(device, compiler, shape, m).map_err(e)?;
            let p = r.plan_masked(*shape, m, splits).map_err(e)?;
            Ok((r, p))
        }
        None => {
            let r = DecodeRunner::for_shape(device, compiler, shape).map_err(e)?;
            let p = r.plan(*shape, shape.cache.capacity(), splits).map_err(e)?;
            Ok((r, p))
        }
    }
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

fn windows(
    causal: bool,
    left: Option<usize>,
    right: Option<usize>,
) -> (Option<usize>, Option<usize>) {
    (left, if causal { Some(0) } else { right })
}

fn report(label: &str, c: &Comparison) -> String {
    format!(
        "{label}: o rel. error {:.3e} (bound {:.1e}), lse max abs. error {:.3e} (bound {:.0e}), \
         {} non-finite rows, {} wrong empty rows: {}",
        c.o_error,
        c.o_tolerance,
        c.lse_error,
        c.lse_tolerance,
        c.non_finite,
        c.bad_empty_rows,
        if c.passed() { "PASS" } else { "FAIL" }
    )
}

/// Runs `fragmask decode`.
pub fn run(args: DecodeArgs) -> CmdResult {
    if args.sweep {
        return run_sweep(&args);
    }
    let Some(random) = args.random.clone() else {
        return run_files(&args);
    };
    let dtype = parse_dtype(&args.dtype)?;
    check_scale(args.scale)?;
    let dims: Vec<usize> = super::parse_sizes(&random, &["B", "SQ", "H", "HKV", "SK", "D"], 0)?
        .into_iter()
        .flatten()
        .collect();
    let [b, sq, h, hkv, sk, d] = dims[..] else {
        return Err(format!("--random {random}: expected B,SQ,H,HKV,SK,D"));
    };
    let (left, right) = windows(args.causal, args.window_left, args.window_right);
    let shape = DecodeShape {
        batch: b,
        seqlen_q: sq,
        heads: h,
        kv_heads: hkv,
        head_dim: d,
        dtype,
        cache: cache(b, sk, args.page_size, args.head_major)
            .map_err(|m| format!("--random {random}: {m}"))?,
        window_left: left,
        window_right: right,
        softmax_scale: args.scale,
    }
    .validate()
    .map_err(|e| format!("--random {random}: {e}"))?;
    if let Some(s) = args.splits {
        if s == 0 || s > fragmask::host::decode::problem::MAX_SPLITS {
            return Err(format!("--splits {s}: expected 1..=256"));
        }
    }
    let mask = match &args.mask {
        Some(path) => {
            let m = load_mask(path, &shape)?;
            if m.seqlen_k != sk {
                return Err(format!(
                    "--mask {}: the mask has {} key columns, --random gives SK = {sk}",
                    path.display(),
                    m.seqlen_k
                ));
            }
            Some(m)
        }
        None => None,
    };
    if let Some(k) = args.topk {
        return run_topk(&args, shape, k);
    }
    // Every size is checked before anything is drawn: the reference's work, then the
    // host memory of the inputs and the reference.
    check_reference_cost(&shape, &format!("--random {random}"))?;
    check_host_budget(&shape).map_err(|e| format!("--random {random}: {e}"))?;
    let lengths = match args.lengths.as_str() {
        "full" => vec![sk as i32; b],
        "random" => random_lengths(&shape, args.seed),
        list => {
            let l: Vec<i64> = parse_list("--lengths", list)?;
            if l.len() != b || l.iter().any(|&x| x < 0 || x as usize > sk) {
                return Err(format!("--lengths {list}: expected {b} values in 0..={sk}"));
            }
            l.into_iter().map(|x| x as i32).collect()
        }
    };
    shape
        .check_lengths_only(&lengths)
        .map_err(|e| format!("--lengths {}: {e}", args.lengths))?;
    let query_lengths = match args.seqlens_q.as_deref() {
        None => None,
        Some("random") => Some(random_query_lengths(b, sq, args.seed)),
        Some(list) => {
            let l: Vec<usize> = parse_list("--seqlens-q", list)?;
            if l.len() != b || l.iter().any(|&x| x > sq) {
                return Err(format!(
                    "--seqlens-q {list}: expected {b} values in 0..={sq}"
                ));
            }
            Some(l)
        }
    };
    // The random block table hands out every request's pages: the pool must hold them.
    if let CacheShape::Paged {
        num_pages,
        max_pages,
        ..
    } = shape.cache
    {
        if b.checked_mul(max_pages).is_none_or(|n| n > num_pages) {
            return Err(format!("--random {random}: the page pool is too small"));
        }
    }
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    // Drawn once a GPU is found (validated above, so this does not fail on the inputs).
    let inputs = random_inputs(&shape, Some(lengths), args.shuffle_pages, args.seed)
        .map_err(|e| format!("--random {random}: {e}"))?;
    let compiler = Compiler::new();
    let (runner, plan) = runner_and_plan(&device, &compiler, &shape, mask.as_ref(), args.splits)?;
    if let Some(lens) = query_lengths {
        let plan = plan.with_varlen(b * sq).map_err(|e| e.to_string())?;
        let cu_list = vec![
            cu_of(&lens),
            cu_of(&vec![sq; b]),
            cu_of(&vec![0; b]),
            cu_of(&random_query_lengths(b, sq, args.seed ^ 0x77)),
        ];
        eprintln!("checking varlen on {} ...", device.name());
        let results = check_varlen(&runner, &plan, &inputs, mask.as_ref(), &cu_list)
            .map_err(|e| e.to_string())?;
        let mut passed = true;
        for (i, c) in results.iter().enumerate() {
            let cu = &cu_list[i.saturating_sub(1)];
            let shown: Vec<String> = cu.iter().take(6).map(|x| x.to_string()).collect();
            let label = format!(
                "varlen decode B={b} Sq<={sq} H={h} Hkv={hkv} Sk={sk} D={d}{}, {} splits, {}, cu_seqlens_q [{}{}]",
                if mask.is_some() { " masked" } else { "" },
                plan.num_splits,
                if i == 0 { "launched".to_string() } else { format!("graph replay {i}") },
                shown.join(","),
                if cu.len() > 6 { ",..." } else { "" }
            );
            println!("{}", report(&label, c));
            passed &= c.passed();
        }
        return Ok(if passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    eprintln!("checking on {} ...", device.name());
    let result = match &mask {
        Some(m) => check_masked(&runner, &plan, &inputs, m),
        None => check(&runner, &plan, &inputs),
    }
    .map_err(|e| e.to_string())?;
    let cache_text = match shape.cache {
        CacheShape::Contiguous { .. } => "contiguous".to_string(),
        CacheShape::HeadMajor { .. } => "head-major".to_string(),
        CacheShape::Paged { page_size, .. } => format!(
            "paged {page_size}{}",
            if args.shuffle_pages { " shuffled" } else { "" }
        ),
    };
    let label = format!(
        "decode B={b} Sq={sq} H={h} Hkv={hkv} Sk={sk} D={d} {} {cache_text}, window ({}, {}){}, {} splits",
        dtype.name(),
        left.map_or("-".into(), |w| w.to_string()),
        right.map_or("-".into(), |w| w.to_string()),
        mask.as_ref().map_or(String::new(), |m| format!(
            ", mask {}x{} ({} listed keys at most)",
            m.block_m,
            m.block_n,
            m.max_listed_keys()
        )),
        plan.num_splits
    );
    println!("{}", report(&label, &result));
    let mut passed = result.passed();
    if args.graph {
        let others = vec![
            vec![sk.min(1) as i32; b],
            vec![sk as i32; b],
            random_lengths(&shape, args.seed ^ 0x9e37),
            vec![0; b],
        ];
        let replays = graph_check(&runner, &plan, &inputs, &others).map_err(|e| e.to_string())?;
        for (lens, c) in others.iter().zip(&replays) {
            let shown: Vec<String> = lens.iter().take(4).map(|x| x.to_string()).collect();
            println!(
                "{}",
                report(
                    &format!(
                        "  graph replay, lengths [{}{}]",
                        shown.join(","),
                        if b > 4 { ",..." } else { "" }
                    ),
                    c
                )
            );
            passed &= c.passed();
        }
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `fragmask decode --random ... --topk K`: K random keys per request gathered from a
/// contiguous cache, checked against the CPU f64 reference over those keys.
fn run_topk(args: &DecodeArgs, shape: DecodeShape, k: usize) -> CmdResult {
    let sk = shape.cache.capacity();
    // The gathered shape, the reference's work and the host memory are checked before
    // any key is drawn.
    let gathered = topk_shape(&shape, k).map_err(|e| format!("--topk {k}: {e}"))?;
    check_reference_cost(&gathered, &format!("--topk {k}"))?;
    check_host_budget(&shape).map_err(|e| format!("--topk {k}: {e}"))?;
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let indices = random_topk(&vec![sk; shape.batch], k, args.seed)
        .map_err(|e| format!("--topk {k}: {e}"))?;
    let (gathered, table) =
        topk_gather(&shape, k, &indices, None).map_err(|e| format!("--topk {k}: {e}"))?;
    drop(indices);
    let mut inputs = random_inputs(&shape, Some(vec![sk as i32; shape.batch]), false, args.seed)
        .map_err(|e| format!("--topk {k}: {e}"))?;
    inputs.reference.block_table = table;
    inputs.reference.seqlens_k = Some(vec![k as i32; shape.batch]);
    let runner =
        DecodeRunner::for_shape(&device, &Compiler::new(), &gathered).map_err(|e| e.to_string())?;
    let plan = runner
        .plan(gathered, k, args.splits)
        .map_err(|e| e.to_string())?;
    eprintln!("checking on {} ...", device.name());
    let result = check(&runner, &plan, &inputs).map_err(|e| e.to_string())?;
    let label = format!(
        "top-k decode B={} Sq={} H={} Hkv={} Sk={sk} D={} {}, k={k} gathered, {} splits",
        shape.batch,
        shape.seqlen_q,
        shape.heads,
        shape.kv_heads,
        shape.head_dim,
        shape.dtype.name(),
        plan.num_splits
    );
    println!("{}", report(&label, &result));
    Ok(if result.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `fragmask decode --sweep`: every case of the built-in sweep in one process.
fn run_sweep(args: &DecodeArgs) -> CmdResult {
    let cases: Vec<_> = sweep_cases()
        .into_iter()
        .enumerate()
        .filter(|(_, c)| {
            args.sweep_only
                .as_ref()
                .is_none_or(|t| c.label.contains(t.as_str()))
        })
        .collect();
    if cases.is_empty() {
        return Err(format!(
            "--sweep-only {}: no sweep case's label contains it",
            args.sweep_only.as_deref().unwrap_or("")
        ));
    }
    let cases: Vec<_> = cases
        .into_iter()
        .map(|(i, mut c)| {
            c.label = format!("#{i} {}", c.label);
            (i, c)
        })
        .collect();
    let mut prepared = Vec::with_capacity(cases.len());
    for (i, c) in cases.iter().map(|(i, c)| (*i, c)) {
        let lengths = c
            .lengths
            .clone()
            .unwrap_or_else(|| random_lengths(&c.shape, args.seed + i as u64));
        let inputs = random_inputs(
            &c.shape,
            Some(lengths),
            c.shuffle_pages,
            args.seed + i as u64,
        )
        .map_err(|e| format!("sweep case {}: {e}", c.label))?;
        let mask = c
            .packed_mask(args.seed + i as u64)
            .map_err(|e| format!("sweep case {}: {e}", c.label))?;
        prepared.push((inputs, mask));
    }
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let compiler = Compiler::new();
    let (mut passed, mut failed) = (0, 0);
    for ((_, c), (inputs, mask)) in cases.iter().zip(&prepared) {
        let (runner, plan) = runner_and_plan(&device, &compiler, &c.shape, mask.as_ref(), c.splits)
            .map_err(|e| format!("{}: {e}", c.label))?;
        let mut results = vec![match mask {
            Some(m) => check_masked(&runner, &plan, inputs, m),
            None => check(&runner, &plan, inputs),
        }
        .map_err(|e| format!("{}: {e}", c.label))?];
        if args.graph && mask.is_none() {
            let cap = c.shape.cache.capacity() as i32;
            let others = vec![
                vec![1.min(cap); c.shape.batch],
                vec![cap; c.shape.batch],
                vec![0; c.shape.batch],
            ];
            results.extend(
                graph_check(&runner, &plan, inputs, &others)
                    .map_err(|e| format!("{}: {e}", c.label))?,
            );
        }
        for (i, r) in results.iter().enumerate() {
            let label = format!(
                "{} ({} splits, {} rows per CTA{}){}",
                c.label,
                plan.num_splits,
                plan.config.cta_rows(),
                if plan.pack_heads {
                    ""
                } else {
                    ", heads not packed"
                },
                if i == 0 {
                    String::new()
                } else {
                    format!(", graph replay {i}")
                }
            );
            println!("{}", report(&label, r));
            if r.passed() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
    }
    println!("sweep: {passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `fragmask decode --inputs`: one call, o and lse written to --out.
fn run_files(args: &DecodeArgs) -> CmdResult {
    let path = args
        .inputs
        .as_ref()
        .ok_or("--inputs or --random is required")?;
    let out = args.out.as_ref().ok_or("--out is required with --inputs")?;
    for (flag, used) in [
        ("--page-size", args.page_size.is_some()),
        ("--graph", args.graph),
    ] {
        if used {
            return Err(format!(
                "{flag} applies to --random; with --inputs the file gives the cache"
            ));
        }
    }
    check_scale(args.scale)?;
    let what = format!("--inputs {}", path.display());
    let bytes = read_file_limited(path, MAX_FILE_BYTES).map_err(|e| format!("{what}: {e}"))?;
    let (left, right) = windows(args.causal, args.window_left, args.window_right);
    let options = DecodeOptions {
        window_left: left,
        window_right: right,
        softmax_scale: args.scale,
    };
    let (shape, mut inputs) = decode_inputs(&bytes, &what, options).map_err(|e| e.to_string())?;
    drop(bytes);
    let mask = match &args.mask {
        Some(path) => Some(load_mask(path, &shape)?),
        None => None,
    };
    check_output(out, &[path]).map_err(|e| format!("--out: {e}"))?;
    if args.check {
        check_reference_cost(&shape, &format!("--check with {what}"))?;
    }
    if let Some(s) = args.splits {
        if s == 0 || s > fragmask::host::decode::problem::MAX_SPLITS {
            return Err(format!("--splits {s}: expected 1..=256"));
        }
    }
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let compiler = Compiler::new();
    let (runner, plan) = runner_and_plan(&device, &compiler, &shape, mask.as_ref(), args.splits)?;
    let s = runner.stream().clone();
    let device_mask = mask
        .as_ref()
        .map(|m| DecodeMaskDevice::upload(&s, m))
        .transpose()
        .map_err(|e| e.to_string())?;
    let tensors = DecodeTensors::upload(
        &s,
        &shape,
        &inputs.q,
        &inputs.k,
        &inputs.v,
        inputs.block_table(),
        inputs.seqlens_k(),
    )
    .map_err(|e| e.to_string())?;
    let mut o = DecodeOutput::new(&s, &shape).map_err(|e| e.to_string())?;
    let mut ws = DecodeWorkspace::new(&s, &plan).map_err(|e| e.to_string())?;
    runner
        .launch_masked(&plan, &tensors, device_mask.as_ref(), &mut o, &mut ws)
        .map_err(|e| e.to_string())?;
    let o_bytes = s
        .clone_dtoh(&o.o)
        .map_err(|e| format!("reading o back: {e}"))?;
    let lse = s
        .clone_dtoh(&o.lse)
        .map_err(|e| format!("reading lse back: {e}"))?;
    let lse_bytes: Vec<u8> = lse.iter().flat_map(|x| x.to_le_bytes()).collect();
    let o_dtype = match shape.dtype {
        ActDtype::F16 => DType::F16,
        _ => DType::BF16,
    };
    write_safetensors(
        out,
        &[
            ("o", o_dtype, &shape.dims("o"), &o_bytes),
            ("lse", DType::F32, &shape.dims("lse"), &lse_bytes),
        ],
    )
    .map_err(|e| e.to_string())?;
    println!(
        "decode B={} Sq={} H={} Hkv={} D={} {}, {} splits: wrote o and lse to {}",
        shape.batch,
        shape.seqlen_q,
        shape.heads,
        shape.kv_heads,
        shape.head_dim,
        shape.dtype.name(),
        plan.num_splits,
        out.display()
    );
    if args.check {
        inputs.fill_reference(shape.dtype);
        let c = compare_masked(&shape, &inputs.reference, mask.as_ref(), &o_bytes, &lse);
        println!("{}", report("check against the CPU f64 reference", &c));
        if !c.passed() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One benchmarked workload: `(name, shape, shuffle_pages)`.
type Workload = (String, DecodeShape, bool);

/// What one benchmark row runs beside the plain call.
enum RowKind {
    Plain,
    Masked(Box<DecodeMask>),
    /// The gathered (paged, one key a page) shape, its block table and K.
    TopK(DecodeShape, Vec<i32>, usize),
    /// `cu_seqlens_q` of a mixed batch.
    Varlen(Vec<i32>),
}

/// The shape of `[B, Sq, H, Hkv, Sk, D]`.
fn bench_shape(
    [batch, seqlen_q, heads, kv_heads, seqlen_k, dim]: [usize; 6],
    dtype: ActDtype,
    page_size: Option<usize>,
    head_major: bool,
    causal: bool,
) -> Result<DecodeShape, String> {
    DecodeShape {
        batch,
        seqlen_q,
        heads,
        kv_heads,
        head_dim: dim,
        dtype,
        cache: cache(batch, seqlen_k, page_size, head_major)?,
        window_left: None,
        window_right: causal.then_some(0),
        softmax_scale: None,
    }
    .validate()
    .map_err(|e| e.to_string())
}

fn workloads(args: &BenchDecodeArgs, dtype: ActDtype) -> Result<Vec<Workload>, String> {
    match args.preset.as_deref() {
        None => {
            let s = bench_shape(
                [
                    args.batch,
                    args.seqlen_q,
                    args.heads,
                    args.kv_heads,
                    args.seqlen_k,
                    args.dim,
                ],
                dtype,
                args.page_size,
                args.head_major,
                args.causal,
            )
            .map_err(|m| {
                format!(
                    "--batch {} --heads {} --kv-heads {} --seqlen-k {} --dim {}: {m}",
                    args.batch, args.heads, args.kv_heads, args.seqlen_k, args.dim
                )
            })?;
            Ok(vec![("custom".into(), s, args.shuffle_pages)])
        }
        // `issue11` and `writeup002`: the presets' former names, still accepted.
        Some("serving" | "issue11") => {
            let w = |name: &str, b, h, hkv, sk, page: Option<usize>| -> Result<Workload, String> {
                Ok((
                    name.to_string(),
                    bench_shape([b, 1, h, hkv, sk, 128], dtype, page, false, false)?,
                    page.is_some(),
                ))
            };
            Ok(vec![
                w("B=16 H=32/8 Sk=8192", 16, 32, 8, 8192, None)?,
                w("B=1 H=32/8 Sk=65536", 1, 32, 8, 65536, None)?,
                w("B=64 H=32/8 Sk=4096", 64, 32, 8, 4096, None)?,
                w("B=8 H=64/8 Sk=16384", 8, 64, 8, 16384, None)?,
                w(
                    "B=16 H=32/8 Sk=8192 paged 16 shuffled",
                    16,
                    32,
                    8,
                    8192,
                    Some(16),
                )?,
                w(
                    "B=16 H=32/8 Sk=8192 paged 1 shuffled",
                    16,
                    32,
                    8,
                    8192,
                    Some(1),
                )?,
                w(
                    "B=16 H=32/8 Sk=8192 paged 64 shuffled",
                    16,
                    32,
                    8,
                    8192,
                    Some(64),
                )?,
                w(
                    "B=16 H=32/8 Sk=8192 paged 256 shuffled",
                    16,
                    32,
                    8,
                    8192,
                    Some(256),
                )?,
            ])
        }
        // Both cache orders: `[B, Sk, Hkv, D]`, then head-major `[B, Hkv, Sk, D]` (VSA's
        // own kernels take `[B, H, N, D]`).
        Some("vsa" | "writeup002") => [false, true]
            .into_iter()
            .map(|head_major| {
                Ok((
                    format!(
                        "VSA Sq=64 H=12 Sk=23296{}",
                        if head_major { " head-major" } else { "" }
                    ),
                    bench_shape([1, 64, 12, 12, 23296, 128], dtype, None, head_major, false)?,
                    false,
                ))
            })
            .collect(),
        Some(other) => Err(format!("--preset {other}: expected serving or vsa")),
    }
}

/// Runs `fragmask bench decode`.
pub fn bench_run(args: BenchDecodeArgs) -> CmdResult {
    let dtype = parse_dtype(&args.dtype)?;
    let list = workloads(&args, dtype)?;
    for (name, shape, _) in &list {
        let bytes = shape
            .elements("k")
            .ok()
            .and_then(|n| n.checked_mul(2 * dtype.size()))
            .unwrap_or(usize::MAX);
        if bytes > MAX_BENCH_CACHE_BYTES {
            return Err(format!(
                "{name}: K and V hold {bytes} bytes; the benchmark takes at most {MAX_BENCH_CACHE_BYTES} \
                 (--batch x --seqlen-k x --kv-heads x --dim x 4)"
            ));
        }
    }
    // Masked and top-k rows follow the plain row of the same cache (validated here,
    // before the GPU is looked for).
    let mut jobs: Vec<(String, DecodeShape, bool, RowKind)> = Vec::new();
    // The same masked calls on the wgmma forward with split-KV (q, K, V `[B, H, S, D]`),
    // where the mask's tile is one of the forward's (docs/architecture.md, "Split-KV
    // forward"): planner's split count, and a scan on the preset.
    let mut forward_jobs: Vec<ForwardJob> = Vec::new();
    let forward_counts = |scan: bool| -> Vec<Option<u32>> {
        match args.splits {
            Some(n) => vec![Some(u32::try_from(n).unwrap_or(u32::MAX))],
            None if scan => vec![None, Some(8), Some(12), Some(16)],
            None => vec![None],
        }
    };
    for (name, shape, shuffle) in list {
        if matches!(args.preset.as_deref(), Some("vsa" | "writeup002")) {
            // VSA's lists: each head keeps a random 50% / 10% of the 364 blocks.
            jobs.push((name.clone(), shape, shuffle, RowKind::Plain));
            for (pct, kept) in [(50, 182), (10, 36)] {
                let packed = fragmask::check::decode::masks::writeup002_mask(12, 23296, kept, pct)
                    .map_err(|e| e.to_string())?;
                let m = DecodeMask::from_packed(&packed).map_err(|e| e.to_string())?;
                m.fit(&shape).map_err(|e| e.to_string())?;
                if !matches!(shape.cache, CacheShape::HeadMajor { .. }) && dtype == ActDtype::Bf16 {
                    match ForwardJob::new(
                        format!("{name} {pct}% of 64-token blocks, wgmma forward"),
                        &shape,
                        packed.clone(),
                        forward_counts(true),
                    ) {
                        Ok(job) => forward_jobs.push(job),
                        Err(e) => println!("(no wgmma forward row: {e})"),
                    }
                }
                jobs.push((
                    format!("{name} {pct}% of 64-token blocks"),
                    shape,
                    shuffle,
                    RowKind::Masked(Box::new(m)),
                ));
            }
            continue;
        }
        let extra = if let Some(path) = &args.mask {
            let m = load_mask(path, &shape)?;
            let packed = load_packed(path)?;
            if !matches!(shape.cache, CacheShape::Paged { .. }) && dtype == ActDtype::Bf16 {
                match ForwardJob::new(
                    format!("{name} mask, wgmma forward"),
                    &shape,
                    packed,
                    forward_counts(false),
                ) {
                    Ok(job) => forward_jobs.push(job),
                    Err(e) => println!("(no wgmma forward row: {e})"),
                }
            }
            Some((
                format!("{name} mask {}x{}", m.block_m, m.block_n),
                RowKind::Masked(Box::new(m)),
            ))
        } else if let Some(k) = args.topk {
            let sk = shape.cache.capacity();
            topk_shape(&shape, k).map_err(|e| format!("--topk {k}: {e}"))?;
            let indices = random_topk(&vec![sk; shape.batch], k, 0x70f)
                .map_err(|e| format!("--topk {k}: {e}"))?;
            let (g, table) =
                topk_gather(&shape, k, &indices, None).map_err(|e| format!("--topk {k}: {e}"))?;
            Some((format!("{name} top-{k} gather"), RowKind::TopK(g, table, k)))
        } else if let Some(list) = &args.seqlens_q {
            let l: Vec<usize> = parse_list("--seqlens-q", list)?;
            if l.len() != shape.batch || l.iter().any(|&x| x > shape.seqlen_q) {
                return Err(format!(
                    "--seqlens-q {list}: expected {} values in 0..={}",
                    shape.batch, shape.seqlen_q
                ));
            }
            Some((
                format!("{name} varlen [{list}]"),
                RowKind::Varlen(cu_of(&l)),
            ))
        } else {
            None
        };
        jobs.push((name, shape, shuffle, RowKind::Plain));
        if let Some((n, kind)) = extra {
            jobs.push((n, shape, shuffle, kind));
        }
    }
    super::bench::check_launches("--iters", args.iters, 1)?;
    super::bench::check_launches("--warmup", args.warmup, 0)?;
    super::bench::check_json(&args.json)?;
    if let Some(s) = args.splits {
        if s == 0 || s > fragmask::host::decode::problem::MAX_SPLITS {
            return Err(format!("--splits {s}: expected 1..=256"));
        }
    }
    let rotate_bytes = args
        .rotate_mb
        .checked_mul(1 << 20)
        .filter(|&b| b <= 16 << 30)
        .ok_or_else(|| format!("--rotate-mb {}: at most 16384", args.rotate_mb))?;
    let device = match device()? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let timing = TimingConfig {
        warmup: args.warmup,
        warmup_ms: 0,
        runs: args.iters,
    };
    let compiler = Compiler::new();
    let mut roof = None;
    let mut rows = Vec::new();
    let mut plain_ms = f64::NAN;
    for (name, dense_shape, shuffle, kind) in &jobs {
        let shape = match kind {
            RowKind::TopK(g, _, _) => g,
            _ => dense_shape,
        };
        let runner = match kind {
            RowKind::Masked(m) => DecodeRunner::for_shape_masked(&device, &compiler, shape, m),
            _ => DecodeRunner::for_shape(&device, &compiler, shape),
        }
        .map_err(|e| e.to_string())?
        .with_dependent_launch(!args.no_dependent_launch);
        let roof_gbps = match roof {
            Some(r) => r,
            None => {
                let (copy_ms, r) =
                    copy_roof(&runner, 1 << 30, timing).map_err(|e| e.to_string())?;
                println!(
                    "device: {}; device-copy roof (1 GiB, read + write): {copy_ms:.3} ms, {r:.0} GB/s",
                    device.name()
                );
                println!("| workload | B | Sq | H | Hkv | Sk | D | cache | splits | sets | ms | GB/s | of roof | graph ms | graph of roof |");
                println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
                roof = Some(r);
                r
            }
        };
        let (plan, extra) = match kind {
            RowKind::Plain => (
                runner.plan(*shape, shape.cache.capacity(), args.splits),
                BenchExtra::default(),
            ),
            RowKind::Masked(m) => (
                runner.plan_masked(*shape, m, args.splits),
                BenchExtra {
                    mask: Some(m),
                    ..BenchExtra::default()
                },
            ),
            RowKind::TopK(_, table, k) => (
                runner.plan(*shape, *k, args.splits),
                BenchExtra {
                    block_table: Some(table),
                    ..BenchExtra::default()
                },
            ),
            RowKind::Varlen(cu) => (
                runner
                    .plan(*shape, shape.cache.capacity(), args.splits)
                    .and_then(|p| p.with_varlen(shape.batch * shape.seqlen_q)),
                BenchExtra {
                    cu_seqlens_q: Some(cu),
                    ..BenchExtra::default()
                },
            ),
        };
        let plan = plan.map_err(|e| e.to_string())?;
        let row = bench(&runner, &plan, *shuffle, timing, rotate_bytes, extra)
            .map_err(|e| e.to_string())?;
        let cache_text = match shape.cache {
            _ if matches!(kind, RowKind::TopK(..)) => "contiguous, gathered".to_string(),
            CacheShape::Contiguous { .. } => "contiguous".to_string(),
            CacheShape::HeadMajor { .. } => "head-major".to_string(),
            CacheShape::Paged { page_size, .. } => {
                format!(
                    "paged {page_size}{}",
                    if *shuffle { " shuffled" } else { "" }
                )
            }
        };
        let graph_gbps = row.bytes as f64 / (row.graph_ms * 1e6);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {cache_text} | {} | {} | {:.4} | {:.0} | {:.3} | {:.4} | {:.3} |",
            shape.batch,
            shape.seqlen_q,
            shape.heads,
            shape.kv_heads,
            dense_shape.cache.capacity(),
            shape.head_dim,
            plan.num_splits,
            row.sets,
            row.ms,
            row.gbps,
            row.gbps / roof_gbps,
            row.graph_ms,
            graph_gbps / roof_gbps
        );
        let speedup = match kind {
            RowKind::Plain => {
                plain_ms = row.ms;
                None
            }
            _ => {
                let x = plain_ms / row.ms;
                println!("|   ({name}: {x:.2}x faster than the plain call of the same cache) |");
                Some(x)
            }
        };
        rows.push(json!({
            "speedup_vs_plain": speedup,
            "workload": name, "batch": shape.batch, "seqlen_q": shape.seqlen_q, "heads": shape.heads,
            "kv_heads": shape.kv_heads, "seqlen_k": dense_shape.cache.capacity(), "head_dim": shape.head_dim,
            "dtype": dtype.name(), "cache": cache_text, "splits": plan.num_splits, "sets": row.sets,
            "ms": row.ms, "bytes": row.bytes, "gbps": row.gbps, "roof_gbps": roof_gbps,
            "roof_fraction": row.gbps / roof_gbps, "graph_ms": row.graph_ms,
            "graph_roof_fraction": graph_gbps / roof_gbps,
        }));
    }
    if !forward_jobs.is_empty() {
        forward_rows(&device, &forward_jobs, timing, rotate_bytes, &mut rows)?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&json!({
            "device": device.name(), "roof_gbps": roof, "rows": rows
        }))
        .map_err(|e| e.to_string())?;
        fragmask::masks::io::write_file_atomically(path, text.as_bytes())
            .map_err(|e| format!("--json: {e}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A masked decode call timed on the wgmma forward with split-KV: q `[B, H, Sq, D]`, K
/// and V `[B, Hkv, Sk, D]` (every request at capacity), the decode call's packed mask.
struct ForwardJob {
    name: String,
    shape: fragmask::host::attention::AttentionShape,
    mask: PackedMask,
    /// `None`: the forward's planner.
    splits: Vec<Option<u32>>,
}

impl ForwardJob {
    /// Checked before any GPU is looked for: the mask's tile is a forward geometry and
    /// it fits the call.
    fn new(
        name: String,
        shape: &DecodeShape,
        mask: PackedMask,
        splits: Vec<Option<u32>>,
    ) -> Result<Self, String> {
        use fragmask::host::attention::{blockmask, AttentionShape};
        let shape = AttentionShape {
            batch: shape.batch,
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            seqlen_q: shape.seqlen_q,
            seqlen_k: shape.cache.capacity(),
            head_dim: shape.head_dim,
        };
        shape.validate().map_err(|e| e.to_string())?;
        blockmask::mask_geometry(&mask).map_err(|e| e.to_string())?;
        blockmask::check_fits(&mask, &shape).map_err(|e| e.to_string())?;
        for n in splits.iter().flatten() {
            if !(1..=fragmask::kernels::attention::MAX_SPLITS).contains(n) {
                return Err(format!(
                    "--splits {n}: the forward takes 1..={}",
                    fragmask::kernels::attention::MAX_SPLITS
                ));
            }
        }
        Ok(ForwardJob {
            name,
            shape,
            mask,
            splits,
        })
    }
}

/// Times each forward job as the decode rows are timed (caches rotated out of L2).
fn forward_rows(
    device: &Device,
    jobs: &[ForwardJob],
    timing: TimingConfig,
    rotate_bytes: usize,
    rows: &mut Vec<serde_json::Value>,
) -> Result<(), String> {
    use fragmask::check::attention::split_bench::time_forward_rotated;
    use fragmask::host::attention::{AttentionOptions, AttentionRunner};
    let runner = AttentionRunner::new(device).map_err(|e| e.to_string())?;
    println!("| workload (wgmma forward, split-KV, [B, H, S, D]) | splits | sets | ms |");
    println!("|---|---|---|---|");
    for job in jobs {
        let opts: Vec<AttentionOptions> = job
            .splits
            .iter()
            .map(|&splits| AttentionOptions {
                splits,
                ..AttentionOptions::default()
            })
            .collect();
        let (timings, sets) =
            time_forward_rotated(&runner, &job.shape, &job.mask, &opts, timing, rotate_bytes)
                .map_err(|e| e.to_string())?;
        for (&splits, t) in job.splits.iter().zip(timings) {
            let (ms, planned) = (t.ms, t.splits);
            let label = match splits {
                Some(n) => n.to_string(),
                None => format!("{planned} (planner)"),
            };
            println!("| {} | {label} | {sets} | {ms:.4} |", job.name);
            rows.push(json!({
                "workload": job.name, "kernel": "attention forward, split-KV",
                "planner": splits.is_none(), "splits": planned, "sets": sets, "ms": ms,
            }));
        }
    }
    Ok(())
}
