//! `fragmask inspect FILE`: what a packed mask holds and what each encoding costs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fragmask::masks::io::{read_packed_file, Checksums, FORMAT_NAME};
use fragmask::masks::{Encoding, MaskError};

use super::pack::human;
use super::CmdResult;

/// Options of `fragmask inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// A packed mask written by `fragmask pack`.
    pub file: PathBuf,
}

/// Reads, validates and describes the file.
pub fn run(args: InspectArgs) -> CmdResult {
    // Header first: a huge or foreign file is refused before its body is read.
    let file = read_packed_file(&args.file).map_err(|e| match e {
        MaskError::Io { .. } => e.to_string(),
        e => format!("{}: {e}", args.file.display()),
    })?;
    let packed = file.mask;
    // The file's own version (the reader accepts older ones); validated above.
    let version = file.format_version;
    let acc = packed.accumulator();
    let s = packed.shape();
    let stats = packed.stats();
    let b = packed.bytes();
    let pct = |x: u64| 100.0 * x as f64 / stats.tiles.max(1) as f64;
    let ratio = |x: u64| x as f64 / (b.lists + b.words).max(1) as f64;
    println!("file: {} ({})", args.file.display(), human(file.file_bytes));
    println!(
        "checksum: {}",
        match file.checksums {
            Checksums::Verified => "SHA-256 of every tensor and of the header, verified",
            Checksums::Absent => "no checksum (a file written before checksums; not verified)",
        }
    );
    println!(
        "format: {FORMAT_NAME} v{version}, encoding {}",
        packed.encoding().name()
    );
    println!(
        "tile: {}x{}, {} warpgroup(s) = {} threads x {} values, swap_ab {}",
        acc.block_m(),
        acc.block_n(),
        acc.warpgroups(),
        acc.threads(),
        acc.values_per_thread(),
        acc.swap_ab()
    );
    println!(
        "mask: B={} H={} Sq={} Sk={}; density {:.4}% ({} of {} elements)",
        s.batch,
        s.heads,
        s.seqlen_q,
        s.seqlen_k,
        100.0 * stats.density(),
        stats.ones,
        stats.elements
    );
    println!(
        "tiles: {} in all: {} empty ({:.1}%), {} full ({:.1}%), {} partial ({:.1}%)",
        stats.tiles,
        stats.empty,
        pct(stats.empty),
        stats.full,
        pct(stats.full),
        stats.partial,
        pct(stats.partial)
    );
    println!(
        "bytes: {} packed ({} words + {} lists); dense bool {} ({:.1}x); plain bit packing {} ({:.1}x)",
        human(b.lists + b.words),
        human(b.words),
        human(b.lists),
        human(b.dense_bool),
        ratio(b.dense_bool),
        human(b.bit_packed),
        ratio(b.bit_packed)
    );
    // A one-warpgroup 64x64 mask's forward may pair its query blocks (docs/architecture.md,
    // "Shared K/V of the 64-token tile"): what the pairs load, and whether that is the default.
    {
        use fragmask::host::attention::choice::{
            shared_kv_pays, SHARED_KV_DEFAULT_HEAD_DIM, SHARED_KV_MAX_LOAD_RATIO,
        };
        match fragmask::host::attention::shared_kv::table_of_64_token_mask(&packed) {
            Ok(Some(pairs)) => println!(
                "shared K/V (the forward's 64x64/2x2 tile): the query-block pairs load {} K/V blocks \
                 for {} list entries ({:.3}); a one-split call at head dim \
                 {SHARED_KV_DEFAULT_HEAD_DIM} runs the {} tile (shared where at most \
                 {SHARED_KV_MAX_LOAD_RATIO}; other head dims: one-block)",
                pairs.loads,
                pairs.own_loads,
                pairs.load_ratio(),
                if shared_kv_pays(pairs.load_ratio()) {
                    "shared-K/V"
                } else {
                    "one-block"
                }
            ),
            Ok(None) => {}
            Err(e) => println!("shared K/V: no step table ({e})"),
        }
    }
    match packed.transposed() {
        Ok(t) => {
            let bwd = t.accumulator();
            let cost = Encoding::FragmentNative.load_cost(bwd);
            let (lists, words) = t.bytes();
            let full = t.lists().full_tiles();
            println!(
                "transposed: yes, for the backward tile {}x{} ({}), {} warpgroup(s) = {} \
                 threads x {} values, swap_ab {}",
                bwd.block_m(),
                bwd.block_n(),
                if bwd.swap_ab() {
                    "S^T = K Q^T, MMA rows = keys"
                } else {
                    "S = Q K^T, MMA rows = queries"
                },
                bwd.warpgroups(),
                bwd.threads(),
                bwd.values_per_thread(),
                bwd.swap_ab()
            );
            println!(
                "  per key block: q_num_blocks / q_indices ({} partial), full_q_num_blocks / \
                 full_q_indices ({full} full); {} words + {} lists; {} bytes per thread per \
                 tile in {} load(s), fragment-native",
                t.partial_tiles(),
                human(words),
                human(lists),
                cost.bytes_per_thread,
                cost.loads_per_thread
            );
            // A 64x64 mask's backward pairs its key blocks (docs/backward.md): what they load.
            if (bwd.block_m(), bwd.block_n()) == (64, 64) {
                match fragmask::host::attention::backward::key_pairs::key_pair_table(
                    t,
                    fragmask::host::attention::backward::key_pairs::PairWalks::Ascending,
                ) {
                    Ok(pairs) => println!(
                        "  paired key blocks (the backward's default on this tile): {} union steps for \
                         {} list entries ({:.3} of the Q/dO loads and dQ reductions)",
                        pairs.steps,
                        pairs.list_steps,
                        pairs.load_ratio()
                    ),
                    Err(e) => println!("  paired key blocks: no table ({e})"),
                }
            }
        }
        Err(_) => println!(
            "transposed: no (forward only; for the backward pass run `fragmask pack \
             --packed {} --transposed -o OUT`)",
            args.file.display()
        ),
    }
    if let Some(d) = packed.documents() {
        println!(
            "documents: {} contiguous, {} within each (the forward runs the documents grid, and so does the backward unless deterministic)",
            d.count(),
            d.kind().name()
        );
    }
    println!("per partial tile, by encoding (* = this file):");
    println!(
        "  {:<17} {:>10} {:>12} {:>12}  {:<7} {:>12}",
        "encoding", "bytes/tile", "bytes/thread", "loads/thread", "memory", "all tiles"
    );
    for encoding in Encoding::ALL {
        let cost = encoding.load_cost(acc);
        let mark = if encoding == packed.encoding() {
            "*"
        } else {
            ""
        };
        println!(
            "  {:<17} {:>10} {:>12} {:>12}  {:<7} {:>12}",
            format!("{}{mark}", encoding.name()),
            cost.bytes_per_tile,
            cost.bytes_per_thread,
            cost.loads_per_thread,
            cost.memory,
            human(cost.bytes_per_tile as u64 * stats.partial)
        );
    }
    Ok(ExitCode::SUCCESS)
}
