//! One claim: lock a queue entry's job and re-read it in one round trip, keep it only
//! if it is still where its entry says ([`Claimed`], [`claim_next`]).

use super::*;

/// A job this worker holds the lock on, re-checked to be in the expected state.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The job as read after locking.
    pub job: JobRecord,
    /// Its data version.
    pub version: i32,
    /// The lock.
    pub lock: JobLock,
    /// The session holding the lock.
    pub session: Session,
    /// Fires when the daemon shuts down: finish at a safe point and hand the job back.
    pub shutdown: CancellationToken,
}

impl Claimed {
    /// Fires when the session is lost: stop at once, commit nothing.
    pub fn lost(&self) -> CancellationToken {
        self.session.lost()
    }
}

/// What trying to claim one queue entry found.
pub(super) enum Attempt {
    /// Locked and re-checked: ours.
    Claimed(Box<Claimed>),
    /// Another worker holds the job's lock (or the job is gone).
    Busy,
    /// The job is not where the entry says (it moved); the lock we took was released
    /// again.
    Moved,
    /// The job's record, at `version`, does not decode: no transition can move it (that
    /// needs its data), so it waits for the work-item TTL ([`crate::lease`]) or an
    /// operator. The lock we took was released again. The caller says so once per job
    /// and version ([`Unreadable`]), not on every pass.
    Unreadable {
        /// The data version of the record that does not decode.
        version: i32,
        /// Why it does not decode.
        error: records::RecordError,
    },
}

/// The jobs whose undecodable record a long-running consumer has already reported, by
/// version: each is logged once (as an error, with the way out), later passes over it
/// only at debug level, until its record changes. It holds only such jobs (a handful on
/// a damaged tree), so it is not pruned.
#[derive(Debug, Default)]
pub(super) struct Unreadable {
    reported: HashMap<String, i32>,
}

impl Unreadable {
    /// Logs `job` at `version` if not logged yet; later calls for the same version log at
    /// debug level only.
    pub(super) fn report(
        &mut self,
        state: JobState,
        job: &str,
        version: i32,
        error: &records::RecordError,
    ) {
        if self.reported.insert(job.to_string(), version) == Some(version) {
            tracing::debug!(job = %job, episode = "unknown", %state, %error, "unreadable job in queue; skipped again");
        } else {
            log_unreadable(state, job, error);
        }
    }
}

/// The one log line for a queued job whose record does not decode.
fn log_unreadable(state: JobState, job: &str, error: &records::RecordError) {
    tracing::error!(job = %job, episode = "unknown", %state, %error, "unreadable job in queue; skipping: no researcher can claim it, the work-item TTL expires it (docs/operations.md, \"Finding a stuck job\")");
}

/// Tries to claim the job of one queue entry: takes its lock and re-reads it (in one
/// round trip), and keeps it only if the job is still in `state` under this entry.
pub(super) async fn try_claim(
    session: &Session,
    state: JobState,
    entry: &QueueEntry,
    owner: &str,
    shutdown: &CancellationToken,
) -> Result<Attempt> {
    let job_path = paths::job(&entry.job);
    let Some((lock, read)) =
        JobLock::try_acquire_and_read(session, &entry.job, owner, &job_path).await?
    else {
        return Ok(Attempt::Busy);
    };
    let guard = LockGuard::new(session, lock);
    let attempt = match read {
        Ok(Some((bytes, stat))) => match records::decode::<JobRecord>(&job_path, &bytes) {
            Ok(job) if job.status == state && job.queue_entry() == *entry => {
                return Ok(Attempt::Claimed(Box::new(Claimed {
                    job,
                    version: stat.version,
                    lock: guard.into_inner(),
                    session: session.clone(),
                    shutdown: shutdown.child_token(),
                })));
            }
            Ok(_) => Ok(Attempt::Moved),
            Err(error) => Ok(Attempt::Unreadable {
                version: stat.version,
                error,
            }),
        },
        Ok(None) => Ok(Attempt::Moved),
        Err(e) => Err(e),
    };
    // Not ours after all: the lock goes again.
    guard.settle(attempt, |_| false).await
}

/// Takes the first job of `state`'s queue whose lock is free, skipping `skip`. After
/// locking, the job is re-read: one that moved meanwhile is unlocked and passed over.
///
/// Lists the queue on every call; a long-running consumer uses a [`Claimer`] instead.
pub async fn claim_next(
    session: &Session,
    state: JobState,
    owner: &str,
    skip: &HashSet<String>,
    shutdown: &CancellationToken,
) -> Result<Option<Claimed>> {
    let (entries, _bad) = queue::list(session, state).await?;
    for entry in entries {
        if skip.contains(&entry.job) {
            continue;
        }
        match try_claim(session, state, &entry, owner, shutdown).await? {
            Attempt::Claimed(claimed) => return Ok(Some(*claimed)),
            Attempt::Unreadable { error, .. } => log_unreadable(state, &entry.job, &error),
            Attempt::Busy | Attempt::Moved => {}
        }
    }
    Ok(None)
}
