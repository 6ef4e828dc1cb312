//! Job transitions as one atomic multi.
//!
//! A transition writes the job's new data at the version it was read (so a job that
//! moved meanwhile is never overwritten), swaps its queue entry from the old state's
//! queue to the new one, and (optionally) deletes the lock: all together or not at all.
//! Only transitions listed in the state table are allowed. Extra operations (a lease
//! write, a report delete) join the same multi.

use std::sync::OnceLock;

use znode_schema::paths;
use znode_schema::records::{JobEvent, JobRecord};
use znode_schema::spec::{Schema, StateMachine};
use znode_schema::JobState;

use crate::error::{EngineError, Result};
use crate::lock::JobLock;
use crate::ops::{self, Mode, Op};
use crate::session::Session;
use crate::store;

/// The state table embedded in this build.
pub fn machine() -> &'static StateMachine {
    static MACHINE: OnceLock<StateMachine> = OnceLock::new();
    MACHINE.get_or_init(|| Schema::embedded().machine)
}

/// What a transition does with the job's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockAction {
    /// Delete it in the same multi (the worker is done with the job).
    Release(JobLock),
    /// Require it to still exist and keep it (the worker goes on with the job).
    Keep(JobLock),
    /// No lock involved (admin actions on unlocked jobs check the job version only).
    None,
}

/// A transition being built. See the module docs.
#[derive(Debug, Clone)]
pub struct Transition {
    current: JobRecord,
    version: i32,
    next: JobRecord,
    lock: LockAction,
    extra: Vec<Op>,
    succeeded: bool,
}

impl Transition {
    /// Starts a transition of `current` (read at `version`) to `to`.
    pub fn new(current: &JobRecord, version: i32, to: JobState) -> Transition {
        let mut next = current.clone();
        next.status = to;
        Transition {
            current: current.clone(),
            version,
            next,
            lock: LockAction::None,
            extra: Vec::new(),
            succeeded: true,
        }
    }

    /// Sets what happens to the lock. Defaults to [`LockAction::None`].
    pub fn lock(mut self, lock: LockAction) -> Self {
        self.lock = lock;
        self
    }

    /// Marks the step as failed: `last_successful_status` is kept (Merritt's
    /// `retain_prior_value`). Defaults to succeeded, which records the current state as
    /// the last successful one.
    pub fn failed(mut self) -> Self {
        self.succeeded = false;
        self
    }

    /// Edits the new record (message, retry count, priority, ...).
    pub fn edit(mut self, f: impl FnOnce(&mut JobRecord)) -> Self {
        f(&mut self.next);
        self
    }

    /// Records the event "`by` did `step` with `result`".
    pub fn event(mut self, by: &str, step: &str, result: &str) -> Self {
        self.next.push_event(JobEvent {
            at: crate::clock::local_now(),
            by: by.to_string(),
            step: step.to_string(),
            result: result.to_string(),
        });
        self
    }

    /// Adds operations to the same multi.
    pub fn with_ops(mut self, ops: impl IntoIterator<Item = Op>) -> Self {
        self.extra.extend(ops);
        self
    }

    /// The operations this transition will commit, after validation.
    pub fn ops(&mut self) -> Result<Vec<Op>> {
        let from = self.current.status;
        let to = self.next.status;
        if !machine().allows(from, to) {
            return Err(EngineError::IllegalTransition { from, to });
        }
        if self.succeeded {
            self.next.last_successful_status = Some(from);
        }
        self.next.updated = crate::clock::local_now();
        let job_path = paths::job(&self.current.id);
        let mut ops = Vec::with_capacity(5 + self.extra.len());
        if let LockAction::Keep(lock) = &self.lock {
            ops.push(lock.check_op());
        }
        ops.push(Op::SetData {
            path: job_path.clone(),
            data: store::encode(&job_path, &self.next)?,
            version: Some(self.version),
        });
        ops.push(Op::Delete {
            path: paths::queue_entry(from, &self.current.queue_entry().name()),
            version: None,
        });
        ops.push(Op::Create {
            path: paths::queue_entry(to, &self.next.queue_entry().name()),
            data: Vec::new(),
            mode: Mode::Persistent,
        });
        if let LockAction::Release(lock) = &self.lock {
            ops.push(lock.release_op());
        }
        ops.extend(self.extra.iter().cloned());
        Ok(ops)
    }

    /// Commits the transition; returns the new record and its data version.
    ///
    /// # Errors
    /// - [`EngineError::IllegalTransition`]: not in the table; nothing written.
    /// - [`EngineError::Precondition`]: the job moved, the lock is gone, or an extra
    ///   operation's precondition failed; nothing written.
    /// - [`EngineError::SessionLost`]: nothing written; the lock is gone with the session.
    pub async fn commit(mut self, session: &Session) -> Result<(JobRecord, i32)> {
        let ops = self.ops()?;
        ops::commit(session, &ops).await?;
        metrics::counter!(
            "archivist_job_transitions_total",
            "from" => self.current.status.as_str(),
            "to" => self.next.status.as_str()
        )
        .increment(1);
        if self.next.status == JobState::Failed {
            metrics::counter!("archivist_job_failures_total", "state" => self.current.status.as_str())
                .increment(1);
        }
        crate::logs::record_state(self.next.status.as_str());
        tracing::info!(
            job = %self.next.id,
            episode = %self.next.episode,
            state = %self.next.status,
            from = %self.current.status,
            "job transition"
        );
        Ok((self.next, self.version + 1))
    }
}
