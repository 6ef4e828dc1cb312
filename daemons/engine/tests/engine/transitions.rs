use archivist_engine::jobs;
use archivist_engine::lock::JobLock;
use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_engine::transition::{machine, LockAction, Role, Transition};
use archivist_engine::EngineError;

use crate::support::{job_in_state, queues_holding};

#[tokio::test]
async fn every_allowed_transition_moves_data_queue_and_lock_together() {
    let (_config, session) = archivist_testkit::fresh_tree("every-transition").await;
    for t in &machine().transitions {
        let job = job_in_state(&session, t.from).await;
        let lock = JobLock::try_acquire(&session, &job.id, "test")
            .await
            .unwrap()
            .unwrap();
        let (_, version) = jobs::read(&session, &job.id).await.unwrap();
        let (moved, new_version) = Transition::new(
            Role::for_move(machine(), t.from, t.to).expect("a listed move"),
            &job,
            version,
            t.to,
        )
        .lock(LockAction::Release(lock))
        .event("test", &t.event, "ok")
        .commit(&session)
        .await
        .unwrap_or_else(|e| panic!("{} -> {}: {e}", t.from, t.to));
        let (stored, stored_version) = jobs::read(&session, &job.id).await.unwrap();
        assert_eq!(stored.status, t.to, "{} -> {}", t.from, t.to);
        assert_eq!(stored, moved);
        assert_eq!(stored_version, new_version);
        assert_eq!(stored.last_successful_status, Some(t.from));
        assert_eq!(queues_holding(&session, &job.id).await, vec![t.to]);
        assert!(!archivist_testkit::locked(&session, &job.id).await);
    }
}

#[tokio::test]
async fn an_illegal_transition_is_refused_and_writes_nothing() {
    let (_config, session) = archivist_testkit::fresh_tree("illegal").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let (_, version) = jobs::read(&session, &job.id).await.unwrap();
    let err = Transition::new(
        archivist_engine::transition::Role::Researcher,
        &job,
        version,
        JobState::Recorded,
    )
    .commit(&session)
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        EngineError::IllegalTransition {
            from: JobState::Pending,
            to: JobState::Recorded
        }
    ));
    let (stored, stored_version) = jobs::read(&session, &job.id).await.unwrap();
    assert_eq!(stored.status, JobState::Pending);
    assert_eq!(stored_version, version);
    assert_eq!(
        queues_holding(&session, &job.id).await,
        vec![JobState::Pending]
    );
}

#[tokio::test]
async fn a_failed_version_check_leaves_the_tree_unchanged() {
    let (_config, session) = archivist_testkit::fresh_tree("atomic").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .unwrap();
    let (before, version) = jobs::read(&session, &job.id).await.unwrap();
    // Someone else writes the job meanwhile.
    session
        .client()
        .set_data(
            &paths::job(&job.id),
            &store::encode(&paths::job(&job.id), &before).unwrap(),
            None,
        )
        .await
        .unwrap();
    let err = Transition::new(
        archivist_engine::transition::Role::Researcher,
        &before,
        version,
        JobState::Leased,
    )
    .lock(LockAction::Release(lock.clone()))
    .commit(&session)
    .await
    .unwrap_err();
    match &err {
        EngineError::Precondition { op, .. } => assert!(op.contains("/jobs/"), "{op}"),
        other => panic!("expected a precondition failure, got {other}"),
    }
    let (after, after_version) = jobs::read(&session, &job.id).await.unwrap();
    assert_eq!(after.status, JobState::Pending);
    assert_eq!(after_version, version + 1);
    assert_eq!(
        queues_holding(&session, &job.id).await,
        vec![JobState::Pending]
    );
    assert!(
        store::exists(&session, &lock.path).await.unwrap().is_some(),
        "the lock delete in the failed multi must not have happened"
    );
}

#[tokio::test]
async fn a_failed_step_keeps_the_last_successful_status() {
    let (_config, session) = archivist_testkit::fresh_tree("failed-keeps").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let (job, v) = Transition::new(
        archivist_engine::transition::Role::Researcher,
        &job,
        0,
        JobState::Leased,
    )
    .commit(&session)
    .await
    .unwrap();
    let (job, _) = Transition::new(
        archivist_engine::transition::Role::Researcher,
        &job,
        v,
        JobState::Failed,
    )
    .failed()
    .edit(|j| j.message = Some("404 Not Found".into()))
    .commit(&session)
    .await
    .unwrap();
    assert_eq!(job.last_successful_status, Some(JobState::Pending));
    assert_eq!(
        machine().resume_at(job.last_successful_status),
        JobState::Pending
    );
    assert_eq!(job.message.as_deref(), Some("404 Not Found"));
}

#[tokio::test]
async fn a_move_by_a_role_the_table_does_not_list_is_refused_and_writes_nothing() {
    let (_config, session) = archivist_testkit::fresh_tree("wrong-role").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let lock = JobLock::try_acquire(&session, &job.id, "test")
        .await
        .unwrap()
        .unwrap();
    let (before, version) = jobs::read(&session, &job.id).await.unwrap();
    // `pending -> expired` is the TTL step's (reaper, planner), not a researcher's.
    let err = Transition::new(Role::Researcher, &before, version, JobState::Expired)
        .failed()
        .lock(LockAction::Release(lock.clone()))
        .commit(&session)
        .await
        .unwrap_err();
    match &err {
        EngineError::NotAllowedBy {
            table,
            from,
            to,
            role,
            by,
        } => {
            assert_eq!(*table, "job");
            assert_eq!((*from, *to), ("pending", "expired"));
            assert_eq!(*role, Role::Researcher);
            assert!(by.contains("reaper"), "{by}");
        }
        other => panic!("expected NotAllowedBy, got {other}"),
    }
    assert!(
        !err.is_conflict() && !err.is_retryable(),
        "a refusal is final"
    );
    let (after, after_version) = jobs::read(&session, &job.id).await.unwrap();
    assert_eq!(after, before);
    assert_eq!(after_version, version);
    assert_eq!(
        queues_holding(&session, &job.id).await,
        vec![JobState::Pending]
    );
    assert!(
        store::exists(&session, &lock.path).await.unwrap().is_some(),
        "the refused move must not have released the lock"
    );
    // The role the table names makes the same move.
    let (moved, _) = Transition::new(Role::Reaper, &before, version, JobState::Expired)
        .failed()
        .lock(LockAction::Release(lock))
        .commit(&session)
        .await
        .unwrap();
    assert_eq!(moved.status, JobState::Expired);
}

#[tokio::test]
async fn every_move_is_refused_to_every_role_its_by_cell_does_not_list() {
    let (_config, session) = archivist_testkit::fresh_tree("roles-table").await;
    for t in &machine().transitions {
        let job = job_in_state(&session, t.from).await;
        for role in Role::ALL {
            let result = Transition::new(role, &job, 0, t.to).ops();
            if role.listed_in(&t.by) {
                assert!(result.is_ok(), "{} -> {} by {role}", t.from, t.to);
            } else {
                assert!(
                    matches!(result, Err(EngineError::NotAllowedBy { .. })),
                    "{} -> {} by {role} (by: {}) was not refused",
                    t.from,
                    t.to,
                    t.by
                );
            }
        }
    }
}

#[tokio::test]
async fn a_failing_ops_hook_stops_the_commit_before_anything_is_sent() {
    let (_config, session) = archivist_testkit::fresh_tree("ops-hook").await;
    let job = job_in_state(&session, JobState::Pending).await;
    let (before, version) = jobs::read(&session, &job.id).await.unwrap();
    let err = Transition::new(Role::Researcher, &before, version, JobState::Leased)
        .try_ops(|_| Err(EngineError::Config("the lease cannot be encoded".into())))
        .commit(&session)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Config(m) if m.contains("lease")),
        "{err}"
    );
    let (after, after_version) = jobs::read(&session, &job.id).await.unwrap();
    assert_eq!((after, after_version), (before, version));
    // A hook sees the new record and its operations join the multi.
    let (_, version) = jobs::read(&session, &job.id).await.unwrap();
    let marker = format!("{}/hooked", paths::job(&job.id));
    let created = marker.clone();
    Transition::new(Role::Researcher, &job, version, JobState::Leased)
        .try_ops(move |next| {
            assert_eq!(next.status, JobState::Leased);
            Ok(vec![archivist_engine::ops::Op::Create {
                path: created,
                data: Vec::new(),
                mode: archivist_engine::ops::Mode::Persistent,
            }])
        })
        .commit(&session)
        .await
        .unwrap();
    assert!(store::exists(&session, &marker).await.unwrap().is_some());
}
