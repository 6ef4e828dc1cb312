//! The jobs pages: a filtered, paged list (`GET /jobs`) over
//! [`archivist_admin::browse::page`], and one job (`GET /jobs/{id}`) over
//! [`archivist_admin::jobs::show`], the functions behind `jobs list` and `jobs show`.

use archivist_admin::actions::Action;
use archivist_admin::browse::{self, JobQuery};
use archivist_admin::jobs::{self, JobDetail, JobFilter};
use archivist_engine::schema::JobState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use crate::error::PageError;
use crate::layout::{self, clip_link, duration_ms, episode_link, job_link, percent, rfc3339};
use crate::overview::urlencode;
use crate::Console;

/// The list's query string (every field optional; empty means "any").
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    /// A state (`failed`, `pending`...).
    pub state: Option<String>,
    /// Text the job's message contains.
    pub reason: Option<String>,
    /// A failure group's reason (`browse::reason_of` the message), as the overview
    /// links to.
    pub group: Option<String>,
    /// Episode id.
    pub episode: Option<String>,
    /// Clip id.
    pub clip: Option<String>,
    /// Start after this job id.
    pub after: Option<String>,
}

/// The bulk actions a list offers: with a state filter, those that can change some
/// job in that state (the failed list offers no `hold`, outside try 24b N4); without
/// one, every action (its confirmation leaves out the jobs it cannot change).
fn offered_on(params: &ListParams) -> Vec<Action> {
    let state = given(&params.state).and_then(|s| s.parse::<JobState>().ok());
    Action::ALL
        .into_iter()
        .filter(|a| state.is_none_or(|s| a.may_apply_in(s)))
        .collect()
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl ListParams {
    /// The admin query these parameters ask for.
    pub fn query(&self, console: &Console) -> Result<JobQuery, PageError> {
        let state = given(&self.state)
            .map(|s| {
                s.parse::<JobState>()
                    .map_err(|_| PageError::Invalid(format!("{s:?} is not a job state")))
            })
            .transpose()?;
        Ok(JobQuery {
            filter: JobFilter {
                state,
                episode: given(&self.episode),
            },
            reason: given(&self.reason),
            group: self.group.clone().filter(|g| !g.is_empty()),
            clip: given(&self.clip),
            changeable_by: None,
            after: given(&self.after),
            limit: console.settings().page_size,
            scan_limit: console.settings().scan_limit,
        })
    }

    /// The query string of the filter, without the cursor (`state=failed&reason=…&`).
    pub fn filter_query(&self) -> String {
        let mut q: Vec<String> = Vec::new();
        for (k, v) in [
            ("state", &self.state),
            ("reason", &self.reason),
            ("group", &self.group),
            ("episode", &self.episode),
            ("clip", &self.clip),
        ] {
            if let Some(v) = given(v) {
                q.push(format!("{k}={}", urlencode(&v)));
            }
        }
        q.join("&")
    }

    /// The query string of the next page, after `job`.
    fn next(&self, job: &str) -> String {
        let filter = self.filter_query();
        let and = if filter.is_empty() { "" } else { "&" };
        format!("/jobs?{filter}{and}after={}", urlencode(job))
    }
}

/// The bulk confirmation's address for `action` on the jobs `params` filter.
fn bulk_link(action: Action, params: &ListParams) -> String {
    let filter = params.filter_query();
    let and = if filter.is_empty() { "" } else { "&" };
    format!("/jobs/bulk?action={}{and}{filter}", action.as_str())
}

/// The query string, or the console's 400 page saying what is wrong with it (a
/// repeated parameter was a bare text/plain 400 from axum: outside try of #24, F9).
pub fn params<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, PageError> {
    query
        .map(|Query(p)| p)
        .map_err(|e| PageError::Invalid(e.body_text()))
}

/// `GET /jobs?state=&reason=&group=&episode=&clip=&after=`.
pub async fn list_page(
    State(console): State<Console>,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Markup, PageError> {
    let actions = crate::actions::enabled(&console);
    let params = params(query)?;
    let query = params.query(&console)?;
    let session = console.session().await?;
    let page = browse::page(&session, console.admin(), &query).await?;
    let selected = query.filter.state;
    Ok(layout::page(
        "Jobs",
        console.settings().refresh_s,
        html! {
            h1 { "Jobs" }
            form.filter #filter method="get" action="/jobs" {
                label { "State"
                    select name="state" {
                        option value="" selected[selected.is_none()] { "any" }
                        @for s in JobState::ALL {
                            option value=(s) selected[selected == Some(s)] { (s) }
                        }
                    }
                }
                label { "Reason (text, or a pattern with *)" input type="text" name="reason" value=[given(&params.reason)]; }
                @if let Some(g) = query.group.as_deref() {
                    label { "Failure group" input type="text" name="group" value=(g) readonly; }
                }
                label { "Episode" input type="text" name="episode" value=[given(&params.episode)] placeholder="e…"; }
                label { "Clip" input type="text" name="clip" value=[given(&params.clip)] placeholder="c…"; }
                button type="submit" { "Filter" }
                a href="/jobs" { "clear" }
            }
            @if actions {
                p #bulk { "On every job this filter matches: "
                    @for a in offered_on(&params) {
                        a.bulk href=(bulk_link(a, &params)) { (a.as_str()) "…" } " "
                    }
                }
            }
            div #jobs-list data-live {
                @if page.jobs.is_empty() {
                    p.muted #no-jobs { "No job matches" @if page.next.is_some() { " in the jobs read so far" } "." }
                } @else {
                    table #jobs {
                        tr { th { "Job" } th { "State" } th { "Episode" } th.num { "Clips" } th.num { "Priority" } th.num { "Retries" } th { "Holder" } th.num { "Progress" } th { "Message" } th { "Updated" } }
                        @for j in &page.jobs {
                            tr.job data-state=(j.status) {
                                td { (job_link(&j.id)) }
                                td.(j.status) { (j.status) }
                                td { (episode_link(&j.episode)) }
                                td.num { (j.clips) } td.num { (j.priority) } td.num { (j.retry_count) }
                                td { (j.holder.as_deref().unwrap_or("")) }
                                td.num { (percent(j.progress)) }
                                td.message { (j.message.as_deref().unwrap_or("")) }
                                td { (rfc3339(j.updated)) }
                            }
                        }
                    }
                }
                @if !page.unreadable.is_empty() {
                    p.error { (page.unreadable.len()) " job records do not decode (run fsck): "
                        @for u in &page.unreadable { (u.path) " " } }
                }
                p.muted { (page.scanned) " job records read for this page." }
                @if let Some(next) = &page.next {
                    p { a #next href=(params.next(next)) { "Next page →" } }
                }
            }
        },
    ))
}

/// `GET /jobs/{id}`.
pub async fn job_page(
    State(console): State<Console>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Markup, PageError> {
    PageError::check_id("job", &id)?;
    let actions = crate::actions::enabled(&console);
    let session = console.session().await?;
    let detail = jobs::show(&session, console.admin(), &id).await?;
    Ok(layout::page(
        &format!("Job {id}"),
        console.settings().refresh_s,
        html! {
            h1 { "Job " (id) }
            @if actions {
                @if crate::actions::armed(&headers) {
                    (crate::actions::job_forms(&detail.job, detail.stat.version))
                } @else {
                    (crate::actions::not_armed_note())
                }
            }
            div #job data-live { (layout::read_at(detail.now_ms)) (render(&detail)) }
        },
    ))
}

fn render(d: &JobDetail) -> Markup {
    let j = &d.job;
    html! {
        table #job-fields {
            tr { th { "State" } td #state.(j.status) { (j.status) } }
            tr { th { "Episode" } td { (episode_link(&j.episode)) } }
            tr { th { "Media" } td { (j.media_url) } }
            tr { th { "Clips" } td { @for c in &j.clips { (clip_link(c)) " " } } }
            @if let Some(b) = &j.batch { tr { th { "Batch" } td { (b) } } }
            tr { th { "Priority" } td { (j.priority) } }
            tr { th { "Retries" } td { (j.retry_count) } }
            tr { th { "Last successful step" } td { (j.last_successful_status.map(|s| s.to_string()).unwrap_or_default()) } }
            tr { th { "Holder" } td #holder { (j.holder.as_deref().unwrap_or("—")) } }
            @if let Some(r) = &j.request {
                tr { th { "Requested" } td { (format!("{r:?}").to_lowercase()) @if let Some(why) = &j.request_reason { ": " (why) } } }
            }
            tr { th { "Progress" } td { (percent(j.progress.fraction)) ", " (j.progress.clips_done) " of " (j.clips.len()) " clips, " (j.progress.bytes) " bytes" } }
            tr { th { "Created" } td { (rfc3339(j.created)) } }
            tr { th { "Updated" } td { (rfc3339(j.updated)) } }
            tr { th { "Queued in" } td { @for s in &d.queued_in { (s) " " } @if d.queued_in.is_empty() { span.error { "no queue" } } } }
        }
        @if let Some(m) = &j.message {
            h2 { "Message" }
            pre.message #message { (m) }
        }
        h2 { "Lease" }
        @match &d.lease {
            None => p.muted #lease { "No lease." },
            Some(l) => p #lease {
                @if let Some(r) = &l.record { "lease of " (duration_ms(r.duration_ms)) ", " }
                @if l.expired { span.error { "expired " (duration_ms(-l.remaining_ms)) " ago" } }
                @else { "expires in " (duration_ms(l.remaining_ms)) }
                @if let Some(why) = &l.invalid { span.error { "; invalid: " (why) } }
                @if let Some(e) = &l.error { span.error { "; does not decode: " (e) } }
            },
        }
        h2 { "Lock" }
        @match &d.lock {
            None => p.muted #lock { "Not locked." },
            Some(l) => p #lock {
                @if let Some(r) = &l.record { "held by " (r.owner) " since " (rfc3339(r.since)) }
                @if let Some(s) = &l.owner_session { " (session " (s) ")" }
                @if let Some(e) = &l.error { span.error { "; does not decode: " (e) } }
            },
        }
        @if !d.reports.is_empty() {
            h2 { "Reports waiting for a recorder" }
            table #reports {
                tr { th { "Report" } th { "Clip" } th.num { "Occurrences" } th { "Final" } th { "Error" } }
                @for r in &d.reports {
                    tr { td { (r.name) } td { (r.clip.as_deref().unwrap_or("")) } td.num { (r.occurrences) }
                         td { @if r.is_final { "yes" } } td.error { (r.error.as_deref().unwrap_or("")) } }
                }
            }
        }
        h2 { "Events" }
        table #events {
            tr { th { "At" } th { "By" } th { "Step" } th { "Result" } }
            @for e in d.events() {
                tr.event { td { (rfc3339(e.at)) } td { (e.by) } td { (e.step) } td { (e.result) } }
            }
        }
    }
}
