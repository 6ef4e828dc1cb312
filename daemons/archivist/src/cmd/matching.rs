//! `archivist match` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist match`.
#[derive(Debug, Args)]
pub struct MatchArgs {}

/// Runs `archivist match`.
pub async fn run(_global: &GlobalOpts, _args: MatchArgs) -> Result<ExitCode> {
    bail!("`archivist match` is not built yet")
}
