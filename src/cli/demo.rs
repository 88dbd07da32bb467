//! `fragmask demo`: a guided tour.

use std::process::ExitCode;

use clap::Args;

use super::CmdResult;

/// Options of `fragmask demo`.
#[derive(Args)]
pub struct DemoArgs {}

/// Runs the tour.
pub fn run(_args: DemoArgs) -> CmdResult {
    Ok(ExitCode::SUCCESS)
}
