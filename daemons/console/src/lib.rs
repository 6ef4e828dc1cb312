//! The web console (`archivist console`): server-rendered pages over the admin library,
//! for operators (overview, jobs, a job's history) and for the people who care about the
//! results (where each clip occurs in an episode, played from the mark).
//!
//! Every page is a call into `archivist-admin`, the library behind the CLI, rendered as
//! HTML: the console has no rule of its own about what a job's state or a result means.
//! This slice is read-only: only `GET` and `HEAD` are answered, any other method is
//! refused with 403 ([`readonly`]). See `docs/console.md`.
#![deny(missing_docs)]

pub mod error;
pub mod jobs;
pub mod layout;
pub mod overview;
pub mod readonly;
pub mod results;
pub mod settings;
pub mod timeline;

use std::net::SocketAddr;
use std::sync::Arc;

use archivist_admin::AdminSettings;
use archivist_db::Database;
use archivist_engine::Session;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

pub use error::{ConsoleError, PageError};
pub use settings::ConsoleSettings;

/// What every page handler reads from: the ZooKeeper session, the database and the
/// settings. Cheap to clone.
#[derive(Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    session: Session,
    db: Database,
    admin: AdminSettings,
    settings: ConsoleSettings,
    overview: overview::Cache,
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
                session,
                db,
                admin,
                settings,
                overview: overview::Cache::default(),
            }),
        }
    }

    /// The ZooKeeper session.
    pub fn session(&self) -> &Session {
        &self.inner.session
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

/// Every page's route, and the read-only guard in front of them.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(overview::page))
        .route("/jobs", get(jobs::list_page))
        .route("/jobs/{id}", get(jobs::job_page))
        .route("/episodes/{id}", get(results::episode_page))
        .route("/clips/{id}", get(results::clip_page))
        .route("/healthz", get(|| async { "ok\n" }))
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn(readonly::refuse_writes))
        .with_state(console)
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
            "the console listens beyond loopback: anyone who can reach it reads the catalog, jobs and results (it has no login yet)"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    let app = router(console);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    });
    Ok((bound, task))
}
