//! The planner daemon: register, wait to lead `/election/planner`, then plan on every
//! wake (researchers, pending queue, catalog) and every tick, until shutdown. A lost
//! session stops planning and starts over on a new session (rebuilding the index).

use archivist_engine::daemon::supervise;
use archivist_engine::leader::LeaderLatch;
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::records::MemberRecord;
use archivist_engine::schema::{paths, SCHEMA_VERSION};
use archivist_engine::{store, EngineError, Session, ZkConfig};
use tokio_util::sync::CancellationToken;

use crate::error::PlannerError;
use crate::plan::{Planner, Stop};
use crate::settings::PlannerSettings;

/// The election role the planner joins.
pub const ROLE: &str = "planner";

/// Runs the planner until `shutdown` fires. Refuses invalid settings before connecting.
pub async fn run(
    config: &ZkConfig,
    settings: PlannerSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), PlannerError> {
    settings.validate()?;
    supervise(config, &identity.name, shutdown.clone(), |session| {
        let settings = settings.clone();
        let identity = identity.clone();
        let shutdown = shutdown.clone();
        async move {
            role(&session, settings, &identity, &shutdown)
                .await
                .map_err(|e| match e {
                    PlannerError::Engine(e) => e,
                    other => EngineError::Config(other.to_string()),
                })
        }
    })
    .await?;
    Ok(())
}

fn candidate_record(identity: &Identity) -> MemberRecord {
    MemberRecord {
        schema: SCHEMA_VERSION,
        role: identity.role.clone(),
        name: identity.name.clone(),
        slots: 0,
        version: env!("CARGO_PKG_VERSION").to_string(),
        host: member::hostname(),
        pid: std::process::id(),
        metrics: None,
        started: archivist_engine::clock::local_now(),
    }
}

/// The planner's work on one session: register, win the election, plan.
pub async fn role(
    session: &Session,
    settings: PlannerSettings,
    identity: &Identity,
    shutdown: &CancellationToken,
) -> Result<(), PlannerError> {
    archivist_engine::tree::check_initialised(session).await?;
    member::register(session, identity, 0, None).await?;
    let data = store::encode(&paths::election(ROLE), &candidate_record(identity))?;
    let latch = LeaderLatch::join(session, ROLE, &data).await?;
    let lost = session.lost();
    tokio::select! {
        led = latch.wait_leadership() => led?,
        _ = shutdown.cancelled() => {
            let _ = latch.leave().await;
            return Ok(());
        }
        _ = lost.cancelled() => return Err(EngineError::SessionLost("while waiting to lead".into()).into()),
    }
    tracing::info!(planner = %identity.name, "leading /election/planner; loading the index");
    let result = lead(session, settings, identity, shutdown, &latch).await;
    if shutdown.is_cancelled() {
        let _ = latch.leave().await;
    }
    result
}

async fn lead(
    session: &Session,
    settings: PlannerSettings,
    identity: &Identity,
    shutdown: &CancellationToken,
    latch: &LeaderLatch,
) -> Result<(), PlannerError> {
    let tick = settings.tick;
    let mut planner = Planner::start(session, settings, &identity.name).await?;
    let lost = session.lost();
    loop {
        if !latch.is_leader().await? {
            tracing::warn!(planner = %identity.name, "no longer the leader; starting over");
            return Ok(());
        }
        match planner.round(shutdown).await {
            Ok(report) => {
                if !report.created.is_empty() || !report.expired.is_empty() {
                    tracing::info!(
                        created = report.created.len(),
                        expired = report.expired.len(),
                        stop = ?report.stop,
                        "planning round"
                    );
                }
                if report.stop == Stop::Shutdown {
                    return Ok(());
                }
            }
            Err(e) if e.is_session_lost() => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, "planning round failed; retrying on the next wake")
            }
        }
        tokio::select! {
            woke = planner.wait(tick) => { woke?; }
            _ = shutdown.cancelled() => return Ok(()),
            _ = lost.cancelled() => return Err(EngineError::SessionLost("while idle".into()).into()),
        }
    }
}
