//! Live-daemon registration: an ephemeral node that vanishes with the session.
//!
//! Researchers register under `/researchers` (the planner counts their slots); every
//! other daemon under `/daemons`. A lost session removes the node; the daemon re-registers
//! on its new session (see [`crate::daemon::supervise`]). A node deleted while its session
//! lives is re-created by the registration's keeper ([`Membership`]); a daemon told to stop
//! while waiting for its name stops without registering.

use tokio_util::sync::CancellationToken;
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

/// A daemon's registration, kept while this value lives.
///
/// The node is ephemeral, so it goes with the session; but anything may delete it while
/// the session lives (an operator by hand, a repair), and a researcher without its node
/// is invisible to the planner (`stop=NoResearchers`) while it keeps working. So a keeper
/// task watches the node and re-creates it when it goes while the session lives, logging
/// each re-registration once. Dropping this value stops the keeper (the node itself goes
/// with the session); the keeper holds a handle on the session, so drop this value before
/// expecting the session to close.
#[derive(Debug)]
pub struct Membership {
    path: String,
    keeper: tokio::task::JoinHandle<()>,
}

impl Membership {
    /// The registered node's path.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Registers a live daemon and keeps it registered while the returned [`Membership`]
/// lives. `slots` is how many jobs it runs at once (researchers).
///
/// `Ok(None)` when `shutdown` fired before the daemon could register (it was waiting for
/// a previous session's node under the same name to expire): the caller exits without
/// registering rather than hold a stopping daemon up for a session timeout.
///
/// # Errors
/// [`EngineError::SessionLost`] when the session goes while waiting; ZooKeeper errors with
/// their path.
pub async fn register(
    session: &Session,
    identity: &Identity,
    slots: u32,
    metrics: Option<String>,
    shutdown: &CancellationToken,
) -> Result<Option<Membership>> {
    register_record(
        session,
        identity,
        &record(identity, slots, metrics),
        shutdown,
    )
    .await
}

/// The member record [`register`] publishes for `identity`; a daemon with more to
/// publish (the planner's work-item TTL) edits it and calls [`register_record`].
pub fn record(identity: &Identity, slots: u32, metrics: Option<String>) -> MemberRecord {
    MemberRecord {
        schema: SCHEMA_VERSION,
        role: identity.role.clone(),
        name: identity.name.clone(),
        slots,
        version: env!("CARGO_PKG_VERSION").to_string(),
        host: hostname(),
        pid: std::process::id(),
        metrics,
        started: crate::clock::stamp_now(),
        work_item_ttl_ms: None,
    }
}

/// [`register`] with a record made by the caller (see [`record`]).
///
/// # Errors
/// Those of [`register`].
pub async fn register_record(
    session: &Session,
    identity: &Identity,
    record: &MemberRecord,
    shutdown: &CancellationToken,
) -> Result<Option<Membership>> {
    let path = if identity.role == "researcher" {
        paths::researcher(&identity.name)
    } else {
        paths::daemon(&identity.name)
    };
    let data = store::encode(&path, record)?;
    let options = session.create_options(zk::CreateMode::Ephemeral);
    let mut told = false;
    let mut next_say: Option<tokio::time::Instant> = None;
    let mut waiting_since = None;
    loop {
        if shutdown.is_cancelled() {
            return Ok(None);
        }
        let sent = crate::clock::host_ms();
        match session.client().create(&path, &data, &options).await {
            Ok((stat, _)) => {
                crate::clock::observe_server_time(stat.ctime, sent, crate::clock::host_ms());
                crate::health::registered(&identity.role, session.lost());
                if told {
                    tracing::info!(daemon = %identity.name, %path, "the previous session's registration went; registered");
                }
                return Ok(Some(keep(session, identity, path, data)));
            }
            Err(zk::Error::NodeExists) => {}
            // A tree never initialised (a mistyped chroot) or whose directory was
            // deleted: "run `archivist init`", not "node not exists" (outside try 17p F8).
            Err(e) => {
                let e = EngineError::zk("create", &path, e);
                return Err(crate::tree::explain_missing(session, e).await);
            }
        }
        // Left by this name's previous session (a restart under the same `--name`),
        // which has not timed out yet: wait for ZooKeeper to remove it rather than take
        // over a node another session owns. A watch wakes us when it goes (no retry
        // loop, no error every backoff); `/readyz` says why it waits, and the log says
        // so again every session timeout.
        let (stat, watcher) = session
            .client()
            .check_and_watch_stat(&path)
            .await
            .map_err(|e| EngineError::zk("exists", &path, e))?;
        let Some(stat) = stat else { continue };
        if stat.ephemeral_owner == session.id_number() {
            crate::health::registered(&identity.role, session.lost());
            return Ok(Some(keep(session, identity, path, data)));
        }
        let owner = format!("{:#x}", stat.ephemeral_owner);
        let since = *waiting_since.get_or_insert_with(tokio::time::Instant::now);
        let timeout = session.config().session_timeout;
        let waited = since.elapsed();
        // Past twice this daemon's session timeout the node is not a previous session's
        // leftover: a live process holds the name (two hosts configured with one name, a
        // forgotten instance, a unit started twice), or a node made by hand never
        // expires.
        let why = if stat.ephemeral_owner == 0 {
            format!("waiting to register: {path} is a persistent node (made by hand): it never expires; delete it to let this daemon register")
        } else if waited >= timeout * 2 {
            format!("waiting to register: {path} is held by session {owner} for {} s, more than twice the session timeout: another running process uses this --name; stop it or give this daemon another name", waited.as_secs())
        } else {
            format!("waiting to register: {path} is held by session {owner} (this name's previous session, gone within its session timeout, {} s; if not, another process uses this --name)", timeout.as_secs())
        };
        crate::health::waiting_to_register(&identity.role, session.lost(), why.clone());
        // Said at once, then again every session timeout while it lasts (the first
        // line alone, "at most its session timeout", left a daemon waiting in silence
        // for ever behind a live namesake: outside 17d finding 12).
        if !told || next_say.is_some_and(|at| tokio::time::Instant::now() >= at) {
            if stat.ephemeral_owner != 0 && waited < timeout * 2 {
                tracing::info!(daemon = %identity.name, %path, owner = %owner, waited_s = waited.as_secs(), "{why}");
            } else {
                tracing::warn!(daemon = %identity.name, %path, owner = %owner, waited_s = waited.as_secs(), "{why} (still waiting)");
            }
            told = true;
            next_say = Some(tokio::time::Instant::now() + timeout);
        }
        let lost = session.lost();
        tokio::select! {
            _ = tokio::time::sleep_until(next_say.unwrap_or(since + timeout)) => {}
            _ = watcher.changed() => {}
            _ = lost.cancelled() => {
                return Err(EngineError::SessionLost("while waiting to register".into()))
            }
            _ = shutdown.cancelled() => {
                tracing::info!(daemon = %identity.name, %path, "shutting down before registering");
                return Ok(None);
            }
        }
    }
}

/// Starts the keeper of a registration just made (see [`Membership`]).
fn keep(session: &Session, identity: &Identity, path: String, data: Vec<u8>) -> Membership {
    let keeper = tokio::spawn(keep_registered(
        session.clone(),
        identity.role.clone(),
        identity.name.clone(),
        path.clone(),
        data,
    ));
    Membership { path, keeper }
}

/// Watches the own node: re-creates it when it goes while the session lives, and writes
/// its record again when it is overwritten ([`restore_data`]). When it
/// cannot (its directory was deleted: `archivist init` makes it again), the role is not
/// ready ([`crate::health::unregistered`], with the reason) until it registers again; the
/// reason is logged once, and the retries back off from 1 s to 30 s.
async fn keep_registered(
    session: Session,
    role: String,
    name: String,
    path: String,
    data: Vec<u8>,
) {
    const FIRST_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
    const LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(30);
    let lost = session.lost();
    let mut told_foreign = false;
    let mut told_failure: Option<String> = None;
    let mut retry = FIRST_RETRY;
    // The data version this keeper last wrote or checked (0: as created).
    let mut written = 0;
    while !lost.is_cancelled() {
        let watched = session.client().check_and_watch_stat(&path).await;
        let (stat, watcher) = match watched {
            Ok(w) => w,
            Err(e) => {
                if !lost.is_cancelled() {
                    tracing::warn!(daemon = %name, %path, error = %e, "cannot watch this daemon's registration; trying again in 1 s");
                }
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                    _ = lost.cancelled() => return,
                }
            }
        };
        match stat {
            Some(stat) if stat.ephemeral_owner == session.id_number() => {
                told_foreign = false;
                if stat.version != written {
                    match restore_data(&session, &name, &path, &data, stat.version).await {
                        Ok(version) => written = version,
                        Err(e) if e.is_session_lost() => return,
                        Err(e) => {
                            tracing::warn!(daemon = %name, %path, error = %e, "cannot check this daemon's registration; trying again in 1 s");
                            tokio::select! {
                                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                                _ = lost.cancelled() => return,
                            }
                        }
                    }
                    continue;
                }
            }
            Some(stat) => {
                // Deleted, then taken by another session under the same name: two
                // daemons share a `--name`. Say so once; never delete another's node.
                if !told_foreign {
                    tracing::warn!(daemon = %name, %path, owner = %format_args!("{:#x}", stat.ephemeral_owner), "this daemon's registration was deleted and another session registered under the same name; two daemons share this --name");
                    told_foreign = true;
                }
            }
            None => {
                let options = session.create_options(zk::CreateMode::Ephemeral);
                match session.client().create(&path, &data, &options).await {
                    Ok(_) => {
                        written = 0;
                        tracing::warn!(daemon = %name, %path, "this daemon's registration was deleted while its session lives; registered again");
                        if told_failure.take().is_some() {
                            crate::health::reregistered(&role);
                        }
                        retry = FIRST_RETRY;
                    }
                    Err(zk::Error::NodeExists) => {}
                    Err(e) if !lost.is_cancelled() => {
                        let why = match e {
                            zk::Error::NoNode => {
                                let dir = path.rsplit_once('/').map_or("/", |(dir, _)| dir);
                                format!("not registered: missing {dir}: run `archivist init` (the planner counts no capacity for this daemon meanwhile)")
                            }
                            other => format!("not registered: create {path}: {other}"),
                        };
                        if told_failure.as_deref() != Some(why.as_str()) {
                            tracing::warn!(daemon = %name, %path, reason = %why, "could not register again; retrying with backoff (not ready until registered)");
                            crate::health::unregistered(&role, why.clone());
                            told_failure = Some(why);
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(retry) => {}
                            _ = lost.cancelled() => return,
                        }
                        retry = (retry * 2).min(LAST_RETRY);
                    }
                    Err(_) => return,
                }
                continue;
            }
        }
        tokio::select! {
            _ = watcher.changed() => {}
            _ = lost.cancelled() => return,
        }
    }
}

/// Puts this daemon's own registration back to `data` when its node (read at
/// `version`) holds anything else: overwritten by hand (`set /researchers/r1 garbage`),
/// it made the daemon invisible (a researcher's slots not counted, `status` without it)
/// until deleted or restarted (outside 17h F5). A version-checked write; returns the
/// version now known to hold `data`. Logged each time it rewrites.
async fn restore_data(
    session: &Session,
    name: &str,
    path: &str,
    data: &[u8],
    version: i32,
) -> Result<i32> {
    let Some((found, stat)) = store::read_raw(session, path).await? else {
        return Ok(version);
    };
    if found == data {
        return Ok(stat.version);
    }
    match session
        .client()
        .set_data(path, data, Some(stat.version))
        .await
    {
        Ok(stat) => {
            tracing::warn!(daemon = %name, %path, "this daemon's registration was overwritten while its session lives (by hand?); its record written again");
            metrics::counter!("archivist_registration_restored_total").increment(1);
            Ok(stat.version)
        }
        // Changed again or gone meanwhile: the watch says so and the keeper looks again.
        Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(-1),
        Err(e) => Err(EngineError::zk("set", path, e)),
    }
}

/// Is the node with this stat a live registration or candidate? Only an ephemeral node
/// is: it belongs to a session and goes with it. A persistent node (made by hand) never
/// goes, so counted as a member it was capacity of nobody for ever, and as an election
/// candidate it kept every real one from leading for ever (outside 17i G1). The one rule
/// for `/researchers`, `/daemons`, `/consumers/{state}` and `/election/{role}`; `fsck`
/// names such a node (`member_not_ephemeral`) and `--repair` deletes it.
pub fn is_live(stat: &zk::Stat) -> bool {
    stat.ephemeral_owner != 0
}

/// Live members under a directory (`/researchers` or `/daemons`). Unreadable entries are
/// skipped with a warning. A member is live only while its node is ephemeral (its
/// session's): a persistent node made by hand never goes, so counted it was capacity for
/// ever (`status` and the planner counted `slots: 1000` of nobody); `fsck` flags it
/// (`member_not_ephemeral`).
pub async fn list(session: &Session, dir: &str) -> Result<Vec<MemberRecord>> {
    let mut out = Vec::new();
    for name in store::children(session, dir).await? {
        let path = format!("{dir}/{name}");
        let Some((bytes, stat)) = store::read_raw(session, &path).await? else {
            continue;
        };
        match znode_schema::records::decode::<MemberRecord>(&path, &bytes) {
            Ok(_) if !is_live(&stat) => {}
            Ok(m) => out.push(m),
            Err(e) => {
                if crate::logs::first_time(&format!("member {path} at {}", stat.mzxid)) {
                    tracing::warn!(%e, %path, "unreadable member record: not counted (logged once per change of the node; `archivist fsck` reports it)");
                }
            }
        }
    }
    Ok(out)
}
