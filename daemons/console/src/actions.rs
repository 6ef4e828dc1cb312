//! Actions (retry, hold, release, cancel, delete), one job at a time or on every job a
//! filter matches, through the admin library's compare-and-set functions (the ones
//! behind `archivist retry`, `hold`... : the same rules, in one place).
//!
//! Enabled only when a token is configured (`console.actions_token` or
//! `console.actions_token_file`); the console is read-only otherwise ([`crate::readonly`]).
//! An operator signs in at `/login` with the token and a name; the console answers with
//! a random session token that the page keeps in the tab's `sessionStorage` (no cookie:
//! cookies ignore ports, so a cookie reached every service on the console's host, such
//! as a media server the episode player fetches from; outside try of #24, N0). The
//! static script ([`crate::assets`]) puts the token into each action form's body when
//! it is submitted; every action is a `POST` that must carry a live session token in its
//! body and an `Origin` header naming the console itself; anything else is refused with
//! 403 before anything is read. A browser never sends the body token on its own, so it
//! is also the CSRF token. Each job is posted with the version the page showed
//! (`j0000000007@12`) and acted on only at that version (N1). Every action is recorded
//! in the job's events with the actor `console:<name>` and logged at WARN with the actor
//! (a deleted job keeps no events; N2).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use archivist_admin::actions::{self, Action, ActionReport};
use archivist_admin::browse;
use archivist_admin::AdminSettings;
use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::JobState;
use archivist_engine::Session;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;

use crate::error::PageError;
use crate::jobs::ListParams;
use crate::layout::{self, job_link};
use crate::Console;

/// The form field that carries the session token (put there by the static script).
pub const SESSION_FIELD: &str = "session";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Most jobs one bulk action acts on (the confirmation lists them all).
pub const MAX_BULK: usize = 1000;
/// Most job nodes read to find a bulk action's jobs.
pub const BULK_SCAN: usize = 100_000;

/// A signed-in browser tab.
#[derive(Clone)]
struct Signed {
    name: String,
    at: Instant,
}

/// Sign-in attempts allowed a minute, right or wrong, from anyone: a person signs in
/// now and then; more is a script guessing (outside try 24b N9: 81 wrong sign-ins a
/// second, each a WARN line, nothing slowed them).
pub const SIGN_INS_PER_MINUTE: u32 = 30;

/// Signed-in tabs, by session token, and the sign-in rate limit (`governor`, as the
/// researcher's per-host politeness: a well-kept limiter, not a hand-written one).
pub struct Sessions {
    by_id: Mutex<HashMap<String, Signed>>,
    sign_ins: governor::DefaultDirectRateLimiter,
}

impl Default for Sessions {
    fn default() -> Sessions {
        let per_minute =
            std::num::NonZeroU32::new(SIGN_INS_PER_MINUTE).unwrap_or(std::num::NonZeroU32::MIN);
        Sessions {
            by_id: Mutex::default(),
            sign_ins: governor::RateLimiter::direct(governor::Quota::per_minute(per_minute)),
        }
    }
}

/// 32 random bytes as hex: session tokens.
fn random_hex() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who a request's session token says is signed in.
pub struct Operator {
    /// The name given at sign-in.
    pub name: String,
}

impl Sessions {
    fn start(&self, name: String) -> String {
        let token = random_hex();
        let signed = Signed {
            name,
            at: Instant::now(),
        };
        if let Ok(mut map) = self.by_id.lock() {
            map.retain(|_, s| s.at.elapsed() < SESSION_TTL);
            map.insert(token.clone(), signed);
        }
        token
    }

    fn end(&self, token: &str) -> bool {
        self.by_id
            .lock()
            .map(|mut map| map.remove(token).is_some())
            .unwrap_or(false)
    }

    fn of(&self, token: &str) -> Option<Operator> {
        if token.len() != 64 {
            return None;
        }
        let map = self.by_id.lock().ok()?;
        let s = map.get(token).filter(|s| s.at.elapsed() < SESSION_TTL)?;
        Some(Operator {
            name: s.name.clone(),
        })
    }
}

/// May a page carrying action forms arm them for this request? Not when the browser says
/// the navigation came from another site or another port of this host
/// (`Sec-Fetch-Site: cross-site` or `same-site`): a page there could send the tab where
/// the operator signed in (or a window it opens, which gets a copy of the tab's session
/// storage) to any confirmation page, signed in, one click from acting (outside try 24c
/// M1). The console's own links (`same-origin`) and a typed address or bookmark (`none`)
/// arm them; a client that sends no such header holds no session storage either.
pub fn armed(headers: &HeaderMap) -> bool {
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        None | Some("same-origin") | Some("none") => true,
        Some(_) => false,
    }
}

/// What a page shows instead of its action forms when the navigation came from elsewhere
/// ([`armed`]).
pub fn not_armed_note() -> Markup {
    html! {
        p.error #not-armed { "This page was opened from another site or another port of this host: its actions are not offered here. Open it from the console's own pages (or type its address) to act." }
    }
}

/// Are actions enabled (a token configured)? Pages then show the action forms; only a
/// post with a live session token in its body acts.
pub fn enabled(console: &Console) -> bool {
    console.settings().actions_token.is_some()
}

/// A refused write: 403 and why, before anything was read.
fn refused(why: &str) -> Response {
    tracing::info!(why, "console action refused");
    (StatusCode::FORBIDDEN, format!("refused: {why}\n")).into_response()
}

/// Checks a write: actions enabled, `Origin` names this console (the request's own
/// `Host`), and the form's body carries a live session token (cookies and other
/// headers count for nothing). Otherwise why not.
fn authorise(
    console: &Console,
    headers: &HeaderMap,
    token: &str,
) -> Result<Operator, &'static str> {
    if console.settings().actions_token.is_none() {
        return Err(crate::readonly::REFUSAL.trim_end());
    }
    if !same_origin(console, headers) {
        return Err("the request's Origin is not this console (CSRF check)");
    }
    console
        .inner
        .sessions
        .of(token)
        .ok_or("not signed in in this tab (no live session token in the form): sign in at /login with the actions token")
}

/// Does the request's `Origin` name the console it was sent to: `http://` + its
/// `Host` (which [`crate::guard`] has checked), or `https://` + its `Host` when that
/// names a host in `console.hosts` (a console behind a TLS-terminating proxy; outside
/// try 24b, N8)? A missing `Origin` does not.
fn same_origin(console: &Console, headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    let (Some(host), Some(origin)) = (host, origin) else {
        return false;
    };
    if origin == format!("http://{host}") {
        return true;
    }
    origin == format!("https://{host}") && crate::guard::named_host(host, &console.settings().hosts)
}

/// The library's settings for an action by `op`: the CLI's, with the actor
/// `console:<name>`.
fn settings_for(console: &Console, op: &Operator) -> AdminSettings {
    console
        .admin()
        .clone()
        .with_actor(format!("console:{}", op.name))
}

/// `GET /login`.
pub async fn login_page(State(console): State<Console>) -> Result<Markup, PageError> {
    if console.settings().actions_token.is_none() {
        return Err(PageError::Invalid(crate::readonly::REFUSAL.trim().into()));
    }
    Ok(layout::page(
        "Sign in",
        0,
        html! {
            h1 { "Sign in to act on jobs" }
            form #login method="post" action="/login" {
                label { "Your name (recorded in job events as console:NAME) " input type="text" name="name" required maxlength=(MAX_NAME) pattern="[A-Za-z0-9._\\-]+"; }
                br;
                label { "Actions token " input type="password" name="token" required; }
                br;
                button type="submit" { "Sign in" }
            }
        },
    ))
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    name: String,
    token: String,
}

/// `POST /login`: a right token and a name that is one (the id rule) start a session.
pub async fn login(
    State(console): State<Console>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let Some(token) = console.settings().actions_token.clone() else {
        return (StatusCode::FORBIDDEN, crate::readonly::REFUSAL).into_response();
    };
    if !same_origin(&console, &headers) {
        return refused("the request's Origin is not this console (CSRF check)");
    }
    let Ok(Form(form)) = form else {
        return PageError::Invalid("the sign-in form is incomplete".into()).into_response();
    };
    if console.inner.sessions.sign_ins.check().is_err() {
        metrics::counter!("archivist_console_sign_ins_throttled_total").increment(1);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "60")],
            format!("too many sign-in attempts (more than {SIGN_INS_PER_MINUTE} a minute): try again in a minute"),
        )
            .into_response();
    }
    if !token.matches(&form.token) {
        tracing::warn!("console sign-in refused: wrong token");
        return refused("wrong token");
    }
    let name = form.name.trim();
    if let Err(e) = check_name(name) {
        return PageError::Invalid(e).into_response();
    }
    let token = console.inner.sessions.start(name.to_string());
    tracing::warn!(target: "archivist::console::audit", name, "console sign-in");
    (
        [(header::CACHE_CONTROL, "no-store")],
        layout::signed_in(name, &token),
    )
        .into_response()
}

/// The sign-out form: the session token (added by the static script).
#[derive(Debug, Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    session: String,
}

/// `POST /logout`: ends the session the body's token names (Origin checked).
pub async fn logout(
    State(console): State<Console>,
    headers: HeaderMap,
    form: Result<Form<LogoutForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return refused("the form does not decode (no session token)");
    };
    let op = match authorise(&console, &headers, &form.session) {
        Ok(op) => op,
        Err(why) => return refused(why),
    };
    console.inner.sessions.end(&form.session);
    tracing::warn!(target: "archivist::console::audit", name = %op.name, "console sign-out");
    layout::page(
        "Signed out",
        0,
        html! { p #signed-out { "Signed out. " a href="/login" { "Sign in again" } } },
    )
    .into_response()
}

/// Most characters of a sign-in name (it goes into every event the operator writes;
/// outside try 24b, N7: a 400 000-character name filled job records past ZooKeeper's
/// node limit).
pub const MAX_NAME: usize = 64;

/// A sign-in name: 1 to [`MAX_NAME`] of `A-Z a-z 0-9 . _ -`.
fn check_name(name: &str) -> Result<(), String> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(safe) {
        return Err(format!(
            "the name must be 1 to {MAX_NAME} of A-Z a-z 0-9 . _ - (it is recorded as console:NAME)"
        ));
    }
    Ok(())
}

/// What a form posts for one job: `id@version@state`, the version and state the page
/// showed ([`parse_job`]).
fn posted(id: &str, version: i32, status: JobState) -> String {
    format!("{id}@{version}@{}", status.as_str())
}

/// The form that posts `action` on one job at the version and state shown.
fn one_form(id: &str, version: i32, status: JobState, action: &str, label: &str) -> Markup {
    html! {
        form.action method="post" action={ "/jobs/" (id) "/" (action) } {
            input type="hidden" name="jobs" value=(posted(id, version, status));
            button type="submit" name="action" value=(action) { (label) }
        }
    }
}

/// The forms of the actions that can change `job` (`Action::applies`: a failed job
/// offers no `hold`, a recorded one nothing, outside try 24b N4), each posting the job
/// at the version shown (`version`): the static script adds the session token when one
/// is submitted. Delete is a link to its confirmation page ([`confirm_one`]), as
/// `archivist delete` asks first (outside try 24b, N5).
pub fn job_forms(job: &JobRecord, version: i32) -> Markup {
    let id = job.id.as_str();
    let offered: Vec<Action> = Action::ALL
        .into_iter()
        .filter(|a| a.applies(job.status, job.request))
        .collect();
    html! {
        div #actions {
            @for a in &offered {
                @if *a == Action::Delete {
                    a.delete href={ "/jobs/" (id) "/delete" } { "delete…" }
                } @else {
                    (one_form(id, version, job.status, a.as_str(), a.as_str()))
                }
            }
            @if offered.is_empty() {
                span.muted { "No action applies to a " (job.status) " job." }
            }
        }
    }
}

/// `GET /jobs/{id}/delete`: what deleting the job would remove, and the button that
/// deletes it at the version shown.
pub async fn confirm_one(
    State(console): State<Console>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Markup, PageError> {
    if action != "delete" {
        return Err(PageError::NoPage);
    }
    if !enabled(&console) {
        return Err(PageError::Invalid(crate::readonly::REFUSAL.trim().into()));
    }
    PageError::check_id("job", &id)?;
    let session = console.session().await?;
    let seen = actions::look(&session, &id).await?;
    Ok(layout::page(
        "Confirm",
        0,
        html! {
            h1 { "delete job " (job_link(&id)) "?" }
            p { "It is " span #state { (seen.job.status) } " (episode " (seen.job.episode) "). The job, its queue entry, lease and reports are deleted; a deleted job keeps no events. Nothing is done if it changes before you confirm." }
            @if !Action::Delete.applies(seen.job.status, seen.job.request) {
                p.error #not-applicable { "A " (seen.job.status) " job is not deleted (only failed, held or cancelled jobs are)." }
            } @else if !armed(&headers) {
                (not_armed_note())
            } @else {
                div #confirm { (one_form(&id, seen.version, seen.job.status, "delete", "delete this job")) }
            }
            p { a href={ "/jobs/" (id) } { "Back to the job" } }
        },
    ))
}

/// The form of an action: the session token (added by the static script) and the jobs
/// as `id@version`, space-separated (what the page showed).
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    session: String,
    #[serde(default)]
    jobs: String,
    /// The submit button's name (single-job forms), ignored.
    #[serde(default)]
    #[allow(dead_code)]
    action: String,
}

/// What became of one posted job.
enum Result1 {
    /// The action ran (its report says whether it changed anything).
    Ran(ActionReport),
    /// The job is not at the version the page showed: nothing done.
    Moved(String),
    /// Refused or failed.
    Failed(String),
}

/// One job as a page showed it: its id, version, and state (when the form posted one).
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    id: String,
    version: i32,
    status: Option<JobState>,
}

/// One posted job: `id@version@state` ([`posted`]; `id@version` too), or why not.
fn parse_job(item: &str) -> Result<Shown, String> {
    let mut parts = item.splitn(3, '@');
    let id = parts.next().unwrap_or_default();
    let Some(version) = parts.next() else {
        return Err(format!(
            "{item:.80}: no version (the page's form posts id@version@state): reload the page and act again"
        ));
    };
    let version = version
        .parse::<i32>()
        .map_err(|_| format!("{item:.80}: the version is not a number"))?;
    let status = parts
        .next()
        .map(|s| {
            s.parse::<JobState>()
                .map_err(|e| format!("{item:.80}: {e}"))
        })
        .transpose()?;
    PageError::check_id("job", id).map_err(|e| e.to_string())?;
    Ok(Shown {
        id: id.to_string(),
        version,
        status,
    })
}

/// Whether `seen` is still the job the page showed: at the version shown, or, for a job
/// a researcher works on (leased, researching), in the state shown, since its heartbeat
/// and progress move the version every few seconds without changing anything an
/// operator decides by (outside try 24d M1: hold and cancel of a running job were
/// refused unless clicked within 5 s of the page loading, where the CLI never is).
fn still_as_shown(shown: &Shown, seen: &actions::Seen) -> bool {
    let running = matches!(seen.job.status, JobState::Leased | JobState::Researching);
    seen.version == shown.version || (running && shown.status == Some(seen.job.status))
}

/// Runs `action` on one job only if it is still at the version the operator saw, with
/// the library's compare-and-set rules (the `*_seen` functions re-check that version
/// under the job's lock).
async fn run_one(
    session: &Session,
    settings: &AdminSettings,
    action: &str,
    shown: &Shown,
) -> Result1 {
    let (id, version) = (shown.id.as_str(), shown.version);
    let seen = match actions::look(session, id).await {
        Ok(seen) => seen,
        Err(e) => {
            // Refused without a change all the same: the audit log names who asked
            // (outside try 24d M3: a missing job left no trace).
            tracing::warn!(target: "archivist::console::audit", actor = %settings.actor, job = id, action, error = %e, "console action refused");
            return Result1::Failed(e.to_string());
        }
    };
    if !still_as_shown(shown, &seen) {
        tracing::warn!(target: "archivist::console::audit", actor = %settings.actor, job = id, action, shown = version, now = seen.version, "console action refused: the job changed since the page showed it");
        return Result1::Moved(format!(
            "changed since the confirmation page (version {version} shown, now {} and {}): nothing done",
            seen.version, seen.job.status
        ));
    }
    let reason = Some("from the web console");
    let done = match action {
        "retry" => actions::retry_seen(session, settings, &seen).await,
        "hold" => actions::hold_seen(session, settings, &seen, reason).await,
        "release" => actions::release_seen(session, settings, &seen).await,
        "cancel" => actions::cancel_seen(session, settings, &seen, reason).await,
        "delete" => actions::delete_seen(session, settings, &seen).await,
        other => return Result1::Failed(format!("{other:?} is not an action")),
    };
    // A deleted job keeps no events: the log names who deleted it, at WARN so the
    // default filter of every command keeps it (outside try of #24, N2).
    match &done {
        Ok(rep) => {
            tracing::warn!(target: "archivist::console::audit", actor = %settings.actor, job = id, action, outcome = ?rep.outcome, "console action")
        }
        Err(e) => {
            tracing::warn!(target: "archivist::console::audit", actor = %settings.actor, job = id, action, error = %e, "console action refused")
        }
    }
    match done {
        Ok(rep) => Result1::Ran(rep),
        Err(e) => Result1::Failed(e.to_string()),
    }
}

fn results_page(action: &str, results: &[(String, Result1)]) -> Markup {
    let count = |f: fn(&Result1) -> bool| results.iter().filter(|(_, r)| f(r)).count();
    let done =
        count(|r| matches!(r, Result1::Ran(rep) if rep.outcome != actions::Outcome::Unchanged));
    let unchanged =
        count(|r| matches!(r, Result1::Ran(rep) if rep.outcome == actions::Outcome::Unchanged));
    let moved = count(|r| matches!(r, Result1::Moved(_)));
    let failed = count(|r| matches!(r, Result1::Failed(_)));
    layout::page(
        "Action",
        0,
        html! {
            h1 { (action) ": " (done) " of " (results.len()) " jobs" }
            p #tally {
                span #done { (done) } " done, "
                span #unchanged { (unchanged) } " already so (nothing done), "
                span #moved { (moved) } " changed since the confirmation page (nothing done), "
                span #refused { (failed) } " refused"
            }
            table #results {
                tr { th { "Job" } th { "Outcome" } }
                @for (id, r) in results {
                    tr.result data-job=(id) {
                        td { (job_link(id)) }
                        @match r {
                            Result1::Ran(rep) => td.ok { (rep.detail) },
                            Result1::Moved(e) => td.error.moved { (e) },
                            Result1::Failed(e) => td.error { (e) },
                        }
                    }
                }
            }
            p { a href="/jobs" { "Jobs" } }
        },
    )
}

fn check_action(action: &str) -> Result<Action, PageError> {
    Action::named(action).ok_or(PageError::NoPage)
}

/// `POST /jobs/{id}/{action}`.
pub async fn act(
    State(console): State<Console>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Response {
    run(&console, &headers, form, &action, Some(&id)).await
}

/// Checks the write ([`authorise`]), the action and every posted `id@version` (one
/// job, `only`, for a job page's form), then runs the action on each job in turn (a
/// job posted twice once), each only at the version shown, and shows what happened to
/// each.
async fn run(
    console: &Console,
    headers: &HeaderMap,
    form: Result<Form<ActionForm>, FormRejection>,
    action: &str,
    only: Option<&str>,
) -> Response {
    let Ok(Form(form)) = form else {
        return refused("the form does not decode (no session token)");
    };
    let op = match authorise(console, headers, &form.session) {
        Ok(op) => op,
        Err(why) => return refused(why),
    };
    if let Err(e) = check_action(action) {
        return e.into_response();
    }
    let posted = form.jobs.split_whitespace().count();
    if posted > MAX_BULK {
        // Never cut silently (outside try 24c L6: 1,500 posted, 1,000 acted on, no word).
        return PageError::Invalid(format!(
            "{posted} jobs posted: one action takes at most {MAX_BULK} (nothing was done)"
        ))
        .into_response();
    }
    let mut jobs: Vec<Shown> = Vec::new();
    for item in form.jobs.split_whitespace() {
        match parse_job(item) {
            Ok(job) if jobs.iter().all(|j| j.id != job.id) => jobs.push(job),
            Ok(_) => {}
            Err(e) => return PageError::Invalid(e).into_response(),
        }
    }
    if let Some(id) = only {
        if let Err(e) = PageError::check_id("job", id) {
            return e.into_response();
        }
        if jobs.len() != 1 || jobs[0].id != id {
            return PageError::Invalid(format!(
                "the form must post exactly job {id} with the version shown (id@version)"
            ))
            .into_response();
        }
    }
    let session = match console.session().await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let settings = settings_for(console, &op);
    let mut results = Vec::with_capacity(jobs.len());
    for shown in jobs {
        let result = run_one(&session, &settings, action, &shown).await;
        results.push((shown.id, result));
    }
    results_page(action, &results).into_response()
}

/// The jobs a filter matches now, at most [`MAX_BULK`] (reading at most
/// [`BULK_SCAN`] job nodes).
async fn matching(
    console: &Console,
    params: &ListParams,
    action: Action,
) -> Result<browse::JobPage, PageError> {
    let mut query = params.query(console)?;
    query.changeable_by = Some(action);
    query.after = None;
    query.limit = MAX_BULK;
    query.scan_limit = BULK_SCAN;
    let session = console.session().await?;
    Ok(browse::page(&session, console.admin(), &query).await?)
}

/// The bulk confirmation's query: an action and the jobs list's filter.
#[derive(Debug, Deserialize)]
pub struct BulkParams {
    action: String,
    #[serde(flatten)]
    filter: ListParams,
}

/// `GET /jobs/bulk?action=&state=&...`: the count of jobs the filter matches and the
/// form that acts on exactly those, each at the version shown.
pub async fn confirm(
    State(console): State<Console>,
    headers: HeaderMap,
    query: Result<Query<BulkParams>, QueryRejection>,
) -> Result<Markup, PageError> {
    let params = crate::jobs::params(query)?;
    let action = check_action(&params.action)?;
    if !enabled(&console) {
        return Err(PageError::Invalid(crate::readonly::REFUSAL.trim().into()));
    }
    // Only the jobs the action can change are read into the page (outside try 24b N4:
    // "hold 301 jobs?" on the failed list, then "0 of 301", each refused; 24c M3: they
    // were dropped after the first 1000 were read, so "act again" never got further).
    let page = matching(&console, &params.filter, action).await?;
    let (jobs, more, unreadable) = (page.jobs, page.next.is_some(), page.unreadable);
    let posted: Vec<String> = jobs
        .iter()
        .map(|j| posted(&j.id, j.version, j.status))
        .collect();
    Ok(layout::page(
        "Confirm",
        0,
        html! {
            h1 { (params.action) " " span #count { (jobs.len()) } @if jobs.len() == 1 { " job?" } @else { " jobs?" } }
            p #bulk-filter { "Jobs matching " code { "/jobs?" (params.filter.filter_query()) } ", as read for this page; each is listed with its state." }
            @if more { p.error { "More jobs match: only the first " (MAX_BULK) " are acted on; act again for the rest." } }
            @if !unreadable.is_empty() {
                p.error #unreadable { (unreadable.len()) " job records read for this page do not decode: whether they match is unknown, and they are not acted on (run `archivist fsck`): "
                    @for u in &unreadable { code { (u.path) } " " } }
            }
            p.muted #left-out { "Jobs the filter matches that " (params.action) " cannot change (by their state) are not listed." }
            @if jobs.is_empty() {
                p.muted { "No job matches that " (params.action) " can change." }
            } @else if !armed(&headers) {
                (not_armed_note())
                p.muted #bulk-jobs { @for j in &jobs { (job_link(&j.id)) " (" (j.status) ") " } }
            } @else {
                p { "Each job is acted on only if it is still as shown here (compare-and-set at the version read for this page): one that changed since is refused, not changed." }
                form.action #confirm method="post" action={ "/jobs/bulk/" (params.action) } {
                    input type="hidden" name="jobs" value=(posted.join(" "));
                    button type="submit" { (params.action) " " (jobs.len()) " jobs" }
                }
                p.muted #bulk-jobs { @for j in &jobs { (job_link(&j.id)) " (" (j.status) ") " } }
            }
        },
    ))
}

/// `POST /jobs/bulk/{action}`: the jobs the confirmation listed (at most
/// [`MAX_BULK`]), each with its own compare-and-set.
pub async fn bulk(
    State(console): State<Console>,
    Path(action): Path<String>,
    headers: HeaderMap,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Response {
    run(&console, &headers, form, &action, None).await
}
