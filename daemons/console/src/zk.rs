//! The console's ZooKeeper session, made anew when it is lost.
//!
//! A daemon whose session expires stops its role and is restarted with a new one; the
//! console is one long-running process serving many requests, so it does the same per
//! request: a page that finds the session lost (expired, closed, or disconnected past
//! its timeout: [`Session::lost`]) connects a new one from the same configuration and
//! goes on. Before, the first expiry made every ZooKeeper page answer 503 for ever while
//! `/healthz` said ok (outside try of #24, finding F1).
//!
//! While the connection is down but the session may still live, a page answers 503 at
//! once ("ZooKeeper is unreachable; the console reconnects by itself") instead of
//! waiting for the session to expire (it used to hang about 25 s).

use archivist_engine::zk::SessionState;
use std::time::{Duration, Instant};

use archivist_engine::Session;

use crate::error::PageError;

/// After a failed attempt to make a new session, requests within this long answer 503
/// at once rather than each trying again (one after the other, behind the lock).
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Longest a request waits for a new session (whatever the configured connect timeout):
/// a page answers 503 after this rather than after the connect timeout (outside try 24b
/// N13: the first request after an expiry waited 10 s).
pub const RECONNECT_WAIT: Duration = Duration::from_secs(2);

/// The current session, behind a lock that makes one request at a time reconnect
/// (the others wait for it and share the new session).
pub struct Zk {
    current: tokio::sync::Mutex<Current>,
}

struct Current {
    session: Session,
    /// When the last attempt to make a new session failed, and why.
    failed: Option<(Instant, String)>,
}

impl Zk {
    /// Starts from `session` (already connected to an initialised tree).
    pub fn new(session: Session) -> Zk {
        Zk {
            current: tokio::sync::Mutex::new(Current {
                session,
                failed: None,
            }),
        }
    }

    /// A live, connected session: the current one, or a new one when it was lost.
    ///
    /// # Errors
    /// [`PageError::Unavailable`] when ZooKeeper cannot be reached now or the new
    /// session cannot be made (the next request tries again).
    pub async fn session(&self) -> Result<Session, PageError> {
        let mut guard = self.current.lock().await;
        let state = &mut *guard;
        if state.session.is_lost() || state.session.state().is_terminated() {
            if let Some((at, why)) = &state.failed {
                if at.elapsed() < RETRY_AFTER {
                    return Err(PageError::Unavailable(why.clone()));
                }
            }
            let attempt = tokio::time::timeout(RECONNECT_WAIT, Self::reconnect(&state.session))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "the ZooKeeper session was lost and no new one was made within {} s (the console tries again at the next request)",
                        RECONNECT_WAIT.as_secs()
                    ))
                });
            match attempt {
                Ok(fresh) => {
                    state.session = fresh;
                    state.failed = None;
                }
                Err(why) => {
                    state.failed = Some((Instant::now(), why.clone()));
                    return Err(PageError::Unavailable(why));
                }
            }
        }
        let current = &state.session;
        match current.state() {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => Ok(current.clone()),
            state => Err(PageError::Unavailable(format!(
                "ZooKeeper is unreachable (session {}, {state:?}); the console reconnects by itself",
                current.id()
            ))),
        }
    }

    /// A new session from `old`'s configuration, on an initialised tree.
    async fn reconnect(old: &Session) -> Result<Session, String> {
        tracing::warn!(old = %old.id(), "the console's ZooKeeper session was lost: connecting a new one");
        let fresh = Session::connect_existing(old.config()).await.map_err(|e| {
            format!(
                "the ZooKeeper session was lost and a new one cannot be made yet (the console tries again at the next request): {e}"
            )
        })?;
        archivist_engine::tree::check_initialised(&fresh)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(new = %fresh.id(), "the console has a new ZooKeeper session");
        Ok(fresh)
    }
}
