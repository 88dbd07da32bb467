//! `fragmask layout EXPR`: the layout calculator (engine in [`fragmask::calc`]).

use std::process::ExitCode;

use clap::Args;
use fragmask::calc::{self, Value, FUNCTIONS};

use super::CmdResult;

/// Options of `fragmask layout`.
#[derive(Args)]
#[command(after_help = after_help())]
pub struct LayoutArgs {
    /// Expression, e.g. 'composition((6,2):(8,2),(4,3):(3,1))'. Several words are
    /// joined with spaces. Options may come before or after it; a word that starts
    /// with '-' is a value only if it is a number (`-1`), else put `--` before the
    /// expression.
    // Not allow_hyphen_values: with it a trailing `--json` became part of the
    // expression (issue 10, class 8).
    #[arg(required = true, num_args = 1.., allow_negative_numbers = true)]
    pub expr: Vec<String>,
    /// Print the result's index grid like cute::print_layout (rows = mode 0, columns =
    /// mode 1), then the result.
    #[arg(long, conflicts_with = "json")]
    pub table: bool,
    /// Print one JSON object: expr, result, kind, shape, stride, size, cosize, values.
    #[arg(long)]
    pub json: bool,
}

fn after_help() -> String {
    let mut text = String::from(
        "Layouts are written in CuTe notation, shape:stride, e.g. ((4,8),2):((1,4),32). A bare\n\
         shape (4,8) is its compact column-major layout and an integer n is n:1. By-mode\n\
         tilers are written <L0,L1,...>; in a tiler position a bare shape (4,8) means <4:1,8:1>,\n\
         as a Shape does in CuTe. The result is printed on the last line.\n\nFunctions:\n",
    );
    for (name, signature) in FUNCTIONS {
        text.push_str(&format!("  {name}{signature}\n"));
    }
    text.push_str("\nExample: fragmask layout 'zipped_divide((8,16):(1,8), <4:1,8:1>)'");
    text
}

/// Evaluates the expression and prints the result.
pub fn run(args: LayoutArgs) -> CmdResult {
    let expr = args.expr.join(" ");
    let (value, notes) = calc::evaluate_with_notes(&expr).map_err(|error| error.render(&expr))?;
    for note in notes {
        eprintln!("note: {note}");
    }
    if args.json {
        println!("{}", calc::to_json(&expr, &value));
        return Ok(ExitCode::SUCCESS);
    }
    if args.table {
        let Value::Layout(layout) = value else {
            return Err(format!(
                "--table needs a layout, but {expr} is the integer {value}"
            ));
        };
        print!("{}", calc::table(&layout)?);
    }
    println!("{value}");
    Ok(ExitCode::SUCCESS)
}
