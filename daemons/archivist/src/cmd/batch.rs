//! `archivist batch ...` (submit, list, show, report and the operator actions) and
//! `archivist batcher` (the daemon), thin layers over `archivist-batches`.
//!
//! Exit codes as the other admin commands: 3 when an action is refused (the batch is not
//! in a state it applies to, or moved meanwhile; nothing was written).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use archivist_batches::admin::{self, BatchDetail, BatchSummary};
use archivist_batches::daemon;
use archivist_batches::submission::{load_submission, submit};
use archivist_batches::{report, BatchError, BatcherSettings};
use archivist_engine::member::Identity;
use archivist_engine::schema::records::{
    BatchRecord, BatchReport, Pair, ReportKind, WebhookDelivery, WebhookStatus,
};
use archivist_engine::schema::BatchState;
use clap::{Args, Subcommand};

use super::admin::render::{emit, or_dash, percent, table};
use super::admin::{ActorOpts, EXIT_REFUSED};
use crate::cli::GlobalOpts;

/// `archivist batch` subcommands.
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// Submit a batch: a YAML manifest of episodes and/or clips (see docs/batches.md).
    Submit(SubmitArgs),
    /// List batches with their progress.
    List(ListArgs),
    /// Show one batch: state, pairs, progress, webhook delivery, events.
    Show(IdArgs),
    /// Print a batch's report (the latest unless `--version`).
    #[command(disable_version_flag = true)]
    Report(ReportArgs),
    /// Release a held batch back to pending.
    Release(ActionArgs),
    /// Delete a batch (its record stays as a tombstone; its reports go).
    Delete(ActionArgs),
    /// Ask for an update report after failed jobs were retried.
    UpdateReport(ActionArgs),
    /// Hold every new batch (collection-wide batch hold).
    HoldAll(HoldAllArgs),
    /// Lift the collection-wide batch hold and release every held batch.
    ReleaseAll(ActorOpts),
}

/// Arguments of `batch submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The submission file.
    pub file: PathBuf,
    /// Who submits.
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `batch list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Include deleted batches.
    #[arg(long)]
    pub all: bool,
}

/// A batch id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// Batch id (`b0000001`).
    pub batch: String,
}

/// Arguments of `batch report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Batch id.
    pub batch: String,
    /// Report number (1 is the first) [default: the latest].
    #[arg(long)]
    pub version: Option<u32>,
}

/// An action on one batch.
#[derive(Debug, Args)]
pub struct ActionArgs {
    /// Batch id.
    pub batch: String,
    /// Who acts.
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `batch hold-all`.
#[derive(Debug, Args)]
pub struct HoldAllArgs {
    /// Why (shown by `archivist batch show` and `tree`).
    #[arg(long, default_value = "")]
    pub reason: String,
    /// Who acts.
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `archivist batcher`.
#[derive(Debug, Args)]
pub struct BatcherArgs {
    /// Identity in `/daemons`, batch locks and events (default `batcher-<host>-<pid>`).
    #[arg(long, env = "ARCHIVIST_BATCHER_NAME")]
    pub name: Option<String>,
    /// Time between passes over the batches, in ms [default: 5000].
    #[arg(long, env = "ARCHIVIST_BATCHER_POLL_MS")]
    pub poll_ms: Option<u64>,
    /// HTTP attempts per webhook delivery [default: 5].
    #[arg(long, env = "ARCHIVIST_BATCHER_WEBHOOK_ATTEMPTS")]
    pub webhook_attempts: Option<u32>,
    /// Wait before the second webhook attempt, doubled after each, in ms [default: 1000].
    #[arg(long, env = "ARCHIVIST_BATCHER_WEBHOOK_BACKOFF_MS")]
    pub webhook_backoff_ms: Option<u64>,
}

/// The batcher settings: the file's `batcher:` section, overridden by the flags.
pub fn settings(base: BatcherSettings, args: &BatcherArgs) -> BatcherSettings {
    let mut s = base;
    if let Some(ms) = args.poll_ms {
        s = s.with_poll_interval(Duration::from_millis(ms));
    }
    if args.webhook_attempts.is_some() || args.webhook_backoff_ms.is_some() {
        let attempts = args.webhook_attempts.unwrap_or(s.webhook_attempts);
        let backoff = args
            .webhook_backoff_ms
            .map(Duration::from_millis)
            .unwrap_or(s.webhook_backoff);
        s = s.with_webhook_retries(attempts, backoff);
    }
    s
}

/// Runs the batcher daemon until SIGTERM/SIGINT.
pub async fn run_daemon(global: &GlobalOpts, args: BatcherArgs) -> Result<ExitCode> {
    let config = crate::context::zk_config(global)?;
    let file = crate::context::file_config(global)?;
    let identity = match &args.name {
        Some(n) => Identity::named("batcher", n.clone()),
        None => Identity::new("batcher"),
    };
    let metrics = global.metrics_addr.map(|a| a.to_string());
    let db = crate::context::database(global).await?;
    daemon::run(
        &config,
        &db,
        settings(file.batcher, &args),
        identity,
        metrics,
        crate::shutdown::on_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a `batch` subcommand.
pub async fn run(global: &GlobalOpts, command: BatchCommand) -> Result<ExitCode> {
    match dispatch(global, command).await {
        Err(err) => match err.downcast_ref::<BatchError>() {
            Some(batch) if batch.is_refusal() => {
                eprintln!("archivist: {batch}");
                Ok(ExitCode::from(EXIT_REFUSED))
            }
            _ => Err(err),
        },
        ok => ok,
    }
}

async fn dispatch(global: &GlobalOpts, command: BatchCommand) -> Result<ExitCode> {
    if let BatchCommand::Submit(args) = &command {
        // Check the file before connecting: a bad file is refused even with ZooKeeper down.
        let submission = load_submission(&args.file)?;
        let session = crate::context::connect_to_write(global).await?;
        let record = submit(&session, &submission, &args.actor.actor()).await?;
        emit(global.output, &record, |r| {
            format!(
                "submitted batch {} ({}): {} episode(s), {} clip(s), {} episode id(s), {} clip id(s){}{}\n",
                r.id,
                r.status,
                r.submission.episodes.len(),
                r.submission.clips.len(),
                r.submission.episode_ids.len(),
                r.submission.clip_ids.len(),
                if r.submission.all_episodes() { "; every episode" } else { "" },
                if r.submission.all_clips() { "; every clip" } else { "" },
            )
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let session = crate::context::connect_initialised(global).await?;
    match command {
        BatchCommand::Submit(_) => {}
        BatchCommand::List(a) => {
            let list = admin::list(&session, a.all).await?;
            emit(global.output, &list, |l| render_list(l))?;
        }
        BatchCommand::Show(a) => {
            let detail = admin::show(&session, &a.batch).await?;
            emit(global.output, &detail, render_detail)?;
        }
        BatchCommand::Report(a) => {
            let r = report::read(&session, &a.batch, a.version).await?;
            emit(global.output, &r, render_report)?;
        }
        BatchCommand::Release(a) => {
            let r = admin::release(&session, &a.batch, &a.actor.actor()).await?;
            emit(global.output, &r, |r| changed(r, "released"))?;
        }
        BatchCommand::Delete(a) => {
            let r = admin::delete(&session, &a.batch, &a.actor.actor()).await?;
            emit(global.output, &r, |r| changed(r, "deleted"))?;
        }
        BatchCommand::UpdateReport(a) => {
            let r = admin::update_report(&session, &a.batch, &a.actor.actor()).await?;
            emit(global.output, &r, |r| {
                changed(r, "will get an update report once every pair is settled")
            })?;
        }
        BatchCommand::HoldAll(a) => {
            let new = admin::hold_all(&session, &a.actor.actor(), &a.reason).await?;
            emit(global.output, &new, |new| {
                if *new {
                    "batches held: new batches wait in `held`\n".to_string()
                } else {
                    "batches were already held\n".to_string()
                }
            })?;
        }
        BatchCommand::ReleaseAll(actor) => {
            let released = admin::release_all(&session, &actor.actor()).await?;
            emit(global.output, &released, |r| {
                format!(
                    "batch hold lifted; released: {}\n",
                    if r.is_empty() {
                        "none".into()
                    } else {
                        r.join(" ")
                    }
                )
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ts(t: time::OffsetDateTime) -> String {
    t.replace_nanosecond(t.millisecond() as u32 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

fn changed(r: &BatchRecord, what: &str) -> String {
    format!("batch {} {what} (now {})\n", r.id, r.status)
}

fn delivery(d: &Option<WebhookDelivery>) -> String {
    let Some(d) = d else {
        return "-".into();
    };
    let status = match d.status {
        WebhookStatus::Pending => "pending",
        WebhookStatus::Delivered => "delivered",
        WebhookStatus::Failed => "failed",
    };
    match &d.error {
        Some(e) => format!(
            "report {} {status} after {} attempt(s): {e}",
            d.report, d.attempts
        ),
        None => format!("report {} {status} ({} attempt(s))", d.report, d.attempts),
    }
}

fn fraction(done: u64, total: u64) -> f64 {
    if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    }
}

/// Progress of a batch whose pairs are known (after curation), else `-`.
fn progress(b: &BatchSummary) -> String {
    match b.status {
        BatchState::Pending | BatchState::Held => "-".into(),
        _ => percent(fraction(b.progress.done(), b.progress.total)),
    }
}

fn render_list(list: &[BatchSummary]) -> String {
    if list.is_empty() {
        return "no batches\n".into();
    }
    table(
        &[
            "batch",
            "name",
            "state",
            "pairs done",
            "failed",
            "progress",
            "reports",
            "webhook",
        ],
        list.iter().map(|b| {
            vec![
                b.id.clone(),
                or_dash(b.name.clone()),
                b.status.to_string(),
                format!("{}/{}", b.progress.done(), b.progress.total),
                b.progress.failed.to_string(),
                progress(b),
                b.reports.to_string(),
                delivery(&b.delivery)
                    .split(' ')
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        }),
    )
}

fn render_detail(d: &BatchDetail) -> String {
    let b = &d.batch;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Batch {} {} — {}",
        b.id,
        b.name
            .as_deref()
            .map(|n| format!("({n})"))
            .unwrap_or_default(),
        b.status
    );
    let _ = writeln!(
        out,
        "Submitted by {} at {}",
        b.submitted_by,
        ts(b.submitted_at)
    );
    if let Some(m) = &b.message {
        let _ = writeln!(out, "Message: {m}");
    }
    let s = &b.submission;
    let _ = writeln!(
        out,
        "Names: {} episode(s), {} clip(s), {} episode id(s), {} clip id(s){}{}",
        s.episodes.len(),
        s.clips.len(),
        s.episode_ids.len(),
        s.clip_ids.len(),
        if s.all_episodes() {
            "; every episode"
        } else {
            ""
        },
        if s.all_clips() { "; every clip" } else { "" }
    );
    let p = b.progress;
    let _ = writeln!(
        out,
        "Pairs: {} episode(s) x {} clip(s) = {}; {} recorded, {} failed, {} pending ({})",
        b.episodes.len(),
        b.clips.len(),
        p.total,
        p.recorded,
        p.failed,
        p.pending,
        percent(fraction(p.done(), p.total))
    );
    for problem in &b.problems {
        let _ = writeln!(out, "Not curated: {problem}");
    }
    let _ = writeln!(
        out,
        "Reports: {}",
        if d.report_numbers.is_empty() {
            "none".to_string()
        } else {
            d.report_numbers
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(
        out,
        "Webhook: {} — {}",
        or_dash(b.webhook.clone()),
        delivery(&b.delivery)
    );
    if let Some(l) = &d.lock {
        let _ = writeln!(out, "Locked by {} since {}", l.owner, ts(l.since));
    }
    if d.batches_held {
        out.push_str("Batches are held (archivist batch release-all)\n");
    }
    out.push_str(&table(
        &["at", "by", "step", "result"],
        b.events
            .iter()
            .map(|e| vec![ts(e.at), e.by.clone(), e.step.clone(), e.result.clone()]),
    ));
    out
}

fn pair_table(pairs: &[Pair]) -> String {
    table(
        &["episode", "clip"],
        pairs
            .iter()
            .map(|p| vec![p.episode.clone(), p.clip.clone()]),
    )
}

fn render_report(r: &BatchReport) -> String {
    let mut out = String::new();
    let kind = match r.kind {
        ReportKind::Initial => "report".to_string(),
        ReportKind::Update => format!("update report (since report {})", or_dash(r.since)),
    };
    let _ = writeln!(
        out,
        "Batch {} — {kind} {} written {}",
        r.batch,
        r.number,
        ts(r.written)
    );
    let p = r.pairs;
    let _ = writeln!(
        out,
        "Pairs: {} total, {} researched, {} failed, {} pending",
        p.total, p.recorded, p.failed, p.pending
    );
    if r.kind == ReportKind::Update {
        let _ = writeln!(
            out,
            "Researched since report {}: {} pair(s); still failed: {}",
            or_dash(r.since),
            r.resolved.len(),
            r.still_failed.len()
        );
        for (title, pairs) in [
            ("Researched since the report before", &r.resolved),
            ("Still failed", &r.still_failed),
        ] {
            if !pairs.is_empty() {
                let _ = writeln!(out, "{title}:");
                out.push_str(&pair_table(pairs));
            }
        }
    }
    let mut found = Vec::new();
    for (clip, episodes) in &r.found {
        for (episode, occurrences) in episodes {
            let at = occurrences
                .iter()
                .map(|o| format!("{:.3}s ({:.2})", o.at, o.conf))
                .collect::<Vec<_>>()
                .join(", ");
            found.push(vec![clip.clone(), episode.clone(), at]);
        }
    }
    if found.is_empty() {
        out.push_str(if r.kind == ReportKind::Update {
            "Found (among the pairs researched since): nowhere\n"
        } else {
            "Found: nowhere\n"
        });
    } else {
        out.push_str("Found:\n");
        out.push_str(&table(&["clip", "episode", "at (confidence)"], found));
    }
    if !r.failed_jobs.is_empty() {
        out.push_str("Failed jobs:\n");
        out.push_str(&table(
            &["job", "episode", "clips", "retries", "why"],
            r.failed_jobs.iter().map(|j| {
                vec![
                    j.job.clone(),
                    j.episode.clone(),
                    j.clips.join(" "),
                    j.retry_count.to_string(),
                    j.reason.clone(),
                ]
            }),
        ));
    }
    if !r.errors.is_empty() {
        out.push_str("Per-clip errors:\n");
        out.push_str(&table(
            &["episode", "clip", "error"],
            r.errors
                .iter()
                .map(|e| vec![e.episode.clone(), e.clip.clone(), e.error.clone()]),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_batch_commands_are_a_valid_clap_tree() {
        crate::cli::Cli::command().debug_assert();
        let cli = crate::cli::Cli::try_parse_from([
            "archivist",
            "batch",
            "report",
            "b0000001",
            "--version",
            "2",
        ]);
        assert!(cli.is_ok(), "{cli:?}");
    }
}
