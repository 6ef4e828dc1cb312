//! Batch changes as one atomic multi.
//!
//! A change writes the batch record at the version it was read (so a batch that moved
//! meanwhile, e.g. an operator deleted it, is never overwritten), optionally checks or
//! releases the batch lock, and carries extra operations (a report node) in the same
//! multi. A status change must be in the batch state table of `schema.yml`.

use std::sync::OnceLock;

use archivist_engine::ops::{self, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{BatchRecord, JobEvent};
use archivist_engine::schema::spec::{Schema, StateMachine};
use archivist_engine::schema::BatchState;
use archivist_engine::transition::LockAction;
use archivist_engine::{clock, store, EngineError, Session};

use crate::error::BatchError;

/// The batch state table embedded in this build.
pub fn machine() -> &'static StateMachine<BatchState> {
    static MACHINE: OnceLock<StateMachine<BatchState>> = OnceLock::new();
    MACHINE.get_or_init(|| Schema::embedded().batch_machine)
}

/// A change of a batch record being built. See the module docs.
#[derive(Debug, Clone)]
pub struct BatchChange {
    current: BatchRecord,
    version: i32,
    next: BatchRecord,
    lock: LockAction,
    extra: Vec<Op>,
}

impl BatchChange {
    /// Starts a change of `current` (read at `version`); the status stays unless
    /// [`BatchChange::to`] is called.
    pub fn new(current: &BatchRecord, version: i32) -> BatchChange {
        BatchChange {
            current: current.clone(),
            version,
            next: current.clone(),
            lock: LockAction::None,
            extra: Vec::new(),
        }
    }

    /// Moves the batch to `to` (checked against the table at commit).
    pub fn to(mut self, to: BatchState) -> Self {
        self.next.status = to;
        self
    }

    /// What happens to the batch lock. Defaults to [`LockAction::None`] (admin actions
    /// check the record version only).
    pub fn lock(mut self, lock: LockAction) -> Self {
        self.lock = lock;
        self
    }

    /// Edits the new record.
    pub fn edit(mut self, f: impl FnOnce(&mut BatchRecord)) -> Self {
        f(&mut self.next);
        self
    }

    /// Records the event "`by` did `step` with `result`".
    pub fn event(mut self, by: &str, step: &str, result: &str) -> Self {
        self.next.push_event(JobEvent {
            at: clock::local_now(),
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

    /// The operations this change will commit, after validation.
    ///
    /// # Errors
    /// [`BatchError::IllegalTransition`] when the status change is not in the table.
    pub fn ops(&mut self) -> Result<Vec<Op>, BatchError> {
        let (from, to) = (self.current.status, self.next.status);
        if from != to && !machine().allows(from, to) {
            return Err(BatchError::IllegalTransition { from, to });
        }
        self.next.updated = clock::local_now();
        let path = paths::batch(&self.current.id);
        let mut ops = Vec::with_capacity(3 + self.extra.len());
        if let LockAction::Keep(lock) = &self.lock {
            ops.push(lock.check_op());
        }
        ops.push(Op::SetData {
            path: path.clone(),
            data: store::encode(&path, &self.next)?,
            version: Some(self.version),
        });
        ops.extend(self.extra.iter().cloned());
        if let LockAction::Release(lock) = &self.lock {
            ops.push(lock.release_op());
        }
        Ok(ops)
    }

    /// Commits the change; returns the new record and its data version.
    ///
    /// # Errors
    /// - [`BatchError::IllegalTransition`]: not in the table; nothing written.
    /// - [`BatchError::Moved`]: the batch or its lock changed meanwhile; nothing written.
    /// - [`BatchError::Engine`]: ZooKeeper failed (a lost session included).
    pub async fn commit(mut self, session: &Session) -> Result<(BatchRecord, i32), BatchError> {
        let ops = self.ops()?;
        match ops::commit(session, &ops).await {
            Ok(_) => {}
            Err(EngineError::Precondition { op, source, .. }) => {
                return Err(BatchError::Moved {
                    batch: self.current.id.clone(),
                    detail: format!("{op}: {source}"),
                })
            }
            Err(e) => return Err(e.into()),
        }
        if self.current.status != self.next.status {
            metrics::counter!(
                "archivist_batch_transitions_total",
                "from" => self.current.status.as_str(),
                "to" => self.next.status.as_str()
            )
            .increment(1);
            tracing::info!(batch = %self.next.id, from = %self.current.status, to = %self.next.status, "batch transition");
        }
        Ok((self.next, self.version + 1))
    }
}

/// Reads a batch and its data version.
///
/// # Errors
/// [`BatchError::NotFound`] when there is no such batch.
pub async fn read(session: &Session, id: &str) -> Result<(BatchRecord, i32), BatchError> {
    match store::read::<BatchRecord>(session, &paths::batch(id)).await? {
        Some((record, stat)) => Ok((record, stat.version)),
        None => Err(BatchError::NotFound(id.to_string())),
    }
}
