//! Actions (retry, hold, release, cancel, delete), one job at a time or on every job a
//! filter matches, through the admin library's compare-and-set functions (the ones
//! behind `archivist retry`, `hold`... : the same rules, in one place).
//!
//! Enabled only when a token is configured (`console.actions_token` or
//! `console.actions_token_file`); the console is read-only otherwise ([`crate::readonly`]).
//! An operator signs in at `/login` with the token and a name; the console then keeps a
//! session for that browser (a random id in an `HttpOnly`, `SameSite=Strict` cookie) with
//! its own CSRF token. Every action is a `POST` that must carry that CSRF token in a
//! form field and an `Origin` header naming the console itself; anything else is refused
//! with 403 before anything is read. Every action is recorded in the job's events with
//! the actor `console:<name>` (the name given at sign-in).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use archivist_admin::actions::{self, ActionReport};
use archivist_admin::browse;
use archivist_admin::AdminSettings;
use archivist_engine::Session;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

use crate::error::PageError;
use crate::jobs::ListParams;
use crate::layout::{self, job_link};
use crate::Console;

/// The cookie that names a signed-in browser's session.
pub const COOKIE: &str = "archivist_console";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Most jobs one bulk action acts on (the confirmation lists them all).
pub const MAX_BULK: usize = 1000;
/// Most job nodes read to find a bulk action's jobs.
pub const BULK_SCAN: usize = 100_000;

/// The actions, as their names in forms and addresses.
pub const ACTIONS: [&str; 5] = ["retry", "hold", "release", "cancel", "delete"];

/// A signed-in browser.
#[derive(Clone)]
struct Signed {
    name: String,
    csrf: String,
    at: Instant,
}

/// Signed-in browsers, by session id.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Signed>>,
}

/// 32 random bytes as hex: session ids and CSRF tokens.
fn random_hex() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who a request's cookie says is signed in, with their CSRF token.
pub struct Operator {
    /// The name given at sign-in.
    pub name: String,
    /// The session's CSRF token.
    pub csrf: String,
}

impl Sessions {
    fn start(&self, name: String) -> (String, Signed) {
        let id = random_hex();
        let signed = Signed {
            name,
            csrf: random_hex(),
            at: Instant::now(),
        };
        if let Ok(mut map) = self.by_id.lock() {
            map.retain(|_, s| s.at.elapsed() < SESSION_TTL);
            map.insert(id.clone(), signed.clone());
        }
        (id, signed)
    }

    fn of(&self, headers: &HeaderMap) -> Option<Operator> {
        let id = cookie(headers, COOKIE)?;
        let map = self.by_id.lock().ok()?;
        let s = map.get(&id).filter(|s| s.at.elapsed() < SESSION_TTL)?;
        Some(Operator {
            name: s.name.clone(),
            csrf: s.csrf.clone(),
        })
    }
}

/// The value of cookie `name` in the request.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The signed-in operator of a request, if actions are enabled and the request's
/// cookie names a live session.
pub fn operator(console: &Console, headers: &HeaderMap) -> Option<Operator> {
    console.settings().actions_token.as_ref()?;
    console.inner.sessions.of(headers)
}

/// A refused write: 403 and why, before anything was read.
fn refused(why: &str) -> Response {
    tracing::info!(why, "console action refused");
    (StatusCode::FORBIDDEN, format!("refused: {why}\n")).into_response()
}

/// Checks a write: actions enabled, a signed-in operator, the form's CSRF token is
/// the session's, and `Origin` names this console (the request's own `Host`).
/// Otherwise why not.
fn authorise(console: &Console, headers: &HeaderMap, csrf: &str) -> Result<Operator, &'static str> {
    if console.settings().actions_token.is_none() {
        return Err(crate::readonly::REFUSAL.trim_end());
    }
    if !same_origin(headers) {
        return Err("the request's Origin is not this console (CSRF check)");
    }
    let Some(op) = console.inner.sessions.of(headers) else {
        return Err("not signed in: sign in at /login with the actions token");
    };
    if csrf.is_empty() || !crate::settings::Token(op.csrf.clone()).matches(csrf) {
        return Err("the form's CSRF token is not this session's");
    }
    Ok(op)
}

/// Does the request's `Origin` name the console it was sent to (`http://` + its
/// `Host`, which [`crate::guard`] has checked)? A missing `Origin` does not.
fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    matches!((host, origin), (Some(h), Some(o)) if o == format!("http://{h}"))
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
                label { "Your name (recorded in job events as console:NAME) " input type="text" name="name" required; }
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
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    if !matches!((host, origin), (Some(h), Some(o)) if o == format!("http://{h}")) {
        return (
            StatusCode::FORBIDDEN,
            "refused: the request's Origin is not this console\n",
        )
            .into_response();
    }
    let Ok(Form(form)) = form else {
        return PageError::Invalid("the sign-in form is incomplete".into()).into_response();
    };
    if !token.matches(&form.token) {
        tracing::warn!("console sign-in refused: wrong token");
        return refused("wrong token");
    }
    let name = form.name.trim();
    if let Err(e) = PageError::check_id("operator", name) {
        return PageError::Invalid(e.to_string()).into_response();
    }
    let (id, _) = console.inner.sessions.start(name.to_string());
    tracing::info!(name, "console sign-in");
    (
        [(
            header::SET_COOKIE,
            format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict"),
        )],
        Redirect::to("/"),
    )
        .into_response()
}

/// The forms of one job's actions, for a signed-in operator.
pub fn job_forms(id: &str, op: &Operator) -> Markup {
    html! {
        div #actions {
            @for a in ACTIONS {
                form.action method="post" action={ "/jobs/" (id) "/" (a) } {
                    input type="hidden" name="csrf" value=(op.csrf);
                    button type="submit" name="action" value=(a) { (a) }
                }
            }
        }
    }
}

/// The form of an action: its CSRF token.
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    csrf: String,
    /// Jobs of a bulk action, space-separated (what the confirmation listed).
    #[serde(default)]
    jobs: String,
}

/// Runs `action` on one job as seen now, with the library's compare-and-set rules.
async fn run_one(
    session: &Session,
    settings: &AdminSettings,
    action: &str,
    id: &str,
) -> Result<ActionReport, String> {
    let seen = actions::look(session, id)
        .await
        .map_err(|e| e.to_string())?;
    let reason = Some("from the web console");
    let done = match action {
        "retry" => actions::retry_seen(session, settings, &seen).await,
        "hold" => actions::hold_seen(session, settings, &seen, reason).await,
        "release" => actions::release_seen(session, settings, &seen).await,
        "cancel" => actions::cancel_seen(session, settings, &seen, reason).await,
        "delete" => actions::delete_seen(session, settings, &seen).await,
        other => return Err(format!("{other:?} is not an action")),
    };
    // A deleted job keeps no events: the log names who deleted it.
    tracing::info!(actor = %settings.actor, job = id, action, ok = done.is_ok(), "console action");
    done.map_err(|e| e.to_string())
}

fn results_page(action: &str, results: &[(String, Result<ActionReport, String>)]) -> Markup {
    let done = results.iter().filter(|(_, r)| r.is_ok()).count();
    layout::page(
        "Action",
        0,
        html! {
            h1 { (action) ": " (done) " of " (results.len()) " jobs" }
            table #results {
                tr { th { "Job" } th { "Outcome" } }
                @for (id, r) in results {
                    tr.result data-job=(id) {
                        td { (job_link(id)) }
                        @match r {
                            Ok(rep) => td.ok { (rep.detail) },
                            Err(e) => td.error { (e) },
                        }
                    }
                }
            }
            p { a href="/jobs" { "Jobs" } }
        },
    )
}

fn check_action(action: &str) -> Result<(), PageError> {
    if ACTIONS.contains(&action) {
        Ok(())
    } else {
        Err(PageError::NoPage)
    }
}

/// `POST /jobs/{id}/{action}`.
pub async fn act(
    State(console): State<Console>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Response {
    run(&console, &headers, form, &action, |_| vec![id]).await
}

/// Checks the write ([`authorise`]), the action and every id, then runs the action on
/// each job of `ids(form)` in turn, each with its own compare-and-set, and shows what
/// happened to each.
async fn run(
    console: &Console,
    headers: &HeaderMap,
    form: Result<Form<ActionForm>, FormRejection>,
    action: &str,
    ids: impl FnOnce(&ActionForm) -> Vec<String>,
) -> Response {
    let Ok(Form(form)) = form else {
        return refused("the form is incomplete (no CSRF token)");
    };
    let op = match authorise(console, headers, &form.csrf) {
        Ok(op) => op,
        Err(why) => return refused(why),
    };
    if let Err(e) = check_action(action) {
        return e.into_response();
    }
    let ids = ids(&form);
    if let Some(Err(e)) = ids
        .iter()
        .map(|id| PageError::check_id("job", id))
        .find(Result::is_err)
    {
        return e.into_response();
    }
    let session = match console.session().await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let settings = settings_for(console, &op);
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let result = run_one(&session, &settings, action, &id).await;
        results.push((id, result));
    }
    results_page(action, &results).into_response()
}

/// The jobs a filter matches now, at most [`MAX_BULK`] (reading at most
/// [`BULK_SCAN`] job nodes).
async fn matching(
    console: &Console,
    params: &ListParams,
) -> Result<(Vec<String>, bool), PageError> {
    let mut query = params.query(console)?;
    query.after = None;
    query.limit = MAX_BULK;
    query.scan_limit = BULK_SCAN;
    let session = console.session().await?;
    let page = browse::page(&session, console.admin(), &query).await?;
    Ok((
        page.jobs.into_iter().map(|j| j.id).collect(),
        page.next.is_some(),
    ))
}

/// The bulk confirmation's query: an action and the jobs list's filter.
#[derive(Debug, Deserialize)]
pub struct BulkParams {
    action: String,
    #[serde(flatten)]
    filter: ListParams,
}

/// `GET /jobs/bulk?action=&state=&...`: the count of jobs the filter matches and the
/// form that acts on exactly those.
pub async fn confirm(
    State(console): State<Console>,
    headers: HeaderMap,
    query: Result<Query<BulkParams>, QueryRejection>,
) -> Result<Markup, PageError> {
    let params = crate::jobs::params(query)?;
    check_action(&params.action)?;
    let Some(op) = operator(&console, &headers) else {
        return Err(PageError::Invalid(
            "sign in at /login with the actions token to act on jobs".into(),
        ));
    };
    let (jobs, more) = matching(&console, &params.filter).await?;
    Ok(layout::page(
        "Confirm",
        0,
        html! {
            h1 { (params.action) " " span #count { (jobs.len()) } " jobs?" }
            @if more { p.error { "More jobs match: only the first " (MAX_BULK) " are acted on; act again for the rest." } }
            @if jobs.is_empty() {
                p.muted { "No job matches." }
            } @else {
                p { "Each job is acted on as it is when the action runs (compare-and-set): one that moved meanwhile is refused, not changed." }
                form #confirm method="post" action={ "/jobs/bulk/" (params.action) } {
                    input type="hidden" name="csrf" value=(op.csrf);
                    input type="hidden" name="jobs" value=(jobs.join(" "));
                    button type="submit" { (params.action) " " (jobs.len()) " jobs" }
                }
                p.muted #bulk-jobs { @for j in &jobs { (job_link(j)) " " } }
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
    run(&console, &headers, form, &action, |f| {
        f.jobs
            .split_whitespace()
            .take(MAX_BULK)
            .map(str::to_string)
            .collect()
    })
    .await
}
