//! A connected ZooKeeper session and the token that says it is gone.
//!
//! ZooKeeper tells a client its session expired only when it reconnects, so a session
//! also counts as lost when it stays disconnected for a whole session timeout (Curator's
//! "lost" rule): by then the server may have expired it and given its locks away. Work
//! guarded by the session's locks selects on [`Session::lost`] and stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use sha1::{Digest, Sha1};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use crate::config::ZkConfig;
use crate::error::{EngineError, Result};
use crate::secure;

/// A connected session. Cheap to clone; the session closes when the last clone drops.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id())
            .field("chroot", &self.inner.chroot)
            .field("lost", &self.is_lost())
            .finish()
    }
}

struct Inner {
    client: zk::Client,
    lost: CancellationToken,
    chroot: String,
    acls: Vec<zk::Acl>,
    secret_acls: Vec<zk::Acl>,
    reconnects: Arc<AtomicU64>,
    config: ZkConfig,
}

/// The digest ACL id of a user (`user:base64(sha1(user:password))`).
pub fn digest_id(user: &str, password: &str) -> String {
    let hash = Sha1::digest(format!("{user}:{password}").as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// ALL for the identities this process authenticates as (digest and/or SASL); empty when
/// it authenticates as nobody.
fn owner_acls(config: &ZkConfig) -> Vec<zk::Acl> {
    let mut acls = Vec::new();
    if let Some(creds) = &config.credentials {
        acls.push(zk::Acl::new(
            zk::Permission::ALL,
            zk::AuthId::new("digest", &digest_id(&creds.user, &creds.password)),
        ));
    }
    if let Some(sasl) = &config.sasl {
        acls.push(zk::Acl::new(
            zk::Permission::ALL,
            zk::AuthId::new("sasl", &sasl.credentials.user),
        ));
    }
    acls
}

/// The ACLs of every node this process creates: ALL for the identities it authenticates
/// as, READ for the configured readers; open to anyone when it authenticates as nobody.
fn acls_for(config: &ZkConfig) -> Vec<zk::Acl> {
    let mut acls = owner_acls(config);
    if acls.is_empty() {
        return vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())];
    }
    if let (Some(_), Some(reader)) = (&config.credentials, &config.reader) {
        acls.push(zk::Acl::new(
            zk::Permission::READ,
            zk::AuthId::new("digest", &digest_id(&reader.user, &reader.password)),
        ));
    }
    if let Some(reader) = config.sasl.as_ref().and_then(|s| s.reader.as_ref()) {
        acls.push(zk::Acl::new(
            zk::Permission::READ,
            zk::AuthId::new("sasl", reader),
        ));
    }
    acls
}

/// The ACLs of secret nodes: ALL for the identities this process authenticates as and
/// nothing for the reader roles, so a read-only operator can `stat` a secret node (as
/// anyone can) but not read it. Open to anyone when the process authenticates as nobody
/// (an unsecured tree has no roles to keep apart).
fn secret_acls_for(config: &ZkConfig) -> Vec<zk::Acl> {
    let acls = owner_acls(config);
    if acls.is_empty() {
        return vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())];
    }
    acls
}

impl Session {
    /// Connects, creates the chroot node if it is missing, and starts watching the
    /// session state.
    ///
    /// # Errors
    /// [`EngineError::Refused`] naming the cause when a server answers but TLS or SASL
    /// fails (see [`secure::diagnose`]); [`EngineError::Unreachable`] when no server
    /// answers within the connect timeout; [`EngineError::Config`] for unreadable TLS files.
    pub async fn connect(config: &ZkConfig) -> Result<Session> {
        Session::connect_with(config, true).await
    }

    /// Connects to a chroot that must exist already, and creates nothing: for commands
    /// that need an initialised tree (every admin command but `init`). A missing chroot
    /// is [`EngineError::NotInitialised`]; creating it, as [`Session::connect`] does,
    /// made a typo in `--chroot` leave nodes (and their parents) behind on a shared
    /// ensemble, from commands that promise to write nothing.
    ///
    /// # Errors
    /// As [`Session::connect`], and [`EngineError::NotInitialised`] for a missing chroot.
    pub async fn connect_existing(config: &ZkConfig) -> Result<Session> {
        Session::connect_with(config, false).await
    }

    async fn connect_with(config: &ZkConfig, create_chroot: bool) -> Result<Session> {
        let (hosts, chroot) = config.hosts_and_chroot();
        let unreachable = |source| EngineError::Unreachable {
            connect: config.connect.clone(),
            source,
        };
        let mut connector = zk::Client::connector()
            .with_session_timeout(config.session_timeout)
            .with_connection_timeout(config.connect_timeout.min(config.session_timeout));
        if let Some(creds) = &config.credentials {
            connector = connector.with_auth(
                "digest",
                format!("{}:{}", creds.user, creds.password).as_bytes(),
            );
        }
        if let Some(sasl) = &config.sasl {
            connector = connector.with_sasl(secure::sasl_options(sasl));
        }
        let refused = |cause| EngineError::Refused {
            connect: config.connect.clone(),
            cause,
        };
        let tls = config.tls.as_ref().map(secure::tls_options).transpose()?;
        let connecting = async {
            match tls {
                Some(tls) => connector.with_tls(tls).secure_connect(&hosts).await,
                None => connector.connect(&hosts).await,
            }
        };
        let connected = tokio::time::timeout(config.connect_timeout, connecting)
            .await
            .unwrap_or(Err(zk::Error::Timeout));
        let client = match connected {
            Ok(client) => client,
            Err(e) => {
                if let Some(cause) = secure::auth_refusal(config, &e) {
                    return Err(refused(cause));
                }
                if let Some(cause) = secure::diagnose(config).await {
                    return Err(refused(cause));
                }
                return Err(unreachable(e));
            }
        };
        // A server enforcing authentication closes the session at its first request.
        let root = if chroot.is_empty() {
            "/"
        } else {
            chroot.as_str()
        };
        let chroot_exists = match client.check_stat(root).await {
            Ok(stat) => stat.is_some(),
            Err(e) => {
                return Err(match secure::auth_refusal(config, &e) {
                    Some(cause) => refused(cause),
                    None => EngineError::zk("check", root, e),
                })
            }
        };
        let acls = acls_for(config);
        if !chroot_exists && !create_chroot {
            return Err(EngineError::NotInitialised {
                missing: chroot.clone(),
                chroot,
            });
        }
        // Only when missing: a read-only role may not create even what exists.
        if chroot != "/" && !chroot.is_empty() && !chroot_exists {
            let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
            client
                .mkdir(&chroot, &options)
                .await
                .map_err(|e| match e {
                    // The server knows no scheme of the ACL we asked for: with SASL
                    // configured, the server has no SASL provider (only an error code
                    // comes back, "invalid acls", which names no cause).
                    zk::Error::InvalidAcl if config.sasl.is_some() => EngineError::Config(format!(
                        "creating {chroot}: the server refused ACLs for the `sasl` scheme: it has no SASL provider (authProvider.sasl in zoo.cfg and a JAAS Server section; docs/operations.md), or zookeeper.sasl is set by mistake"
                    )),
                    e => EngineError::zk("create chroot", &chroot, e),
                })?;
        }
        let client = if chroot == "/" || chroot.is_empty() {
            client
        } else {
            client
                .chroot(chroot.clone())
                .map_err(|_| EngineError::Config(format!("invalid chroot {chroot:?}")))?
        };
        let lost = CancellationToken::new();
        let reconnects = Arc::new(AtomicU64::new(0));
        spawn_state_watch(
            client.state_watcher(),
            lost.clone(),
            reconnects.clone(),
            config.session_timeout,
        );
        tracing::debug!(session = %client.session_id(), %chroot, "zookeeper session established");
        Ok(Session {
            inner: Arc::new(Inner {
                client,
                lost,
                chroot,
                acls,
                secret_acls: secret_acls_for(config),
                reconnects,
                config: config.clone(),
            }),
        })
    }

    /// The client, with the chroot applied.
    pub fn client(&self) -> &zk::Client {
        &self.inner.client
    }

    /// Fires when the session expired, was closed or stayed disconnected past its
    /// timeout. Guarded work must stop; make a new session.
    pub fn lost(&self) -> CancellationToken {
        self.inner.lost.clone()
    }

    /// Has [`Session::lost`] fired?
    pub fn is_lost(&self) -> bool {
        self.inner.lost.is_cancelled()
    }

    /// Fails with [`EngineError::SessionLost`] if the session is gone.
    pub fn ensure_alive(&self) -> Result<()> {
        if self.is_lost() {
            Err(EngineError::SessionLost("session expired or closed".into()))
        } else {
            Ok(())
        }
    }

    /// Session id, as ZooKeeper prints it (`0x...`).
    pub fn id(&self) -> String {
        self.inner.client.session_id().to_string()
    }

    /// Session id as a number (the `ephemeralOwner` of nodes it creates).
    pub fn id_number(&self) -> i64 {
        self.inner.client.session_id().0
    }

    /// Current client-side session state.
    pub fn state(&self) -> zk::SessionState {
        self.inner.client.state()
    }

    /// Times the client reconnected within this session.
    pub fn reconnects(&self) -> u64 {
        self.inner.reconnects.load(Ordering::Relaxed)
    }

    /// The chroot the tree lives under.
    pub fn chroot(&self) -> &str {
        &self.inner.chroot
    }

    /// The configuration this session was made from.
    pub fn config(&self) -> &ZkConfig {
        &self.inner.config
    }

    /// Create options for a node of this mode, with this session's ACLs.
    pub fn create_options(&self, mode: zk::CreateMode) -> zk::CreateOptions<'_> {
        mode.with_acls(zk::Acls::new(&self.inner.acls))
    }

    /// Create options for a secret node of this mode: no READ for the reader roles
    /// (docs/operations.md, "What each role can read").
    pub fn secret_create_options(&self, mode: zk::CreateMode) -> zk::CreateOptions<'_> {
        mode.with_acls(zk::Acls::new(&self.inner.secret_acls))
    }

    /// Marks the session lost now (used on shutdown and by tests).
    pub fn abandon(&self) {
        self.inner.lost.cancel();
    }

    /// Ends the session and waits up to `wait` for ZooKeeper to confirm, so its ephemeral
    /// nodes (registration, locks, election candidacy) vanish at once rather than a
    /// session timeout later. The client sends `CloseSession` only when its last handle
    /// is dropped, and a process that returns from `main` right after its role stops
    /// ends the runtime before that happens: the nodes stayed, a restart under the same
    /// `--name` waited a session timeout, and the planner counted a stopped researcher's
    /// slots. So this marks the session lost first (every task holding a handle stops:
    /// a registration keeper, a lock's background release), drops this handle, and
    /// waits. Returns whether the session closed in time (if a handle is still held
    /// somewhere, ZooKeeper expires the session after its timeout, as before).
    pub async fn close(self, wait: std::time::Duration) -> bool {
        let mut watcher = self.inner.client.state_watcher();
        if watcher.peek_state().is_terminated() {
            return true;
        }
        self.abandon();
        drop(self);
        tokio::time::timeout(wait, async {
            while !watcher.changed().await.is_terminated() {}
        })
        .await
        .is_ok()
    }
}

fn spawn_state_watch(
    mut watcher: zk::StateWatcher,
    lost: CancellationToken,
    reconnects: Arc<AtomicU64>,
    session_timeout: std::time::Duration,
) {
    tokio::spawn(async move {
        let mut state = watcher.state();
        loop {
            match state {
                zk::SessionState::Closed => {
                    // Closed by this process (the last handle dropped): not a loss.
                    tracing::debug!("zookeeper session closed");
                    lost.cancel();
                    return;
                }
                zk::SessionState::Expired | zk::SessionState::AuthFailed => {
                    tracing::warn!(?state, "zookeeper session lost");
                    lost.cancel();
                    return;
                }
                zk::SessionState::Disconnected => {
                    tokio::select! {
                        next = watcher.changed() => {
                            if next == zk::SessionState::SyncConnected {
                                reconnects.fetch_add(1, Ordering::Relaxed);
                                metrics::counter!("archivist_zk_reconnects_total").increment(1);
                            }
                            state = next;
                            continue;
                        }
                        _ = tokio::time::sleep(session_timeout) => {
                            tracing::warn!("zookeeper disconnected for a whole session timeout; treating the session as lost");
                            lost.cancel();
                            return;
                        }
                        _ = lost.cancelled() => return,
                    }
                }
                _ => {}
            }
            tokio::select! {
                next = watcher.changed() => state = next,
                _ = lost.cancelled() => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{acls_for, digest_id, secret_acls_for};
    use crate::config::{Credentials, SaslConfig, ZkConfig};
    use zookeeper_client as zk;

    fn named(acls: &[zk::Acl]) -> Vec<String> {
        acls.iter()
            .map(|a| format!("{}:{}", a.scheme(), a.id()))
            .collect()
    }

    #[test]
    fn secret_nodes_give_the_readers_nothing() {
        let config = ZkConfig::new("h:1")
            .with_credentials(Credentials::parse("archivist:pw"))
            .with_reader(Credentials::parse("ops:look"))
            .with_sasl(Some(SaslConfig {
                credentials: Credentials::parse("archivist:pw").unwrap(),
                reader: Some("ops".into()),
            }));
        let everyday = acls_for(&config);
        assert_eq!(
            named(&everyday),
            [
                format!("digest:{}", digest_id("archivist", "pw")),
                "sasl:archivist".into(),
                format!("digest:{}", digest_id("ops", "look")),
                "sasl:ops".into(),
            ]
        );
        let secret = secret_acls_for(&config);
        assert_eq!(named(&secret), named(&everyday[..2]));
        assert!(secret.iter().all(|a| a.permission() == zk::Permission::ALL));
        // An unsecured tree has no roles to keep apart.
        assert_eq!(
            named(&secret_acls_for(&ZkConfig::new("h:1"))),
            ["world:anyone"]
        );
    }

    #[test]
    fn digest_ids_match_zookeepers_generate_digest() {
        // Printed by ZooKeeper 3.8 itself: `java -cp zookeeper.jar:...
        // org.apache.zookeeper.server.auth.DigestAuthenticationProvider super:superpw ops:look`
        assert_eq!(
            digest_id("super", "superpw"),
            "super:g9oN2HttPfn8MMWJZ2r45Np/LIA="
        );
        assert_eq!(digest_id("ops", "look"), "ops:NcXEBhlN+5uc8aUCiJspjlrbpiQ=");
    }
}
