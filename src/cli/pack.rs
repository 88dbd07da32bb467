//! `fragmask pack`: any attention mask → tile lists + FragmentNative (or QuadLane /
//! RowMajor) words in a safetensors file (docs/masks.md); with `--transposed`, also the
//! backward pass's transposed lists and words (and `--packed FILE` adds them to a file
//! packed without them).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::{ArgGroup, Args};
use fragmask::masks::io::{
    check_output, read_array, read_file, read_packed_file, ArrayView, SafetensorsFile,
};
use fragmask::masks::{
    pack, parse_predicate, BlockSparseMask, BlockSparseOptions, DenseMask, DocumentIds, Encoding,
    MaskError, MaskShape, MaskSource, PackOptions, PackProgress, PackedMask, PredicateMask,
    TiledAccumulator, TopKMask, TransposedLists, MAX_SEQLEN, MAX_THREADS,
};

use super::CmdResult;

/// Options of `fragmask pack`.
#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["mask", "topk", "blocks", "predicate", "packed"])))]
#[command(after_help = AFTER_HELP)]
pub struct PackArgs {
    /// Dense mask, .npy (bool or uint8; nonzero = keep) or safetensors:
    /// [Sq, Sk], [H, Sq, Sk] or [B, H, Sq, Sk].
    #[arg(long, value_name = "FILE")]
    pub mask: Option<PathBuf>,
    /// Top-k key indices per query: fixed-k [.., Sq, k] in any order with -1 as padding,
    /// or, with --topk-offsets, CSR indices (each row sorted strictly ascending). Needs
    /// --seqlen-k.
    #[arg(long, value_name = "FILE", requires = "seqlen_k")]
    pub topk: Option<PathBuf>,
    /// CSR row offsets for --topk: B*H*Sq + 1 entries, rows in (batch, head, query)
    /// order. B and H come from --batch / --heads (default 1 and rows / Sq).
    #[arg(long, value_name = "FILE", requires = "topk", conflicts_with_all = ["mask", "blocks", "predicate"])]
    pub topk_offsets: Option<PathBuf>,
    /// Batch dimension B of CSR --topk rows (1 = broadcast over batch; default 1).
    #[arg(long, value_name = "B", requires = "topk_offsets", conflicts_with_all = ["mask", "blocks", "predicate"])]
    pub batch: Option<usize>,
    /// Head dimension H of CSR --topk rows (1 = broadcast over heads; default rows /
    /// (B * Sq) with --seqlen-q, else 1).
    #[arg(long, value_name = "H", requires = "topk_offsets", conflicts_with_all = ["mask", "blocks", "predicate"])]
    pub heads: Option<usize>,
    /// Block lists: a safetensors file holding q2k_block_sparse_index,
    /// q2k_block_sparse_num and variable_block_sizes, or the index array (.npy) with
    /// --blocks-num and --block-sizes.
    #[arg(long, value_name = "FILE")]
    pub blocks: Option<PathBuf>,
    /// q2k_block_sparse_num (.npy) for an index array given to --blocks.
    #[arg(long, value_name = "FILE", requires = "blocks", conflicts_with_all = ["mask", "topk", "predicate"])]
    pub blocks_num: Option<PathBuf>,
    /// variable_block_sizes (.npy) for an index array given to --blocks (default: every
    /// key block whole).
    #[arg(long, value_name = "FILE", requires = "blocks_num", conflicts_with_all = ["mask", "topk", "predicate"])]
    pub block_sizes: Option<PathBuf>,
    /// Tokens per block of the block lists (default 64).
    #[arg(long, value_name = "TOKENS", conflicts_with_all = ["mask", "topk", "predicate"])]
    pub sparse_block: Option<usize>,
    /// Predicate: e.g. 'causal', 'window=256:0', 'prefix=64 | causal@top-left',
    /// 'causal,doc=ids.npy', '!(window=8:8)'. Needs --seqlen-q / --seqlen-k.
    #[arg(long, value_name = "EXPR")]
    pub predicate: Option<String>,
    /// Tensor name inside a safetensors --mask or --topk file (default: its only tensor).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["blocks", "predicate"])]
    pub tensor: Option<String>,
    /// Query length Sq (predicates; optional check for block lists).
    #[arg(long, value_name = "N")]
    pub seqlen_q: Option<usize>,
    /// Key length Sk (predicates and top-k; optional check for block lists).
    #[arg(long, value_name = "N")]
    pub seqlen_k: Option<usize>,
    /// Tile, block_m x block_n (FlashAttention-3's kBlockM x kBlockN).
    #[arg(
        long,
        default_value = "128x128",
        value_name = "MxN",
        allow_hyphen_values = true
    )]
    pub block: String,
    /// MMA warpgroups (1-3); default: 2 when the MMA's M side (block_m, or block_n with
    /// --swap-ab) is a multiple of 128, else 1 (as the Python package picks them).
    #[arg(long)]
    pub warpgroups: Option<u32>,
    /// The kernel computes S transposed (SwapAB).
    #[arg(long)]
    pub swap_ab: bool,
    /// Bit order of the partial tiles.
    #[arg(long, default_value = "fragment-native", value_parser = ["fragment-native", "quad-lane", "row-major"])]
    pub encoding: String,
    /// Worker threads (0 = all cores; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=MAX_THREADS as i64))]
    pub threads: u16,
    /// Also store the backward pass's transposed tile lists (q_num_blocks, q_indices,
    /// full_q_num_blocks, full_q_indices) and every partial tile again in the backward
    /// accumulator's register order (docs/masks.md, "Transposed lists").
    #[arg(long)]
    pub transposed: bool,
    /// Warpgroups of the backward accumulator (default: 2 when block_n is a multiple of
    /// 128, else 1).
    #[arg(long, value_name = "W", requires = "transposed")]
    pub transposed_warpgroups: Option<u32>,
    /// The backward accumulator computes S, not S transposed (no SwapAB; its MMA rows
    /// are then the tile's queries).
    #[arg(long, requires = "transposed")]
    pub transposed_no_swap_ab: bool,
    /// A file written by `fragmask pack`: add the transposed lists to it (needs
    /// --transposed; the tile and encoding are the file's).
    #[arg(long, value_name = "FILE", requires = "transposed", conflicts_with_all = ["block", "warpgroups", "swap_ab", "encoding", "tensor", "seqlen_q", "seqlen_k"])]
    pub packed: Option<PathBuf>,
    /// Output safetensors file (written whole or not at all).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// No progress line or summary.
    #[arg(short, long)]
    pub quiet: bool,
}

const AFTER_HELP: &str = "Examples:\n  \
    fragmask pack --mask mask.npy --block 128x128 --warpgroups 2 -o mask.safetensors\n  \
    fragmask pack --topk idx.npy --seqlen-k 16384 -o topk.safetensors\n  \
    fragmask pack --predicate 'causal,window=1024:0' --seqlen-q 8192 --seqlen-k 8192 -o swa.safetensors\n  \
    fragmask pack --blocks lists.safetensors -o video.safetensors\n  \
    fragmask pack --mask mask.npy --transposed -o train.safetensors\n  \
    fragmask pack --packed mask.safetensors --transposed -o train.safetensors\n\n\
    Load in PyTorch: see docs/masks.md (BlockMask.from_kv_blocks and the FragmentNative layout).";

/// The mode of a `fragmask pack` command line (its input) and the flags it reads: each
/// source's own flags, the tile and encoding, the transposed lists and the output.
pub fn mode(args: &PackArgs) -> super::Mode {
    macro_rules! with_tile_and_output {
        ($($id:literal),*) => {
            Some(&[$($id,)* "block", "warpgroups", "swap_ab", "encoding", "threads",
                "transposed", "transposed_warpgroups", "transposed_no_swap_ab", "output",
                "quiet"])
        };
    }
    let (name, uses): (&'static str, Option<&'static [&'static str]>) = if args.packed.is_some() {
        (
            "--packed (the file gives the mask, tile and encoding)",
            Some(&[
                "packed",
                "transposed",
                "transposed_warpgroups",
                "transposed_no_swap_ab",
                "threads",
                "output",
                "quiet",
            ]),
        )
    } else if args.mask.is_some() {
        (
            "--mask",
            with_tile_and_output!("mask", "tensor", "seqlen_q", "seqlen_k"),
        )
    } else if args.topk.is_some() {
        (
            "--topk",
            with_tile_and_output!(
                "topk",
                "topk_offsets",
                "batch",
                "heads",
                "tensor",
                "seqlen_q",
                "seqlen_k"
            ),
        )
    } else if args.blocks.is_some() {
        (
            "--blocks",
            with_tile_and_output!(
                "blocks",
                "blocks_num",
                "block_sizes",
                "sparse_block",
                "seqlen_q",
                "seqlen_k"
            ),
        )
    } else {
        (
            "--predicate",
            with_tile_and_output!("predicate", "seqlen_q", "seqlen_k"),
        )
    };
    super::Mode { name, uses }
}

/// Packs the chosen source and writes the file.
pub fn run(args: PackArgs) -> CmdResult {
    check_size_flags(&args)?;
    // Before any work: the output must not be a device, FIFO, directory or an input
    // (doc=FILE inputs are checked as the predicate loads them).
    let inputs = [
        &args.mask,
        &args.topk,
        &args.topk_offsets,
        &args.blocks,
        &args.blocks_num,
        &args.block_sizes,
        &args.packed,
    ];
    check_output(
        &args.output,
        &inputs.into_iter().flatten().collect::<Vec<_>>(),
    )
    .map_err(|e| e.to_string())?;
    if let Some(path) = &args.packed {
        return add_transposed(path, &args);
    }
    let acc = parse_tile(&args.block, args.warpgroups, args.swap_ab)?;
    // The backward tile is checked before anything is read.
    let backward = backward_tile(&acc, &args)?;
    let encoding = Encoding::from_name(&args.encoding).ok_or("unknown encoding")?;
    let start = Instant::now();
    // File bytes must outlive the borrowed sources.
    let mask_bytes;
    let source: Box<dyn MaskSource> = if let Some(path) = &args.mask {
        mask_bytes = read(path)?;
        let view = read_array(&mask_bytes, args.tensor.as_deref()).map_err(at(path))?;
        let data = view.mask_bytes("dense mask").map_err(at(path))?;
        let dense = DenseMask::new(data, &view.shape).map_err(at(path))?;
        check_lengths(dense.shape(), &args)?;
        Box::new(dense)
    } else if let Some(path) = &args.topk {
        Box::new(topk_source(path, &args)?)
    } else if let Some(path) = &args.blocks {
        Box::new(block_source(path, &args)?)
    } else if let Some(text) = &args.predicate {
        Box::new(predicate_source(text, &args)?)
    } else {
        return Err("give one of --mask, --topk, --blocks, --predicate".into());
    };
    let input = match (&args.mask, &args.topk, &args.blocks) {
        (Some(path), _, _) | (_, Some(path), _) | (_, _, Some(path)) => path.display().to_string(),
        _ => "--predicate".to_string(),
    };
    let mut packed =
        run_pack(source.as_ref(), &acc, encoding, &args).map_err(|e| format!("{input}: {e}"))?;
    if let Some(backward) = &backward {
        packed
            .add_transposed(backward, &pack_options(&args))
            .map_err(|e| format!("{input}: {e}"))?;
    }
    packed
        .write_safetensors(&args.output)
        .map_err(|e| e.to_string())?;
    if !args.quiet {
        summarize(&packed, &args.output, start.elapsed().as_secs_f64());
    }
    Ok(ExitCode::SUCCESS)
}

/// `fragmask pack --packed FILE --transposed`: the file's mask with the transposed
/// lists added, written to `--output`.
fn add_transposed(path: &Path, args: &PackArgs) -> CmdResult {
    let start = Instant::now();
    let mut packed = read_packed_file(path)
        .map(|file| file.mask)
        .map_err(|e| match e {
            MaskError::Io { .. } => e.to_string(),
            e => at(path)(e),
        })?;
    let backward = backward_tile(packed.accumulator(), args)?
        .ok_or("--packed needs --transposed (a file is only rewritten to add the lists)")?;
    packed
        .add_transposed(&backward, &pack_options(args))
        .map_err(at(path))?;
    packed
        .write_safetensors(&args.output)
        .map_err(|e| e.to_string())?;
    if !args.quiet {
        summarize(&packed, &args.output, start.elapsed().as_secs_f64());
    }
    Ok(ExitCode::SUCCESS)
}

/// The backward accumulator of `--transposed` for the forward tile `acc`: SwapAB with
/// `--transposed-warpgroups` (default [`TransposedLists::default_accumulator`]'s), or
/// no SwapAB with `--transposed-no-swap-ab`; `None` without `--transposed`.
fn backward_tile(
    acc: &TiledAccumulator,
    args: &PackArgs,
) -> Result<Option<TiledAccumulator>, String> {
    if !args.transposed {
        return Ok(None);
    }
    let swap_ab = !args.transposed_no_swap_ab;
    let warpgroups = match args.transposed_warpgroups {
        Some(w) => w,
        None if swap_ab => TransposedLists::default_accumulator(acc)
            .map(|a| a.warpgroups())
            .unwrap_or(1),
        None => acc.warpgroups(),
    };
    TiledAccumulator::new(acc.block_m(), acc.block_n(), warpgroups, swap_ab)
        .map(Some)
        .map_err(|e| {
            format!(
                "--transposed: the backward tile {}x{} with {warpgroups} warpgroup(s){}: {}; \
                 choose --transposed-warpgroups{}",
                acc.block_m(),
                acc.block_n(),
                if swap_ab { ", SwapAB" } else { "" },
                MaskError::from(e),
                if swap_ab {
                    " or --transposed-no-swap-ab"
                } else {
                    ""
                }
            )
        })
}

/// The warpgroups of a tile: `given`, else 2 when the MMA's M side (block_m, or block_n
/// under SwapAB) is a multiple of 128, else 1 (the Python package's default).
pub fn default_warpgroups(given: Option<u32>, block_m: u32, block_n: u32, swap_ab: bool) -> u32 {
    given.unwrap_or(if (if swap_ab { block_n } else { block_m }) % 128 == 0 {
        2
    } else {
        1
    })
}

/// `MxN` → a tiled accumulator.
pub fn parse_tile(
    block: &str,
    warpgroups: Option<u32>,
    swap_ab: bool,
) -> Result<TiledAccumulator, String> {
    let (m, n) = block
        .split_once(['x', 'X'])
        .and_then(|(m, n)| Some((m.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)))
        .ok_or_else(|| format!("--block must be MxN, e.g. 128x128, not '{block}'"))?;
    let w = default_warpgroups(warpgroups, m, n, swap_ab);
    TiledAccumulator::new(m, n, w, swap_ab).map_err(|e| {
        format!(
            "--block {block} --warpgroups {w}{}: {}{}",
            if swap_ab { " --swap-ab" } else { "" },
            MaskError::from(e),
            warpgroups_hint(m, n, w, swap_ab)
        )
    })
}

/// A hint naming the warpgroup count that fits the tile, when another does.
pub fn warpgroups_hint(block_m: u32, block_n: u32, warpgroups: u32, swap_ab: bool) -> String {
    (1..=3)
        .filter(|&w| w != warpgroups)
        .find(|&w| TiledAccumulator::new(block_m, block_n, w, swap_ab).is_ok())
        .map_or(String::new(), |w| format!(" (try --warpgroups {w})"))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    read_file(path).map_err(|e| e.to_string())
}

/// Prefixes an error with the file it came from.
fn at(path: &Path) -> impl Fn(MaskError) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// The size flags, before anything is read or allocated: each at least 1 (the thread
/// count aside) and the sequence lengths within [`MAX_SEQLEN`].
fn check_size_flags(args: &PackArgs) -> Result<(), String> {
    for (flag, value) in [
        ("--seqlen-q", args.seqlen_q),
        ("--seqlen-k", args.seqlen_k),
        ("--batch", args.batch),
        ("--heads", args.heads),
        ("--sparse-block", args.sparse_block),
    ] {
        match value {
            Some(0) => return Err(format!("{flag} must be at least 1")),
            Some(n) if flag.starts_with("--seqlen") && n as u64 > MAX_SEQLEN => {
                return Err(format!(
                    "{flag} {n} is too large: the limit is {MAX_SEQLEN} (attention kernels \
                     index tokens with 32-bit ints; docs/masks.md)"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_lengths(shape: MaskShape, args: &PackArgs) -> Result<(), String> {
    for (flag, given, actual) in [
        ("--seqlen-q", args.seqlen_q, shape.seqlen_q),
        ("--seqlen-k", args.seqlen_k, shape.seqlen_k),
    ] {
        if let Some(given) = given {
            if given != actual {
                return Err(format!(
                    "shape mismatch: {flag} {given} but the input has {actual}"
                ));
            }
        }
    }
    Ok(())
}

fn topk_source(path: &Path, args: &PackArgs) -> Result<TopKMask, String> {
    let seqlen_k = args.seqlen_k.ok_or("--topk needs --seqlen-k")?;
    let bytes = read(path)?;
    let view = read_array(&bytes, args.tensor.as_deref()).map_err(at(path))?;
    if args.topk_offsets.is_some() {
        rank1(&view, "CSR top-k indices").map_err(at(path))?;
    }
    let indices = view.to_i64("top-k indices").map_err(at(path))?;
    match &args.topk_offsets {
        None => {
            let topk =
                TopKMask::from_fixed_k_dims(&view.shape, seqlen_k, &indices).map_err(at(path))?;
            check_lengths(topk.shape(), args)?;
            Ok(topk)
        }
        Some(offsets_path) => {
            let offsets_bytes = read(offsets_path)?;
            let offsets_view = read_array(&offsets_bytes, None).map_err(at(offsets_path))?;
            rank1(&offsets_view, "CSR offsets").map_err(at(offsets_path))?;
            let offsets = offsets_view
                .to_i64("CSR offsets")
                .map_err(at(offsets_path))?;
            let rows = offsets
                .len()
                .checked_sub(1)
                .ok_or_else(|| format!("{}: CSR offsets are empty", offsets_path.display()))?;
            let shape = csr_shape(rows, seqlen_k, args)?;
            TopKMask::from_csr(shape, &offsets, &indices).map_err(at(path))
        }
    }
}

/// The shape of `rows` CSR rows from --batch, --heads and --seqlen-q (any two of the
/// three leading sizes fix the third; B and H default to 1).
fn csr_shape(rows: usize, seqlen_k: usize, args: &PackArgs) -> Result<MaskShape, String> {
    let batch = args.batch.unwrap_or(1);
    // A product that overflows or is 0 cannot divide `rows`: the check below reports it.
    let heads = match (args.heads, args.seqlen_q) {
        (Some(heads), _) => heads,
        (None, Some(seqlen_q)) => batch
            .checked_mul(seqlen_q)
            .and_then(|d| rows.checked_div(d))
            .unwrap_or(0),
        (None, _) => 1,
    };
    let seqlen_q = match args.seqlen_q {
        Some(seqlen_q) => seqlen_q,
        None => batch
            .checked_mul(heads)
            .and_then(|d| rows.checked_div(d))
            .unwrap_or(0),
    };
    let leading = batch
        .checked_mul(heads)
        .and_then(|n| n.checked_mul(seqlen_q));
    if leading != Some(rows) {
        return Err(format!(
            "shape mismatch: the CSR offsets describe {rows} rows, but B x H x Sq = \
             {batch} x {heads} x {seqlen_q} (set --batch, --heads, --seqlen-q)"
        ));
    }
    MaskShape::new(batch, heads, seqlen_q, seqlen_k).map_err(|e| e.to_string())
}

fn block_source(path: &Path, args: &PackArgs) -> Result<BlockSparseMask, String> {
    let options = BlockSparseOptions {
        block_size: args.sparse_block.unwrap_or(64),
        seqlen_q: args.seqlen_q,
        seqlen_k: args.seqlen_k,
    };
    let bytes = read(path)?;
    let ints = |view: &ArrayView, what| view.to_i64(what).map_err(at(path));
    if args.blocks_num.is_none() {
        let file = SafetensorsFile::parse(&bytes).map_err(at(path))?;
        let index = file.tensor("q2k_block_sparse_index").map_err(at(path))?;
        let num = file.tensor("q2k_block_sparse_num").map_err(at(path))?;
        let sizes = match file.tensor("variable_block_sizes") {
            Ok(v) => {
                rank1(&v, "variable_block_sizes").map_err(at(path))?;
                Some(ints(&v, "variable_block_sizes")?)
            }
            Err(MaskError::Missing { .. }) => None,
            Err(e) => return Err(at(path)(e)),
        };
        return BlockSparseMask::new(
            &index.shape,
            &ints(&index, "q2k_block_sparse_index")?,
            &num.shape,
            &ints(&num, "q2k_block_sparse_num")?,
            sizes.as_deref(),
            options,
        )
        .map_err(at(path));
    }
    let index = read_array(&bytes, None).map_err(at(path))?;
    let num_path = args
        .blocks_num
        .as_ref()
        .ok_or("--blocks with an .npy index needs --blocks-num")?;
    let num_bytes = read(num_path)?;
    let num = read_array(&num_bytes, None).map_err(at(num_path))?;
    let sizes = match &args.block_sizes {
        Some(p) => {
            let b = read(p)?;
            let v = read_array(&b, None).map_err(at(p))?;
            rank1(&v, "variable_block_sizes").map_err(at(p))?;
            Some(v.to_i64("variable_block_sizes").map_err(at(p))?)
        }
        None => None,
    };
    BlockSparseMask::new(
        &index.shape,
        &ints(&index, "q2k_block_sparse_index")?,
        &num.shape,
        &num.to_i64("q2k_block_sparse_num").map_err(at(num_path))?,
        sizes.as_deref(),
        options,
    )
    .map_err(at(path))
}

/// A 1-D array (`what` names it in the error).
fn rank1(view: &ArrayView, what: &'static str) -> Result<(), MaskError> {
    if view.shape.len() != 1 {
        return Err(MaskError::BadRank {
            what,
            rank: view.shape.len(),
            expected: "1",
        });
    }
    Ok(())
}

fn predicate_source(text: &str, args: &PackArgs) -> Result<PredicateMask, String> {
    let (seqlen_q, seqlen_k) = match (args.seqlen_q, args.seqlen_k) {
        (Some(q), Some(k)) => (q, k),
        (Some(s), None) | (None, Some(s)) => (s, s),
        (None, None) => return Err("--predicate needs --seqlen-q and/or --seqlen-k".into()),
    };
    let mut load_docs = |name: &str| -> Result<DocumentIds, MaskError> {
        let path = Path::new(name);
        check_output(&args.output, &[path])?;
        // One id list serves queries and keys, so its length is Sq and Sk both.
        fragmask::inputs::attention::document_ids(
            &read_file(path)?,
            [
                ("document ids length (must equal --seqlen-q)", seqlen_q),
                ("document ids length (must equal --seqlen-k)", seqlen_k),
            ],
        )
    };
    let predicate =
        parse_predicate(text, &mut load_docs).map_err(|e| format!("--predicate: {e}"))?;
    PredicateMask::new(seqlen_q, seqlen_k, predicate).map_err(|e| format!("--predicate: {e}"))
}

fn run_pack(
    source: &dyn MaskSource,
    acc: &TiledAccumulator,
    encoding: Encoding,
    args: &PackArgs,
) -> Result<PackedMask, String> {
    let show = !args.quiet && std::io::stderr().is_terminal();
    let last = AtomicUsize::new(usize::MAX);
    let progress = |p: PackProgress| {
        let percent = p.done * 100 / p.total.max(1);
        if last.swap(percent, Ordering::Relaxed) != percent {
            eprint!(
                "\rpacking {percent:3}% ({} of {} row blocks)",
                p.done, p.total
            );
        }
    };
    let options = PackOptions {
        progress: if show { Some(&progress) } else { None },
        ..pack_options(args)
    };
    let result = pack(source, acc, encoding, &options).map_err(|e| e.to_string());
    if show {
        eprintln!();
    }
    result
}

/// `--threads`, no progress.
fn pack_options(args: &PackArgs) -> PackOptions<'static> {
    PackOptions {
        threads: usize::from(args.threads),
        progress: None,
    }
}

fn summarize(packed: &PackedMask, output: &Path, seconds: f64) {
    let s = packed.shape();
    let stats = packed.stats();
    let bytes = packed.bytes();
    let acc = packed.accumulator();
    println!(
        "packed B={} H={} Sq={} Sk={} (density {:.2}%) into {}x{} tiles, {} warpgroup(s){}, {}",
        s.batch,
        s.heads,
        s.seqlen_q,
        s.seqlen_k,
        100.0 * stats.density(),
        acc.block_m(),
        acc.block_n(),
        acc.warpgroups(),
        if acc.swap_ab() { ", SwapAB" } else { "" },
        packed.encoding().name()
    );
    println!(
        "tiles: {} partial, {} full, {} empty of {}",
        stats.partial, stats.full, stats.empty, stats.tiles
    );
    let (t_lists, t_words) = match packed.transposed() {
        Ok(t) => {
            let bwd = t.accumulator();
            println!(
                "transposed: q_num_blocks / q_indices per key block, {} partial tiles again \
                 for the backward tile ({} warpgroup(s){})",
                t.partial_tiles(),
                bwd.warpgroups(),
                if bwd.swap_ab() { ", SwapAB" } else { "" }
            );
            t.bytes()
        }
        Err(_) => (0, 0),
    };
    println!(
        "wrote {} ({} of words + {} of lists) in {seconds:.2} s",
        output.display(),
        human(bytes.words + t_words),
        human(bytes.lists + t_lists)
    );
}

/// Bytes in B / KiB / MiB / GiB.
pub fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}
