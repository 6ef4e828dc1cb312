//! The recorder daemon: the `/reports` watcher and the `reported` consumer on one
//! session, restarted on a new session whenever it is lost.

use std::sync::Arc;

use archivist_db::Database;
use archivist_engine::consumer::{self, ConsumerOptions};
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::JobState;
use archivist_engine::{daemon, EngineError, Session, ZkConfig};
use tokio_util::sync::CancellationToken;

use crate::error::RecorderError;
use crate::finish::FinishStep;
use crate::settings::RecorderSettings;
use crate::watcher;

/// Runs the recorder until `shutdown` fires, on a new session whenever one is lost,
/// storing research into `db`. Several recorders may run at once, in one process or
/// many.
///
/// # Errors
/// [`RecorderError::Settings`] for unusable settings; otherwise it keeps retrying.
pub async fn run(
    config: &ZkConfig,
    db: Database,
    settings: RecorderSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), RecorderError> {
    settings.validate()?;
    let name = identity.name.clone();
    daemon::supervise(config, &name, shutdown.clone(), |session| {
        let settings = settings.clone();
        let identity = identity.clone();
        let shutdown = shutdown.clone();
        let db = db.clone();
        async move { run_on_session(&session, &db, &settings, &identity, &shutdown).await }
    })
    .await?;
    Ok(())
}

/// On one session: registers under `/daemons` and runs both consumers until `shutdown`
/// fires or the session is lost (either consumer failing stops the other).
pub async fn run_on_session(
    session: &Session,
    db: &Database,
    settings: &RecorderSettings,
    identity: &Identity,
    shutdown: &CancellationToken,
) -> Result<(), EngineError> {
    let Some(_membership) = member::register(session, identity, 0, None, shutdown).await? else {
        return Ok(());
    };
    let stop = shutdown.child_token();
    let options = ConsumerOptions::new(JobState::Reported, identity.name.clone())
        .with_concurrency(settings.concurrency)
        .with_poll_interval(settings.poll_interval);
    let step = Arc::new(FinishStep::new(
        settings.clone(),
        db.clone(),
        identity.name.clone(),
    ));
    let reports = async {
        let result = watcher::run(session, db, settings, stop.clone()).await;
        stop.cancel();
        result.map(|_| ()).map_err(|e| match e {
            RecorderError::Engine(e) => e,
            other => EngineError::daemon(other),
        })
    };
    let reported = async {
        let result = consumer::run(session, options, step, stop.clone()).await;
        stop.cancel();
        result
    };
    let (a, b) = tokio::join!(reports, reported);
    a.and(b)
}
