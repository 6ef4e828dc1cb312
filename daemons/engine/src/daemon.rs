//! Keeping a daemon's role running across session losses.
//!
//! A lost session ends every lock and lease the role held, so the role's work is stopped
//! (its futures observe [`Session::lost`]) and the role restarts on a fresh session,
//! re-registering its ephemeral nodes and watches.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::ZkConfig;
use crate::error::Result;
use crate::session::Session;

/// How long a stopping daemon waits for ZooKeeper to confirm its session closed.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// Runs `role` on a session, reconnecting with backoff whenever the session is lost or
/// the role fails, until `shutdown` fires. A session the role is done with (stopped or
/// failed, not lost) is closed before going on ([`Session::close`]).
pub async fn supervise<F, Fut>(
    config: &ZkConfig,
    name: &str,
    shutdown: CancellationToken,
    mut role: F,
) -> Result<()>
where
    F: FnMut(Session) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut backoff = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        crate::health::disconnected(name, "connecting to ZooKeeper");
        let session = tokio::select! {
            s = Session::connect(config) => s,
            _ = shutdown.cancelled() => break,
        };
        let session = match session {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(daemon = name, error = %e, "cannot connect; retrying in {backoff:?}");
                crate::health::disconnected(name, format!("cannot reach ZooKeeper: {e}"));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        tracing::info!(daemon = name, session = %session.id(), "session established");
        crate::health::connected(name);
        metrics::counter!("archivist_zk_sessions_total", "daemon" => name.to_string()).increment(1);
        metrics::gauge!("archivist_zk_session_connected", "daemon" => name.to_string()).set(1.0);
        let watch = tokio::spawn(watch_connection(
            session.client().state_watcher(),
            name.to_string(),
        ));
        let outcome = role(session.clone()).await;
        watch.abort();
        metrics::gauge!("archivist_zk_session_connected", "daemon" => name.to_string()).set(0.0);
        // Stopped or failed: close the session now, so its ephemeral nodes go at once (a
        // restart under the same name, or a successor, need not wait a session timeout).
        if !matches!(&outcome, Err(e) if e.is_session_lost()) && !session.close(CLOSE_WAIT).await {
            tracing::debug!(
                daemon = name,
                "the session did not close in time; ZooKeeper expires it after its timeout"
            );
        }
        match outcome {
            Ok(()) if shutdown.is_cancelled() => break,
            Ok(()) => {}
            Err(e) if e.is_session_lost() => {
                tracing::warn!(
                    daemon = name,
                    "session lost; stopping guarded work and reconnecting"
                );
                backoff = Duration::from_millis(200);
                continue;
            }
            Err(e) => {
                let e = role_failure(&e, config);
                tracing::error!(daemon = name, error = %e, "role failed; restarting in {backoff:?}");
                crate::health::disconnected(name, format!("role failed; restarting: {e}"));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    crate::health::connected(name);
    Ok(())
}

/// Follows the session's connection while its role runs: disconnected, the daemon is
/// not ready (`/readyz` 503 naming it) and `archivist_zk_session_connected` is 0 until
/// the client reconnects within the session, or the session is lost and
/// [`supervise`] makes a new one. (Outside try 17p F2: for the whole session timeout
/// after ZooKeeper stopped, every daemon answered ready, the gauge stayed 1, and nothing
/// was logged.)
async fn watch_connection(mut watcher: crate::zk::StateWatcher, name: String) {
    use crate::zk::SessionState;
    let gauge = || metrics::gauge!("archivist_zk_session_connected", "daemon" => name.clone());
    loop {
        match watcher.changed().await {
            SessionState::Disconnected => {
                tracing::warn!(daemon = %name, "ZooKeeper connection lost; reconnecting (the session lives until its timeout)");
                crate::health::disconnected(
                    &name,
                    "ZooKeeper connection lost; reconnecting within the session timeout",
                );
                gauge().set(0.0);
            }
            SessionState::SyncConnected => {
                tracing::info!(daemon = %name, "ZooKeeper connection back within the session");
                crate::health::connected(&name);
                gauge().set(1.0);
            }
            state if state.is_terminated() => return,
            _ => {}
        }
    }
}

/// A failed role's error in words: for a read or write the tree's ACLs refused, with
/// the identity the daemon connected as and what to check ([`crate::error::refusal_hint`],
/// the admin CLI's rule), so a reader's secret deployed to a daemon does not read like
/// an ACL problem of the tree (outside 17g finding 5).
fn role_failure(err: &crate::EngineError, config: &ZkConfig) -> String {
    if crate::error::refused_by_acl(err) {
        format!("{err} ({})", crate::error::refusal_hint(config))
    } else {
        err.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_write_names_the_identity_used() {
        let config =
            ZkConfig::new("127.0.0.1:2181").with_credentials(Some(crate::config::Credentials {
                user: "ops".into(),
                password: "r34d".into(),
            }));
        let refused = crate::EngineError::zk(
            "create",
            "/researchers/ro-r",
            zookeeper_client::Error::NoAuth,
        );
        let text = role_failure(&refused, &config);
        assert!(
            text.contains("not authorized") && text.contains("connected as digest user \"ops\""),
            "{text}"
        );
        assert!(!text.contains("r34d"), "the secret stays out: {text}");
        let other = crate::EngineError::zk(
            "create",
            "/researchers/ro-r",
            zookeeper_client::Error::NodeExists,
        );
        assert_eq!(role_failure(&other, &config), other.to_string());
    }
}
