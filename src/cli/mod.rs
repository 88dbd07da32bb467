//! Subcommands of the `fragmask` program, one module each.

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

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
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// A guided tour for newcomers: the layout calculator on FlashAttention-3's
    /// accumulator, then the rest of the toolkit.
    Demo(demo::DemoArgs),
    /// Masked attention forward on an H100 (wgmma + TMA, FragmentNative masks): run,
    /// benchmark (--bench) or self-test (--selftest).
    Attention(Box<attention::AttentionArgs>),
    /// Lightning attention decode (MiniMax-01's linear attention) on the GPU, checked
    /// step by step against the f64 reference.
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
    /// Measure: apply cost from SASS (`sass`), on the GPU (`apply`), the GPU packer
    /// (`packer`), the attention forward (`attention`) and backward (`backward`),
    /// lightning decode (`lightning`) and split-KV decode (`decode`).
    Bench(bench::BenchArgs),
}

/// Parses the command line and runs the chosen subcommand.
pub fn run() -> ExitCode {
    let command = command();
    let matches = command.clone().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = check_modes(&cli, &command, &matches).and_then(|()| dispatch(cli));
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(cli: Cli) -> CmdResult {
    match cli.command {
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
    }
}

/// The program's argument parser: every subcommand, negative numbers taken as values.
pub fn command() -> clap::Command {
    values_may_start_with_a_hyphen(Cli::command())
}

/// Parses `argv` (without the program name) and checks every flag against the mode it
/// selects, as `fragmask` does before running anything: the error message of exit 2.
/// Returns the mode selected.
#[allow(dead_code)] // the argument walk of tests/cli_arguments.rs
pub fn check_args(argv: &[&str]) -> Result<Mode, String> {
    let command = command();
    let matches = command
        .clone()
        .try_get_matches_from(std::iter::once("fragmask").chain(argv.iter().copied()))
        .map_err(|e| e.render().to_string())?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.render().to_string())?;
    check_modes(&cli, &command, &matches)?;
    Ok(mode_of(&cli).1)
}

/// One way a subcommand runs (`--random`, `--inputs`, `--emit-source`, ...) and the
/// arguments it reads: every other argument given on the command line is an error
/// (exit 2) naming it, rather than silently ignored.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    /// How the mode is named in errors, e.g. `--inputs` or `--emit-source`.
    pub name: &'static str,
    /// The ids (field names) of the arguments it reads; `None`: all of them.
    pub uses: Option<&'static [&'static str]>,
}

impl Mode {
    /// A subcommand with one mode that reads every argument.
    pub const ALL: Mode = Mode {
        name: "",
        uses: None,
    };
}

/// The mode the parsed command line selects, with the subcommand's path (e.g.
/// `["bench", "decode"]`).
pub fn mode_of(cli: &Cli) -> (Vec<&'static str>, Mode) {
    match &cli.command {
        Command::Attention(a) => (vec!["attention"], attention::mode(a)),
        Command::Lightning(a) => (vec!["lightning"], lightning::mode(a)),
        Command::Decode(a) => (vec!["decode"], decode::mode(a)),
        Command::Pack(a) => (vec!["pack"], pack::mode(a)),
        Command::Bench(a) => (vec!["bench", bench::name(a)], bench::mode(a)),
        Command::Demo(_) => (vec!["demo"], Mode::ALL),
        Command::Layout(_) => (vec!["layout"], Mode::ALL),
        Command::Frag(_) => (vec!["frag"], Mode::ALL),
        Command::Inspect(_) => (vec!["inspect"], Mode::ALL),
        Command::Codegen(_) => (vec!["codegen"], Mode::ALL),
        Command::Verify(_) => (vec!["verify"], Mode::ALL),
    }
}

/// Refuses every argument given on the command line that the selected mode does not
/// read, naming it (clap's `requires` does not hold where its target conflicts with a
/// present argument, so this is checked here, after parsing).
fn check_modes(cli: &Cli, command: &clap::Command, matches: &ArgMatches) -> Result<(), String> {
    let (path, mode) = mode_of(cli);
    let Some(uses) = mode.uses else {
        return Ok(());
    };
    let (mut cmd, mut m) = (command, matches);
    for name in &path {
        cmd = cmd
            .find_subcommand(name)
            .ok_or_else(|| format!("no subcommand {name}"))?;
        m = m
            .subcommand_matches(name)
            .ok_or_else(|| format!("no matches of {name}"))?;
    }
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) || uses.contains(&id)
        {
            continue;
        }
        return Err(format!(
            "{} does not apply with {}: it would be ignored (see fragmask {} --help)",
            flag_name(arg),
            mode.name,
            path.join(" ")
        ));
    }
    Ok(())
}

/// `--long` (or `-s`, or the value name) of an argument, as the user typed it.
pub fn flag_name(arg: &clap::Arg) -> String {
    match (arg.get_long(), arg.get_short()) {
        (Some(l), _) => format!("--{l}"),
        (None, Some(s)) => format!("-{s}"),
        _ => arg.get_id().to_string(),
    }
}

/// Lets every option that takes a value and is not a path take one beginning with `-`
/// (`--seqlen-q -1`, `--lengths -1,5`, `--scale -inf`, `--block -128x128`), so the value
/// is reported as invalid for its flag (exit 2, naming the flag) rather than as an
/// unknown argument `-1` that names nothing. Paths keep clap's default, so a missing path
/// before the next flag (`--out --json`) still reads as a missing value.
fn values_may_start_with_a_hyphen(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let takes_values = a.get_action().takes_values();
        let path = matches!(
            a.get_value_hint(),
            clap::ValueHint::AnyPath | clap::ValueHint::FilePath | clap::ValueHint::DirPath
        );
        // Only ever switched on: an argument's own setting stays.
        let a = if takes_values {
            a.allow_negative_numbers(true)
        } else {
            a
        };
        if takes_values && !a.is_positional() && !path {
            a.allow_hyphen_values(true)
        } else {
            a
        }
    })
    .mut_subcommands(values_may_start_with_a_hyphen)
}

/// The sizes of a `--random` flag in the subcommand's `order` (e.g. `["B", "H", "N",
/// "D", "E"]`, where the last `optional` names may be left out): either positional
/// (`16,32,1,128`) or named in any order (`b=16,h=32,n=1,d=128`, case-insensitive). A
/// name given twice, an unknown name, a missing size or a value that is not a
/// non-negative integer is an error naming `--random`.
pub fn parse_sizes(
    text: &str,
    order: &[&str],
    optional: usize,
) -> Result<Vec<Option<usize>>, String> {
    let expected = order.join(",");
    let err = |why: String| {
        format!(
            "--random {text}: {why} (expected {expected}, or named: {})",
            order
                .iter()
                .map(|n| format!("{}=..", n.to_lowercase()))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let number = |p: &str| {
        p.parse::<usize>()
            .map_err(|_| err(format!("`{p}` is not a non-negative integer")))
    };
    let mut sizes = vec![None; order.len()];
    if parts.iter().any(|p| p.contains('=')) {
        for p in &parts {
            let (name, value) = p
                .split_once('=')
                .ok_or_else(|| err(format!("`{p}` is not NAME=SIZE")))?;
            let i = order
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name.trim()))
                .ok_or_else(|| err(format!("unknown size `{name}`")))?;
            if sizes[i].is_some() {
                return Err(err(format!("`{name}` is given twice")));
            }
            sizes[i] = Some(number(value.trim())?);
        }
    } else {
        if parts.len() > order.len() || parts.len() + optional < order.len() {
            return Err(err(format!("{} sizes", parts.len())));
        }
        for (i, p) in parts.iter().enumerate() {
            sizes[i] = Some(number(p)?);
        }
    }
    if let Some(i) = sizes[..order.len() - optional]
        .iter()
        .position(Option::is_none)
    {
        return Err(err(format!("{} is missing", order[i])));
    }
    Ok(sizes)
}

/// What a subcommand returns: an exit code, or an error message for standard error.
pub type CmdResult = Result<ExitCode, String>;
