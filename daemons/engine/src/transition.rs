//! Moves of records kept under a state table (jobs and batches) as one atomic multi.
//!
//! One builder, [`Change`], serves both tables ([`Transition`] is its job form; the
//! batcher's `BatchChange` its batch form). A change writes the record's new data at the
//! version it was read (so a record that moved meanwhile is never overwritten), makes the
//! table's own moves around it (a job's queue entry goes from the old state's queue to
//! the new one), and checks, keeps or deletes the lock: all together or not at all.
//!
//! Only moves listed in the table are made, and only by a role its `by` column lists
//! ([`Role`]): a researcher cannot expire a job, nor an operator close one. Extra
//! operations (a lease write, a report) join the same multi, built up front
//! ([`Change::with_ops`]) or by a fallible hook ([`Change::try_ops`]) whose error
//! stops the commit before anything is sent.

use std::fmt;
use std::sync::OnceLock;

use znode_schema::paths;
use znode_schema::records::{BatchRecord, JobEvent, JobRecord};
use znode_schema::spec::{Schema, StateMachine};
use znode_schema::{BatchState, JobState, TableState};

use crate::error::{EngineError, Result};
use crate::lock::JobLock;
use crate::ops::{self, Mode, Op};
use crate::session::Session;
use crate::store;

/// The job state table embedded in this build.
pub fn machine() -> &'static StateMachine {
    static MACHINE: OnceLock<StateMachine> = OnceLock::new();
    MACHINE.get_or_init(|| Schema::embedded().machine)
}

/// The batch state table embedded in this build.
pub fn batch_machine() -> &'static StateMachine<BatchState> {
    static MACHINE: OnceLock<StateMachine<BatchState>> = OnceLock::new();
    MACHINE.get_or_init(|| Schema::embedded().batch_machine)
}

/// Who makes a move: the names of the state tables' `by` column. A daemon builds its
/// changes with its own role, so a move the table gives to another role is refused
/// ([`EngineError::NotAllowedBy`]) instead of written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Plans jobs and expires those that waited past their work-item TTL.
    Planner,
    /// Claims pending jobs and researches them.
    Researcher,
    /// Stores reports and closes reported jobs.
    Recorder,
    /// Expires jobs whose lease ran out or whose holder died.
    Reaper,
    /// Curates batches and writes their reports.
    Batcher,
    /// An operator's command (`archivist ...`).
    Admin,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Planner,
        Role::Researcher,
        Role::Recorder,
        Role::Reaper,
        Role::Batcher,
        Role::Admin,
    ];

    /// The name used in the tables' `by` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Researcher => "researcher",
            Role::Recorder => "recorder",
            Role::Reaper => "reaper",
            Role::Batcher => "batcher",
            Role::Admin => "admin",
        }
    }

    /// The role of a name, if it is one.
    pub fn named(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name.trim())
    }

    /// Does a `by` cell list this role? A cell names one role or several, separated by
    /// commas (`researcher, reaper`).
    pub fn listed_in(self, by: &str) -> bool {
        by.split(',').any(|r| r.trim() == self.as_str())
    }

    /// The first role `table` lists for `from -> to`, if the move is in it: for tools
    /// and tests that drive a record along the table rather than act as one daemon.
    pub fn for_move<S: TableState>(table: &StateMachine<S>, from: S, to: S) -> Option<Role> {
        table
            .transition(from, to)
            .and_then(|t| t.by.split(',').find_map(Role::named))
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record kept under a state table: what [`Change`] needs to know about it. The rule
/// (table, role, version, lock, one multi) is [`Change`]'s; this trait only says where
/// the record lives and what its table adds to a move.
pub trait Tracked: Clone + znode_schema::records::Record + Send + Sync + 'static {
    /// The table's states.
    type State: TableState + Send + Sync;
    /// The table's name in errors (`job`, `batch`).
    const TABLE: &'static str;
    /// May a change keep the status (an edit of the record, checked by version only)?
    /// Batches: yes; jobs: every change is a move of the table.
    const EDITS_IN_PLACE: bool;
    /// Does the lock's release come before the extra operations in the multi (jobs) or
    /// after them (batches)? Kept per table so a failed precondition names the same
    /// operation as before the two builders became one.
    const RELEASE_BEFORE_EXTRA: bool;

    /// The table.
    fn machine() -> &'static StateMachine<Self::State>;
    /// The record's id.
    fn id(&self) -> &str;
    /// Its status.
    fn status(&self) -> Self::State;
    /// Sets its status.
    fn set_status(&mut self, to: Self::State);
    /// Its node.
    fn path(&self) -> String;
    /// Appends an event to its history.
    fn push_event(&mut self, event: JobEvent);
    /// Stamps the time of the change.
    fn touch(&mut self);
    /// The error for a move the table does not list.
    fn illegal(from: Self::State, to: Self::State) -> EngineError;
    /// The table's own operations of a move besides the record write (a job's queue
    /// entry moves to the new state's queue).
    fn move_ops(current: &Self, next: &Self) -> Vec<Op>;
    /// Notes a successful step out of `from` on the new record (jobs remember their last
    /// successful state for `retry`).
    fn succeeded_from(_next: &mut Self, _from: Self::State) {}
    /// Counts and logs a committed change.
    fn committed(current: &Self, next: &Self);
}

/// What a change does with the record's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockAction {
    /// Delete it in the same multi (the worker is done with the record).
    Release(JobLock),
    /// Require it to still exist and keep it (the worker goes on with the record).
    Keep(JobLock),
    /// No lock involved (admin actions on unlocked records check the version only).
    None,
}

/// A fallible hook that builds extra operations of the multi.
type OpsHook<R> = Box<dyn FnOnce(&R) -> Result<Vec<Op>> + Send>;

/// A change of a tracked record being built. See the module docs.
pub struct Change<R: Tracked> {
    role: Role,
    current: R,
    version: i32,
    next: R,
    lock: LockAction,
    extra: Vec<Op>,
    hooks: Vec<OpsHook<R>>,
    succeeded: bool,
}

impl<R: Tracked + fmt::Debug> fmt::Debug for Change<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Change")
            .field("role", &self.role)
            .field("current", &self.current)
            .field("version", &self.version)
            .field("next", &self.next)
            .field("lock", &self.lock)
            .field("extra", &self.extra)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

/// A job transition: [`Change`] of a [`JobRecord`].
pub type Transition = Change<JobRecord>;

impl Transition {
    /// Starts `role`'s transition of `current` (read at `version`) to `to`.
    pub fn new(role: Role, current: &JobRecord, version: i32, to: JobState) -> Transition {
        Change::edit_of(role, current, version).to(to)
    }
}

impl<R: Tracked> Change<R> {
    /// Starts `role`'s change of `current` (read at `version`); the status stays unless
    /// [`Change::to`] is called.
    pub fn edit_of(role: Role, current: &R, version: i32) -> Change<R> {
        Change {
            role,
            current: current.clone(),
            version,
            next: current.clone(),
            lock: LockAction::None,
            extra: Vec::new(),
            hooks: Vec::new(),
            succeeded: true,
        }
    }

    /// Moves the record to `to` (checked against the table and the role at commit).
    pub fn to(mut self, to: R::State) -> Self {
        self.next.set_status(to);
        self
    }

    /// Sets what happens to the lock. Defaults to [`LockAction::None`].
    pub fn lock(mut self, lock: LockAction) -> Self {
        self.lock = lock;
        self
    }

    /// Marks the step as failed: a job's `last_successful_status` is kept (Merritt's
    /// `retain_prior_value`). Defaults to succeeded, which records the current state as
    /// the last successful one.
    pub fn failed(mut self) -> Self {
        self.succeeded = false;
        self
    }

    /// Edits the new record (message, retry count, priority, ...).
    pub fn edit(mut self, f: impl FnOnce(&mut R)) -> Self {
        f(&mut self.next);
        self
    }

    /// Records the event "`by` did `step` with `result`".
    pub fn event(mut self, by: &str, step: &str, result: &str) -> Self {
        self.next.push_event(JobEvent {
            at: crate::clock::stamp_now(),
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

    /// Adds the operations `hook` builds from the new record when the multi is put
    /// together; an error of the hook is the commit's error, and nothing is written.
    pub fn try_ops(mut self, hook: impl FnOnce(&R) -> Result<Vec<Op>> + Send + 'static) -> Self {
        self.hooks.push(Box::new(hook));
        self
    }

    /// Checks the move against the table and the role; nothing is written either way.
    fn check(&self) -> Result<()> {
        let from = self.current.status();
        let to = self.next.status();
        if from == to && R::EDITS_IN_PLACE {
            return Ok(());
        }
        let Some(spec) = R::machine().transition(from, to) else {
            return Err(R::illegal(from, to));
        };
        if !self.role.listed_in(&spec.by) {
            return Err(EngineError::NotAllowedBy {
                table: R::TABLE,
                from: from.name(),
                to: to.name(),
                role: self.role,
                by: spec.by.clone(),
            });
        }
        Ok(())
    }

    /// The operations this change will commit, after validation.
    ///
    /// # Errors
    /// Those of [`Change::commit`] that come before anything is sent.
    pub fn ops(&mut self) -> Result<Vec<Op>> {
        self.check()?;
        let from = self.current.status();
        if self.succeeded && from != self.next.status() {
            R::succeeded_from(&mut self.next, from);
        }
        self.next.touch();
        let path = self.current.path();
        let mut ops = Vec::with_capacity(5 + self.extra.len());
        if let LockAction::Keep(lock) = &self.lock {
            ops.push(lock.check_op());
        }
        ops.push(Op::SetData {
            path: path.clone(),
            data: store::encode(&path, &self.next)?,
            version: Some(self.version),
        });
        ops.extend(R::move_ops(&self.current, &self.next));
        let release = match &self.lock {
            LockAction::Release(lock) => Some(lock.release_op()),
            _ => None,
        };
        if R::RELEASE_BEFORE_EXTRA {
            ops.extend(release.clone());
        }
        ops.extend(self.extra.iter().cloned());
        for hook in self.hooks.drain(..) {
            ops.extend(hook(&self.next)?);
        }
        if !R::RELEASE_BEFORE_EXTRA {
            ops.extend(release);
        }
        Ok(ops)
    }

    /// Commits the change; returns the new record and its data version.
    ///
    /// # Errors
    /// - [`EngineError::IllegalTransition`] (a job) or
    ///   [`EngineError::IllegalBatchTransition`] (a batch): not in the table; nothing
    ///   written.
    /// - [`EngineError::NotAllowedBy`]: the table gives the move to another role;
    ///   nothing written.
    /// - An error of a [`Change::try_ops`] hook; nothing written.
    /// - [`EngineError::Precondition`]: the record moved, the lock is gone, or an extra
    ///   operation's precondition failed; nothing written.
    /// - [`EngineError::SessionLost`]: nothing written; the lock is gone with the session.
    pub async fn commit(mut self, session: &Session) -> Result<(R, i32)> {
        let ops = self.ops()?;
        ops::commit(session, &ops).await?;
        R::committed(&self.current, &self.next);
        Ok((self.next, self.version + 1))
    }
}

impl Tracked for JobRecord {
    type State = JobState;
    const TABLE: &'static str = "job";
    const EDITS_IN_PLACE: bool = false;
    const RELEASE_BEFORE_EXTRA: bool = true;

    fn machine() -> &'static StateMachine<JobState> {
        machine()
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn status(&self) -> JobState {
        self.status
    }

    fn set_status(&mut self, to: JobState) {
        self.status = to;
    }

    fn path(&self) -> String {
        paths::job(&self.id)
    }

    fn push_event(&mut self, event: JobEvent) {
        JobRecord::push_event(self, event)
    }

    fn touch(&mut self) {
        self.updated = crate::clock::stamp_now();
    }

    fn illegal(from: JobState, to: JobState) -> EngineError {
        EngineError::IllegalTransition { from, to }
    }

    fn move_ops(current: &Self, next: &Self) -> Vec<Op> {
        vec![
            Op::Delete {
                path: paths::queue_entry(current.status, &current.queue_entry().name()),
                version: None,
            },
            Op::Create {
                path: paths::queue_entry(next.status, &next.queue_entry().name()),
                data: Vec::new(),
                mode: Mode::Persistent,
            },
        ]
    }

    fn succeeded_from(next: &mut Self, from: JobState) {
        next.last_successful_status = Some(from);
    }

    fn committed(current: &Self, next: &Self) {
        metrics::counter!(
            "archivist_job_transitions_total",
            "from" => current.status.as_str(),
            "to" => next.status.as_str()
        )
        .increment(1);
        if next.status == JobState::Failed {
            metrics::counter!("archivist_job_failures_total", "state" => current.status.as_str())
                .increment(1);
        }
        crate::logs::record_state(next.status.as_str());
        tracing::info!(
            job = %next.id,
            episode = %next.episode,
            state = %next.status,
            from = %current.status,
            "job transition"
        );
    }
}

impl Tracked for BatchRecord {
    type State = BatchState;
    const TABLE: &'static str = "batch";
    const EDITS_IN_PLACE: bool = true;
    const RELEASE_BEFORE_EXTRA: bool = false;

    fn machine() -> &'static StateMachine<BatchState> {
        batch_machine()
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn status(&self) -> BatchState {
        self.status
    }

    fn set_status(&mut self, to: BatchState) {
        self.status = to;
    }

    fn path(&self) -> String {
        paths::batch(&self.id)
    }

    fn push_event(&mut self, event: JobEvent) {
        BatchRecord::push_event(self, event)
    }

    fn touch(&mut self) {
        self.updated = crate::clock::stamp_now();
    }

    fn illegal(from: BatchState, to: BatchState) -> EngineError {
        EngineError::IllegalBatchTransition { from, to }
    }

    fn move_ops(_current: &Self, _next: &Self) -> Vec<Op> {
        Vec::new()
    }

    fn committed(current: &Self, next: &Self) {
        if current.status != next.status {
            metrics::counter!(
                "archivist_batch_transitions_total",
                "from" => current.status.as_str(),
                "to" => next.status.as_str()
            )
            .increment(1);
            tracing::info!(batch = %next.id, from = %current.status, to = %next.status, "batch transition");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_by_cell_of_both_tables_names_known_roles() {
        let cells = machine()
            .transitions
            .iter()
            .map(|t| t.by.as_str())
            .chain(batch_machine().transitions.iter().map(|t| t.by.as_str()));
        for cell in cells {
            for name in cell.split(',') {
                assert!(
                    Role::named(name).is_some(),
                    "unknown role {name:?} in by: {cell:?}"
                );
            }
        }
    }

    #[test]
    fn a_cell_may_list_several_roles() {
        assert!(Role::Reaper.listed_in("researcher, reaper"));
        assert!(Role::Researcher.listed_in("researcher, reaper"));
        assert!(!Role::Admin.listed_in("researcher, reaper"));
        assert!(!Role::Researcher.listed_in("researchers"));
    }
}
