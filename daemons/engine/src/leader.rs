//! Leader election for roles where only one daemon may act at a time (planner, reaper).
//!
//! Curator's LeaderLatch: each candidate creates an ephemeral sequential node
//! `/election/{role}/n_<session>_<seq>`; the lowest sequence leads; every other candidate
//! watches only its predecessor. The session id in the name lets a create lost to a
//! connection drop be found again. The decision itself is the pure [`decide`], over the
//! live candidates only ([`candidates`]): a persistent node made by hand in the election
//! is no candidate (it has no session to lose, so it would lead for ever without
//! working; outside 17i G1).
//!
//! [`run_while_leading`] is the one "run this role while leading" loop: wait to lead,
//! run the work with a token cancelled when leadership or the session goes, back off
//! when the work fails.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use znode_schema::paths;
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::member;
use crate::session::Session;
use crate::store;

/// What a candidate should do, given the sorted candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// This candidate leads.
    Lead,
    /// Wait until this predecessor's node is gone, then decide again.
    Watch(String),
    /// This candidate's node is gone (session lost or deleted): join again.
    Rejoin,
}

fn sequence(name: &str) -> Option<u64> {
    name.rsplit('_').next()?.parse().ok()
}

/// Decides from the children of the election node and this candidate's node name.
pub fn decide(children: &[String], mine: &str) -> Decision {
    let mut ordered: Vec<(u64, &String)> = children
        .iter()
        .filter_map(|c| sequence(c).map(|s| (s, c)))
        .collect();
    ordered.sort();
    match ordered.iter().position(|(_, c)| c.as_str() == mine) {
        None => Decision::Rejoin,
        Some(0) => Decision::Lead,
        Some(i) => Decision::Watch(ordered[i - 1].1.clone()),
    }
}

/// The live candidates of one role's election: the children of `/election/{role}` that
/// are ephemeral ([`member::is_live`], the rule registrations use). A persistent node
/// (made by hand) is skipped with a warning, once per node: it never goes, and sorting
/// first it kept every real candidate from leading for ever; `fsck` names it
/// (`member_not_ephemeral`) and `--repair` deletes it. A child gone meanwhile is skipped.
pub async fn candidates(session: &Session, role: &str) -> Result<Vec<String>> {
    let dir = paths::election(role);
    let mut live = Vec::new();
    for child in store::children(session, &dir).await? {
        let path = format!("{dir}/{child}");
        match store::exists(session, &path).await? {
            Some(stat) if member::is_live(&stat) => live.push(child),
            Some(stat)
                if crate::logs::first_time(&format!("election ghost {path} at {}", stat.czxid)) =>
            {
                tracing::warn!(%path, "a persistent node in the election (made by hand?) is not a candidate: skipped; `archivist fsck --repair` deletes it");
            }
            Some(_) | None => {}
        }
    }
    Ok(live)
}

/// The live candidate leading `role` now (the lowest sequence of [`candidates`]), if any.
pub async fn leader_node(session: &Session, role: &str) -> Result<Option<String>> {
    let live = candidates(session, role).await?;
    Ok(live
        .iter()
        .filter_map(|c| sequence(c).map(|s| (s, c)))
        .min()
        .map(|(_, c)| c.clone()))
}

/// A candidate in one role's election.
pub struct LeaderLatch {
    session: Session,
    role: String,
    node: String,
}

impl LeaderLatch {
    /// Joins the election for `role`, storing `data` (a member record) in the node.
    pub async fn join(session: &Session, role: &str, data: &[u8]) -> Result<LeaderLatch> {
        let dir = paths::election(role);
        let prefix = format!("{dir}/n_{:x}_", session.id_number());
        let options = session.create_options(zk::CreateMode::EphemeralSequential);
        let node = match session.client().create(&prefix, data, &options).await {
            Ok((_, seq)) => format!("n_{:x}_{seq}", session.id_number()),
            Err(zk::Error::NoNode) => {
                session
                    .client()
                    .mkdir(&dir, &session.create_options(zk::CreateMode::Persistent))
                    .await
                    .map_err(|e| EngineError::zk("create", &dir, e))?;
                let (_, seq) = session
                    .client()
                    .create(&prefix, data, &options)
                    .await
                    .map_err(|e| EngineError::zk("create", &prefix, e))?;
                format!("n_{:x}_{seq}", session.id_number())
            }
            Err(zk::Error::ConnectionLoss) => {
                let mine = format!("n_{:x}_", session.id_number());
                store::children(session, &dir)
                    .await?
                    .into_iter()
                    .find(|c| c.starts_with(&mine))
                    .ok_or_else(|| EngineError::zk("create", &prefix, zk::Error::ConnectionLoss))?
            }
            Err(e) => return Err(EngineError::zk("create", &prefix, e)),
        };
        Ok(LeaderLatch {
            session: session.clone(),
            role: role.to_string(),
            node,
        })
    }

    /// Waits until this candidate leads. Returns an error if the session is lost or the
    /// candidate's node disappeared.
    pub async fn wait_leadership(&self) -> Result<()> {
        let dir = paths::election(&self.role);
        loop {
            self.session.ensure_alive()?;
            let children = candidates(&self.session, &self.role).await?;
            match decide(&children, &self.node) {
                Decision::Lead => return Ok(()),
                Decision::Rejoin => {
                    return Err(EngineError::NotFound(format!("{dir}/{}", self.node)))
                }
                Decision::Watch(prev) => {
                    let path = format!("{dir}/{prev}");
                    let (stat, watcher) = self
                        .session
                        .client()
                        .check_and_watch_stat(&path)
                        .await
                        .map_err(|e| EngineError::zk("watch", &path, e))?;
                    if stat.is_some() {
                        let lost = self.session.lost();
                        tokio::select! {
                            _ = watcher.changed() => {}
                            _ = lost.cancelled() => {}
                        }
                    }
                }
            }
        }
    }

    /// Is this candidate the leader right now?
    pub async fn is_leader(&self) -> Result<bool> {
        let children = candidates(&self.session, &self.role).await?;
        Ok(decide(&children, &self.node) == Decision::Lead)
    }

    /// Returns once this candidate no longer leads: its node is gone (deleted, or with
    /// its session) or the session is lost; or once `stop` fires. A leader stays the
    /// lowest sequence for as long as its node lives (later candidates get higher
    /// numbers), so watching its own node is enough.
    pub async fn until_not_leading(&self, stop: &CancellationToken) {
        let path = format!("{}/{}", paths::election(&self.role), self.node);
        let lost = self.session.lost();
        loop {
            let watched = self.session.client().check_and_watch_stat(&path).await;
            let watcher = match watched {
                Ok((Some(_), watcher)) => watcher,
                Ok((None, _)) => return,
                Err(e) => {
                    if self.session.is_lost() {
                        return;
                    }
                    tracing::debug!(error = %e, %path, "leadership watch not set; looking again");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                        _ = stop.cancelled() => return,
                        _ = lost.cancelled() => return,
                    }
                }
            };
            tokio::select! {
                _ = watcher.changed() => {}
                _ = stop.cancelled() => return,
                _ = lost.cancelled() => return,
            }
        }
    }

    /// Leaves the election (deletes the node).
    pub async fn leave(self) -> Result<()> {
        let path = format!("{}/{}", paths::election(&self.role), self.node);
        store::delete_if_present(&self.session, &path)
            .await
            .map(|_| ())
    }
}

/// The first pause after the work of [`run_while_leading`] failed; it doubles up to
/// [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// The longest pause between failed runs of the work of [`run_while_leading`].
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Runs a role's work whenever this daemon leads its election, on one session: joins
/// `/election/{role}` with `candidate` (a member record), waits to lead, and runs
/// `work` with a token that is cancelled when leadership goes (this candidate's node is
/// gone), the session goes, or `shutdown` fires; then waits to lead again. Work that
/// fails (not by a lost session) is run again after a pause that doubles from
/// [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`], so a failing leader never spins. Returns
/// `Ok` after `shutdown` (leaving the election), or the error of a lost session (the
/// caller, usually [`crate::daemon::supervise`], starts over on a new one).
///
/// This is the one wait-to-lead loop of the planner and the reaper.
pub async fn run_while_leading<F, Fut>(
    session: &Session,
    role: &str,
    candidate: &[u8],
    shutdown: &CancellationToken,
    mut work: F,
) -> Result<()>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let latch = LeaderLatch::join(session, role, candidate).await?;
    let lost = session.lost();
    let outcome = async {
        let mut backoff = FIRST_BACKOFF;
        loop {
            tokio::select! {
                led = latch.wait_leadership() => led?,
                _ = shutdown.cancelled() => return Ok(()),
                _ = lost.cancelled() => {
                    return Err(EngineError::SessionLost(format!("while waiting to lead {role}")))
                }
            }
            tracing::info!(role, "leading /election/{role}");
            let leading = shutdown.child_token();
            let result = {
                let running = work(leading.clone());
                tokio::pin!(running);
                tokio::select! {
                    result = &mut running => result,
                    () = latch.until_not_leading(&leading) => {
                        // Leadership or the session went: the work winds down.
                        leading.cancel();
                        running.await
                    }
                }
            };
            leading.cancel();
            match result {
                Ok(()) if shutdown.is_cancelled() => return Ok(()),
                Ok(()) => {
                    tracing::warn!(role, "no longer leading; waiting to lead again");
                    backoff = FIRST_BACKOFF;
                }
                Err(e) if e.is_session_lost() || lost.is_cancelled() => return Err(e),
                Err(e) => {
                    tracing::warn!(role, error = %e, backoff_ms = backoff.as_millis() as u64, "work while leading failed; backing off");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = lost.cancelled() => {
                            return Err(EngineError::SessionLost("while backing off".into()))
                        }
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
    .await;
    if shutdown.is_cancelled() {
        let _ = latch.leave().await;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lowest_sequence_leads_regardless_of_session_prefix() {
        let c = names(&["n_ff_0000000003", "n_1_0000000001", "n_a_0000000002"]);
        assert_eq!(decide(&c, "n_1_0000000001"), Decision::Lead);
        assert_eq!(
            decide(&c, "n_ff_0000000003"),
            Decision::Watch("n_a_0000000002".into())
        );
        assert_eq!(
            decide(&c, "n_a_0000000002"),
            Decision::Watch("n_1_0000000001".into())
        );
    }

    #[test]
    fn a_missing_node_means_rejoin() {
        let c = names(&["n_1_0000000001"]);
        assert_eq!(decide(&c, "n_2_0000000002"), Decision::Rejoin);
    }
}
