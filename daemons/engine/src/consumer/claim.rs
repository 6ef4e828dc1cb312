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
    /// The job is not where the entry says (it moved, or cannot be read); the lock we
    /// took was released again.
    Moved,
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
    let read = read.and_then(|found| match found {
        Some((bytes, stat)) => Ok(Some((
            records::decode::<JobRecord>(&job_path, &bytes)?,
            stat.version,
        ))),
        None => Ok(None),
    });
    let attempt = match read {
        Ok(Some((job, version))) if job.status == state && job.queue_entry() == *entry => {
            return Ok(Attempt::Claimed(Box::new(Claimed {
                job,
                version,
                lock: guard.into_inner(),
                session: session.clone(),
                shutdown: shutdown.child_token(),
            })));
        }
        Ok(_) => Ok(Attempt::Moved),
        Err(EngineError::Record(err)) => {
            // An unreadable job cannot be moved by a transition (that needs its
            // data); leave it locked-free for fsck and say so.
            tracing::error!(job = %entry.job, episode = "unknown", %state, %err, "unreadable job in queue; skipping (run `archivist fsck`)");
            Ok(Attempt::Moved)
        }
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
        if let Attempt::Claimed(claimed) =
            try_claim(session, state, &entry, owner, shutdown).await?
        {
            return Ok(Some(*claimed));
        }
    }
    Ok(None)
}
