//! Issue 17's engine rules: `init` never leaves a counter behind the ids in use (defect
//! 1), a precondition failure names the exact operation, and a daemon restarted under
//! the same name waits quietly for its old registration to go (defect 7) and stops on
//! the shutdown token while it waits; a registration deleted while its session lives is
//! made again (outside test 17c, defects 9 and 5).

use std::time::Duration;

use archivist_engine::member::{self, Identity};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::{store, EngineError};
use tokio_util::sync::CancellationToken;

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
    let old_membership = member::register(&old, &identity, 0, None, &CancellationToken::new())
        .await
        .unwrap();
    let new = archivist_testkit::another_session(&config).await;
    let waiting = tokio::spawn({
        let identity = identity.clone();
        async move {
            member::register(&new, &identity, 0, None, &CancellationToken::new())
                .await
                .map(|m| m.map(|m| m.path().to_string()))
        }
    });
    // While the old session lives the new one waits (the old code failed at once, and
    // the supervisor logged an error and retried every backoff).
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !waiting.is_finished(),
        "registered over a live session's node"
    );
    drop(old_membership); // its keeper holds the session too
    drop(old); // closes it, or it expires within the test session timeout (4 s)
    let registered = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("registered once the old session went")
        .unwrap();
    assert_eq!(
        registered.unwrap().as_deref(),
        Some(paths::daemon("reaper-one").as_str())
    );
}

#[tokio::test]
async fn a_daemon_told_to_stop_while_waiting_for_its_name_stops_without_registering() {
    let (config, old) = archivist_testkit::fresh_tree("rules-stop-waiting").await;
    let identity = Identity::named("recorder", "recorder-one");
    let _old_membership = member::register(&old, &identity, 0, None, &CancellationToken::new())
        .await
        .unwrap();
    let new = archivist_testkit::another_session(&config).await;
    let shutdown = CancellationToken::new();
    let waiting = tokio::spawn({
        let (identity, shutdown, new) = (identity.clone(), shutdown.clone(), new.clone());
        async move {
            member::register(&new, &identity, 0, None, &shutdown)
                .await
                .map(|m| m.is_some())
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "registered over a live session's node"
    );
    // Defect 9 (outside test 17c): SIGTERM was ignored until the old session expired.
    shutdown.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("the wait ends on the shutdown token")
        .unwrap();
    assert!(!outcome.unwrap(), "registered although told to stop");
    let (stat, _) = new
        .client()
        .check_and_watch_stat(&paths::daemon("recorder-one"))
        .await
        .unwrap();
    assert_eq!(
        stat.map(|s| s.ephemeral_owner),
        Some(old.id_number()),
        "the old session's node is left alone"
    );
}

#[tokio::test]
async fn a_registration_deleted_while_the_session_lives_is_made_again() {
    let (config, session) = archivist_testkit::fresh_tree("rules-reregister").await;
    let identity = Identity::named("researcher", "r-deleted");
    let membership = member::register(&session, &identity, 2, None, &CancellationToken::new())
        .await
        .unwrap()
        .expect("registered");
    let path = paths::researcher("r-deleted");
    assert_eq!(membership.path(), path);
    // Deleted by hand (defect 5 of outside test 17c): the researcher kept working, the
    // planner saw no researcher and planned nothing.
    let operator = archivist_testkit::another_session(&config).await;
    for round in 0..2 {
        operator.client().delete(&path, None).await.unwrap();
        let back = archivist_testkit::eventually(Duration::from_secs(5), || {
            let (session, path) = (session.clone(), path.clone());
            async move {
                let members = member::list(&session, paths::RESEARCHERS).await.unwrap();
                let (stat, _) = session.client().check_and_watch_stat(&path).await.unwrap();
                members
                    .iter()
                    .any(|m| m.name == "r-deleted" && m.slots == 2)
                    && stat.is_some_and(|s| s.ephemeral_owner == session.id_number())
            }
        })
        .await;
        assert!(
            back,
            "deletion {round}: the registration was not made again"
        );
    }
    // Once the membership is dropped (the daemon's role ended) nothing re-creates it.
    drop(membership);
    tokio::time::sleep(Duration::from_millis(100)).await;
    operator.client().delete(&path, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (stat, _) = operator.client().check_and_watch_stat(&path).await.unwrap();
    assert!(
        stat.is_none(),
        "re-registered after the daemon's role ended"
    );
}

/// Outside 17h F5: a live researcher's `/researchers/NAME` (or a daemon's
/// `/daemons/NAME`) overwritten with garbage (`set ... "garbage: [unclosed"`) was never
/// re-registered: `status` said "0 live, 0 slots" and the planner planned one job at a
/// time until someone deleted the node. The owner now writes its record again.
#[tokio::test]
async fn a_registration_overwritten_while_the_session_lives_is_written_again() {
    let (config, session) = archivist_testkit::fresh_tree("rules-overwritten").await;
    let operator = archivist_testkit::another_session(&config).await;
    for (identity, path, dir) in [
        (
            Identity::named("researcher", "r-overwritten"),
            paths::researcher("r-overwritten"),
            paths::RESEARCHERS,
        ),
        (
            Identity::named("planner", "p-overwritten"),
            paths::daemon("p-overwritten"),
            paths::DAEMONS,
        ),
    ] {
        let _membership = member::register(&session, &identity, 2, None, &CancellationToken::new())
            .await
            .unwrap()
            .expect("registered");
        for round in 0..2 {
            operator
                .client()
                .set_data(&path, b"garbage: [unclosed", None)
                .await
                .unwrap();
            let back = archivist_testkit::eventually(Duration::from_secs(5), || {
                let (session, name) = (session.clone(), identity.name.clone());
                async move {
                    member::list(&session, dir)
                        .await
                        .unwrap()
                        .iter()
                        .any(|m| m.name == name && m.slots == 2)
                }
            })
            .await;
            assert!(
                back,
                "{path}, overwrite {round}: the registration was not written again"
            );
        }
    }
}

/// Outside 17d finding 4 (its rest): with `/researchers` deleted under a running
/// researcher, it retried every second ("could not register again", no hint) while
/// `/readyz` said "ready" and the planner counted no capacity for it. The role is now not
/// ready, with a reason naming the missing directory and `archivist init`, until it
/// registers again.
#[tokio::test]
async fn a_daemon_that_cannot_register_again_is_not_ready_and_says_why() {
    let (config, session) = archivist_testkit::fresh_tree("rules-unregistered").await;
    let identity = Identity::named("unregistered-test", "d-unreg");
    let _membership = member::register(&session, &identity, 0, None, &CancellationToken::new())
        .await
        .unwrap()
        .expect("registered");
    let role = "unregistered-test";
    assert_eq!(archivist_engine::health::report().get(role), Some(&None));
    let path = paths::daemon("d-unreg");
    let operator = archivist_testkit::another_session(&config).await;
    archivist_engine::ops::commit(
        &operator,
        &[
            archivist_engine::ops::Op::Delete {
                path: path.clone(),
                version: None,
            },
            archivist_engine::ops::Op::Delete {
                path: paths::DAEMONS.to_string(),
                version: None,
            },
        ],
    )
    .await
    .unwrap();
    let why = archivist_testkit::eventually(Duration::from_secs(5), || async {
        archivist_engine::health::report()
            .get(role)
            .cloned()
            .flatten()
            .is_some()
    })
    .await;
    assert!(why, "a daemon that cannot register is reported ready");
    let reason = archivist_engine::health::report()[role].clone().unwrap();
    assert!(
        reason.contains(paths::DAEMONS) && reason.contains("archivist init"),
        "{reason}"
    );
    // `archivist init` makes the directory again: registered and ready again.
    operator
        .client()
        .create(
            paths::DAEMONS,
            &[],
            &operator.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    let back = archivist_testkit::eventually(Duration::from_secs(10), || async {
        archivist_engine::health::report().get(role) == Some(&None)
    })
    .await;
    assert!(back, "not ready after registering again");
    let (stat, _) = operator.client().check_and_watch_stat(&path).await.unwrap();
    assert_eq!(stat.map(|s| s.ephemeral_owner), Some(session.id_number()));
}

/// Outside test 17d, finding 12 (and 17g, still): a second daemon started under the name
/// a *live* daemon uses logged "waiting for it to expire (at most its session timeout)"
/// and then nothing, for ever, with `/readyz` saying only "no role registered". It now
/// says so again every session timeout, naming the holder's session; past twice the
/// session timeout it says a live process holds the name; and `/readyz` says why it
/// waits all along.
/// (Single-threaded runtime: the capturing subscriber is this thread's default.)
#[tokio::test]
async fn a_name_held_by_a_live_daemon_is_named_as_such_after_twice_the_session_timeout() {
    let (captured, _default) = crate::support::Captured::install();
    let (config, live) = archivist_testkit::fresh_tree("rules-live-name").await;
    let role = "live-name-test";
    let identity = Identity::named(role, "planner-twice");
    let _live = member::register(&live, &identity, 0, None, &CancellationToken::new())
        .await
        .unwrap();
    let holder = format!("{:#x}", live.id_number());
    let second = archivist_testkit::another_session(&config).await;
    let timeout = second.config().session_timeout;
    let shutdown = CancellationToken::new();
    let waiting = member::register(&second, &identity, 0, None, &shutdown);
    let watch = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let early = archivist_engine::health::report()
            .get(role)
            .cloned()
            .flatten();
        tokio::time::sleep(timeout * 2 + Duration::from_millis(500)).await;
        let late = archivist_engine::health::report()
            .get(role)
            .cloned()
            .flatten();
        shutdown.cancel();
        (early, late)
    };
    let (registered, (early, late)) = tokio::join!(waiting, watch);
    assert!(
        registered.unwrap().is_none(),
        "never registered: the name is held"
    );
    let early = early.expect("/readyz says why it waits");
    assert!(
        early.contains("waiting to register") && early.contains(&holder),
        "{early}"
    );
    let late = late.expect("/readyz says why it waits");
    assert!(
        late.contains("another running process uses this --name") && late.contains(&holder),
        "{late}"
    );
    let log = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(
        captured.lines_with(&format!("held by session {holder}")) >= 3,
        "said once only: {log}"
    );
    assert!(
        captured.lines_with("another running process uses this --name") >= 1,
        "{log}"
    );
}

/// Outside 17d finding 16f: an undecodable `/researchers/junk` drew a warning on every
/// listing (the planner lists members every round: ~100k lines a day). It is told once
/// per change of the node, and never counted.
/// (Single-threaded runtime: the capturing subscriber is this thread's default.)
#[tokio::test]
async fn an_undecodable_member_is_told_once_per_change_not_every_listing() {
    let (captured, _default) = crate::support::Captured::install();
    let (_config, session) = archivist_testkit::fresh_tree("rules-junk-member").await;
    let path = paths::researcher("junk");
    session
        .client()
        .create(
            &path,
            b"slots: [",
            &session.create_options(archivist_engine::zk::CreateMode::Ephemeral),
        )
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(member::list(&session, paths::RESEARCHERS)
            .await
            .unwrap()
            .is_empty());
    }
    assert_eq!(captured.lines_with("unreadable member record"), 1);
    session
        .client()
        .set_data(&path, b"slots: {", None)
        .await
        .unwrap();
    for _ in 0..3 {
        member::list(&session, paths::RESEARCHERS).await.unwrap();
    }
    assert_eq!(captured.lines_with("unreadable member record"), 2);
}

/// Outside 17d finding 16e: a daemon whose ZooKeeper is unreachable answered `/readyz`
/// with "no role registered" (the log said why only 10 s later). Its health now names
/// the daemon and says it is connecting, then that ZooKeeper cannot be reached.
#[tokio::test]
async fn a_daemon_that_cannot_reach_zookeeper_says_so_in_its_health() {
    let config = archivist_engine::config::ZkConfig::new("127.0.0.1:1")
        .with_chroot("/unreachable")
        .with_connect_timeout(Duration::from_millis(300));
    let shutdown = CancellationToken::new();
    let name = "unreachable-daemon";
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            archivist_engine::daemon::supervise(&config, name, shutdown, |_session| async {
                Ok(())
            })
            .await
        }
    });
    let said = archivist_testkit::eventually(Duration::from_secs(5), || async {
        archivist_engine::health::report()
            .get(name)
            .cloned()
            .flatten()
            .is_some_and(|why| why.contains("cannot reach ZooKeeper"))
    })
    .await;
    assert!(said, "{:?}", archivist_engine::health::report().get(name));
    assert!(!archivist_engine::health::is_ready());
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(!archivist_engine::health::report().contains_key(name));
}

/// Outside 17h F7: with `/queues/pending` deleted by hand, the planner's `/readyz` named
/// it, but the researchers answered "ready" and logged nothing: they idled silently. A
/// consumer whose queue directory is missing is now not ready, naming it and `archivist
/// init`, and ready again once the directory is back.
#[tokio::test]
async fn a_consumer_whose_queue_directory_is_missing_is_not_ready_and_says_why() {
    use archivist_engine::consumer::{self, Claimed, ConsumerOptions, Step};
    use archivist_engine::schema::JobState;
    use archivist_engine::transition::Role;
    struct Never;
    impl Step for Never {
        async fn run(&self, _claimed: Claimed) -> Result<(), EngineError> {
            Err(EngineError::Config("nothing is queued in this test".into()))
        }
    }
    let (config, session) = archivist_testkit::fresh_tree("rules-queue-dir").await;
    // A role name no other test uses (`/readyz` state is per process).
    let identity = Identity::named("batcher", "b-queue-dir");
    let _membership = member::register(&session, &identity, 1, None, &CancellationToken::new())
        .await
        .unwrap()
        .expect("registered");
    let shutdown = CancellationToken::new();
    let options = ConsumerOptions::new(JobState::Pending, "b-queue-dir")
        .with_role(Role::Batcher)
        .with_poll_interval(Duration::from_millis(100));
    let consumer = tokio::spawn({
        let (session, shutdown) = (session.clone(), shutdown.clone());
        async move { consumer::run(&session, options, std::sync::Arc::new(Never), shutdown).await }
    });
    let operator = archivist_testkit::another_session(&config).await;
    let dir = paths::queue(JobState::Pending);
    operator.client().delete(&dir, None).await.unwrap();
    let said = archivist_testkit::eventually(Duration::from_secs(5), || async {
        archivist_engine::health::report()
            .get("batcher")
            .cloned()
            .flatten()
            .is_some_and(|why| why.contains(&dir) && why.contains("archivist init"))
    })
    .await;
    assert!(
        said,
        "{:?}",
        archivist_engine::health::report().get("batcher")
    );
    operator
        .client()
        .create(
            &dir,
            &[],
            &operator.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    let back = archivist_testkit::eventually(Duration::from_secs(5), || async {
        archivist_engine::health::report().get("batcher") == Some(&None)
    })
    .await;
    assert!(
        back,
        "{:?}",
        archivist_engine::health::report().get("batcher")
    );
    shutdown.cancel();
    consumer.await.unwrap().unwrap();
}

/// Outside try 17p F8: a daemon on a chroot `init` never made (a typo) failed to
/// register with "create /daemons/X: node not exists"; it says to run `archivist init`.
#[tokio::test]
async fn registering_in_a_tree_never_initialised_says_to_run_init() {
    let config = archivist_testkit::config("engine-no-init");
    let session = archivist_engine::Session::connect(&config).await.unwrap();
    let err = member::register(
        &session,
        &Identity::named("reaper", "r-typo"),
        0,
        None,
        &CancellationToken::new(),
    )
    .await
    .expect_err("no /daemons in this tree");
    assert!(
        matches!(err, EngineError::NotInitialised { .. })
            && err.to_string().contains("archivist init"),
        "{err}"
    );
}
