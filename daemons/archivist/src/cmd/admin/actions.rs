//! `archivist retry`, `cancel` and `delete`: compare-and-set actions on jobs.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Result};
use archivist_admin::actions::{self, ActionReport, BulkItem, UnreadableDelete};
use archivist_admin::AdminError;
use clap::Args;

use super::render::{emit, or_dash, table};
use super::{ActorOpts, EXIT_REFUSED};
use crate::cli::GlobalOpts;

/// Arguments of `retry`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["job", "all_failed"]))]
pub struct RetryArgs {
    /// The failed job to retry.
    #[arg(value_parser = super::ids::node_name)]
    pub job: Option<String>,
    /// Retry every failed job.
    #[arg(long)]
    pub all_failed: bool,
    /// With `--all-failed`: only jobs whose message matches (substring, or a glob with
    /// `*`; case-insensitive).
    #[arg(long, requires = "all_failed")]
    pub reason: Option<String>,
    /// Duration of the fresh lease, in seconds (up to 2,592,000: 30 days); it must be
    /// longer than the work-item TTL (planner.work_item_ttl_ms, 300 s by default).
    #[arg(long, env = "ARCHIVIST_LEASE_DURATION_S", default_value_t = 600,
        value_parser = clap::value_parser!(u64).range(1..=archivist_engine::lease::MAX_DURATION_S))]
    pub lease_duration_s: u64,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Job to cancel.
    #[arg(value_parser = super::ids::node_name)]
    pub job: String,
    /// Why (stored as the job's message).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Failed, held or cancelled job to delete.
    #[arg(value_parser = super::ids::node_name)]
    pub job: String,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Delete a job whose record does not decode (no state rule can apply to it), with
    /// its queue entries and lease; a job that decodes is refused.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// `delete --force`: the job whose record does not decode, after confirmation.
async fn delete_unreadable(
    global: &GlobalOpts,
    args: &DeleteArgs,
    session: &archivist_engine::Session,
    settings: &archivist_admin::settings::AdminSettings,
) -> Result<ExitCode> {
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "refusing to delete {} without confirmation: stdin is not a terminal; pass --yes",
                args.job
            );
        }
        eprint!(
            "Delete job {} whatever its record holds (only a job whose record does not decode)?\nIts queue entries and lease go too; research stays. Type the job id to confirm: ",
            args.job
        );
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != args.job {
            eprintln!("archivist: not confirmed; nothing deleted");
            return Ok(ExitCode::FAILURE);
        }
    }
    let report = actions::delete_unreadable(session, settings, &args.job).await?;
    emit(global.output, &report, render_unreadable)?;
    Ok(ExitCode::SUCCESS)
}

fn render_unreadable(r: &UnreadableDelete) -> String {
    table(
        &["job", "action", "record error", "deleted", "detail"],
        [vec![
            r.job.clone(),
            "delete --force".into(),
            r.error.clone(),
            r.deleted.join(" "),
            r.detail.clone(),
        ]],
    )
}

/// A table of one action's report.
pub fn render_action(r: &ActionReport) -> String {
    table(
        &[
            "job", "episode", "action", "from", "to", "outcome", "detail",
        ],
        [vec![
            r.job.clone(),
            r.episode.clone(),
            format!("{:?}", r.action).to_lowercase(),
            r.from.to_string(),
            or_dash(r.to),
            format!("{:?}", r.outcome).to_lowercase(),
            r.detail.clone(),
        ]],
    )
}

fn render_bulk(items: &[BulkItem]) -> String {
    let mut out = table(
        &["job", "result", "to", "detail"],
        items.iter().map(|i| match (&i.report, &i.error) {
            (Some(r), _) => vec![
                i.job.clone(),
                "retried".into(),
                or_dash(r.to),
                r.detail.clone(),
            ],
            (None, e) => vec![
                i.job.clone(),
                if i.refused {
                    "refused".into()
                } else if i.unconfirmed {
                    "unknown".into()
                } else {
                    "error".into()
                },
                "-".into(),
                e.clone().unwrap_or_default(),
            ],
        }),
    );
    let unknown = items.iter().filter(|i| i.unconfirmed).count();
    out.push_str(&format!(
        "{} retried, {} not",
        items.iter().filter(|i| i.report.is_some()).count(),
        items
            .iter()
            .filter(|i| i.report.is_none() && !i.unconfirmed)
            .count()
    ));
    if unknown > 0 {
        out.push_str(&format!(
            ", {unknown} unknown (the reply was lost and the job could not be read back: `archivist jobs show J` tells)"
        ));
    }
    out.push('\n');
    out
}

/// Runs `retry`.
pub async fn retry(global: &GlobalOpts, args: RetryArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    let settings = args
        .actor
        .settings()
        .with_lease_duration(std::time::Duration::from_secs(args.lease_duration_s))
        .with_work_item_ttl(crate::context::file_config(global)?.planner.work_item_ttl);
    if let Some(job) = &args.job {
        let report = actions::retry(&session, &settings, job).await?;
        emit(global.output, &report, render_action)?;
        return Ok(ExitCode::SUCCESS);
    }
    let items = actions::retry_all_failed(&session, &settings, args.reason.as_deref()).await?;
    emit(global.output, &items, |i| render_bulk(i))?;
    Ok(if items.iter().any(|i| i.report.is_none() && !i.refused) {
        ExitCode::FAILURE
    } else if items.iter().any(|i| i.refused) {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `cancel`.
pub async fn cancel(global: &GlobalOpts, args: CancelArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    let report = actions::cancel(
        &session,
        &args.actor.settings(),
        &args.job,
        args.reason.as_deref(),
    )
    .await?;
    emit(global.output, &report, render_action)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `delete`: shows the job, asks (unless `--yes`), then deletes it at the version
/// shown.
pub async fn delete(global: &GlobalOpts, args: DeleteArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    let settings = args.actor.settings();
    if args.force {
        return delete_unreadable(global, &args, &session, &settings).await;
    }
    let seen = match actions::look(&session, &args.job).await {
        Err(AdminError::Engine(archivist_engine::EngineError::Record(e))) => bail!(
            "{e}; `archivist delete {} --force` deletes a job whose record does not decode",
            args.job
        ),
        other => other?,
    };
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "refusing to delete {} without confirmation: stdin is not a terminal; pass --yes",
                args.job
            );
        }
        eprint!(
            "Delete job {} ({}, episode {}, {} clips, message: {})?\nIts queue entry, lease and reports go too; research stays. Type the job id to confirm: ",
            seen.job.id,
            seen.job.status,
            seen.job.episode,
            seen.job.clips.len(),
            seen.job.message.as_deref().unwrap_or("-")
        );
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != seen.job.id {
            eprintln!("archivist: not confirmed; nothing deleted");
            return Ok(ExitCode::FAILURE);
        }
    }
    let report = actions::delete_seen(&session, &settings, &seen).await?;
    emit(global.output, &report, render_action)?;
    Ok(ExitCode::SUCCESS)
}
