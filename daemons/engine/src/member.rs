//! Live-daemon registration: an ephemeral node that vanishes with the session.
//!
//! Researchers register under `/researchers` (the planner counts their slots); every
//! other daemon under `/daemons`. A lost session removes the node; the daemon re-registers
//! on its new session (see [`crate::daemon::supervise`]).

use znode_schema::paths;
use znode_schema::records::MemberRecord;
use znode_schema::SCHEMA_VERSION;
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::session::Session;
use crate::store;

/// Who this daemon is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Role (`researcher`, `planner`, `recorder`, `reaper`, `curator`).
    pub role: String,
    /// Unique name (`<role>-<host>-<pid>` unless configured).
    pub name: String,
}

impl Identity {
    /// `<role>-<host>-<pid>`.
    pub fn new(role: &str) -> Identity {
        Identity {
            role: role.to_string(),
            name: format!("{role}-{}-{}", hostname(), std::process::id()),
        }
    }

    /// A custom name.
    pub fn named(role: &str, name: impl Into<String>) -> Identity {
        Identity {
            role: role.to_string(),
            name: name.into(),
        }
    }
}

/// This host's name (for identities and member records).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Registers a live daemon. `slots` is how many jobs it runs at once (researchers).
pub async fn register(
    session: &Session,
    identity: &Identity,
    slots: u32,
    metrics: Option<String>,
) -> Result<String> {
    let path = if identity.role == "researcher" {
        paths::researcher(&identity.name)
    } else {
        paths::daemon(&identity.name)
    };
    let record = MemberRecord {
        schema: SCHEMA_VERSION,
        role: identity.role.clone(),
        name: identity.name.clone(),
        slots,
        version: env!("CARGO_PKG_VERSION").to_string(),
        host: hostname(),
        pid: std::process::id(),
        metrics,
        started: crate::clock::local_now(),
    };
    let data = store::encode(&path, &record)?;
    let options = session.create_options(zk::CreateMode::Ephemeral);
    let mut told = false;
    loop {
        match session.client().create(&path, &data, &options).await {
            Ok(_) => {
                crate::health::registered(&identity.role, session.lost());
                if told {
                    tracing::info!(daemon = %identity.name, %path, "the previous session's registration went; registered");
                }
                return Ok(path);
            }
            Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(EngineError::zk("create", &path, e)),
        }
        // Left by this name's previous session (a restart under the same `--name`),
        // which has not timed out yet: wait for ZooKeeper to remove it rather than take
        // over a node another session owns. One line, then quiet: a watch wakes us
        // when it goes (no retry loop, no error every backoff).
        let (stat, watcher) = session
            .client()
            .check_and_watch_stat(&path)
            .await
            .map_err(|e| EngineError::zk("exists", &path, e))?;
        let Some(stat) = stat else { continue };
        if stat.ephemeral_owner == session.id_number() {
            crate::health::registered(&identity.role, session.lost());
            return Ok(path);
        }
        if !told {
            tracing::info!(
                daemon = %identity.name,
                %path,
                owner = %format_args!("{:#x}", stat.ephemeral_owner),
                "this name is still registered by a previous session; waiting for it to expire (at most its session timeout)"
            );
            told = true;
        }
        let lost = session.lost();
        tokio::select! {
            _ = watcher.changed() => {}
            _ = lost.cancelled() => {
                return Err(EngineError::SessionLost("while waiting to register".into()))
            }
        }
    }
}

/// Live members under a directory (`/researchers` or `/daemons`). Unreadable entries are
/// skipped with a warning.
pub async fn list(session: &Session, dir: &str) -> Result<Vec<MemberRecord>> {
    let mut out = Vec::new();
    for name in store::children(session, dir).await? {
        let path = format!("{dir}/{name}");
        match store::read::<MemberRecord>(session, &path).await {
            Ok(Some((m, _))) => out.push(m),
            Ok(None) => {}
            Err(EngineError::Record(e)) => tracing::warn!(%e, "unreadable member record"),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
