//! The overview page: what `archivist status` shows (researchers and slots, jobs per
//! state, paused queues, leases, research progress, the oldest waiting job), plus the
//! failed jobs grouped by reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use archivist_admin::browse::{self, Failures};
use archivist_admin::status::{self, StatusReport};
use archivist_admin::Silent;
use axum::extract::State;
use maud::{html, Markup};

use crate::error::PageError;
use crate::layout::{self, duration_ms, job_link, percent};
use crate::Console;

/// The last overview built and when, reused for `overview_cache_s`.
#[derive(Default)]
pub struct Cache {
    last: tokio::sync::Mutex<Option<(Instant, Arc<Overview>)>>,
}

/// What the overview shows.
#[derive(Debug)]
pub struct Overview {
    /// `status`.
    pub status: StatusReport,
    /// Failures by reason.
    pub failures: Failures,
}

/// The overview, built at most once per `overview_cache_s` (requests meanwhile wait
/// for the one being built and share it).
pub async fn overview(console: &Console) -> Result<Arc<Overview>, PageError> {
    let ttl = Duration::from_secs(console.settings().overview_cache_s);
    let mut last = console.inner.overview.last.lock().await;
    if let Some((at, view)) = last.as_ref() {
        if at.elapsed() < ttl {
            return Ok(view.clone());
        }
    }
    let session = console.session().await?;
    let status = status::status(&session, console.db(), console.admin(), false, &Silent).await?;
    let failures =
        browse::failures_by_reason(&session, console.admin(), console.settings().failures_read)
            .await?;
    let view = Arc::new(Overview { status, failures });
    *last = Some((Instant::now(), view.clone()));
    Ok(view)
}

/// `GET /`.
pub async fn page(State(console): State<Console>) -> Result<Markup, PageError> {
    let view = overview(&console).await?;
    Ok(layout::page(
        "Overview",
        console.settings().refresh_s,
        html! {
            h1 { "Overview" }
            div #overview data-live {
                (layout::read_at(view.status.now_ms))
                (render(&view))
            }
        },
    ))
}

fn render(view: &Overview) -> Markup {
    let s = &view.status;
    html! {
        @if let Some(note) = &s.clock_note { p.error { (note) } }
        h2 { "Researchers" }
        @if s.researchers.is_empty() {
            p.muted { "No researcher is live." }
        } @else {
            table #researchers {
                tr { th { "Researcher" } th { "Host" } th { "Version" } th.num { "Slots" } th.num { "Load" } th { "Jobs" } }
                @for r in &s.researchers {
                    tr {
                        td { (r.name) } td { (r.host) } td { (r.version) }
                        td.num { (r.slots) } td.num { (r.load) }
                        td { @for j in &r.jobs { (job_link(j)) " " } }
                    }
                }
            }
            p { (s.slots) " slots in all." }
        }
        @if !s.active_jobs.is_empty() {
            h2 { "In progress" }
            table #active {
                tr { th { "Job" } th { "Episode" } th { "State" } th { "Holder" } th.num { "Progress" } th.num { "Clips" } }
                @for j in &s.active_jobs {
                    tr {
                        td { (job_link(&j.job)) } td { (layout::episode_link(&j.episode)) }
                        td { (j.state) } td { (j.holder.as_deref().unwrap_or("—")) }
                        td.num { (percent(j.progress)) } td.num { (j.clips_done) "/" (j.clips) }
                    }
                }
            }
        }
        h2 { "Jobs" }
        table #jobs-per-state {
            tr { th { "State" } th.num { "Jobs" } th { "Queue" } }
            @for (state, n) in &s.jobs {
                @let paused = s.paused.iter().find(|p| p.state == *state && p.paused);
                tr {
                    td { a href={ "/jobs?state=" (state) } { (state) } }
                    td.num { (n) }
                    td { @if let Some(p) = paused {
                        strong { "paused" }
                        @if let Some(r) = &p.record { " by " (r.by) ": " (r.reason) }
                    } }
                }
            }
        }
        @if !s.pending_strays.is_empty() {
            p.error { (s.pending_strays.len()) " entries of the pending queue are not work (run fsck)." }
        }
        h2 { "Leases" }
        p #leases {
            (s.leases.active) " active, " (s.leases.expired) " expired, "
            (s.leases.invalid) " invalid, " (s.leases.undecodable.len()) " undecodable. "
            (s.reports_waiting) " reports wait for a recorder."
        }
        h2 { "Research" }
        @let r = &s.research;
        p #research {
            (r.researched_pairs) " of " (r.total_pairs) " (episode, clip) pairs researched ("
            (percent(r.fraction)) "); clips found in " (r.found_pairs) " pairs; "
            (r.episodes_with_research) " of " (s.catalog.episodes) " episodes and "
            (s.catalog.clips) " clips in the catalog."
        }
        @if !r.unreadable.is_empty() {
            p.error { (r.unreadable.len()) " research records do not decode (run fsck)." }
        }
        h2 { "Oldest waiting job" }
        @match &s.oldest_waiting {
            Some(w) => p #oldest {
                (job_link(&w.job)) " has waited " (duration_ms(w.waiting_ms))
                " (priority " (w.priority) ", " (w.position) " ahead of it)"
                @if let Some(e) = &w.unreadable { span.error { ": does not decode: " (e) } }
            },
            None => p #oldest.muted { "No job waits." },
        }
        (failures(&view.failures))
    }
}

fn failures(f: &Failures) -> Markup {
    html! {
        h2 { "Failures by reason" }
        @if f.groups.is_empty() {
            p.muted #failures { "No job failed." }
        } @else {
            @if f.read < f.failed {
                p.muted { "Grouped from the first " (f.read) " of " (f.failed) " failed jobs." }
            }
            table #failures {
                tr { th.num { "Jobs" } th { "Reason" } th { "For example" } }
                @for g in &f.groups {
                    tr {
                        td.num { a href={ "/jobs?state=failed&group=" (urlencode(&g.reason)) } { (g.count) } }
                        td.failed { (g.reason) }
                        td { (job_link(&g.example)) br; span.example { (cut(&g.example_message)) } }
                    }
                }
            }
            @if f.more_groups > 0 {
                p.muted #more-failures { (f.more_jobs) " more failed jobs in " (f.more_groups) " smaller groups." }
            }
        }
    }
}

/// At most `browse::REASON_CHARS` characters of `text`, `…` when cut.
fn cut(text: &str) -> String {
    let max = browse::REASON_CHARS;
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn urlencode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
