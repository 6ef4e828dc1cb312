//! `archivist run --all` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run every daemon.
    #[arg(long)]
    pub all: bool,
}

/// Runs several daemons in one process.
pub async fn run(_global: &GlobalOpts, _args: RunArgs) -> Result<ExitCode> {
    bail!("`archivist run` is not built yet")
}
