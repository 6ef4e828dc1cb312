//! The per-job lock: an ephemeral node `/jobs/{job}/lock` owned by the worker's session.
//! Batches use the same recipe on `/batches/{batch}/lock` ([`JobLock::try_acquire_at`]).
//!
//! Taking the lock is a plain create; whoever creates it owns the job until it deletes
//! the node (usually inside a transition's multi) or its session ends. After taking it,
//! callers must re-read the job and check its state (Merritt's duplicate-acquire bug:
//! the job may have moved between listing the queue and locking it).

use znode_schema::paths;
use znode_schema::records::LockRecord;
use znode_schema::SCHEMA_VERSION;
use zookeeper_client as zk;

use crate::error::{reply_may_be_lost, EngineError, Result};
use crate::ops::Op;
use crate::session::Session;
use crate::store;

/// A lock this session holds on a job (or, through [`JobLock::try_acquire_at`], on a
/// batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLock {
    /// Job id (batch id for a batch lock).
    pub job: String,
    /// Lock node path.
    pub path: String,
    /// Version of the lock node (for the delete in a transition).
    pub version: i32,
}

impl JobLock {
    /// Tries to take the lock; `None` if another session holds it (or the job is gone).
    ///
    /// On a lost reply (connection loss, timeout, or an I/O error such as a TLS peer gone
    /// without `close_notify`: [`reply_may_be_lost`]) the create may have succeeded
    /// unseen; the lock is then looked up and counted as ours only if its
    /// `ephemeralOwner` is this session, so this session never holds a lock it does not
    /// know about (the caller then re-checks the job as after any lock).
    pub async fn try_acquire(session: &Session, job: &str, owner: &str) -> Result<Option<JobLock>> {
        Self::try_acquire_at(session, &paths::job_lock(job), job, owner).await
    }

    /// The same recipe on any lock node `path` (e.g. `/batches/{batch}/lock`), for the
    /// item `id`; `None` if another session holds it or the item is gone.
    pub async fn try_acquire_at(
        session: &Session,
        path: &str,
        id: &str,
        owner: &str,
    ) -> Result<Option<JobLock>> {
        let job = id;
        let path = path.to_string();
        let data = lock_data(session, &path, owner)?;
        let options = session.create_options(zk::CreateMode::Ephemeral);
        match session.client().create(&path, &data, &options).await {
            Ok((stat, _)) => Ok(Some(JobLock {
                job: job.to_string(),
                path,
                version: if stat.version >= 0 { stat.version } else { 0 },
            })),
            Err(zk::Error::NodeExists) | Err(zk::Error::NoNode) => Ok(None),
            Err(e) if reply_may_be_lost(&e) => {
                JobLock::confirm_after_loss(session, job, path).await
            }
            Err(e) => Err(EngineError::zk("create", &path, e)),
        }
    }

    /// Tries to take the lock and reads `read_path` in the same round trip: both requests
    /// are sent at once, and ZooKeeper serves one session's requests in order, so the read
    /// sees the tree as it is *after* the lock was taken (the re-check the lock rule asks
    /// for) without waiting for the create first. `None` if another session holds the
    /// lock (or the job is gone); otherwise the lock and the read's outcome (`None`: no
    /// node at `read_path`).
    ///
    /// On a lost reply the outcome of the create is unknown: falls back to
    /// [`JobLock::try_acquire`]'s check of the lock's owner, then reads again.
    pub async fn try_acquire_and_read(
        session: &Session,
        job: &str,
        owner: &str,
        read_path: &str,
    ) -> Result<Option<(JobLock, Result<Option<(Vec<u8>, zk::Stat)>>)>> {
        let path = paths::job_lock(job);
        let data = lock_data(session, &path, owner)?;
        let options = session.create_options(zk::CreateMode::Ephemeral);
        // zookeeper-client sends each request when its future is made: create, then get.
        let created = session.client().create(&path, &data, &options);
        let read = session.client().get_data(read_path);
        let lock = match created.await {
            Ok((stat, _)) => JobLock {
                job: job.to_string(),
                path,
                version: if stat.version >= 0 { stat.version } else { 0 },
            },
            Err(zk::Error::NodeExists) | Err(zk::Error::NoNode) => return Ok(None),
            Err(e) if reply_may_be_lost(&e) => {
                drop(read);
                return match JobLock::confirm_after_loss(session, job, path).await? {
                    Some(lock) => {
                        let read = store::read_raw(session, read_path).await;
                        Ok(Some((lock, read)))
                    }
                    None => Ok(None),
                };
            }
            Err(e) => return Err(EngineError::zk("create", &path, e)),
        };
        let read = match read.await {
            Ok(found) => Ok(Some(found)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(EngineError::zk("get", read_path, e)),
        };
        Ok(Some((lock, read)))
    }

    /// After a create whose reply was lost: is the lock node there, and is it this
    /// session's? Looks again while the connection is down (the reply may be lost again
    /// during an election), for at most the session timeout plus the connect timeout:
    /// past that the server has expired the session and with it any lock it held.
    async fn confirm_after_loss(
        session: &Session,
        job: &str,
        path: String,
    ) -> Result<Option<JobLock>> {
        let stat = while_reply_lost(session, || store::exists(session, &path)).await?;
        Ok(match stat {
            Some(stat) if stat.ephemeral_owner == session.id_number() => Some(JobLock {
                job: job.to_string(),
                path,
                version: stat.version,
            }),
            _ => None,
        })
    }

    /// Is this lock's node still this session's (its `ephemeralOwner`), at the version
    /// taken? Asked after a write of unknown outcome, before going on under the lock; a
    /// read whose reply is lost is sent again while the session lives.
    pub async fn is_ours(&self, session: &Session) -> Result<bool> {
        let stat = while_reply_lost(session, || store::exists(session, &self.path)).await?;
        Ok(stat
            .is_some_and(|s| s.ephemeral_owner == session.id_number() && s.version == self.version))
    }

    /// The multi operation that releases this lock.
    pub fn release_op(&self) -> Op {
        Op::Delete {
            path: self.path.clone(),
            version: Some(self.version),
        }
    }

    /// The multi operation that requires this lock to still exist.
    pub fn check_op(&self) -> Op {
        Op::Check {
            path: self.path.clone(),
            version: self.version,
        }
    }

    /// Releases the lock if its node is still this session's, whatever else happened: for
    /// a holder whose transition failed its precondition on something else (the job's
    /// queue entry, its version) and so cannot tell whether the lock is still its own.
    /// Walking away from a lock it still held left the job locked, unworked and
    /// unexpirable until the holder's process restarted.
    ///
    /// # Errors
    /// ZooKeeper failures other than a lost reply.
    pub async fn release_if_ours(&self, session: &Session) -> Result<()> {
        release_if_ours(session, self).await
    }

    /// Releases the lock on its own (when no transition happens). A delete whose reply
    /// was lost may have applied, and another session may have taken the job's lock
    /// since, at version 0 too: so it is not sent again blindly, but only while the node
    /// is still this session's (`ephemeralOwner`); gone, or another's, means the lost
    /// delete applied (outside 17n H1: the resent delete removed the lock another
    /// researcher had just taken, and the job was researched twice). The lock is not
    /// left behind on a session that goes on living.
    pub async fn release(self, session: &Session) -> Result<()> {
        match session
            .client()
            .delete(&self.path, Some(self.version))
            .await
        {
            Ok(()) | Err(zk::Error::NoNode) => return Ok(()),
            Err(e) if !reply_may_be_lost(&e) || session.is_lost() => {
                return Err(EngineError::zk("delete", &self.path, e))
            }
            Err(_) => {}
        }
        while_reply_lost(session, || async {
            match store::exists(session, &self.path).await? {
                Some(stat) if stat.ephemeral_owner == session.id_number() => {
                    match session
                        .client()
                        .delete(&self.path, Some(stat.version))
                        .await
                    {
                        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                        Err(e) => Err(EngineError::zk("delete", &self.path, e)),
                    }
                }
                _ => Ok(()),
            }
        })
        .await
    }
}

/// A lock that is released on every exit path of the code holding it.
///
/// The normal paths say what became of the lock: [`LockGuard::release`] deletes it (and
/// reports whether that worked), [`LockGuard::committed`] says a transition's multi
/// deleted it ([`JobLock::release_op`]) or handed it on. A guard dropped without either
/// (an early `?`, a panic, a cancelled future) spawns a best-effort release on the
/// current Tokio runtime, so a lock is not left behind for the rest of a session that
/// goes on living. That release deletes the node only if it is still this session's
/// (its `ephemeralOwner`): lock nodes are always at version 0, so a version check alone
/// could delete the lock another worker took after ours went in a multi. Without a
/// runtime (dropped outside one) or once the session is lost nothing is spawned: the
/// session's end deletes its ephemeral nodes anyway.
#[derive(Debug)]
#[must_use = "a dropped guard releases the lock in the background; say what became of it"]
pub struct LockGuard {
    lock: Option<JobLock>,
    session: Session,
}

impl LockGuard {
    /// Guards `lock`, taken by `session`.
    pub fn new(session: &Session, lock: JobLock) -> LockGuard {
        LockGuard {
            lock: Some(lock),
            session: session.clone(),
        }
    }

    /// The guarded lock (for [`JobLock::check_op`] and [`JobLock::release_op`] in a
    /// transition).
    pub fn lock(&self) -> &JobLock {
        self.lock
            .as_ref()
            .unwrap_or_else(|| unreachable!("a guard holds its lock until consumed"))
    }

    /// Releases the lock now ([`JobLock::release`]).
    pub async fn release(mut self) -> Result<()> {
        match self.lock.take() {
            Some(lock) => lock.release(&self.session).await,
            None => Ok(()),
        }
    }

    /// The lock is no longer this guard's to release: a committed multi deleted it, or
    /// the caller keeps it under another owner ([`LockGuard::into_inner`]).
    pub fn committed(mut self) {
        self.lock = None;
    }

    /// Settles the lock after the work done under it: when `outcome` is `Ok` and
    /// `released` says its commit deleted the lock, nothing is left to do; any other
    /// `Ok` releases the lock (a failed release is the error); an `Err` releases it as
    /// well, best effort, and returns the work's error (after an error the lock is still
    /// ours unless the session went).
    pub async fn settle<T, E>(
        self,
        outcome: std::result::Result<T, E>,
        released: impl FnOnce(&T) -> bool,
    ) -> std::result::Result<T, E>
    where
        E: From<EngineError>,
    {
        match outcome {
            Ok(value) if released(&value) => {
                self.committed();
                Ok(value)
            }
            Ok(value) => {
                self.release().await?;
                Ok(value)
            }
            Err(e) => {
                let _ = self.release().await;
                Err(e)
            }
        }
    }

    /// Gives the lock back unguarded (the caller takes over its release).
    pub fn into_inner(mut self) -> JobLock {
        self.lock
            .take()
            .unwrap_or_else(|| unreachable!("a guard holds its lock until consumed"))
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        if self.session.is_lost() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(lock = %lock.path, "lock guard dropped outside a runtime; the session's end releases it");
            return;
        };
        let session = self.session.clone();
        runtime.spawn(async move {
            if let Err(e) = release_if_ours(&session, &lock).await {
                tracing::warn!(error = %e, lock = %lock.path, "could not release a dropped lock; the session's end will");
            }
        });
    }
}

/// Deletes `lock` if its node is still this session's (see [`LockGuard`]).
async fn release_if_ours(session: &Session, lock: &JobLock) -> Result<()> {
    let stat = while_reply_lost(session, || store::exists(session, &lock.path)).await?;
    match stat {
        Some(stat) if stat.ephemeral_owner == session.id_number() => {
            lock.clone().release(session).await
        }
        _ => Ok(()),
    }
}

/// Runs `call` again while it fails with a lost reply ([`reply_may_be_lost`]), with a
/// short backoff, until the session timeout plus the connect timeout has passed (by
/// then the server has expired the session and its ephemeral nodes) or the session is
/// lost. `call` must be safe to repeat (a read, or a delete that accepts `NoNode`): the
/// way to look after a write of unknown outcome.
pub async fn while_reply_lost<T, F, Fut>(session: &Session, mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let config = session.config();
    let deadline = tokio::time::Instant::now() + config.session_timeout + config.connect_timeout;
    let mut backoff = std::time::Duration::from_millis(50);
    loop {
        match call().await {
            Err(EngineError::Zk { source, .. })
                if reply_may_be_lost(&source)
                    && !session.is_lost()
                    && tokio::time::Instant::now() + backoff < deadline =>
            {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

/// The data of a lock node at `path`: who took it, on which session, when.
fn lock_data(session: &Session, path: &str, owner: &str) -> Result<Vec<u8>> {
    let record = LockRecord {
        schema: SCHEMA_VERSION,
        owner: owner.to_string(),
        session: session.id(),
        since: crate::clock::stamp_now(),
    };
    store::encode(path, &record)
}

/// Who holds a job's lock, if anyone.
pub async fn holder(session: &Session, job: &str) -> Result<Option<(LockRecord, zk::Stat)>> {
    store::read::<LockRecord>(session, &paths::job_lock(job)).await
}
