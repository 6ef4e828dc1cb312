//! The lock guard: a lock is released on every exit path, and a late release never
//! deletes a lock another session took meanwhile.

use std::time::Duration;

use archivist_engine::lock::{JobLock, LockGuard};
use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::{store, EngineError};

use crate::support::job_in_state;

#[tokio::test]
async fn a_guard_dropped_without_release_frees_the_lock() {
    let (_config, session) = archivist_testkit::fresh_tree("guard-drop").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .expect("free lock");
    let guard = LockGuard::new(&session, lock);
    // An early return, a panic or a cancelled future: the guard is dropped unsettled.
    drop(guard);
    assert!(
        archivist_testkit::eventually(Duration::from_secs(5), || async {
            !archivist_testkit::locked(&session, &job.id).await
        })
        .await,
        "the dropped guard's lock is still there"
    );
}

#[tokio::test]
async fn settling_an_error_releases_the_lock_and_keeps_the_error() {
    let (_config, session) = archivist_testkit::fresh_tree("guard-settle").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .expect("free lock");
    let guard = LockGuard::new(&session, lock);
    let outcome: Result<(), EngineError> = Err(EngineError::SessionLost("test".into()));
    let err = guard.settle(outcome, |_| true).await.unwrap_err();
    assert!(err.is_session_lost(), "{err}");
    assert!(!archivist_testkit::locked(&session, &job.id).await);
}

#[tokio::test]
async fn a_late_guard_leaves_another_sessions_lock_alone() {
    let (config, session) = archivist_testkit::fresh_tree("guard-late").await;
    let other = archivist_testkit::another_session(&config).await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .expect("free lock");
    // The lock goes (as in a transition's multi) but the guard is not told...
    let guard = LockGuard::new(&session, lock.clone());
    lock.release(&session).await.unwrap();
    // ...and another worker takes the job: its lock is at version 0 like ours was.
    let theirs = JobLock::try_acquire(&other, &job.id, "other")
        .await
        .unwrap()
        .expect("the lock is free again");
    assert_eq!(theirs.version, 0);
    drop(guard);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, stat) = store::read_raw(&session, &paths::job_lock(&job.id))
        .await
        .unwrap()
        .expect("the other session's lock is kept");
    assert_eq!(stat.ephemeral_owner, other.id_number());
}

#[tokio::test]
async fn a_committed_guard_does_nothing() {
    let (_config, session) = archivist_testkit::fresh_tree("guard-commit").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .expect("free lock");
    LockGuard::new(&session, lock).committed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        archivist_testkit::locked(&session, &job.id).await,
        "a guard told the lock is taken care of must not release it"
    );
}
