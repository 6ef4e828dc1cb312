//! `archivist planner` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist planner`.
#[derive(Debug, Args)]
pub struct PlannerArgs {}

/// Runs `archivist planner`.
pub async fn run(_global: &GlobalOpts, _args: PlannerArgs) -> Result<ExitCode> {
    bail!("`archivist planner` is not built yet")
}
