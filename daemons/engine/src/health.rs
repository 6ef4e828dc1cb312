//! Process readiness, for `/readyz`.
//!
//! A daemon is ready while the session it registered with is alive and its work makes
//! progress. Registration ([`crate::member::register`]) records the role with its
//! session's `lost` token; a lost session makes the role not ready until it registers
//! again on a new session. A role whose loop keeps failing (every round errs, so it backs
//! off) reports [`trouble`] with the reason, and is not ready until a round succeeds
//! again ([`recovered`]): `/readyz` never claims health while a loop spins. One process
//! may run several roles (`archivist run --all`): it is ready when every role that
//! registered is.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
struct Role {
    lost: CancellationToken,
    trouble: Option<String>,
    /// Why its registration is gone and cannot be made again (kept apart from
    /// `trouble`, which the role's loop clears on every good round).
    unregistered: Option<String>,
}

fn roles() -> &'static Mutex<BTreeMap<String, Role>> {
    static ROLES: OnceLock<Mutex<BTreeMap<String, Role>>> = OnceLock::new();
    ROLES.get_or_init(Mutex::default)
}

/// Daemons (by name) that have no session, and why: connecting, ZooKeeper unreachable,
/// or the role failed and is restarting. Kept apart from the roles: a daemon that never
/// connected has no role registered, and `/readyz` said only "no role registered" while
/// ZooKeeper was unreachable (outside 17d finding 16e).
fn unconnected() -> &'static Mutex<BTreeMap<String, String>> {
    static UNCONNECTED: OnceLock<Mutex<BTreeMap<String, String>>> = OnceLock::new();
    UNCONNECTED.get_or_init(Mutex::default)
}

/// Records that daemon `name` has no session, and why (shown by `/readyz`).
pub fn disconnected(name: &str, why: impl Into<String>) {
    if let Ok(mut map) = unconnected().lock() {
        map.insert(name.to_string(), why.into());
    }
}

/// Records that daemon `name` has a session again.
pub fn connected(name: &str) {
    if let Ok(mut map) = unconnected().lock() {
        map.remove(name);
    }
}

/// Records that `role` registered on a session whose loss `lost` signals.
pub fn registered(role: &str, lost: CancellationToken) {
    set_role(role, lost, None);
}

/// Records `role` on the session whose loss `lost` signals, with no trouble, and not
/// ready while `unregistered` says why.
fn set_role(role: &str, lost: CancellationToken, unregistered: Option<String>) {
    if let Ok(mut map) = roles().lock() {
        map.insert(
            role.to_string(),
            Role {
                lost,
                trouble: None,
                unregistered,
            },
        );
    }
}

/// Records that `role` (on the session whose loss `lost` signals) waits to register
/// because another session holds its name, and why: `/readyz` says so instead of "no
/// role registered" (outside 17d finding 12). [`registered`] clears it.
pub fn waiting_to_register(role: &str, lost: CancellationToken, why: impl Into<String>) {
    set_role(role, lost, Some(why.into()));
}

/// Records that `role`'s loop is failing and backing off, and why (shown by `/readyz`).
pub fn trouble(role: &str, why: impl Into<String>) {
    if let Ok(mut map) = roles().lock() {
        if let Some(r) = map.get_mut(role) {
            r.trouble = Some(why.into());
        }
    }
}

/// Records that `role`'s loop made progress again.
pub fn recovered(role: &str) {
    if let Ok(mut map) = roles().lock() {
        if let Some(r) = map.get_mut(role) {
            r.trouble = None;
        }
    }
}

/// Records that `role`'s registration went and cannot be made again, and why: a daemon
/// no one can see (the planner counts no capacity for an unregistered researcher) is not
/// ready, whatever its loop does (outside 17d finding 4: `/researchers` deleted, the
/// researcher said "ready" while `status` showed 0 researchers).
pub fn unregistered(role: &str, why: impl Into<String>) {
    if let Ok(mut map) = roles().lock() {
        if let Some(r) = map.get_mut(role) {
            r.unregistered = Some(why.into());
        }
    }
}

/// Records that `role` is registered again.
pub fn reregistered(role: &str) {
    if let Ok(mut map) = roles().lock() {
        if let Some(r) = map.get_mut(role) {
            r.unregistered = None;
        }
    }
}

/// Is every registered role's session alive and its loop untroubled (and at least one
/// role registered)?
pub fn is_ready() -> bool {
    let connected = unconnected().lock().map(|m| m.is_empty()).unwrap_or(false);
    connected
        && roles()
            .lock()
            .map(|map| {
                !map.is_empty()
                    && map.values().all(|r| {
                        !r.lost.is_cancelled() && r.trouble.is_none() && r.unregistered.is_none()
                    })
            })
            .unwrap_or(false)
}

/// Each registered role and `None` when it is ready, or why it is not.
pub fn report() -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = roles()
        .lock()
        .map(|m| {
            m.iter()
                .map(|(k, r)| {
                    let why = if r.lost.is_cancelled() {
                        Some("ZooKeeper session lost; reconnecting".to_string())
                    } else {
                        r.unregistered.clone().or_else(|| r.trouble.clone())
                    };
                    (k.clone(), why)
                })
                .collect()
        })
        .unwrap_or_default();
    if let Ok(map) = unconnected().lock() {
        for (name, why) in map.iter() {
            out.insert(name.clone(), Some(why.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_troubled_role_is_not_ready_until_it_recovers() {
        registered("health-test", CancellationToken::new());
        assert!(report()["health-test"].is_none());
        trouble("health-test", "every round fails: boom");
        assert!(!is_ready());
        assert_eq!(
            report()["health-test"].as_deref(),
            Some("every round fails: boom")
        );
        recovered("health-test");
        assert!(report()["health-test"].is_none());
    }

    #[test]
    fn a_daemon_without_a_session_says_why() {
        disconnected("health-conn", "cannot reach ZooKeeper: timed out");
        assert_eq!(
            report()["health-conn"].as_deref(),
            Some("cannot reach ZooKeeper: timed out")
        );
        assert!(!is_ready());
        connected("health-conn");
        assert!(!report().contains_key("health-conn"));
    }

    #[test]
    fn an_unregistered_role_is_not_ready_whatever_its_loop_does() {
        registered("health-unreg", CancellationToken::new());
        unregistered("health-unreg", "missing /researchers: run `archivist init`");
        recovered("health-unreg");
        assert_eq!(
            report()["health-unreg"].as_deref(),
            Some("missing /researchers: run `archivist init`")
        );
        reregistered("health-unreg");
        assert!(report()["health-unreg"].is_none());
    }
}
