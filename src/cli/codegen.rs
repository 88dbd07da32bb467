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
    /// MMA (consumer) warpgroups; each owns 64 rows per atom. Default: 2 when the MMA's
    /// M side (block_m, or block_n with --swap-ab) is a multiple of 128, else 1.
    #[arg(long)]
    pub warpgroups: Option<u32>,
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
    let tile_flags = |warpgroups: String, e: String| {
        format!(
            "--block {} --warpgroups {warpgroups}{}: {e}",
            args.block,
            if args.swap_ab { " --swap-ab" } else { "" }
        )
    };
    let given = args
        .warpgroups
        .map_or("(default)".to_string(), |w| w.to_string());
    let (block_m, block_n) =
        parse_block(&args.block).map_err(|e| tile_flags(given.clone(), e.to_string()))?;
    let warpgroups =
        super::pack::default_warpgroups(args.warpgroups, block_m, block_n, args.swap_ab);
    let encoding =
        parse_encoding(&args.encoding).map_err(|e| format!("--encoding {}: {e}", args.encoding))?;
    let acc = accumulator(block_m, block_n, warpgroups, args.swap_ab).map_err(|e| {
        tile_flags(
            warpgroups.to_string(),
            format!(
                "{e}{}",
                super::pack::warpgroups_hint(block_m, block_n, warpgroups, args.swap_ab)
            ),
        )
    })?;
    let command = format!(
        "fragmask codegen --block {block_m}x{block_n} --warpgroups {} --encoding {}{}",
        warpgroups,
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
        warpgroups,
        text.len()
    );
    Ok(ExitCode::SUCCESS)
}
