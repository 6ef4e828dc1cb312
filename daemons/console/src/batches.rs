//! The batches pages: every batch with its progress (`GET /batches`, over
//! [`archivist_batches::admin::list`], what `archivist batch list` prints), and one batch
//! with its report (`GET /batches/{id}`, over [`archivist_batches::admin::show`] and
//! [`archivist_batches::report::read`], `batch show` and `batch report`).

use archivist_batches::admin::{self, BatchSummary};
use archivist_batches::{report, BatchError};
use archivist_engine::schema::records::{BatchProgress, BatchReport, WebhookDelivery};
use archivist_engine::schema::BatchState;
use axum::extract::{Path, Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use crate::error::PageError;
use crate::layout::{self, clip_link, episode_link, job_link, percent, rfc3339};
use crate::Console;

/// Done of total as a fraction (1 when there is nothing to do), as `batch list`.
fn fraction(p: &BatchProgress) -> f64 {
    if p.total == 0 {
        1.0
    } else {
        p.done() as f64 / p.total as f64
    }
}

/// Progress of a batch whose pairs are known (after curation), else `-`: the CLI's rule.
fn progress(status: BatchState, p: &BatchProgress) -> String {
    match status {
        BatchState::Pending | BatchState::Held => "-".into(),
        _ => percent(fraction(p)),
    }
}

/// A webhook delivery as the CLI says it (never the secret: it is not in the record).
fn delivery(d: &Option<WebhookDelivery>) -> String {
    let Some(d) = d else {
        return "-".into();
    };
    let status = format!("{:?}", d.status).to_lowercase();
    match &d.error {
        Some(e) => format!(
            "report {} {status} after {} attempt(s): {e}",
            d.report, d.attempts
        ),
        None => format!("report {} {status} ({} attempt(s))", d.report, d.attempts),
    }
}

/// Only the scheme and host of a webhook URL: its path or query may carry a token,
/// and no secret is rendered (docs/console.md, "Access").
fn webhook_host(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host = host.rsplit('@').next().unwrap_or(host);
            format!("{scheme}://{host}/…")
        }
        None => "(not a URL)".into(),
    }
}

impl From<BatchError> for PageError {
    fn from(e: BatchError) -> Self {
        match e {
            BatchError::NotFound(id) => PageError::NotFound(format!("no batch {id}")),
            other => PageError::Unavailable(other.to_string()),
        }
    }
}

/// `GET /batches`.
pub async fn list_page(State(console): State<Console>) -> Result<Markup, PageError> {
    let session = console.session().await?;
    let list = admin::list(&session, false).await?;
    Ok(layout::page(
        "Batches",
        console.settings().refresh_s,
        html! {
            h1 { "Batches" }
            div #batches-live data-live {
                @if list.is_empty() {
                    p.muted #no-batches { "No batches (archivist batch submit FILE)." }
                } @else {
                    table #batches {
                        tr { th { "Batch" } th { "Name" } th { "State" } th.num { "Pairs done" } th.num { "Failed" }
                             th.num { "Progress" } th.num { "Reports" } th { "Webhook" } th { "Submitted" } }
                        @for b in &list { (row(b)) }
                    }
                }
            }
        },
    ))
}

fn row(b: &BatchSummary) -> Markup {
    html! {
        tr.batch data-id=(b.id) {
            td { a href={ "/batches/" (b.id) } { (b.id) } }
            td { (b.name.as_deref().unwrap_or("-")) }
            td.state { (b.status) }
            td.num.done { (b.progress.done()) "/" (b.progress.total) }
            td.num { (b.progress.failed) }
            td.num.progress { (progress(b.status, &b.progress)) }
            td.num { (b.reports) }
            td { (delivery(&b.delivery)) }
            td { (rfc3339(b.submitted_at)) }
        }
    }
}

/// `?report=N`: which report to show (the latest by default).
#[derive(Debug, Default, Deserialize)]
pub struct BatchParams {
    /// Report number.
    pub report: Option<u32>,
}

/// `GET /batches/{id}`.
pub async fn batch_page(
    State(console): State<Console>,
    Path(id): Path<String>,
    Query(params): Query<BatchParams>,
) -> Result<Markup, PageError> {
    PageError::check_id("batch", &id)?;
    let session = console.session().await?;
    let d = admin::show(&session, &id).await?;
    let b = &d.batch;
    let report = match report::read(&session, &id, params.report).await {
        Ok(r) => Some(r),
        Err(BatchError::NoReport { .. } | BatchError::Deleted(_)) if params.report.is_none() => {
            None
        }
        Err(BatchError::NoReport { .. }) => {
            return Err(PageError::NotFound(format!(
                "batch {id} has no report {}",
                params.report.unwrap_or(0)
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let p = b.progress;
    Ok(layout::page(
        &format!("Batch {}", b.id),
        console.settings().refresh_s,
        html! {
            h1 { "Batch " (b.id) @if let Some(n) = &b.name { " (" (n) ")" } }
            div #batch data-live {
                p { "State " strong #state { (b.status) } " · submitted by " (b.submitted_by) " at " (rfc3339(b.submitted_at)) }
                @if let Some(m) = &b.message { p #message { (m) } }
                p #pairs { "Pairs: " (b.episodes.len()) " episode(s) × " (b.clips.len()) " clip(s) = " (p.total) "; "
                    (p.recorded) " recorded, " (p.failed) " failed, " (p.pending) " pending ("
                    span.progress { (percent(fraction(&p))) } ")" }
                progress max=(p.total.max(1)) value=(p.done()) {}
                @for problem in &b.problems { p.error { "Not curated: " (problem) } }
                p { "Webhook: " (b.webhook.as_deref().map(webhook_host).unwrap_or_else(|| "-".into()))
                    " — " (delivery(&b.delivery)) }
                @if let Some(l) = &d.lock { p { "Locked by " (l.owner) " since " (rfc3339(l.since)) } }
                @if d.batches_held { p.error { "Batches are held (archivist batch release-all)." } }
                p #reports { "Reports: "
                    @if d.report_numbers.is_empty() { "none yet" }
                    @for n in &d.report_numbers { a href={ "/batches/" (b.id) "?report=" (n) } { (n) } " " } }
                @if let Some(r) = &report { (render_report(r)) }
                h2 { "Events" }
                table #events {
                    tr { th { "At" } th { "By" } th { "Step" } th { "Result" } }
                    @for e in &b.events { tr.event { td { (rfc3339(e.at)) } td { (e.by) } td { (e.step) } td { (e.result) } } }
                }
            }
        },
    ))
}

fn render_report(r: &BatchReport) -> Markup {
    let p = r.pairs;
    html! {
        section #report data-number=(r.number) {
            h2 { "Report " (r.number) " (" (format!("{:?}", r.kind).to_lowercase()) ") written " (rfc3339(r.written)) }
            p { "Pairs: " (p.total) " total, " (p.recorded) " researched, " (p.failed) " failed, " (p.pending) " pending." }
            h3 { "Found" }
            @if r.found.is_empty() { p.muted #found-nowhere { "Nowhere." } }
            @else {
                table #found {
                    tr { th { "Clip" } th { "Episode" } th { "At (confidence)" } }
                    @for (clip, episodes) in &r.found {
                        @for (episode, occurrences) in episodes {
                            tr.found { td { (clip_link(clip)) } td { (episode_link(episode)) }
                                td { @for o in occurrences { (layout::clock(o.at)) " (" (format!("{:.2}", o.conf)) ") " } } }
                        }
                    }
                }
            }
            @if !r.failed_jobs.is_empty() {
                h3 { "Failed jobs" }
                table #failed-jobs {
                    tr { th { "Job" } th { "Episode" } th { "Clips" } th.num { "Retries" } th { "Why" } }
                    @for j in &r.failed_jobs {
                        tr { td { (job_link(&j.job)) } td { (episode_link(&j.episode)) } td { (j.clips.join(" ")) }
                             td.num { (j.retry_count) } td.error { (j.reason) } }
                    }
                }
            }
            @if !r.errors.is_empty() {
                h3 { "Per-clip errors" }
                table #report-errors {
                    tr { th { "Episode" } th { "Clip" } th { "Error" } }
                    @for e in &r.errors { tr { td { (episode_link(&e.episode)) } td { (clip_link(&e.clip)) } td.error { (e.error) } } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_shows_its_host_only() {
        assert_eq!(
            webhook_host("https://user:pw@hooks.example/p/SECRET?token=x"),
            "https://hooks.example/…"
        );
        assert_eq!(webhook_host("nonsense"), "(not a URL)");
    }
}
