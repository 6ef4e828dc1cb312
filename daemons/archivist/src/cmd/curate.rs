//! `archivist curate ...` and `archivist curator` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

use crate::cli::GlobalOpts;

/// `archivist curate ...`
#[derive(Debug, Subcommand)]
pub enum CurateCommand {
    /// Register every episode of a podcast feed.
    Feed {
        /// Feed URL.
        url: String,
    },
}

/// Arguments of `archivist curator`.
#[derive(Debug, Args)]
pub struct CuratorArgs {}

/// Runs `archivist curate ...`.
pub async fn run(_global: &GlobalOpts, _command: CurateCommand) -> Result<ExitCode> {
    bail!("`archivist curate` is not built yet")
}

/// Runs the curator daemon.
pub async fn run_daemon(_global: &GlobalOpts, _args: CuratorArgs) -> Result<ExitCode> {
    bail!("`archivist curator` is not built yet")
}
