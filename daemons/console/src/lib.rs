//! The web console (`archivist console`): server-rendered pages over the admin library,
//! for operators (overview, jobs, a job's history) and for the people who care about the
//! results (where each clip occurs in an episode, played from the mark).
//!
//! Every page is a call into `archivist-admin`, the library behind the CLI, rendered as
//! HTML: the console has no rule of its own about what a job's state or a result means.
//! Read-only unless an actions token is configured: then a signed-in operator can act
//! on jobs through the admin library ([`actions`]); otherwise only `GET` and `HEAD` are
//! answered, any other method is refused with 403 ([`readonly`]). See `docs/console.md`.
#![deny(missing_docs)]

pub mod actions;
pub mod assets;
pub mod batches;
pub mod chart;
pub mod error;
pub mod export;
pub mod guard;
pub mod jobs;
pub mod layout;
pub mod overview;
pub mod readonly;
pub mod results;
pub mod search;
pub mod settings;
pub mod timeline;
pub mod zk;

use std::net::SocketAddr;
use std::sync::Arc;

use archivist_admin::AdminSettings;
use archivist_db::Database;
use archivist_engine::Session;
use axum::routing::{get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;

pub use error::{ConsoleError, PageError};
pub use settings::ConsoleSettings;

/// What every page handler reads from: the ZooKeeper session (made anew when lost,
/// [`zk::Zk`]), the database and the settings. Cheap to clone.
#[derive(Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    zk: zk::Zk,
    db: Database,
    admin: AdminSettings,
    settings: ConsoleSettings,
    overview: overview::Cache,
    chart: chart::History,
    sessions: actions::Sessions,
    db_failures: error::DbFailures,
}

impl Console {
    /// A console over `session` and `db`.
    pub fn new(
        session: Session,
        db: Database,
        admin: AdminSettings,
        settings: ConsoleSettings,
    ) -> Console {
        Console {
            inner: Arc::new(Inner {
                zk: zk::Zk::new(session),
                db,
                admin,
                settings,
                overview: overview::Cache::default(),
                chart: chart::History::default(),
                sessions: actions::Sessions::default(),
                db_failures: error::DbFailures::default(),
            }),
        }
    }

    /// A live ZooKeeper session: a new one when the last was lost.
    ///
    /// # Errors
    /// [`PageError::Unavailable`] while ZooKeeper cannot be reached.
    pub async fn session(&self) -> Result<Session, PageError> {
        self.inner.zk.session().await
    }

    /// The database.
    pub fn db(&self) -> &Database {
        &self.inner.db
    }

    /// Settings of the admin library calls.
    pub fn admin(&self) -> &AdminSettings {
        &self.inner.admin
    }

    /// The console's own settings.
    pub fn settings(&self) -> &ConsoleSettings {
        &self.inner.settings
    }
}

/// Every page's route, the read-only guard in front of them, and the `Host` check and
/// security headers in front of everything ([`guard`]).
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(overview::page))
        .route("/jobs", get(jobs::list_page))
        .route("/jobs/{id}", get(jobs::job_page))
        .route("/login", get(actions::login_page).post(actions::login))
        .route("/logout", post(actions::logout))
        .route("/jobs/bulk", get(actions::confirm))
        .route("/jobs/bulk/{action}", post(actions::bulk))
        .route(
            "/jobs/{id}/{action}",
            get(actions::confirm_one).post(actions::act),
        )
        .route("/episodes/{id}", get(results::episode_page))
        .route("/clips/{id}", get(results::clip_page))
        .route("/episodes/{id}/export", get(export::episode))
        .route("/clips/{id}/export", get(export::clip))
        .route("/search", get(search::page))
        .route("/batches", get(batches::list_page))
        .route("/batches/{id}", get(batches::batch_page))
        .route("/healthz", get(healthz))
        .route(assets::STYLE_PATH, get(assets::style))
        .route(assets::REFRESH_PATH, get(assets::refresh))
        .route(assets::PLAYER_PATH, get(assets::player))
        .route(assets::SESSION_PATH, get(assets::session))
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            readonly::refuse_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            guard::check,
        ))
        .with_state(console)
}

/// `GET /healthz`: `ok` only when the console can read ZooKeeper (making a new session
/// if the last was lost) and its database; 503 naming what fails otherwise, so a
/// supervisor sees a console that cannot serve its pages (outside try of #24, F1: it
/// said ok while every ZooKeeper page answered 503).
async fn healthz(
    axum::extract::State(console): axum::extract::State<Console>,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let zk = match console.session().await {
        Ok(s) => archivist_engine::tree::check_initialised(&s)
            .await
            .map_err(|e| format!("zookeeper: {e}")),
        Err(e) => Err(format!("zookeeper: {e}")),
    };
    let db = match console.db().probe().await {
        Err(e) => Err(format!("database: {e}")),
        Ok(()) => match console.inner.db_failures.recent() {
            Some(why) => Err(format!("database: {why}")),
            None => Ok(()),
        },
    };
    match (zk, db) {
        (Ok(_), Ok(())) => "ok\n".into_response(),
        (zk, db) => {
            let why: Vec<String> = [zk.err(), db.err()].into_iter().flatten().collect();
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{}\n", why.join("\n")),
            )
                .into_response()
        }
    }
}

/// Binds `addr` and serves the console until `shutdown`; returns the bound address (the
/// port is chosen by the system when `addr` has port 0) once it accepts connections.
pub async fn serve(
    console: Console,
    addr: SocketAddr,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>), ConsoleError> {
    if !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "the console listens beyond loopback: anyone who can reach it reads the catalog, jobs and results (signing in guards only the actions; reading needs none)"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    tokio::spawn(overview::sample_forever(console.clone(), shutdown.clone()));
    let app = router(console);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    });
    Ok((bound, task))
}
