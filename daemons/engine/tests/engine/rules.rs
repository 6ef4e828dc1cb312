//! Issue 17's engine rules: `init` never leaves a counter behind the ids in use (defect
//! 1), a precondition failure names the exact operation, and a daemon restarted under
//! the same name waits quietly for its old registration to go (defect 7).

use std::time::Duration;

use archivist_engine::member::{self, Identity};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::{store, EngineError};

use crate::support::create;

#[tokio::test]
async fn init_moves_a_counter_behind_the_ids_in_use_past_them_never_back() {
    let (_config, session) = archivist_testkit::fresh_tree("rules-init").await;
    for _ in 0..3 {
        create(&session, 0, 1_700_000_000_000).await;
    }
    // Deleted by hand: `init` re-creates it ("1 missing node")...
    session
        .client()
        .delete(paths::JOB_COUNTER, None)
        .await
        .unwrap();
    let report = archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    assert_eq!(report.created, [paths::JOB_COUNTER.to_string()]);
    // ...but not at version 0, which would give out j0000000001 again.
    let stat = store::exists(&session, paths::JOB_COUNTER)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stat.version, 3);
    let next = create(&session, 0, 1_700_000_000_000).await;
    assert_eq!(next.id, paths::job_id(4));
    // Running it again changes nothing.
    let again = archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    assert!(again.created.is_empty() && again.counters_moved.is_empty());
}

#[tokio::test]
async fn a_precondition_failure_names_its_operation_index_and_path() {
    let (_config, session) = archivist_testkit::fresh_tree("rules-precondition").await;
    let err = ops::commit(
        &session,
        &[
            Op::Create {
                path: "/jobs/j0000000077".into(),
                data: Vec::new(),
                mode: Mode::Persistent,
            },
            Op::Check {
                path: paths::JOB_COUNTER.into(),
                version: 41,
            },
        ],
    )
    .await
    .unwrap_err();
    match &err {
        EngineError::Precondition { index, path, .. } => {
            assert_eq!((*index, path.as_str()), (1, paths::JOB_COUNTER));
        }
        other => panic!("{other}"),
    }
    assert_eq!(err.failed_path(), Some(paths::JOB_COUNTER));
}

#[tokio::test]
async fn a_restart_under_the_same_name_waits_for_the_old_registration_to_go() {
    let (config, old) = archivist_testkit::fresh_tree("rules-rename").await;
    let identity = Identity::named("reaper", "reaper-one");
    member::register(&old, &identity, 0, None).await.unwrap();
    let new = archivist_testkit::another_session(&config).await;
    let waiting = tokio::spawn({
        let identity = identity.clone();
        async move { member::register(&new, &identity, 0, None).await }
    });
    // While the old session lives the new one waits (the old code failed at once, and
    // the supervisor logged an error and retried every backoff).
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !waiting.is_finished(),
        "registered over a live session's node"
    );
    drop(old); // closes it, or it expires within the test session timeout (4 s)
    let registered = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("registered once the old session went")
        .unwrap();
    assert_eq!(registered.unwrap(), paths::daemon("reaper-one"));
}
