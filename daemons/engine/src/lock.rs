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

use crate::error::{EngineError, Result};
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
    /// On connection loss the create may have succeeded unseen; the lock is then looked
    /// up and counted as ours only if its `ephemeralOwner` is this session.
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
        let record = LockRecord {
            schema: SCHEMA_VERSION,
            owner: owner.to_string(),
            session: session.id(),
            since: crate::clock::local_now(),
        };
        let data = store::encode(&path, &record)?;
        let options = session.create_options(zk::CreateMode::Ephemeral);
        match session.client().create(&path, &data, &options).await {
            Ok((stat, _)) => Ok(Some(JobLock {
                job: job.to_string(),
                path,
                version: if stat.version >= 0 { stat.version } else { 0 },
            })),
            Err(zk::Error::NodeExists) | Err(zk::Error::NoNode) => Ok(None),
            Err(zk::Error::ConnectionLoss) => match store::exists(session, &path).await? {
                Some(stat) if stat.ephemeral_owner == session.id_number() => Ok(Some(JobLock {
                    job: job.to_string(),
                    path,
                    version: stat.version,
                })),
                _ => Ok(None),
            },
            Err(e) => Err(EngineError::zk("create", &path, e)),
        }
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

    /// Releases the lock on its own (when no transition happens).
    pub async fn release(self, session: &Session) -> Result<()> {
        match session
            .client()
            .delete(&self.path, Some(self.version))
            .await
        {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(e) => Err(EngineError::zk("delete", &self.path, e)),
        }
    }
}

/// Who holds a job's lock, if anyone.
pub async fn holder(session: &Session, job: &str) -> Result<Option<(LockRecord, zk::Stat)>> {
    store::read::<LockRecord>(session, &paths::job_lock(job)).await
}
