//! `archivist researcher` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist researcher`.
#[derive(Debug, Args)]
pub struct ResearcherArgs {}

/// Runs `archivist researcher`.
pub async fn run(_global: &GlobalOpts, _args: ResearcherArgs) -> Result<ExitCode> {
    bail!("`archivist researcher` is not built yet")
}
