//! `archivist run`: several daemons in one process, for a single machine (`--all`) or a
//! chosen set (`--recorder --reaper`). Each role keeps its own ZooKeeper session, so a
//! lost session stops only that role's work. Settings come from the configuration file
//! and `ARCHIVIST__...` variables (see docs/configuration.md).

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use archivist_engine::member::Identity;
use clap::Args;
use tokio::task::JoinSet;

use crate::cli::GlobalOpts;
use crate::context::{file_config, zk_config};

/// Arguments of `archivist run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run every daemon (the curator only if feeds are configured).
    #[arg(long)]
    pub all: bool,
    /// Run the planner.
    #[arg(long)]
    pub planner: bool,
    /// Run a researcher.
    #[arg(long)]
    pub researcher: bool,
    /// Run the recorder.
    #[arg(long)]
    pub recorder: bool,
    /// Run the reaper.
    #[arg(long)]
    pub reaper: bool,
    /// Run the batcher.
    #[arg(long)]
    pub batcher: bool,
    /// Run the curator (needs `curator.feeds` in the configuration).
    #[arg(long)]
    pub curator: bool,
    /// Let the researcher fetch `file://` URLs (local media).
    #[arg(long, env = "ARCHIVIST_ALLOW_FILE_URLS")]
    pub allow_file_urls: bool,
}

/// Runs the chosen daemons until SIGTERM/SIGINT, then waits for each to wind down.
pub async fn run(global: &GlobalOpts, args: RunArgs) -> Result<ExitCode> {
    let file = file_config(global)?;
    let zk = zk_config(global)?;
    let all = args.all;
    let want = |flag: bool| all || flag;
    if !(want(args.planner)
        || want(args.researcher)
        || want(args.recorder)
        || want(args.reaper)
        || want(args.batcher)
        || args.curator)
    {
        bail!("nothing to run: give --all or at least one of --planner --researcher --recorder --reaper --batcher --curator");
    }
    {
        let session = archivist_engine::Session::connect(&zk).await?;
        archivist_engine::tree::init(&session, concat!("archivist ", env!("CARGO_PKG_VERSION")))
            .await?;
    }
    let shutdown = crate::shutdown::on_signal();
    let mut roles = JoinSet::new();
    if want(args.planner) {
        let (zk, settings, stop) = (zk.clone(), file.planner.clone(), shutdown.clone());
        roles.spawn(async move {
            archivist_planner::run(&zk, settings, Identity::new("planner"), stop)
                .await
                .context("planner")
        });
    }
    if want(args.researcher) {
        let mut settings = file.researcher.clone();
        if args.allow_file_urls {
            settings.download.allow_file_urls = true;
        }
        let (zk, stop) = (zk.clone(), shutdown.clone());
        roles.spawn(async move {
            archivist_researcher::run(&zk, settings, Identity::new("researcher"), stop)
                .await
                .context("researcher")
        });
    }
    if want(args.recorder) {
        let (zk, settings, stop) = (zk.clone(), file.recorder.clone(), shutdown.clone());
        roles.spawn(async move {
            archivist_recorder::run(&zk, settings, Identity::new("recorder"), stop)
                .await
                .context("recorder")
        });
    }
    if want(args.reaper) {
        let (zk, settings, stop) = (zk.clone(), file.reaper.clone(), shutdown.clone());
        roles.spawn(async move {
            archivist_recorder::reaper::run(&zk, settings, Identity::new("reaper"), stop)
                .await
                .context("reaper")
        });
    }
    if want(args.batcher) {
        let (zk, settings, stop) = (zk.clone(), file.batcher.clone(), shutdown.clone());
        let metrics = global.metrics_addr.map(|a| a.to_string());
        roles.spawn(async move {
            archivist_batches::daemon::run(&zk, settings, Identity::new("batcher"), metrics, stop)
                .await
                .context("batcher")
        });
    }
    if args.curator || (all && !file.curator.feeds.is_empty()) {
        let (zk, settings, stop) = (zk.clone(), file.curator.clone(), shutdown.clone());
        roles.spawn(async move {
            archivist_catalog::run(&zk, settings, Identity::new("curator"), stop)
                .await
                .context("curator")
        });
    }
    let mut failed = false;
    while let Some(joined) = roles.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("archivist: {e:#}");
                failed = true;
                shutdown.cancel();
            }
            Err(e) => {
                eprintln!("archivist: a daemon task panicked: {e}");
                failed = true;
                shutdown.cancel();
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
