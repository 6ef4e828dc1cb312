//! Process readiness, for `/readyz`.
//!
//! A daemon is ready while the session it registered with is alive. Registration
//! ([`crate::member::register`]) records the role with its session's `lost` token; a lost
//! session makes the role not ready until it registers again on a new session. One
//! process may run several roles (`archivist run --all`): it is ready when every role
//! that registered is.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

fn roles() -> &'static Mutex<BTreeMap<String, CancellationToken>> {
    static ROLES: OnceLock<Mutex<BTreeMap<String, CancellationToken>>> = OnceLock::new();
    ROLES.get_or_init(Mutex::default)
}

/// Records that `role` registered on a session whose loss `lost` signals.
pub fn registered(role: &str, lost: CancellationToken) {
    if let Ok(mut map) = roles().lock() {
        map.insert(role.to_string(), lost);
    }
}

/// Is every registered role's session alive (and at least one registered)?
pub fn is_ready() -> bool {
    roles()
        .lock()
        .map(|map| !map.is_empty() && map.values().all(|lost| !lost.is_cancelled()))
        .unwrap_or(false)
}

/// Each registered role and whether its session is alive.
pub fn report() -> BTreeMap<String, bool> {
    roles()
        .lock()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), !v.is_cancelled()))
                .collect()
        })
        .unwrap_or_default()
}
