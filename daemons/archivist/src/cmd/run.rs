//! `archivist run`: several daemons in one process, for a single machine (`--all`) or a
//! chosen set (`--recorder --reaper`). Each role keeps its own ZooKeeper session, so a
//! lost session stops only that role's work. A role that fails or panics is restarted
//! after a backoff and never stops its neighbours ([`keep_running`]). Settings come from
//! the configuration file and `ARCHIVIST__...` variables (see docs/configuration.md).

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use archivist_engine::member::Identity;
use clap::Args;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

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
    // Configuration errors stop the command before anything starts: a restart would
    // not fix them (run-time failures are restarted, see keep_running).
    if args.curator && file.curator.feeds.is_empty() {
        bail!("--curator needs feeds: set curator.feeds in the configuration");
    }
    for feed in &file.curator.feeds {
        archivist_catalog::feed::feed_urls(feed).context("curator.feeds")?;
    }
    // One database for every role of this process (a pool: cheap to share), opened
    // before the tree's init, which moves the job counter past the archive's job ids
    // (a counter behind them would hand out ids the archive holds). A database that
    // cannot be reached now is no configuration error: the tree is made without the
    // archive's ids, and each role opens the database when it starts, restarted with
    // a backoff until it can (outside 22 finding 13).
    let url = crate::context::database_url(global)?;
    let opened = match archivist_db::Database::connect(&url).await {
        Ok(db) => Some(db),
        Err(e @ (archivist_db::DbError::Connect { .. } | archivist_db::DbError::Query { .. })) => {
            eprintln!("archivist: {e}; the daemons start and open the database when it answers");
            tracing::error!(error = %e, "database unavailable at start; roles retry");
            None
        }
        Err(e) => return Err(e.into()),
    };
    {
        let archived = match &opened {
            Some(db) => archivist_engine::counter::Archived::from_highest_job(
                archivist_db::research::highest_job(db).await?.as_deref(),
            ),
            None => archivist_engine::counter::Archived::NONE,
        };
        let deployment = match &opened {
            Some(db) => archivist_db::deployment::get(db).await?,
            None => None,
        };
        let session = archivist_engine::Session::connect(&zk).await?;
        archivist_engine::tree::init_past(
            &session,
            concat!("archivist ", env!("CARGO_PKG_VERSION")),
            &archivist_engine::tree::FromDatabase {
                archived,
                deployment: deployment.as_deref(),
            },
        )
        .await?;
        if let Some(db) = &opened {
            // A database of another deployment is a configuration error: stop here.
            crate::deployment::bind(&session, db, crate::deployment::Mode::Bind).await?;
        }
    }
    let shared = std::sync::Arc::new(tokio::sync::OnceCell::new_with(opened));
    let database = {
        let (url, zk) = (url.clone(), zk.clone());
        move || {
            let (shared, url, zk) = (shared.clone(), url.clone(), zk.clone());
            async move {
                shared
                    .get_or_try_init(|| crate::context::open_bound(&url, &zk))
                    .await
                    .cloned()
            }
        }
    };
    let shutdown = crate::shutdown::on_signal();
    let mut roles = JoinSet::new();
    if want(args.planner) {
        let (zk, settings, stop) = (zk.clone(), file.planner.clone(), shutdown.clone());
        let db = database.clone();
        roles.spawn(keep_running("planner", shutdown.clone(), move || {
            let (zk, settings, stop, db) = (zk.clone(), settings.clone(), stop.clone(), db.clone());
            async move {
                let db = db().await?;
                archivist_planner::run(&zk, &db, settings, Identity::new("planner"), stop)
                    .await
                    .context("planner")
            }
        }));
    }
    if want(args.researcher) {
        let mut settings = crate::context::with_default_media_dir(file.researcher.clone());
        if args.allow_file_urls {
            settings.download.allow_file_urls = true;
        }
        let (zk, stop, db) = (zk.clone(), shutdown.clone(), database.clone());
        roles.spawn(keep_running("researcher", shutdown.clone(), move || {
            let (zk, settings, stop, db) = (zk.clone(), settings.clone(), stop.clone(), db.clone());
            async move {
                let db = db().await?;
                archivist_researcher::run(&zk, &db, settings, Identity::new("researcher"), stop)
                    .await
                    .context("researcher")
            }
        }));
    }
    if want(args.recorder) {
        let (zk, settings, stop) = (zk.clone(), file.recorder.clone(), shutdown.clone());
        let db = database.clone();
        roles.spawn(keep_running("recorder", shutdown.clone(), move || {
            let (zk, settings, stop) = (zk.clone(), settings.clone(), stop.clone());
            let db = db.clone();
            async move {
                let db = db().await?;
                archivist_recorder::run(&zk, db, settings, Identity::new("recorder"), stop)
                    .await
                    .context("recorder")
            }
        }));
    }
    if want(args.reaper) {
        let (zk, settings, stop, db) = (
            zk.clone(),
            file.reaper.clone(),
            shutdown.clone(),
            database.clone(),
        );
        roles.spawn(keep_running("reaper", shutdown.clone(), move || {
            let (zk, settings, stop, db) = (zk.clone(), settings.clone(), stop.clone(), db.clone());
            async move {
                let db = db().await?;
                archivist_recorder::reaper::run(&zk, &db, settings, Identity::new("reaper"), stop)
                    .await
                    .context("reaper")
            }
        }));
    }
    if want(args.batcher) {
        let (zk, settings, stop) = (zk.clone(), file.batcher.clone(), shutdown.clone());
        let metrics = global.metrics_addr.map(|a| a.to_string());
        let db = database.clone();
        roles.spawn(keep_running("batcher", shutdown.clone(), move || {
            let (zk, settings, stop, db) = (zk.clone(), settings.clone(), stop.clone(), db.clone());
            let metrics = metrics.clone();
            async move {
                let db = db().await?;
                archivist_batches::daemon::run(
                    &zk,
                    &db,
                    settings,
                    Identity::new("batcher"),
                    metrics,
                    stop,
                )
                .await
                .context("batcher")
            }
        }));
    }
    if args.curator || (all && !file.curator.feeds.is_empty()) {
        let (zk, settings, stop) = (zk.clone(), file.curator.clone(), shutdown.clone());
        let db = database.clone();
        roles.spawn(keep_running("curator", shutdown.clone(), move || {
            let (zk, settings, stop, db) = (zk.clone(), settings.clone(), stop.clone(), db.clone());
            async move {
                let db = db().await?;
                archivist_catalog::run(&zk, &db, settings, Identity::new("curator"), stop)
                    .await
                    .context("curator")
            }
        }));
    }
    let mut failed = false;
    while let Some(joined) = roles.join_next().await {
        // keep_running catches its role's panics; a JoinError here is a bug in it.
        failed |= joined.unwrap_or(true);
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// First and longest wait before a failed role is started again.
const RESTART_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// Runs one role until `shutdown`: each start is its own task, so a panic inside the role
/// is caught here like an error; either is printed and the role starts again after a
/// backoff (1 s doubling to 60 s). Its neighbours never notice. Returns whether the role
/// ever failed (the exit status says so at shutdown).
async fn keep_running<F, Fut>(name: &'static str, shutdown: CancellationToken, start: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let mut backoff = RESTART_BACKOFF.0;
    let mut failed = false;
    loop {
        let reason = match tokio::spawn(start()).await {
            Ok(Ok(())) => return failed,
            Ok(Err(e)) => format!("{e:#}"),
            Err(e) if e.is_panic() => format!("{name} panicked: {e}"),
            Err(e) => format!("{name} stopped: {e}"),
        };
        failed = true;
        if shutdown.is_cancelled() {
            eprintln!("archivist: {reason}");
            return failed;
        }
        eprintln!(
            "archivist: {reason}; restarting {name} in {} s (the other daemons go on)",
            backoff.as_secs()
        );
        tracing::error!(role = name, %reason, backoff_s = backoff.as_secs(), "role failed; restarting it");
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return failed,
        }
        backoff = (backoff * 2).min(RESTART_BACKOFF.1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    /// A role that panics (twice) and one that errors are restarted, while a neighbour
    /// runs on untouched until shutdown; the result says which ones failed.
    #[tokio::test]
    async fn a_role_that_panics_or_fails_is_restarted_and_never_stops_its_neighbours() {
        let shutdown = CancellationToken::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let s = starts.clone();
        let stop = shutdown.clone();
        let panicky = tokio::spawn(keep_running("panicky", shutdown.clone(), move || {
            let (s, stop) = (s.clone(), stop.clone());
            async move {
                if s.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("parser exploded");
                }
                stop.cancelled().await;
                Ok(())
            }
        }));
        let failing = tokio::spawn(keep_running("failing", shutdown.clone(), || async {
            anyhow::bail!("no feeds configured")
        }));
        let neighbour_stopped_early = Arc::new(AtomicUsize::new(0));
        let n = neighbour_stopped_early.clone();
        let stop = shutdown.clone();
        let neighbour = tokio::spawn(keep_running("neighbour", shutdown.clone(), move || {
            let (n, stop) = (n.clone(), stop.clone());
            async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => { n.fetch_add(1, Ordering::SeqCst); }
                }
                Ok(())
            }
        }));
        // Backoffs of 1 s then 2 s: the third start, at about 3 s, runs. A busy machine
        // may start it later, so wait for it (up to 30 s), then check it stays running.
        let waited = std::time::Instant::now();
        while starts.load(Ordering::SeqCst) < 3 && waited.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "two panics, then it runs");
        assert!(!neighbour.is_finished() && !panicky.is_finished() && !failing.is_finished());
        shutdown.cancel();
        assert!(panicky.await.unwrap(), "the panics are reported");
        assert!(failing.await.unwrap());
        assert!(!neighbour.await.unwrap(), "the neighbour never failed");
        assert_eq!(neighbour_stopped_early.load(Ordering::SeqCst), 0);
    }
}
