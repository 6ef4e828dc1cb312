//! `archivist recorder` and `archivist reaper` (not built yet).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist recorder`.
#[derive(Debug, Args)]
pub struct RecorderArgs {}

/// Arguments of `archivist reaper`.
#[derive(Debug, Args)]
pub struct ReaperArgs {}

/// Runs the recorder daemon.
pub async fn run_recorder(_global: &GlobalOpts, _args: RecorderArgs) -> Result<ExitCode> {
    bail!("`archivist recorder` is not built yet")
}

/// Runs the reaper daemon.
pub async fn run_reaper(_global: &GlobalOpts, _args: ReaperArgs) -> Result<ExitCode> {
    bail!("`archivist reaper` is not built yet")
}
