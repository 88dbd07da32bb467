//! `fragmask codegen`: write the drop-in mask-apply header.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use fragmask::kernels::apply::{accumulator, header, parse_block, parse_encoding, HeaderOptions};
use fragmask::masks::io::write_file_atomically;

use super::CmdResult;

/// Options of `fragmask codegen`.
#[derive(Args)]
#[command(
    after_help = "Example: fragmask codegen --block 128x128 --warpgroups 2 \
    --encoding fragment-native -o fragmask_apply.cuh\n\nSee docs/codegen.md for the usage \
    in a FlashAttention-3-style kernel."
)]
pub struct CodegenArgs {
    /// Tile, <block_m>x<block_n> (query rows x keys).
    #[arg(long, default_value = "128x128", allow_hyphen_values = true)]
    pub block: String,
    /// MMA (consumer) warpgroups; each owns 64 rows per atom.
    #[arg(long, default_value_t = 2)]
    pub warpgroups: u32,
    /// fragment-native, quad-lane or row-major.
    #[arg(long, default_value = "fragment-native")]
    pub encoding: String,
    /// The MMA computes the transposed tile (SwapAB).
    #[arg(long)]
    pub swap_ab: bool,
    /// Output file ("-" for standard output).
    #[arg(short, long, default_value = "fragmask_apply.cuh")]
    pub output: PathBuf,
}

/// Generates the header and writes it (to a temporary file, then renamed:
/// `fragmask::masks::io::write_atomically`).
pub fn run(args: CodegenArgs) -> CmdResult {
    let tile_flags = |e: String| {
        format!(
            "--block {} --warpgroups {}{}: {e}",
            args.block,
            args.warpgroups,
            if args.swap_ab { " --swap-ab" } else { "" }
        )
    };
    let (block_m, block_n) = parse_block(&args.block).map_err(|e| tile_flags(e.to_string()))?;
    let encoding =
        parse_encoding(&args.encoding).map_err(|e| format!("--encoding {}: {e}", args.encoding))?;
    let acc = accumulator(block_m, block_n, args.warpgroups, args.swap_ab)
        .map_err(|e| tile_flags(e.to_string()))?;
    let command = format!(
        "fragmask codegen --block {block_m}x{block_n} --warpgroups {} --encoding {}{}",
        args.warpgroups,
        encoding.name(),
        if args.swap_ab { " --swap-ab" } else { "" }
    );
    let text = header(
        &acc,
        encoding,
        &HeaderOptions {
            command: Some(command),
        },
    )
    .map_err(|e| e.to_string())?;
    if args.output == Path::new("-") {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    write_file_atomically(&args.output, text.as_bytes()).map_err(|e| e.to_string())?;
    eprintln!(
        "wrote {} ({} encoding, {block_m}x{block_n} tile, {} warpgroup(s), {} bytes)",
        args.output.display(),
        encoding.name(),
        args.warpgroups,
        text.len()
    );
    Ok(ExitCode::SUCCESS)
}
