//! Subcommands of the `fragmask` program, one module each.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod attention;
mod bench;
mod codegen;
mod decode;
mod demo;
mod frag;
mod inspect;
mod layout;
mod lightning;
mod pack;
mod verify;

/// fragmask: proven MMA fragment maps, fragment-native attention masks, and the CUDA
/// kernels that consume them.
#[derive(Parser)]
#[command(name = "fragmask", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A guided tour for newcomers: the layout calculator on FlashAttention-3's
    /// accumulator, then the rest of the toolkit.
    Demo(demo::DemoArgs),
    /// Masked attention forward on an H100 (wgmma + TMA, FragmentNative masks): run,
    /// benchmark (--bench) or self-test (--selftest).
    Attention(Box<attention::AttentionArgs>),
    /// Lightning attention decode (write-up 003) on the GPU, checked step by step
    /// against the f64 reference.
    Lightning(lightning::LightningArgs),
    /// Split-KV decode over a contiguous or paged KV cache (packed GQA, causal / sliding
    /// window), checked against the CPU f64 reference, or on files.
    Decode(Box<decode::DecodeArgs>),
    /// Layout calculator: evaluate a CuTe layout-algebra expression.
    Layout(layout::LayoutArgs),
    /// Fragment map: which wgmma accumulator element each thread holds (FA3 tiling).
    Frag(frag::FragArgs),
    /// Pack an attention mask (dense, top-k, block lists, predicates) into tile lists
    /// and FragmentNative words (safetensors).
    Pack(Box<pack::PackArgs>),
    /// Describe a packed mask: density, tile classes, bytes, per-encoding load cost.
    Inspect(inspect::InspectArgs),
    /// Write the drop-in CUDA header that applies a mask to a wgmma accumulator.
    Codegen(codegen::CodegenArgs),
    /// Check fragments, mask apply and the GPU packer on this machine's GPU (exit 3: no GPU).
    Verify(verify::VerifyArgs),
    /// Measure: apply cost from SASS (`sass`), on the GPU (`apply`), the GPU packer (`packer`),
    /// the attention forward (`attention`).
    Bench(bench::BenchArgs),
}

/// Parses the command line and runs the chosen subcommand.
pub fn run() -> ExitCode {
    let matches = negative_numbers_are_values(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Attention(args) => attention::run(*args),
        Command::Lightning(args) => lightning::run(args),
        Command::Decode(args) => decode::run(*args),
        Command::Layout(args) => layout::run(args),
        Command::Frag(args) => frag::run(args),
        Command::Pack(args) => pack::run(*args),
        Command::Inspect(args) => inspect::run(args),
        Command::Codegen(args) => codegen::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Lets every option of every subcommand take a negative number as its value, so
/// `--seqlen-q -1` is reported as an invalid value of `--seqlen-q` (exit 2, naming the
/// flag) rather than as an unknown argument `-1` that names nothing (issue 10, class 8).
/// Values that are not numbers but start with `-` are still taken as flags.
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let takes_values = a.get_action().takes_values();
        a.allow_negative_numbers(takes_values)
    })
    .mut_subcommands(negative_numbers_are_values)
}

/// What a subcommand returns: an exit code, or an error message for standard error.
pub type CmdResult = Result<ExitCode, String>;
