//! `archivist status [--episodes] [--watch]`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use archivist_admin::spool::Spool;
use archivist_admin::status::{EpisodeProgress, StatusReport};
use archivist_admin::AdminSettings;
use archivist_engine::schema::BatchState;
use clap::Args;

use super::progress::Bar;
use super::render::{emit, or_dash, percent, span, table, terminal_safe, when};
use super::streamed::{self, SpooledRows, Widths, WithRows, BOXED_ROWS};
use crate::cli::{GlobalOpts, OutputFormat};

/// Arguments of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Add a research-progress row per episode.
    #[arg(long)]
    pub episodes: bool,
    /// Refresh until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Refresh interval of `--watch`, in seconds.
    #[arg(long, env = "ARCHIVIST_STATUS_INTERVAL_S", default_value_t = 2)]
    pub interval_s: u64,
}

/// Runs `status`.
pub async fn run(global: &GlobalOpts, args: StatusArgs) -> Result<ExitCode> {
    let session = crate::context::connect_initialised(global).await?;
    let db = crate::context::database_read_only(global).await?;
    let settings = AdminSettings::default();
    if !args.watch {
        if args.episodes {
            return with_episodes(global.output, &session, &db, &settings).await;
        }
        let report =
            archivist_admin::status::status(&session, &db, &settings, false, &Bar::stderr())
                .await?;
        emit(global.output, &report, render)?;
        return Ok(ExitCode::SUCCESS);
    }
    let stop = crate::shutdown::on_signal();
    loop {
        let report = archivist_admin::status::status(
            &session,
            &db,
            &settings,
            args.episodes,
            &archivist_admin::Silent,
        )
        .await?;
        match global.output {
            // The screen is cleared on a terminal only: a file or pipe gets the tables
            // one after another (outside try 17p F9: escape codes in a log file).
            OutputFormat::Table if std::io::stdout().is_terminal() => {
                out!("\x1b[2J\x1b[H{}", terminal_safe(&render(&report)))
            }
            OutputFormat::Table => outln!("{}", terminal_safe(&render(&report))),
            // One document per refresh, so a script can read them as a stream.
            OutputFormat::Json => outln!("{}", serde_json::to_string(&report)?),
            OutputFormat::Yaml => out!("---\n{}", serde_yaml::to_string(&report)?),
        }
        if crate::output::reader_gone() {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(args.interval_s.max(1))) => {}
            _ = stop.cancelled() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The header of `status --episodes`'s table.
const EPISODE_HEADER: [&str; 6] = [
    "episode",
    "title",
    "researched",
    "found",
    "progress",
    "held",
];

/// An episode's cells, shown safely.
fn episode_cells(e: &EpisodeProgress) -> Vec<String> {
    streamed::cells([
        e.episode.clone(),
        e.title.clone(),
        format!("{}/{}", e.researched, e.clips),
        e.found.to_string(),
        percent(e.fraction),
        if e.held { "held".into() } else { String::new() },
    ])
}

/// `status --episodes`: the per-episode rows are spooled to a temporary file as the
/// catalog is walked, then printed one at a time, so memory stays flat at any catalog
/// size (outside 22 finding 9: 135 MB for 50k episodes). JSON and YAML are the same
/// documents as before; a table of more than [`BOXED_ROWS`] episodes follows the
/// report as plain columns.
async fn with_episodes(
    format: OutputFormat,
    session: &archivist_engine::Session,
    db: &archivist_db::Database,
    settings: &AdminSettings,
) -> Result<ExitCode> {
    let mut spool = Spool::<EpisodeProgress>::new()?;
    let mut widths = Widths::of(&EPISODE_HEADER);
    let mut report = archivist_admin::status::status_each(
        session,
        db,
        settings,
        Some(&mut |row| {
            if format == OutputFormat::Table {
                widths.fit(&episode_cells(&row));
            }
            spool.push(&row)
        }),
        &Bar::stderr(),
    )
    .await?;
    if format == OutputFormat::Table && spool.len() <= BOXED_ROWS {
        report.research.per_episode = Some(spool.collect()?);
        emit(format, &report, render)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = SpooledRows::new(spool.into_rows()?);
    streamed::write_out(|out| {
        match format {
            OutputFormat::Table => {
                out.write_all(terminal_safe(&render(&report)).as_bytes())?;
                out.write_all(b"Per episode:\n")?;
                let header: Vec<String> = EPISODE_HEADER.iter().map(|h| h.to_string()).collect();
                out.write_all(widths.line(&header).as_bytes())?;
                let SpooledRows(cell) = rows;
                for row in cell.into_inner().into_iter().flatten() {
                    out.write_all(widths.line(&episode_cells(&row?)).as_bytes())?;
                }
            }
            OutputFormat::Json | OutputFormat::Yaml => {
                let document = serde_yaml::to_value(&report)?;
                let document = document
                    .as_mapping()
                    .ok_or_else(|| anyhow::anyhow!("the status report is not a mapping"))?;
                let with = WithRows {
                    document,
                    parent: "research",
                    key: "per_episode",
                    rows: &rows,
                };
                if format == OutputFormat::Json {
                    serde_json::to_writer_pretty(&mut *out, &with)?;
                    out.write_all(b"\n")?;
                } else {
                    serde_yaml::to_writer(&mut *out, &with)?;
                }
            }
        }
        Ok(())
    })
    .map_err(|e| e.context("writing the status"))?;
    Ok(ExitCode::SUCCESS)
}

fn render(r: &StatusReport) -> String {
    let mut out = String::new();
    match &r.clock_note {
        None => {
            let _ = writeln!(
                out,
                "Archivist at {} — {} (ZooKeeper clock, as the daemons last stamped it)\n",
                r.chroot,
                when(r.now_ms)
            );
        }
        Some(note) => {
            let _ = writeln!(
                out,
                "Archivist at {} — {} (this host's clock)\nWARNING: {note}\n",
                r.chroot,
                when(r.now_ms)
            );
        }
    }
    let _ = writeln!(
        out,
        "Researchers: {} live, {} slots",
        r.researchers.len(),
        r.slots
    );
    if !r.researchers.is_empty() {
        out.push_str(&table(
            &["researcher", "host", "version", "slots", "load", "jobs"],
            r.researchers.iter().map(|x| {
                vec![
                    x.name.clone(),
                    x.host.clone(),
                    x.version.clone(),
                    x.slots.to_string(),
                    format!("{}/{}", x.load, x.slots),
                    x.jobs.join(" "),
                ]
            }),
        ));
    }
    if !r.active_jobs.is_empty() {
        out.push_str("In progress:\n");
        out.push_str(&table(
            &["job", "episode", "state", "holder", "progress", "clips"],
            r.active_jobs.iter().map(|j| {
                vec![
                    j.job.clone(),
                    j.episode.clone(),
                    j.state.to_string(),
                    or_dash(j.holder.clone()),
                    percent(j.progress),
                    format!("{}/{}", j.clips_done, j.clips),
                ]
            }),
        ));
    }
    if !r.daemons.is_empty() {
        let _ = writeln!(
            out,
            "Daemons: {}",
            r.daemons
                .iter()
                .map(|d| format!("{} ({})", d.name, d.role))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.leaders.is_empty() {
        let _ = writeln!(
            out,
            "Leaders: {}",
            r.leaders
                .iter()
                .map(|(role, name)| match name {
                    Some(name) => format!("{role} {name}"),
                    None => format!("{role} none (no live candidate: no {role} works)"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out.push_str("\nJobs per state:\n");
    out.push_str(&table(
        &["state", "jobs", "paused"],
        r.jobs.iter().map(|(state, n)| {
            let paused = r
                .paused
                .iter()
                .find(|p| p.state == *state)
                .map(|p| match &p.record {
                    Some(rec) => format!("paused by {} ({})", rec.by, rec.reason),
                    None => "paused".into(),
                });
            vec![state.to_string(), n.to_string(), paused.unwrap_or_default()]
        }),
    ));
    if !r.ignored_pauses.is_empty() {
        let _ = writeln!(
            out,
            "  /control/pause/{{{}}} pause nothing (only {} can be paused; made by hand?): remove them, `archivist fsck --repair` does",
            r.ignored_pauses.join(","),
            archivist_engine::consumer::PAUSABLE_STATES
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    if !r.pending_strays.is_empty() {
        let _ = writeln!(
            out,
            "  {} stray entr{} in /queues/pending not counted (not a queue entry, no such job, its job in another state, or a second entry of a job; the planner ignores them too and removes the proven ones; `archivist fsck --repair` the rest): {}",
            r.pending_strays.len(),
            if r.pending_strays.len() == 1 { "y" } else { "ies" },
            a_few(&r.pending_strays)
        );
    }
    for (state, strays) in &r.queue_strays {
        let _ = writeln!(
            out,
            "  {} stray entr{} in /queues/{state} not counted (not a queue entry, no such job, its job in another state, or a second entry of a job; {}): {}",
            strays.len(),
            if strays.len() == 1 { "y" } else { "ies" },
            if archivist_engine::queue::STRAY_CHECKED.contains(state) {
                "the reaper removes the proven ones, `archivist fsck --repair` the rest"
            } else {
                "`archivist fsck --repair` removes them"
            },
            a_few(strays)
        );
    }
    let _ = writeln!(
        out,
        "\nLeases: {} active, {} expired{}",
        r.leases.active,
        r.leases.expired,
        if r.leases.invalid > 0 {
            format!(
                ", {} invalid (duration not positive or over 30 days: no researcher claims it; `archivist fsck` names it)",
                r.leases.invalid
            )
        } else {
            String::new()
        }
    );
    if !r.leases.undecodable.is_empty() {
        let _ = writeln!(
            out,
            "  {} lease(s) whose data does not decode ({}): neither active nor expired; the planner keeps the job's pairs out of planning until the node's creation plus the work-item TTL; `archivist fsck` reports them",
            r.leases.undecodable.len(),
            a_few(&r.leases.undecodable)
        );
    }
    if !r.leases.without_job.is_empty() {
        let _ = writeln!(
            out,
            "  {} lease(s) whose job does not exist ({}): not counted above; the planner keeps their pairs out of planning only until the node's creation plus the work-item TTL, the reaper removes them; `archivist fsck` reports lease_without_job",
            r.leases.without_job.len(),
            a_few(&r.leases.without_job)
        );
    }
    if !r.leases.expired_leases.is_empty() {
        out.push_str(&table(
            &["expired lease", "episode", "holder", "expired ago"],
            r.leases.expired_leases.iter().map(|l| {
                vec![
                    l.job.clone(),
                    or_dash(l.record.as_ref().map(|x| x.episode.clone())),
                    or_dash(l.record.as_ref().and_then(|x| x.holder.clone())),
                    span(-l.remaining_ms),
                ]
            }),
        ));
    }
    let _ = writeln!(out, "Reports waiting for a recorder: {}", r.reports_waiting);
    let _ = writeln!(
        out,
        "Catalog: {} episodes, {} clips",
        r.catalog.episodes, r.catalog.clips
    );
    let p = &r.research;
    let _ = writeln!(
        out,
        "Research: {}/{} pairs ({}), clip found in {} pairs, {} episodes with research",
        p.researched_pairs,
        p.total_pairs,
        percent(p.fraction),
        p.found_pairs,
        p.episodes_with_research
    );
    if p.renditions.pinned > 0 {
        let _ = writeln!(
            out,
            "Renditions: {} episodes pinned to the audio they are researched on; {} whose audio changed at some time, {} of them served other audio than the pin when last asked (`archivist results --episode E` lists an episode's renditions)",
            p.renditions.pinned, p.renditions.changed, p.renditions.serving_other
        );
    }
    if !p.unreadable.is_empty() {
        let _ = writeln!(
            out,
            "  {} research record(s) do not decode: not counted, and their episodes are not planned until repaired (run `archivist fsck`):",
            p.unreadable.len()
        );
        for u in &p.unreadable {
            let _ = writeln!(out, "    {}: {}", u.path, u.error);
        }
    }
    if let Some(per) = &p.per_episode {
        out.push_str(&table(&EPISODE_HEADER, per.iter().map(episode_cells)));
    }
    match &r.oldest_waiting {
        Some(w) => {
            let _ = writeln!(out, "Oldest waiting job: {} (waiting {}, priority {}, position {} in the pending queue){}", w.job, match w.clock_behind_ms { Some(_) => "just now: the daemons' last clock stamp is older than the job".to_string(), None => span(w.waiting_ms) }, w.priority, w.position + 1, if w.unreadable.is_some() { ": its record does not decode (below)" } else { "" });
        }
        None => out.push_str("Oldest waiting job: none\n"),
    }
    if !r.unreadable_waiting.is_empty() {
        let _ = writeln!(
            out,
            "  {} waiting job(s) whose record does not decode: no researcher can claim them; the work-item TTL expires each by its node's age (its record replaced by what the tree still knows), or remove one now with `archivist delete J --force` (either way its pairs are planned again):",
            r.unreadable_waiting.len()
        );
        for u in &r.unreadable_waiting {
            let _ = writeln!(out, "    {}: {}", u.job, u.error);
        }
    }
    if !r.unreadable_jobs.is_empty() {
        let _ = writeln!(
            out,
            "{} job(s) outside pending whose record does not decode: no daemon can move or expire them (counted in their queue above; `archivist fsck` reports them, `archivist delete J --force` removes one):",
            r.unreadable_jobs.len()
        );
        for u in &r.unreadable_jobs {
            let _ = writeln!(out, "    {} ({}): {}", u.job, u.queue, u.error);
        }
    }
    let _ = writeln!(
        out,
        "Batches: {}{}",
        r.batches.batches.len(),
        if r.batches.held {
            " (held: new batches wait for `archivist batch release-all`)"
        } else {
            ""
        }
    );
    if !r.batches.batches.is_empty() {
        out.push_str(&table(
            &["batch", "name", "state", "pairs done", "failed", "progress"],
            r.batches.batches.iter().map(|b| {
                vec![
                    b.id.clone(),
                    or_dash(b.name.clone()),
                    b.status.to_string(),
                    format!("{}/{}", b.done, b.total),
                    b.failed.to_string(),
                    match b.status {
                        BatchState::Pending | BatchState::Held => "-".into(),
                        _ => percent(b.fraction),
                    },
                ]
            }),
        ));
    }
    out
}

/// How many names [`a_few`] shows.
const FEW: usize = 5;

/// At most [`FEW`] of `names`, then how many more: a status line stays one short line
/// however many strays there are (outside 17h F3: 1,283 stray names, ~60 KB, on one
/// line). `-o json` keeps every name; `archivist fsck` lists them all.
fn a_few(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(FEW)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    match names.len().saturating_sub(FEW) {
        0 => shown,
        more => format!("{shown} and {more} more (`archivist fsck` lists them all)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_of_names_are_cut_to_a_few_and_a_count() {
        let names: Vec<String> = (0..1_283).map(|i| format!("j{i:010}")).collect();
        let line = a_few(&names);
        assert!(line.len() < 200, "{line}");
        assert!(
            line.ends_with("and 1278 more (`archivist fsck` lists them all)"),
            "{line}"
        );
        assert_eq!(a_few(&names[..2]), "j0000000000 j0000000001");
    }
}
