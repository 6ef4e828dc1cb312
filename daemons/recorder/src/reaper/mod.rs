//! The reaper: housekeeping the seed never had, done by one leader at a time.
//!
//! Only the leader of `/election/reaper` sweeps ([`sweep::sweep`]) every
//! [`ReaperSettings::interval`]. [`run`] is a whole daemon (reconnecting on a lost
//! session) that `archivist reaper` runs alone and `archivist run --all` or
//! `archivist recorder --with-reaper` spawn inside their own process.

pub mod sweep;

use archivist_db::Database;
use archivist_engine::leader;
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::MemberRecord;
use archivist_engine::schema::SCHEMA_VERSION;
use archivist_engine::{clock, daemon, store, EngineError, Session, ZkConfig};
use tokio_util::sync::CancellationToken;

use crate::error::ReaperError;
use crate::settings::ReaperSettings;

pub use sweep::{sweep, SweepReport, LEASE_EXPIRED, TTL_PASSED};

/// Runs the reaper until `shutdown` fires, on a new session whenever one is lost.
///
/// # Errors
/// [`ReaperError::Settings`] for unusable settings; otherwise it keeps retrying.
pub async fn run(
    config: &ZkConfig,
    db: &Database,
    settings: ReaperSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), ReaperError> {
    settings.validate()?;
    let name = identity.name.clone();
    daemon::supervise(config, &name, shutdown.clone(), |session| {
        let settings = settings.clone();
        let identity = identity.clone();
        let shutdown = shutdown.clone();
        let db = db.clone();
        async move { lead_and_sweep(&session, &db, &settings, &identity, &shutdown).await }
    })
    .await?;
    Ok(())
}

fn candidate_data(identity: &Identity) -> Result<Vec<u8>, EngineError> {
    let record = MemberRecord {
        schema: SCHEMA_VERSION,
        role: identity.role.clone(),
        name: identity.name.clone(),
        slots: 0,
        version: env!("CARGO_PKG_VERSION").to_string(),
        host: member::hostname(),
        pid: std::process::id(),
        metrics: None,
        started: clock::stamp_now(),
        work_item_ttl_ms: None,
    };
    store::encode(&paths::election("reaper"), &record)
}

/// On one session: registers, joins the election, and sweeps while leading until
/// `shutdown` fires (leaves the election) or the session is lost.
pub async fn lead_and_sweep(
    session: &Session,
    db: &Database,
    settings: &ReaperSettings,
    identity: &Identity,
    shutdown: &CancellationToken,
) -> Result<(), EngineError> {
    let Some(_membership) = member::register(session, identity, 0, None, shutdown).await? else {
        return Ok(());
    };
    let candidate = candidate_data(identity)?;
    leader::run_while_leading(
        session,
        "reaper",
        &candidate,
        shutdown,
        |leading| async move { sweep_while_leading(session, db, settings, identity, &leading).await },
    )
    .await
}

/// Sweeps every interval until `leading` is cancelled (leadership, the session or the
/// daemon went). A failed sweep is logged and tried again at the next interval.
async fn sweep_while_leading(
    session: &Session,
    db: &Database,
    settings: &ReaperSettings,
    identity: &Identity,
    leading: &CancellationToken,
) -> Result<(), EngineError> {
    let lost = session.lost();
    loop {
        match sweep(session, db, settings, &identity.name).await {
            Ok(report) => {
                archivist_engine::health::recovered(&identity.role);
                if report != SweepReport::default() {
                    tracing::info!(?report, "reaper sweep");
                }
            }
            Err(e) if e.is_session_lost() => return Err(e),
            Err(e) => {
                // A deleted directory or `/clock` says "run `archivist init`".
                let e = archivist_engine::tree::explain_missing(session, e).await;
                tracing::warn!(error = %e, "reaper sweep failed; next interval retries");
                archivist_engine::health::trouble(
                    &identity.role,
                    format!("the last sweep failed: {e}"),
                );
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = leading.cancelled() => return Ok(()),
            _ = lost.cancelled() => return Err(EngineError::SessionLost("reaper idle".into())),
        }
    }
}
