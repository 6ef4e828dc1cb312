//! The planner daemon: register, wait to lead `/election/planner`, then plan on every
//! wake (researchers, pending queue, catalog) and every tick, until shutdown. A lost
//! session stops planning and starts over on a new session (rebuilding the index).

use std::time::Duration;

use archivist_db::Database;
use archivist_engine::daemon::supervise;
use archivist_engine::health;
use archivist_engine::leader;
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::MemberRecord;
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
    db: &Database,
    settings: PlannerSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), PlannerError> {
    settings.validate()?;
    supervise(config, &identity.name, shutdown.clone(), |session| {
        let settings = settings.clone();
        let identity = identity.clone();
        let shutdown = shutdown.clone();
        let db = db.clone();
        async move {
            role(&session, &db, settings, &identity, &shutdown)
                .await
                .map_err(engine_error)
        }
    })
    .await?;
    Ok(())
}

/// A planner error on its way through the engine: its own type kept
/// ([`EngineError::daemon`]), a ZooKeeper error as it is.
fn engine_error(err: PlannerError) -> EngineError {
    match err {
        PlannerError::Engine(e) => e,
        other => EngineError::daemon(other),
    }
}

/// The planner's member record (`/daemons/{name}` and its election candidate): with the
/// work-item TTL it runs with, which `retry`/`release` check a lease against.
fn planner_record(identity: &Identity, settings: &PlannerSettings) -> MemberRecord {
    MemberRecord {
        work_item_ttl_ms: Some(settings.work_item_ttl_ms()),
        ..member::record(identity, 0, None)
    }
}

/// The planner's work on one session: register, win the election, plan.
pub async fn role(
    session: &Session,
    db: &Database,
    settings: PlannerSettings,
    identity: &Identity,
    shutdown: &CancellationToken,
) -> Result<(), PlannerError> {
    archivist_engine::tree::check_initialised(session).await?;
    let record = planner_record(identity, &settings);
    let Some(_membership) = member::register_record(session, identity, &record, shutdown).await?
    else {
        return Ok(());
    };
    let data = store::encode(&paths::election(ROLE), &record)?;
    // A follower exports `leading 0` from the start, not only after losing the lead: an
    // alert on "no series with leading 1" then has series to look at (outside 17i G1).
    metrics::gauge!("archivist_planner_leading").set(0.0);
    leader::run_while_leading(session, ROLE, &data, shutdown, |leading| {
        let settings = settings.clone();
        async move {
            lead(session, db, settings, identity, &leading)
                .await
                .map_err(engine_error)
        }
    })
    .await?;
    Ok(())
}

/// Plans while `leading` lives (cancelled when leadership, the session or the daemon
/// goes).
async fn lead(
    session: &Session,
    db: &Database,
    settings: PlannerSettings,
    identity: &Identity,
    leading: &CancellationToken,
) -> Result<(), PlannerError> {
    tracing::info!(planner = %identity.name, "leading /election/planner; loading the index");
    let tick = settings.tick;
    let mut planner = Planner::start(session, db, settings, &identity.name).await?;
    let lost = session.lost();
    let mut failures = Failures::default();
    loop {
        // The round stops when leading ends, even in the middle (a multi is atomic; a planner
        // that leads next reloads its index from the tree).
        let round = tokio::select! {
            r = planner.round(leading) => r,
            _ = leading.cancelled() => return Ok(()),
        };
        match round {
            Ok(report) => {
                failures.succeeded(&identity.role);
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
                // Make progress or back off and say why: a failing round waits longer
                // each time (not on the next wake, which may come at once), and the
                // planner is not ready while rounds fail. A deleted directory says
                // "run `archivist init`", not "the tree changed meanwhile".
                let e = archivist_engine::tree::explain_missing(session, e).await;
                let pause = failures.failed(&identity.role, &e, tick);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = leading.cancelled() => return Ok(()),
                    _ = lost.cancelled() => return Err(EngineError::SessionLost("while backing off".into()).into()),
                }
            }
        }
        tokio::select! {
            woke = planner.wait(tick) => { woke?; }
            _ = leading.cancelled() => return Ok(()),
            _ = lost.cancelled() => return Err(EngineError::SessionLost("while idle".into()).into()),
        }
    }
}

/// Consecutive failed rounds, and how long to back off after the next one.
#[derive(Debug, Default)]
struct Failures {
    streak: u32,
}

impl Failures {
    /// The first backoff after a failed round; it doubles up to the tick.
    const FIRST: Duration = Duration::from_millis(200);

    fn failed(&mut self, role: &str, error: &EngineError, tick: Duration) -> Duration {
        self.streak = self.streak.saturating_add(1);
        let pause = backoff(self.streak, tick);
        tracing::warn!(error = %error, failures = self.streak, backoff_ms = pause.as_millis() as u64, "planning round failed; backing off");
        metrics::counter!("archivist_planner_round_failures_total").increment(1);
        health::trouble(
            role,
            format!("{} planning round(s) failed in a row: {error}", self.streak),
        );
        pause
    }

    fn succeeded(&mut self, role: &str) {
        if self.streak > 0 {
            tracing::info!(after = self.streak, "planning rounds succeed again");
            health::recovered(role);
        }
        self.streak = 0;
    }
}

/// The pause after the `streak`-th failed round in a row: 200 ms doubling, at most the
/// tick (at least 200 ms).
fn backoff(streak: u32, tick: Duration) -> Duration {
    let doubled = Failures::FIRST.saturating_mul(1u32 << streak.saturating_sub(1).min(16));
    doubled.min(tick.max(Failures::FIRST))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_rounds_back_off_longer_each_time_up_to_the_tick() {
        let tick = Duration::from_secs(5);
        assert_eq!(backoff(1, tick), Duration::from_millis(200));
        assert_eq!(backoff(2, tick), Duration::from_millis(400));
        assert_eq!(backoff(5, tick), Duration::from_millis(3_200));
        assert_eq!(backoff(6, tick), tick);
        assert_eq!(backoff(60, tick), tick);
        assert_eq!(
            backoff(3, Duration::from_millis(10)),
            Duration::from_millis(200)
        );
    }
}
