//! `archivist jobs list` and `archivist jobs show`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use archivist_admin::jobs::{JobDetail, JobFilter, JobList};
use archivist_admin::AdminSettings;
use archivist_engine::schema::JobState;
use clap::Subcommand;

use super::progress::Bar;
use super::render::{emit, or_dash, percent, span, table, when};
use crate::cli::GlobalOpts;

/// `jobs ...`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, optionally of one state or episode.
    List {
        /// Only jobs in this state (pending, leased, researching, reported, recorded,
        /// failed, held, expired, cancelled).
        #[arg(long)]
        state: Option<JobState>,
        /// Only jobs of this episode.
        #[arg(long)]
        episode: Option<String>,
    },
    /// Everything about one job: data, lock, lease, event history, reports waiting,
    /// progress.
    Show {
        /// Job id (`j` + 10 digits).
        #[arg(value_parser = super::ids::node_name)]
        job: String,
    },
}

/// Runs `jobs ...`.
pub async fn run(global: &GlobalOpts, command: JobsCommand) -> Result<ExitCode> {
    let session = crate::context::connect_initialised(global).await?;
    let settings = AdminSettings::default();
    match command {
        JobsCommand::List { state, episode } => {
            let db = crate::context::database_read_only(global).await?;
            let list = archivist_admin::jobs::list(
                &session,
                &db,
                &settings,
                &JobFilter { state, episode },
                &Bar::stderr(),
            )
            .await?;
            emit(global.output, &list, render_list)?;
            if !list.unreadable.is_empty() {
                eprintln!(
                    "archivist: {} job node(s) do not decode: run `archivist fsck`",
                    list.unreadable.len()
                );
            }
        }
        JobsCommand::Show { job } => {
            let detail = archivist_admin::jobs::show(&session, &settings, &job).await?;
            emit(global.output, &detail, render_detail)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn render_list(list: &JobList) -> String {
    let mut out = table(
        &[
            "job", "state", "episode", "clips", "priority", "retries", "holder", "progress",
            "updated", "message",
        ],
        list.jobs.iter().map(|j| {
            let request = j
                .request
                .map(|r| format!(" ({r:?} requested)").to_lowercase())
                .unwrap_or_default();
            vec![
                j.id.clone(),
                format!("{}{request}", j.status),
                j.episode.clone(),
                j.clips.to_string(),
                j.priority.to_string(),
                j.retry_count.to_string(),
                or_dash(j.holder.clone()),
                percent(j.progress),
                j.updated
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default(),
                j.message.clone().unwrap_or_default(),
            ]
        }),
    );
    let _ = writeln!(out, "{} job(s)", list.jobs.len());
    for bad in &list.unreadable {
        let _ = writeln!(out, "unreadable: {}", bad.error);
    }
    out
}

fn render_detail(d: &JobDetail) -> String {
    let j = &d.job;
    let mut out = String::new();
    let mut rows = vec![
        vec!["job".into(), j.id.clone()],
        vec!["status".into(), j.status.to_string()],
        vec!["last successful".into(), or_dash(j.last_successful_status)],
        vec!["retries".into(), j.retry_count.to_string()],
        vec!["message".into(), or_dash(j.message.clone())],
        vec![
            "request".into(),
            or_dash(j.request.map(|r| format!("{r:?}").to_lowercase())),
        ],
        vec!["episode".into(), format!("{} ({})", j.episode, j.media_url)],
        vec![
            "clips".into(),
            format!("{} ({})", j.clips.len(), j.clips.join(" ")),
        ],
        vec!["priority".into(), j.priority.to_string()],
        vec!["batch".into(), or_dash(j.batch.clone())],
        vec!["holder".into(), or_dash(j.holder.clone())],
        vec![
            "progress".into(),
            format!(
                "{} ({} bytes, {} clips reported)",
                percent(j.progress.fraction),
                j.progress.bytes,
                j.progress.clips_done
            ),
        ],
        vec![
            "created".into(),
            format!(
                "{} (node {}, version {})",
                j.created,
                when(d.stat.ctime_ms),
                d.stat.version
            ),
        ],
        vec!["updated".into(), j.updated.to_string()],
        vec![
            "queue entry".into(),
            format!(
                "{} in {}",
                d.queue_entry,
                if d.queued_in.is_empty() {
                    "no queue (run fsck)".into()
                } else {
                    d.queued_in
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ],
    ];
    rows.push(vec![
        "lock".into(),
        match &d.lock {
            None => "unlocked".into(),
            Some(l) => match &l.record {
                Some(r) => format!(
                    "{} since {} (session {})",
                    r.owner,
                    r.since,
                    or_dash(l.owner_session.clone())
                ),
                None => format!("unreadable: {}", or_dash(l.error.clone())),
            },
        },
    ]);
    rows.push(vec![
        "lease".into(),
        match &d.lease {
            None => "none".into(),
            Some(l) => {
                let holder = l
                    .record
                    .as_ref()
                    .and_then(|r| r.holder.clone())
                    .unwrap_or_else(|| "unclaimed".into());
                if let Some(why) = &l.invalid {
                    format!("INVALID ({holder}): {why}")
                } else if l.expired {
                    format!("EXPIRED {} ago ({holder})", span(-l.remaining_ms))
                } else {
                    format!(
                        "{holder}, expires in {} at {}",
                        span(l.remaining_ms),
                        when(l.expires_ms)
                    )
                }
            }
        },
    ]);
    out.push_str(&table(&["field", "value"], rows));
    out.push_str("\nEvents (oldest first):\n");
    out.push_str(&table(
        &["at", "by", "step", "result"],
        d.events().iter().map(|e| {
            vec![
                e.at.to_string(),
                e.by.clone(),
                e.step.clone(),
                e.result.clone(),
            ]
        }),
    ));
    if !d.reports.is_empty() {
        out.push_str("\nReports waiting for a recorder:\n");
        out.push_str(&table(
            &["report", "clip", "occurrences", "final", "error"],
            d.reports.iter().map(|r| {
                vec![
                    r.name.clone(),
                    or_dash(r.clip.clone()),
                    r.occurrences.to_string(),
                    r.is_final.to_string(),
                    r.error.clone().unwrap_or_default(),
                ]
            }),
        ));
    }
    out
}
