//! Admin commands (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Subcommand;

use crate::cli::GlobalOpts;

/// Admin subcommands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Researchers, jobs per state, leases, catalog and research progress.
    Status,
}

/// Runs an admin command.
pub async fn run(_global: &GlobalOpts, _command: AdminCommand) -> Result<ExitCode> {
    bail!("admin commands are not built yet")
}
