//! One module per subcommand (mini-redis style); [`run`] dispatches.

pub mod admin;
pub mod batch;
pub mod config;
pub mod console;
pub mod curate;
pub mod matching;
pub mod migrate;
pub mod planner;
pub mod recorder;
pub mod researcher;
pub mod run;
pub mod sample;
pub mod sample_check;
pub mod schema;
pub mod serve;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    let global = cli.global;
    let metrics_addr = match global.metrics_addr {
        Some(addr) => Some(addr),
        None if cli.command.is_daemon() => crate::context::file_config(&global)?.metrics_addr,
        None => None,
    };
    if let Some(addr) = metrics_addr {
        if cli.command.is_daemon() {
            crate::observe::serve(addr, tokio_util::sync::CancellationToken::new()).await?;
        }
    }
    match cli.command {
        Command::Init(args) => schema::init(&global, args).await,
        Command::Schema(c) => schema::run(&global, c).await,
        Command::Match(a) => matching::run(&global, a).await,
        Command::Curate(c) => curate::run(&global, c).await,
        Command::Curator(a) => curate::run_daemon(&global, a).await,
        Command::Planner(a) => planner::run(&global, a).await,
        Command::Researcher(a) => researcher::run(&global, a).await,
        Command::Recorder(a) => recorder::run_recorder(&global, a).await,
        Command::Reaper(a) => recorder::run_reaper(&global, a).await,
        Command::Run(a) => run::run(&global, a).await,
        Command::Config(c) => config::run(&global, c).await,
        Command::ServeFiles(a) => serve::run(&global, a).await,
        Command::Sample(a) => sample::run(&global, a).await,
        Command::Batch(c) => batch::run(&global, c).await,
        Command::Batcher(a) => batch::run_daemon(&global, a).await,
        Command::Console(a) => console::run(&global, a).await,
        Command::Admin(c) => admin::run(&global, c).await,
        Command::Migrate(a) => migrate::run(&global, a).await,
    }
}
