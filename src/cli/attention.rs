//! `fragmask attention`: masked attention forward on an H100, from files or random
//! inputs, with a CUDA-event benchmark mode and the GPU correctness sweep.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use fragmask::check::attention::{self as attn_check, selftest};
use fragmask::check::numeric;
use fragmask::check::timing::TimingConfig;
use fragmask::host::attention::{
    choice, compile, documents, strides, AttentionOptions, AttentionRunner, AttentionShape, Mask,
    PackedMask, Window,
};
use fragmask::host::Device;
use fragmask::inputs::attention::{self as inputs, InputError, MaskInput, Qkv};
use fragmask::kernels::attention::{Geometry, MaskMode};
use fragmask::masks::io::{read_file_limited, write_npy_file, write_safetensors, DType};

#[path = "attention_backward.rs"]
pub mod backward;

use super::verify::NO_GPU_EXIT;

#[path = "attention_decode.rs"]
mod decode_shape;
use super::CmdResult;

/// The inputs and masks paragraph shared by both commands' help.
macro_rules! inputs_help {
    () => {
        "\
Inputs: --inputs FILE.safetensors holding q, k, v ([B,H,S,D], BF16/F16/F32), or --q/--k/--v \
(.npy float32/float16, or .safetensors with one tensor), or --random B,H,HKV,SQ,SK,D \
(or named: b=1,h=16,hkv=16,sq=4096,sk=4096,d=128; decode's --random orders its sizes B,SQ,H,HKV,SK,D).
Masks: --mask PACK.safetensors (FragmentNative, from `fragmask pack`: kv_num_blocks, kv_indices, \
full_kv_num_blocks, full_kv_indices, kv_tile_offsets, words), --dense-mask MASK.npy (bool \
[B|1,H|1,Sq,Sk], packed here as `fragmask pack` does), --synthetic-mask random:P | blocksparse:T:P | topk:F, --causal, \
--window LEFT,RIGHT (-1 = unbounded) with --diag-offset.
Every input is read and checked before a GPU is looked for. Limits: q, k, v and O together \
at most 64 GiB of bf16; input files at most 256 GiB; dense and synthetic masks at most 2^36 \
elements (docs/masks.md, \"Attention inputs\")."
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
    #[arg(long, conflicts_with_all = ["q", "k", "v", "random"])]
    inputs: Option<PathBuf>,
    /// Query tensor file.
    #[arg(long, requires_all = ["k", "v"], conflicts_with = "random")]
    q: Option<PathBuf>,
    /// Key tensor file.
    #[arg(long, requires_all = ["q", "v"], conflicts_with = "random")]
    k: Option<PathBuf>,
    /// Value tensor file.
    #[arg(long, requires_all = ["q", "k"], conflicts_with = "random")]
    v: Option<PathBuf>,
    /// Random bf16 inputs of sizes B,H,HKV,SQ,SK,D: batch, query heads, KV heads, query
    /// length, key length, head dim (the `[B, H, S, D]` order of q; `fragmask decode
    /// --random` orders its sizes B,SQ,H,HKV,SK,D). Or named, in any order:
    /// b=1,h=16,hkv=16,sq=4096,sk=4096,d=128.
    #[arg(long, value_name = "B,H,HKV,SQ,SK,D", allow_hyphen_values = true)]
    random: Option<String>,
    /// Seed of --random and synthetic masks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// FragmentNative block mask (safetensors from `fragmask pack`).
    #[arg(long, conflicts_with_all = ["dense_mask", "synthetic_mask", "causal", "window", "diag_offset"])]
    mask: Option<PathBuf>,
    /// Dense bool mask .npy [B|1, H|1, Sq, Sk], packed here as `fragmask pack` does.
    #[arg(long, conflicts_with_all = ["synthetic_mask", "causal", "window", "diag_offset"])]
    dense_mask: Option<PathBuf>,
    /// Synthetic block mask, packed here: random:P, blocksparse:T:P, topk:F.
    #[arg(long, conflicts_with_all = ["causal", "window", "diag_offset"])]
    synthetic_mask: Option<String>,
    /// Predicate mask, packed here (the grammar of `fragmask pack --predicate`, e.g.
    /// causal,doc=ids.npy with ids [S] or [B, S]). Causal or full within contiguous
    /// documents runs the documents grid.
    #[arg(long, conflicts_with_all = ["mask", "dense_mask", "synthetic_mask", "causal", "window", "diag_offset"])]
    predicate: Option<String>,
    /// Causal (top-left aligned, as torch SDPA is_causal).
    #[arg(long, conflicts_with = "window")]
    causal: bool,
    /// Sliding window LEFT,RIGHT around the diagonal (-1: unbounded).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    window: Option<Vec<i64>>,
    /// Diagonal offset of --causal/--window (Sk-Sq: bottom-right alignment).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    diag_offset: i32,
    /// Softmax scale (default 1/sqrt(D)).
    #[arg(long, allow_hyphen_values = true)]
    scale: Option<f32>,
    /// Warm-up launches before timing.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Then warm up until this many milliseconds have passed (0..=60000; 0: none), so the
    /// timed launches run at the clocks a sustained load settles at under the power cap.
    #[arg(long, default_value_t = 0)]
    warmup_ms: u32,
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
    /// Lazy rescale of the online softmax: a row keeps its running max while a step's max
    /// is at most 2^8 above it, and O is rescaled only when a row moved (true or false;
    /// default true).
    #[arg(long)]
    lazy_rescale: Option<bool>,
    /// Q held in registers as the RS A operand of S = Q K^T, so each k-step reads only K
    /// from shared memory (true or false; default: the kernel's choice). Refused where its
    /// registers do not fit.
    #[arg(long)]
    q_registers: Option<bool>,
    /// Tile geometry MxN: 128x128, 64x64 (64-token block sparsity), 128x64, 128x80,
    /// 192x128; 64x64/2x2 is the 64-token tile with two query blocks sharing K/V per CTA
    /// (tile lists only). Default: a --mask file's own tile, else the head dim's (192x128 at 64,
    /// 128x128 at 128, 128x80 at 256, or 128x128 at 256 for a --dense-mask or
    /// --synthetic-mask that visits fewer keys on it). --selftest without it sweeps every
    /// geometry.
    #[arg(long)]
    block: Option<String>,
    /// Split-KV: cut each row block's key steps into this many splits (1..=128), merged
    /// by a combine kernel. For calls with few row blocks and many keys (video block-sparse
    /// decode: 64 queries against 23296 keys).
    #[arg(long)]
    splits: Option<u32>,
    /// Persistent CTAs (one per SM slot, each walking a list of row blocks): on or off.
    /// Default: the runtime's choice (on where a CTA gets several row blocks and the
    /// second Q buffer fits; never with --splits above 1).
    #[arg(long, value_parser = parse_on_off)]
    persistent: Option<bool>,
    /// The most persistent CTAs (default: one per SM slot); fewer give each more row
    /// blocks (for checking the tile loop on small shapes).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    persistent_ctas: Option<u32>,
    /// Shared K/V on the 64-token tile (two 64-row query blocks per CTA walk the union of
    /// their key-block lists, each block loaded once): on or off. Default: the runtime's
    /// choice (on for a 64x64 tile-list call with one split where the pairs load fewer
    /// blocks). `--block 64x64/2x2` names the tile.
    #[arg(long, value_parser = parse_on_off)]
    shared_kv: Option<bool>,
    /// (head, batch) planes per section of the launch order: a section's row blocks run
    /// longest first with its planes side by side. Default: the runtime's choice (causal
    /// calls: the heads whose K/V fit in L2); 1 is the plain order (head after head).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) head_section: Option<u32>,
    /// The split tail: the launch's last work tiles cut into splits merged by the combine,
    /// so its last wave runs on more SMs (on or off). Default: the runtime's choice (head
    /// dim 64's tile, where its estimate ends the launch at least 3% earlier; one-tile grid)
    #[arg(long, value_parser = parse_on_off)]
    tail_split: Option<bool>,
    /// The split tail's TILES,SPLITS instead of the runtime's (the last TILES work tiles of
    /// the launch order, SPLITS splits each; for checks and A/B measurements)
    #[arg(long, value_parser = parse_tail)]
    tail: Option<fragmask::host::attention::splits::TailSplit>,
    /// Whether a mask's work tiles run largest first, the longest walks starting first (for
    /// A/B measurements): the forward's row blocks on the one-tile grid, the backward's key
    /// tiles. `on` (an error where they cannot: no mask; the forward's documents grid,
    /// shared-K/V tile, persistent CTAs or split tail; the backward's deterministic mode,
    /// documents grid or paired key blocks) or `off`. Default: on where they can.
    #[arg(long, value_parser = parse_on_off)]
    pub(crate) tile_order: Option<bool>,
    /// Where the kernels write their outputs (O; with --backward dQ, dK, dV): `bhsd`
    /// (contiguous [B, H, S, D], default) or `bshd` ([B, S, H, D] memory, FlashAttention's
    /// layout: the kernel variants that write through strides). --out files are [B, H, S, D]
    /// either way.
    #[arg(long, value_enum, default_value_t = OutLayout::Bhsd)]
    pub(crate) out_layout: OutLayout,
}

/// `--out-layout`: the memory order the outputs are written in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutLayout {
    /// Contiguous `[B, H, S, D]`.
    Bhsd,
    /// `[B, S, H, D]` memory (`strides::bshd_strides`).
    Bshd,
}

impl OutLayout {
    /// The output strides of a `[B, H, S, D]` tensor of `extents` in this layout (`None`:
    /// contiguous, `AttentionOptions::out_strides`' default).
    pub(crate) fn out_strides(self, extents: [usize; 4]) -> Option<[usize; 3]> {
        match self {
            OutLayout::Bhsd => None,
            OutLayout::Bshd => Some(strides::bshd_strides(extents)),
        }
    }

    /// An output of `extents` read back in this layout, in `[B, H, S, D]` order.
    pub(crate) fn gather(self, bits: Vec<u16>, extents: [usize; 4]) -> Result<Vec<u16>, String> {
        match self.out_strides(extents) {
            None => Ok(bits),
            Some(st) => strides::gather_contiguous(&bits, extents, st)
                .ok_or_else(|| format!("an output of {extents:?} read back shorter than its span")),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            OutLayout::Bhsd => "bhsd",
            OutLayout::Bshd => "bshd",
        }
    }
}

/// `--tail TILES,SPLITS` (ranges checked by `validate`, the call's work tiles at planning).
fn parse_tail(text: &str) -> Result<fragmask::host::attention::splits::TailSplit, String> {
    let (tiles, splits) = text
        .split_once(',')
        .ok_or_else(|| format!("expected TILES,SPLITS, got {text:?}"))?;
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|e| format!("--tail {text:?}: {e}"))
    };
    Ok(fragmask::host::attention::splits::TailSplit {
        tiles: num(tiles)?,
        splits: num(splits)?,
    })
}

/// `on` / `off` (also `true` / `false`).
pub(crate) fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("expected on or off, got '{text}'")),
    }
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
    /// With --selftest (forward or backward): only the cases whose name contains this text (e.g. "documents").
    #[arg(long)]
    cases: Option<String>,
    /// Print the generated CUDA source for --head-dim and the mask mode, then exit.
    #[arg(long)]
    emit_source: bool,
    /// Compile (no GPU needed) and print ptxas' report and the SASS summary (with how many of
    /// a softmax loop's exp2s and conversions come before each wgmma wait, how many
    /// instructions and selects run between a step's last conversion and the next step's
    /// first GEMM, every GEMM loop back-edge that waits on a scoreboard, every wait
    /// carried over a back-edge, and what each waits for), then exit; with --backward, the
    /// backward kernels.
    #[arg(long)]
    inspect: bool,
    /// Head dim for --emit-source / --inspect.
    #[arg(long, default_value_t = 128)]
    head_dim: u32,
    /// Run the backward (dQ, dK, dV) instead: the forward gives O and lse, dO is --d-o or
    /// random; --out writes dq, dk, dv (safetensors); --bench times the backward; with
    /// --selftest, the backward sweep.
    #[arg(long)]
    backward: bool,
    #[command(flatten)]
    backward_flags: backward::BackwardFlags,
}

/// The forward's inputs, masks and kernel configuration (every run mode reads them).
macro_rules! forward_ids {
    ($($extra:literal),*) => {
        &["inputs", "q", "k", "v", "random", "seed", "mask", "dense_mask", "synthetic_mask", "predicate",
          "causal", "window", "diag_offset", "scale", "json", "stages", "no_overlap", "pingpong",
          "lookahead", "lazy_rescale", "q_registers", "block", "splits", "persistent",
          "persistent_ctas", "shared_kv", "head_section", "tail_split", "tail", "tile_order", "out_layout",
          $($extra),*]
    };
}

/// The mode of a `fragmask attention` command line and the flags it reads.
pub fn mode(args: &AttentionArgs) -> super::Mode {
    use super::Mode;
    let kernel_only: &'static [&'static str] = &[
        "emit_source",
        "inspect",
        "head_dim",
        "block",
        "stages",
        "no_overlap",
        "pingpong",
        "lookahead",
        "lazy_rescale",
        "q_registers",
        "mask",
        "synthetic_mask",
        "persistent",
    ];
    match (args.emit_source || args.inspect, args.selftest, args.backward, args.bench) {
        (true, false, true, false) => Mode {
            name: if args.emit_source {
                "--emit-source --backward (it shows the backward kernels of --head-dim, --block \
                 and a mask kind)"
            } else {
                "--inspect --backward (it compiles the backward kernels of --head-dim, --block \
                 and a mask kind)"
            },
            uses: Some(&[
                "emit_source",
                "inspect",
                "backward",
                "head_dim",
                "block",
                "synthetic_mask",
                "deterministic",
                "dq_reduce",
                "dq_writer",
                "bwd_stages",
                "bwd_step",
                "group_slices",
            ]),
        },
        (true, ..) => Mode {
            name: if args.emit_source {
                "--emit-source (it shows the forward kernel of --head-dim, --block and a mask kind)"
            } else {
                "--inspect (it compiles the forward kernel of --head-dim, --block and a mask kind)"
            },
            uses: Some(kernel_only),
        },
        (false, true, false, _) => Mode {
            name: "--selftest",
            uses: Some(&[
                "selftest",
                "cases",
                "block",
                "no_overlap",
                "pingpong",
                "lookahead",
                "lazy_rescale",
                "q_registers",
                "seed",
            ]),
        },
        (false, true, true, _) => Mode {
            name: "--selftest --backward",
            uses: Some(&["selftest", "backward", "cases", "seed"]),
        },
        (false, false, true, true) => Mode {
            name: "--backward --bench",
            uses: Some(forward_ids!(
                "warmup", "warmup_ms", "iters", "out", "bench", "backward", "deterministic", "d_o",
                "dq_reduce", "dq_writer", "bwd_stages", "bwd_step", "group_slices", "paired_keys",
                "deterministic_walks"
            )),
        },
        (false, false, true, false) => Mode {
            name: "--backward (--warmup, --warmup-ms and --iters need --bench)",
            uses: Some(forward_ids!(
                "out", "backward", "deterministic", "d_o", "dq_reduce", "dq_writer", "bwd_stages",
                "bwd_step", "group_slices", "paired_keys", "deterministic_walks"
            )),
        },
        (false, false, false, true) => Mode {
            name: "--bench (the gradient flags need --backward)",
            uses: Some(forward_ids!("warmup", "warmup_ms", "iters", "out", "lse_out", "bench")),
        },
        (false, false, false, false) => Mode {
            name: "a forward run (the gradient flags need --backward, --warmup, --warmup-ms and --iters need --bench)",
            uses: Some(forward_ids!("out", "lse_out")),
        },
    }
}

/// The kernel-configuration flags given, as `--stages 9 --pingpong true: `, to name
/// them in a configuration error (empty when none was given: the error is then about
/// the inputs' head size, which it names).
fn config_flags(args: &ForwardArgs) -> String {
    let mut given = Vec::new();
    if let Some(s) = args.stages {
        given.push(format!("--stages {s}"));
    }
    if args.no_overlap {
        given.push("--no-overlap".to_string());
    }
    if let Some(p) = args.pingpong {
        given.push(format!("--pingpong {p}"));
    }
    if let Some(l) = args.lookahead {
        given.push(format!("--lookahead {l}"));
    }
    if let Some(l) = args.lazy_rescale {
        given.push(format!("--lazy-rescale {l}"));
    }
    if let Some(q) = args.q_registers {
        given.push(format!("--q-registers {q}"));
    }
    if let Some(b) = &args.block {
        given.push(format!("--block {b}"));
    }
    if given.is_empty() {
        String::new()
    } else {
        format!("{}: ", given.join(" "))
    }
}

/// `--block`, parsed (validated in [`validate`], so a later parse cannot fail).
fn geometry_flag(args: &ForwardArgs) -> Result<Option<Geometry>, String> {
    args.block
        .as_deref()
        .map(|b| Geometry::parse(b).map_err(|e| format!("--block {b}: {e}")))
        .transpose()
}

fn opts(args: &ForwardArgs) -> AttentionOptions {
    AttentionOptions {
        scale: args.scale,
        stages: args.stages,
        overlap: if args.no_overlap { Some(false) } else { None },
        pingpong: args.pingpong,
        lookahead: args.lookahead,
        geometry: geometry_flag(args).ok().flatten(),
        dtype: None,
        splits: args.splits,
        persistent: args.persistent,
        persistent_ctas: args.persistent_ctas,
        lazy_rescale: args.lazy_rescale,
        out_strides: None,
        q_registers: args.q_registers,
        shared_kv: args.shared_kv,
        head_section: args.head_section,
        tail_split: args.tail_split,
        tail: args.tail,
        // The CLI's masks are packed or loaded on the host: their lists are there.
        mask_on_device_only: false,
        tile_order: args.tile_order,
    }
}

fn mode_of(args: &ForwardArgs) -> MaskMode {
    if args.mask.is_some()
        || args.dense_mask.is_some()
        || args.synthetic_mask.is_some()
        || args.predicate.is_some()
    {
        MaskMode::Blocks
    } else {
        MaskMode::Window
    }
}

/// The SASS summary of a compiled kernel's main function: instruction counts, where each
/// softmax loop's wgmma waits fall among its exp2s and conversions (docs/architecture.md,
/// "The PV wait's pin"), then every GEMM loop back-edge that waits on a scoreboard and every
/// wait carried over a back-edge (each step pays for the awaited instruction's latency;
/// docs/backward.md, "The stage release").
fn print_sass_summary(s: &fragmask::check::sass::KernelSass) {
    let classes = s.classes();
    println!(
        "SASS: {} instructions, {} HGMMA, {} UTMALDG, {} local-memory ops",
        classes.total,
        classes.hgmma,
        s.count("UTMALDG"),
        classes.ldl + classes.stl
    );
    let back_edge = s.gemm_back_edge_waits();
    let carried = s.gemm_loop_carried_waits();
    println!(
        "GEMM loops {}, back-edge waits {}, waits carried over a back-edge {}",
        s.gemm_loops().len(),
        back_edge.len(),
        carried.len()
    );
    for w in s.gemm_wait_placements() {
        println!(
            "  wgmma wait {:#06x} ({}): after {} of {} exp2s, {} of {} conversions",
            w.offset, w.operands, w.exp2_before, w.exp2_total, w.convert_before, w.convert_total
        );
    }
    for l in s.gemm_issue_leads() {
        println!(
            "  first GEMM issue {:#06x}: {} instructions after the last conversion {:#06x} ({} selects)",
            l.issue, l.instructions, l.convert, l.selects
        );
    }
    for (what, waits) in [("back-edge", back_edge), ("carried", carried)] {
        for w in waits {
            println!(
                "  {what} {:#06x} {} waits for the {} of {:#06x} {}",
                w.waiter,
                w.waiter_opcode,
                if w.on_read { "operand read" } else { "result" },
                w.setter,
                w.setter_opcode
            );
        }
    }
}

/// ptxas' lines of a compile log.
fn print_ptxas_lines(log: &str) {
    for line in log
        .lines()
        .filter(|l| l.contains("ptxas") || l.contains("warning"))
    {
        println!("  {line}");
    }
}

/// `--emit-source --backward` / `--inspect --backward`: the backward configuration a call of
/// --head-dim and the mask kind (--synthetic-mask: a mask of the --block tile, or of the
/// forward's default tile) runs with the backward flags, its source or its compile report.
fn inspect_backward(args: &AttentionArgs) -> CmdResult {
    use fragmask::check::sass;
    use fragmask::host::attention::backward::compile_backward;
    use fragmask::kernels::attention::backward::{BackwardMask, KERNEL_NAME};
    let fwd = &args.forward;
    let mode = match &fwd.synthetic_mask {
        Some(spec) => {
            inputs::parse_synthetic(spec).map_err(|e| e.to_string())?;
            let g = match geometry_flag(fwd)? {
                Some(g) => g,
                None => choice::call_geometry(args.head_dim as usize, None, &opts(fwd))
                    .map_err(|e| e.to_string())?,
            };
            BackwardMask::Blocks {
                block_m: g.block_m(),
                block_n: g.block_n(),
            }
        }
        None if fwd.block.is_some() => {
            return Err("--block sets the backward's mask tile: give a mask kind \
                        (--synthetic-mask) with it; the window walk's tile is fixed"
                .into())
        }
        None => BackwardMask::Window,
    };
    let flags = &args.backward_flags;
    let bwd_opts = backward::backward_opts(fwd, flags);
    let k = choice::backward_config(args.head_dim, mode, &bwd_opts).map_err(|e| {
        let named = [
            flags.bwd_stages.map(|n| format!(" --bwd-stages {n}")),
            flags.bwd_step.map(|n| format!(" --bwd-step {n}")),
            flags.group_slices.map(|n| format!(" --group-slices {n}")),
        ];
        format!(
            "--head-dim {}{}: {e}",
            args.head_dim,
            named.into_iter().flatten().collect::<String>()
        )
    })?;
    if args.emit_source {
        print!("{}", k.source().map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    let c = compile_backward(&k).map_err(|e| e.to_string())?;
    println!("{}", k.label());
    println!(
        "registers {} (entry cap), spill bytes {}",
        c.registers, c.spill_bytes
    );
    match sass::inspect_bytes(&c.cubin) {
        Ok(report) => match report.kernel(KERNEL_NAME) {
            Some(s) => print_sass_summary(s),
            None => println!("SASS: no function {KERNEL_NAME}"),
        },
        Err(e) => println!("SASS: not inspected ({e})"),
    }
    print_ptxas_lines(&c.log);
    Ok(ExitCode::SUCCESS)
}

/// Runs `fragmask attention`.
pub fn run(args: AttentionArgs) -> CmdResult {
    if (args.emit_source || args.inspect) && args.backward {
        return inspect_backward(&args);
    }
    if args.emit_source || args.inspect {
        let fwd = &args.forward;
        if let Some(spec) = &fwd.synthetic_mask {
            inputs::parse_synthetic(spec).map_err(|e| e.to_string())?;
        }
        // A --mask file is read and checked; its tile is the kernel's (as for a run).
        let mask = match &fwd.mask {
            Some(path) => {
                let bytes = read_input(path, "--mask")?;
                let m = PackedMask::from_safetensors(&bytes)
                    .map_err(|e| format!("--mask {}: {e}", path.display()))?;
                let g = choice::call_geometry(args.head_dim as usize, Some(&m), &opts(fwd))
                    .map_err(|e| format!("--mask {}: {e}", path.display()))?;
                Some(g)
            }
            None => None,
        };
        let geometry = match mask {
            Some(g) => g,
            None => {
                geometry_flag(fwd)?;
                choice::call_geometry(args.head_dim as usize, None, &opts(fwd))
                    .map_err(|e| e.to_string())?
            }
        };
        let k = choice::kernel_config(args.head_dim as usize, mode_of(fwd), geometry, &opts(fwd))
            .map_err(|e| format!("--head-dim {}: {}{e}", args.head_dim, config_flags(fwd)))?;
        // --persistent on shows the persistent form (the runtime picks it per call).
        let k = k
            .with_persistent(fwd.persistent == Some(true))
            .map_err(|e| format!("--persistent on: {e}"))?;
        if args.emit_source {
            print!("{}", k.source().map_err(|e| e.to_string())?);
            return Ok(ExitCode::SUCCESS);
        }
        let c = compile::compile_kernel(&k).map_err(|e| e.to_string())?;
        println!("{k:?}");
        println!(
            "registers {} (entry cap; consumers setmaxnreg {}), spill bytes {}, stack bytes {}",
            c.registers,
            k.geometry().consumer_regs(),
            c.spill_bytes,
            c.stack_bytes
        );
        match attn_check::kernel_sass(&c) {
            Ok(s) => print_sass_summary(&s),
            Err(e) => println!("SASS: not inspected ({e})"),
        }
        print_ptxas_lines(&c.log);
        return Ok(ExitCode::SUCCESS);
    }

    // Every input is parsed and checked before looking for a GPU (the selftest has none).
    let validated = if args.selftest {
        None
    } else {
        Some(validate(&args.forward)?)
    };
    if !args.backward
        && (args.backward_flags.deterministic
            || args.backward_flags.d_o.is_some()
            || args.backward_flags.dq_reduce.is_some()
            || args.backward_flags.dq_writer.is_some()
            || args.backward_flags.bwd_stages.is_some()
            || args.backward_flags.bwd_step.is_some()
            || args.backward_flags.group_slices.is_some()
            || args.backward_flags.paired_keys.is_some()
            || args.backward_flags.deterministic_walks.is_some())
    {
        return Err(
            "--deterministic, --d-o, --dq-reduce, --dq-writer, --bwd-stages, --bwd-step, \
             --group-slices, --paired-keys and --deterministic-walks need --backward"
                .into(),
        );
    }
    if args.backward && args.lse_out.is_some() {
        return Err("--lse-out: the backward writes dq, dk, dv to --out only".into());
    }
    // The backward's own checks (its configuration, a mask's transposed lists, dO).
    let backward_d_o = match (&validated, args.backward) {
        (Some(v), true) => {
            backward::validate(&args.forward, &args.backward_flags, v)?;
            Some(match backward::read_d_o(&args.backward_flags, v)? {
                Some(d) => Some(d),
                None => backward::d_o_from_inputs(&args.forward, v)?,
            })
        }
        _ => None,
    };
    // Outputs: never a device node or directory, never one of the inputs.
    let fwd = &args.forward;
    let inputs: Vec<&PathBuf> = [
        &fwd.inputs,
        &fwd.q,
        &fwd.k,
        &fwd.v,
        &fwd.mask,
        &fwd.dense_mask,
        &args.backward_flags.d_o,
    ]
    .into_iter()
    .flatten()
    .collect();
    for (flag, out) in [("--out", &args.out), ("--lse-out", &args.lse_out)] {
        if let Some(path) = out {
            fragmask::masks::io::check_output(path, &inputs).map_err(|e| format!("{flag}: {e}"))?;
        }
    }
    let device = match Device::first() {
        Ok(d) => d,
        Err(e) if e.is_no_gpu() => {
            eprintln!(
                "no GPU: {e}; the inputs are valid, but the attention kernel needs an SM90 GPU: nothing ran."
            );
            return Ok(ExitCode::from(NO_GPU_EXIT));
        }
        Err(e) => return Err(format!("GPU discovery failed: {e}")),
    };
    let Some(validated) = validated else {
        let runner = AttentionRunner::new(&device).map_err(|e| e.to_string())?;
        if args.backward {
            return backward::run_selftest(
                &runner,
                args.forward.seed,
                args.cases.as_deref(),
                device.name(),
            );
        }
        return run_selftest(&runner, &args.forward, args.cases.as_deref(), device.name());
    };
    if let Some(d_o) = backward_d_o {
        return backward::backward(
            &device,
            &args.forward,
            &args.backward_flags,
            validated,
            d_o,
            args.bench,
            args.out.as_deref(),
        );
    }
    forward(
        &device,
        &args.forward,
        validated,
        args.bench,
        args.out.as_deref(),
        args.lse_out.as_deref(),
    )
}

/// Where q, k and v come from, validated.
pub(crate) enum Source {
    /// `--random`: the shape is checked; the tensors are generated once a GPU is found.
    Random(AttentionShape, u64),
    /// Files, read, checked and converted to bf16.
    Files(Qkv),
}

/// Everything one forward needs, parsed and validated without a GPU.
pub struct Validated {
    source: Source,
    pub(crate) shape: AttentionShape,
    pub(crate) mask: Option<MaskInput>,
    window: Window,
}

/// Most `--warmup` / `--iters` launches.
const MAX_LAUNCHES: usize = 1_000_000;

/// Longest `--warmup-ms`.
const MAX_WARMUP_MS: u32 = 60_000;

/// The timing of `--bench`: `--warmup` launches, more for `--warmup-ms`, then `--iters`.
pub(crate) fn bench_timing(args: &ForwardArgs) -> TimingConfig {
    TimingConfig {
        warmup: args.warmup,
        warmup_ms: args.warmup_ms,
        runs: args.iters,
    }
}

/// Reads an input file (bounded by [`inputs::MAX_FILE_BYTES`]); errors name the flag.
fn read_input(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    read_file_limited(path, inputs::MAX_FILE_BYTES).map_err(|e| format!("{flag}: {e}"))
}

fn named(path: &Path, flag: &str) -> String {
    format!("{} ({flag})", path.display())
}

/// `Err("{what} {conflicts}")` when any flag conflicts.
fn refuse_conflicts(what: &str, conflicts: &[&str]) -> Result<(), String> {
    match conflicts.is_empty() {
        true => Ok(()),
        false => Err(format!("{what} {}", conflicts.join(", "))),
    }
}

/// Parses and validates every input of a forward (files, shapes, masks, flags and the
/// kernel configuration), without looking for a GPU; the caller looks for one after.
pub fn validate(args: &ForwardArgs) -> Result<Validated, String> {
    let e = |x: InputError| x.to_string();
    geometry_flag(args)?;
    if let Some(n) = args.splits {
        if !(1..=fragmask_kernels::attention::MAX_SPLITS).contains(&n) {
            return Err(format!(
                "--splits {n}: expected 1..={}",
                fragmask_kernels::attention::MAX_SPLITS
            ));
        }
    }
    // The split tail: its own ranges here, the call's work tiles at planning.
    if let Some(t) = args.tail {
        let max = fragmask_kernels::attention::MAX_SPLITS;
        if t.tiles == 0 || !(2..=max).contains(&t.splits) {
            return Err(format!(
                "--tail {},{}: expected TILES at least 1 and SPLITS 2..={max}",
                t.tiles, t.splits
            ));
        }
        if args.tail_split == Some(false) {
            return Err("--tail names a split tail, --tail-split off turns it off".into());
        }
    }
    // What the runtime would refuse at planning (choice::forward_tail), refused here first.
    if opts(args).tail_asked() {
        let conflicts: Vec<&str> = [
            (args.splits.is_some_and(|n| n > 1), "--splits above 1"),
            (args.persistent == Some(true), "--persistent on"),
            (
                args.head_section.is_some_and(|n| n > 1),
                "--head-section above 1",
            ),
            (args.shared_kv == Some(true), "--shared-kv on"),
        ]
        .into_iter()
        .filter_map(|(conflict, flag)| conflict.then_some(flag))
        .collect();
        refuse_conflicts(
            "--tail and --tail-split on run on the one-tile grid: not with",
            &conflicts,
        )?;
    }
    if let Some(s) = args.scale {
        // As decode: the scale multiplies QK^T before the softmax; 0 or a negative scale
        // is not attention.
        if !s.is_finite() || s <= 0.0 {
            return Err(format!("--scale {s}: expected a finite number above 0"));
        }
    }
    for (flag, n) in [("--warmup", args.warmup), ("--iters", args.iters)] {
        if n > MAX_LAUNCHES {
            return Err(format!("{flag} {n}: expected at most {MAX_LAUNCHES}"));
        }
    }
    if args.warmup_ms > MAX_WARMUP_MS {
        return Err(format!(
            "--warmup-ms {}: expected at most {MAX_WARMUP_MS}",
            args.warmup_ms
        ));
    }
    let window = match &args.window {
        Some(w) => inputs::parse_window(w, args.diag_offset).map_err(e)?,
        None if args.causal => Window {
            diag_offset: args.diag_offset,
            ..Window::causal()
        },
        None => Window::NONE,
    };
    let synthetic = match &args.synthetic_mask {
        Some(spec) => Some(inputs::parse_synthetic(spec).map_err(e)?),
        None => None,
    };

    // ---- inputs ----
    let source = if let Some(r) = &args.random {
        let sizes: Vec<usize> = super::parse_sizes(r, &["B", "H", "HKV", "SQ", "SK", "D"], 0)?
            .into_iter()
            .flatten()
            .collect();
        Source::Random(inputs::random_shape(&sizes).map_err(e)?, args.seed)
    } else if let Some(path) = &args.inputs {
        let bytes = read_input(path, "--inputs")?;
        Source::Files(inputs::qkv_from_safetensors(&bytes, &named(path, "--inputs")).map_err(e)?)
    } else {
        match (&args.q, &args.k, &args.v) {
            (Some(q), Some(k), Some(v)) => {
                let (qb, kb, vb) = (
                    read_input(q, "--q")?,
                    read_input(k, "--k")?,
                    read_input(v, "--v")?,
                );
                let what = [named(q, "--q"), named(k, "--k"), named(v, "--v")];
                let qv = inputs::tensor_from_bytes(&qb, "q", &what[0]).map_err(e)?;
                let kv = inputs::tensor_from_bytes(&kb, "k", &what[1]).map_err(e)?;
                let vv = inputs::tensor_from_bytes(&vb, "v", &what[2]).map_err(e)?;
                Source::Files(
                    inputs::qkv_from_views(&qv, &kv, &vv, [&what[0], &what[1], &what[2]])
                        .map_err(e)?,
                )
            }
            _ => return Err(
                "no inputs: give --inputs FILE, or --q/--k/--v FILE, or --random B,H,HKV,SQ,SK,D"
                    .into(),
            ),
        }
    };
    let shape = match &source {
        Source::Random(s, _) => *s,
        Source::Files(qkv) => qkv.shape,
    };

    // ---- mask ----
    let mask = if let Some(path) = &args.mask {
        let bytes = read_input(path, "--mask")?;
        Some(inputs::packed_mask(&bytes, &shape, &named(path, "--mask")).map_err(e)?)
    } else if let Some(path) = &args.dense_mask {
        let bytes = read_input(path, "--dense-mask")?;
        Some(inputs::dense_mask(&bytes, &shape, &named(path, "--dense-mask")).map_err(e)?)
    } else if let Some(spec) = synthetic {
        Some(inputs::synthetic_mask(spec, args.seed, &shape).map_err(e)?)
    } else if let Some(text) = &args.predicate {
        let mut read_ids = |name: &str| read_file_limited(Path::new(name), inputs::MAX_FILE_BYTES);
        Some(inputs::predicate_mask(text, &shape, &mut read_ids).map_err(e)?)
    } else {
        None
    };

    if args.tile_order == Some(true) {
        if mask.is_none() {
            return Err(
                "--tile-order on: the largest-first order runs a mask's tiles (--mask, \
                 --dense-mask, --synthetic-mask or --predicate), not the window walk"
                    .into(),
            );
        }
        let conflicts: Vec<&str> = [
            (args.persistent == Some(true), "--persistent on"),
            (
                args.tail.is_some() || args.tail_split == Some(true),
                "the split tail",
            ),
            (args.shared_kv == Some(true), "--shared-kv on"),
        ]
        .into_iter()
        .filter_map(|(conflict, flag)| conflict.then_some(flag))
        .collect();
        refuse_conflicts(
            "--tile-order on: the forward's row order runs on the one-tile grid, not with",
            &conflicts,
        )?;
    }
    // ---- kernel configuration (compiles nothing) ----
    let packed = match &mask {
        Some(MaskInput::Packed(m)) => Some(m.as_ref()),
        _ => None,
    };
    choice::call_kernel(shape.head_dim, mode_of(args), packed, &opts(args))
        .map_err(|x| format!("{}{x}", config_flags(args)))?;
    Ok(Validated {
        source,
        shape,
        mask,
        window,
    })
}

/// One attention forward on `device` with inputs from [`validate`]: packs the mask,
/// runs the kernel once, times it with CUDA events when `timed` (median over `--iters`
/// after `--warmup`), writes O / lse when asked and prints the report (text or `--json`).
/// The one code path behind `fragmask attention [--bench]` and `fragmask bench attention`.
pub fn forward(
    device: &Device,
    args: &ForwardArgs,
    inputs: Validated,
    timed: bool,
    out_path: Option<&Path>,
    lse_path: Option<&Path>,
) -> CmdResult {
    if decode_shape::serves(
        args,
        &inputs,
        timed,
        out_path.is_some() || lse_path.is_some(),
    ) {
        return decode_shape::bench_decode(device, args, &inputs.shape);
    }
    let runner = AttentionRunner::new(device).map_err(|e| e.to_string())?;
    let shape = inputs.shape;

    // ---- inputs ----
    let qkv = match inputs.source {
        Source::Files(qkv) => qkv,
        Source::Random(s, seed) => inputs::random_qkv(s, seed).map_err(|e| e.to_string())?,
    };
    let q = runner
        .upload_bf16(&qkv.q, shape.q_shape())
        .map_err(|e| e.to_string())?;
    let k = runner
        .upload_bf16(&qkv.k, shape.kv_shape())
        .map_err(|e| e.to_string())?;
    let v = runner
        .upload_bf16(&qkv.v, shape.kv_shape())
        .map_err(|e| e.to_string())?;
    drop(qkv);

    // ---- mask ----
    // The geometry: a packed mask's tile, else the tile the mask is packed at (both
    // chosen by the runtime's `choice`, and timed with the pack), else the head dim's
    // default.
    let pack_start = Instant::now();
    let geometry = match &inputs.mask {
        Some(m) => m.geometry(&shape, &opts(args)),
        None => choice::call_geometry(shape.head_dim, None, &opts(args)),
    }
    .map_err(|e| e.to_string())?;
    let block_mask = match inputs.mask {
        Some(m) => Some(m.build(&shape, &geometry).map_err(|e| e.to_string())?),
        None => None,
    };
    let pack_ms = pack_start.elapsed().as_secs_f64() * 1e3;
    let device_mask = match &block_mask {
        Some(m) => Some(runner.upload_block_mask(m).map_err(|e| e.to_string())?),
        None => None,
    };
    let window = inputs.window;
    let mask = match &device_mask {
        Some(m) => Mask::Blocks(m),
        None => Mask::Window(window),
    };
    let (visited, partial) = match &block_mask {
        Some(m) => block_tiles(m, &shape),
        None => inputs::window_tiles(&window, &shape, &geometry),
    };

    // ---- run ----
    let o = AttentionOptions {
        out_strides: args.out_layout.out_strides(shape.q_shape()),
        ..opts(args)
    };
    let mut out = runner.alloc_output(&shape).map_err(|e| e.to_string())?;
    let launch = runner
        .prepare(&q, &k, &v, &mask, &o, &mut out)
        .map_err(|e| e.to_string())?;
    let kernel = launch.kernel;
    // The documents grid visits each document's own tiles, not the mask's lists.
    let (visited, partial) = match (kernel.mask(), &block_mask) {
        (MaskMode::Documents, Some(m)) => m.documents().map_or((visited, partial), |docs| {
            let (v, p) = documents::tiles(&documents::work_items(docs, &kernel.geometry()));
            let planes = (shape.batch * shape.heads) as u64;
            (v * planes, p * planes)
        }),
        _ => (visited, partial),
    };
    launch.launch().map_err(|e| e.to_string())?;
    runner
        .stream()
        .synchronize()
        .map_err(|e| format!("attention kernel failed: {e}"))?;
    // --iters 0: nothing timed (time_launches needs one run).
    let mut timing = None;
    if timed && args.iters > 0 {
        timing = Some(
            attn_check::time_launches(&launch, bench_timing(args)).map_err(|e| e.to_string())?,
        );
    }
    drop(launch);

    // ---- outputs ----
    if out_path.is_some() || lse_path.is_some() {
        let o_bits = runner
            .stream()
            .clone_dtoh(&out.o.data)
            .map_err(|e| e.to_string())?;
        let o_bits = args.out_layout.gather(o_bits, shape.q_shape())?;
        let lse = runner
            .stream()
            .clone_dtoh(&out.lse)
            .map_err(|e| e.to_string())?;
        let lse_shape = [shape.batch, shape.heads, shape.seqlen_q];
        let lse_bytes = numeric::f32_le_bytes(&lse);
        if let Some(path) = out_path {
            let written = if is_safetensors(path) {
                write_safetensors(
                    path,
                    &[
                        (
                            "o",
                            DType::BF16,
                            &shape.q_shape(),
                            &numeric::u16_le_bytes(&o_bits),
                        ),
                        ("lse", DType::F32, &lse_shape, &lse_bytes),
                    ],
                )
            } else {
                let o_f32 = numeric::bf16_to_f32_le_bytes(&o_bits);
                write_npy_file(path, DType::F32, &shape.q_shape(), &o_f32)
            };
            written.map_err(|e| format!("--out: {e}"))?;
        }
        if let Some(path) = lse_path {
            write_npy_file(path, DType::F32, &lse_shape, &lse_bytes)
                .map_err(|e| format!("--lse-out: {e}"))?;
        }
    }

    let g = kernel.geometry();
    // A visited tile is one of the mask's (64 x 64 for each query block of the shared-K/V tile).
    let tile_flops =
        4.0 * f64::from(g.mask_geometry().block_m() * g.block_n()) * shape.head_dim as f64;
    let (median, min, iters) = timing.as_ref().map_or((f64::NAN, f64::NAN, 0), |t| {
        (t.median_ms, t.min_ms, t.samples_ms.len())
    });
    let dense_tf = shape.dense_flops() / (median * 1e-3) / 1e12;
    let kept_tf = visited as f64 * tile_flops / (median * 1e-3) / 1e12;
    let mask_bytes = block_mask.as_ref().map_or(0, |m| {
        let b = m.bytes();
        b.lists + b.words
    });
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "device": device.name(),
                "shape": [shape.batch, shape.heads, shape.kv_heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim],
                "kernel": format!("{kernel:?}"),
                "geometry": g.name(),
                "grid": grid_name(kernel.mask()),
                "iters": iters,
                "ms_median": timing.as_ref().map(|_| median),
                "ms_min": timing.as_ref().map(|_| min),
                "tflops_dense_equiv": timing.as_ref().map(|_| dense_tf),
                "tflops_kept_tiles": timing.as_ref().map(|_| kept_tf),
                "visited_tiles": visited,
                "partial_tiles": partial,
                "mask_bytes": mask_bytes,
                "mask_pack_ms_cpu": if block_mask.is_some() { Some(pack_ms) } else { None },
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
        println!("kernel: {kernel:?}");
        println!("grid: {}", grid_name(kernel.mask()));
        println!("out layout: {}", args.out_layout.name());
        println!("tiles visited {visited} (partial {partial}), mask bytes {mask_bytes}");
        if timing.is_some() {
            println!(
                "median {median:.4} ms (min {min:.4}, {iters} iters): {dense_tf:.1} TFLOP/s dense-equivalent, {kept_tf:.1} on visited tiles"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The forward's grid, as `--json` reports it: `documents` (one CTA per document and
/// row block), `tiles` (the mask's tile lists) or `window` (bounds computed in the kernel).
fn grid_name(mode: MaskMode) -> &'static str {
    match mode {
        MaskMode::Documents => "documents",
        MaskMode::Blocks => "tiles",
        MaskMode::Window => "window",
    }
}

fn is_safetensors(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "safetensors")
}

/// (visited tiles, partial tiles) over the whole call for a (validated) block mask.
fn block_tiles(m: &PackedMask, s: &AttentionShape) -> (u64, u64) {
    let ms = m.shape();
    let repeat = ((s.batch / ms.batch) * (s.heads / ms.heads)) as u64;
    let partial: u64 = m
        .lists()
        .num_blocks()
        .iter()
        .map(|&x| x.max(0) as u64)
        .sum();
    let full = m.lists().full_tiles();
    ((partial + full) * repeat, partial * repeat)
}

fn run_selftest(
    runner: &AttentionRunner,
    args: &ForwardArgs,
    only: Option<&str>,
    device: &str,
) -> CmdResult {
    println!(
        "attention selftest on {device}: GPU vs CPU f64 reference (tolerance {})",
        selftest::O_TOLERANCE
    );
    let mut failures = 0;
    let geometries = match geometry_flag(args)? {
        Some(g) => vec![g],
        None => Geometry::SUPPORTED
            .into_iter()
            .chain(Geometry::SHARED)
            .collect(),
    };
    let cases: Vec<selftest::Case> = geometries
        .into_iter()
        .flat_map(selftest::cases_for)
        .filter(|case| only.is_none_or(|text| case.name.contains(text)))
        .collect();
    if cases.is_empty() {
        return Err(format!(
            "--cases {}: no selftest case matches",
            only.unwrap_or_default()
        ));
    }
    for (i, case) in cases.iter().enumerate() {
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
        if args.lazy_rescale.is_some() {
            case.opts.lazy_rescale = args.lazy_rescale;
        }
        if args.q_registers.is_some() {
            case.opts.q_registers = args.q_registers;
        }
        match selftest::run_case(runner, &case, args.seed.wrapping_add(i as u64)) {
            Ok(r) => {
                if !r.passed {
                    failures += 1;
                }
                println!(
                    "{} {:<62} rel_err {:.2e}  lse_err {:.2e}  bad {}  empty-row errors {}  partial tiles {}",
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
                println!("FAIL {:<62} error: {e}", case.name);
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
