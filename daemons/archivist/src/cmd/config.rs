//! `archivist config check [FILE]`: validates a configuration file (and the
//! `ARCHIVIST__...` environment overrides), naming the key path of any error.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
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
            config.console.check().map_err(anyhow::Error::msg)?;
            // The ZooKeeper settings as every command reads them (flags, variables such
            // as ARCHIVIST_ZK_AUTH, the file's zookeeper section), so `check` passes
            // nothing a command then refuses. Reads the password file; connects nowhere.
            let mut with_file = global.clone();
            with_file.config = file.clone();
            crate::context::zk_config(&with_file).context(
                "zookeeper settings (flags, ARCHIVIST_ZK_* variables, zookeeper section)",
            )?;
            // The database URL as every command reads it; opens nothing.
            let url = crate::context::database_url(&with_file).context(
                "database settings (--database-url, ARCHIVIST_DATABASE_URL, database.url)",
            )?;
            if archivist_db::Backend::of(&url).is_none() {
                anyhow::bail!(
                    "database URL {}: expected sqlite://PATH or postgres://USER@HOST:PORT/DB",
                    archivist_db::redact(&url)
                );
            }
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
