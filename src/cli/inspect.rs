//! `fragmask inspect FILE`: what a packed mask holds and what each encoding costs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fragmask::masks::io::{read_file, FORMAT_NAME, FORMAT_VERSION};
use fragmask::masks::{Encoding, PackedMask};

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
    let bytes = read_file(&args.file).map_err(|e| e.to_string())?;
    let packed = PackedMask::from_safetensors(&bytes)
        .map_err(|e| format!("{}: {e}", args.file.display()))?;
    let acc = packed.accumulator();
    let s = packed.shape();
    let stats = packed.stats();
    let b = packed.bytes();
    let pct = |x: u64| 100.0 * x as f64 / stats.tiles.max(1) as f64;
    let ratio = |x: u64| x as f64 / (b.lists + b.words).max(1) as f64;
    println!(
        "file: {} ({})",
        args.file.display(),
        human(bytes.len() as u64)
    );
    println!(
        "format: {FORMAT_NAME} v{FORMAT_VERSION}, encoding {}",
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
