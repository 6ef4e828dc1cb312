//! `archivist config check [FILE]`: validates a configuration file (and the
//! `ARCHIVIST__...` environment overrides), naming the key path of any error.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::cli::GlobalOpts;

/// `archivist config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file (default: the one `--config` names).
    Check {
        /// File to check.
        file: Option<PathBuf>,
    },
}

/// Runs `archivist config ...`.
pub async fn run(global: &GlobalOpts, command: ConfigCommand) -> Result<ExitCode> {
    match command {
        ConfigCommand::Check { file } => {
            let file = file.or_else(|| global.config.clone());
            let config = crate::config::load(file.as_deref())?;
            config.planner.validate()?;
            config.recorder.validate()?;
            config.reaper.validate()?;
            if config.reaper.work_item_ttl != config.planner.work_item_ttl {
                eprintln!(
                    "warning: reaper.work_item_ttl_ms ({:?}) differs from planner.work_item_ttl_ms ({:?}); the planner's is the one that must stay below the lease duration",
                    config.reaper.work_item_ttl, config.planner.work_item_ttl
                );
            }
            outln!(
                "{}: valid",
                file.map(|f| f.display().to_string())
                    .unwrap_or_else(|| "defaults and environment".into())
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
