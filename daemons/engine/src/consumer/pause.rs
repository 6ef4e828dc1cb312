//! Whether a state is paused: the operator's pause node, watched instead of read before
//! every claim, and the states a pause can stop ([`PAUSABLE_STATES`]).

use super::*;

/// Whether a state is paused, kept current by a persistent watch on its pause node
/// instead of a read before every claim.
pub(super) struct PauseFlag {
    state: JobState,
    path: String,
    paused: Option<bool>,
    watcher: Option<zk::PersistentWatcher>,
    dead: bool,
}

impl PauseFlag {
    pub(super) fn new(state: JobState) -> PauseFlag {
        PauseFlag {
            state,
            path: paths::pause(state),
            paused: None,
            watcher: None,
            dead: false,
        }
    }

    fn apply(&mut self, event: zk::WatchedEvent) {
        if queue::is_terminal(&event) {
            // Never poll the watcher again (the client panics); ask every time.
            self.dead = true;
            self.watcher = None;
            self.paused = None;
            return;
        }
        match event.event_type {
            zk::EventType::NodeCreated => self.paused = Some(true),
            zk::EventType::NodeDeleted => self.paused = Some(false),
            zk::EventType::Session => self.paused = None,
            _ => {}
        }
    }

    fn apply_arrived(&mut self) {
        while let Some(event) = self.watcher.as_mut().and_then(queue::arrived) {
            self.apply(event);
        }
    }

    /// Is the state paused? Reads the pause node only when the watch cannot say.
    pub(super) async fn get(&mut self, session: &Session) -> Result<bool> {
        self.apply_arrived();
        if let Some(paused) = self.paused {
            return Ok(paused);
        }
        if self.watcher.is_none() && !self.dead {
            match session
                .client()
                .watch(&self.path, zk::AddWatchMode::Persistent)
                .await
            {
                Ok(watcher) => self.watcher = Some(watcher),
                Err(e) => {
                    tracing::debug!(error = %e, path = %self.path, "pause watch not set; reading each time")
                }
            }
        }
        let paused = is_paused(session, self.state).await?;
        if self.watcher.is_some() {
            self.paused = Some(paused);
            self.apply_arrived();
        }
        Ok(self.paused.unwrap_or(paused))
    }

    /// Waits until the pause node is created or deleted (never returns without a watch).
    pub(super) async fn changed(&mut self) {
        loop {
            let Some(watcher) = self.watcher.as_mut() else {
                return std::future::pending().await;
            };
            let event = watcher.changed().await;
            let before = self.paused;
            self.apply(event);
            if self.paused != before {
                return;
            }
        }
    }
}

/// The states whose queue a daemon claims from, the only ones a pause can stop:
/// researchers claim from `pending`, recorders from `reported`. Jobs reach `leased` and
/// `researching` from a researcher that already holds them, so nothing waits in those
/// queues to be claimed, and terminal, failed and held jobs are claimed by nobody.
/// `archivist pause` refuses every other state (it would say "paused" and stop nothing).
pub const PAUSABLE_STATES: [JobState; 2] = [JobState::Pending, JobState::Reported];

/// Is the state paused by an operator?
pub async fn is_paused(session: &Session, state: JobState) -> Result<bool> {
    Ok(store::exists(session, &paths::pause(state))
        .await?
        .is_some())
}
