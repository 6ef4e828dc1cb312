//! The planner's persistent recursive watches and the events they bring.
//!
//! One watch each on `/signals` (the database's catalog and research changed),
//! `/control/hold`, `/leases`, `/queues` and `/researchers` (not the whole tree: `/jobs`
//! progress heartbeats and `/clock` writes would flood it). The catalog and the research
//! archive are in the database, which the planner reads when `/signals/catalog` or
//! `/signals/research` moves.
//! A persistent watch survives reconnects but may lose events while disconnected
//! (ZOOKEEPER-4698), so a reconnect is reported and the planner reloads its index.
//! After a terminal session event the watchers are never polled again (the client
//! panics on that).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use archivist_engine::schema::paths;
use archivist_engine::zk;
use archivist_engine::{EngineError, Session};

/// The directories the planner watches.
pub const WATCHED: [&str; 5] = [
    paths::SIGNALS,
    paths::HOLDS,
    paths::LEASES,
    "/queues",
    paths::RESEARCHERS,
];

/// Something the watches saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A node under a watched directory was created, changed or deleted.
    Node {
        /// Path relative to the chroot.
        path: String,
        /// The node is gone.
        deleted: bool,
    },
    /// The connection dropped; events may be lost until it is back.
    Disconnected,
    /// The connection is back; events may have been lost: reload.
    Reconnected,
    /// The session ended; nothing more will come.
    Lost,
}

/// The planner's watches.
pub struct Watches {
    watchers: Vec<zk::PersistentWatcher>,
    dead: bool,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches")
            .field("watchers", &self.watchers.len())
            .field("dead", &self.dead)
            .finish()
    }
}

fn convert(event: zk::WatchedEvent) -> Option<Event> {
    match event.event_type {
        zk::EventType::NodeCreated | zk::EventType::NodeDataChanged => Some(Event::Node {
            path: event.path,
            deleted: false,
        }),
        zk::EventType::NodeDeleted => Some(Event::Node {
            path: event.path,
            deleted: true,
        }),
        zk::EventType::NodeChildrenChanged => None,
        zk::EventType::Session => match event.session_state {
            zk::SessionState::Disconnected => Some(Event::Disconnected),
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                Some(Event::Reconnected)
            }
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                Some(Event::Lost)
            }
        },
    }
}

impl Watches {
    /// Sets the watches (before the index is loaded, so no change falls in between).
    pub async fn set(session: &Session) -> Result<Watches, EngineError> {
        let mut watchers = Vec::with_capacity(WATCHED.len());
        for dir in WATCHED {
            let watcher = session
                .client()
                .watch(dir, zk::AddWatchMode::PersistentRecursive)
                .await
                .map_err(|e| EngineError::zk("watch", dir, e))?;
            watchers.push(watcher);
        }
        Ok(Watches {
            watchers,
            dead: false,
        })
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if self.dead {
            return Poll::Ready(Event::Lost);
        }
        for watcher in &mut self.watchers {
            loop {
                let next = pin!(watcher.changed());
                match next.poll(cx) {
                    Poll::Ready(event) => match convert(event) {
                        Some(Event::Lost) => {
                            self.dead = true;
                            return Poll::Ready(Event::Lost);
                        }
                        Some(event) => return Poll::Ready(event),
                        None => continue,
                    },
                    Poll::Pending => break,
                }
            }
        }
        Poll::Pending
    }

    /// The next event, if one has already arrived (does not wait).
    pub fn try_next(&mut self) -> Option<Event> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_event(&mut cx) {
            Poll::Ready(event) => Some(event),
            Poll::Pending => None,
        }
    }

    /// Waits for the next event.
    pub async fn next(&mut self) -> Event {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }
}
