//! `fragmask layout EXPR`: the layout calculator.

use std::process::ExitCode;

use clap::Args;

use super::CmdResult;

/// Options of `fragmask layout`.
#[derive(Args)]
pub struct LayoutArgs {
    /// Expression, e.g. 'composition((6,2):(8,2),(4,3):(3,1))'.
    pub expr: String,
}

/// Evaluates the expression.
pub fn run(_args: LayoutArgs) -> CmdResult {
    Ok(ExitCode::SUCCESS)
}
