use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use archivist_engine::consumer;
use archivist_engine::jobs;
use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_engine::transition::{LockAction, Transition};
use tokio_util::sync::CancellationToken;

use crate::support::{create, queues_holding};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_consumer_loses_its_lock_after_the_session_timeout_and_another_finishes() {
    let (config, session) = archivist_testkit::fresh_tree("sigkill").await;
    let job = create(&session, 0, 1_700_000_000_000).await;
    let mut child = archivist_testkit::child_on("child::engine_test_consumer", &config)
        .args(["pending", "600000", "1", "2000"])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn consumer");
    let lock_path = paths::job_lock(&job.id);
    let locked = archivist_testkit::eventually(Duration::from_secs(20), || async {
        store::exists(&session, &lock_path).await.unwrap().is_some()
    })
    .await;
    assert!(locked, "the consumer never took the lock");
    let killed_at = Instant::now();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let released = archivist_testkit::eventually(Duration::from_secs(20), || async {
        store::exists(&session, &lock_path).await.unwrap().is_none()
    })
    .await;
    let waited = killed_at.elapsed();
    assert!(released, "the dead consumer's lock never went away");
    assert!(
        waited >= Duration::from_millis(1000),
        "lock vanished too early: {waited:?}"
    );
    println!("lock released {waited:?} after SIGKILL (session timeout 2 s)");
    let claimed = consumer::claim_next(
        &session,
        JobState::Pending,
        "survivor",
        &HashSet::new(),
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .expect("the job is claimable again");
    assert_eq!(claimed.job.id, job.id);
    Transition::new(
        archivist_engine::transition::Role::Researcher,
        &claimed.job,
        claimed.version,
        JobState::Leased,
    )
    .lock(LockAction::Release(claimed.lock))
    .commit(&session)
    .await
    .unwrap();
    assert_eq!(
        queues_holding(&session, &job.id).await,
        vec![JobState::Leased]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_session_expires_stops_and_commits_nothing() {
    let (config, observer) = archivist_testkit::fresh_tree("expiry").await;
    let job = create(&observer, 0, 1_700_000_000_000).await;
    // Work takes 3 s; the session times out after 2 s of silence.
    let child = archivist_testkit::child_on("child::engine_test_consumer", &config)
        .args(["pending", "3000", "1", "2000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn consumer");
    let lock_path = paths::job_lock(&job.id);
    let locked = archivist_testkit::eventually(Duration::from_secs(20), || async {
        store::exists(&observer, &lock_path)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert!(locked, "the consumer never took the lock");
    // Freeze it past its session timeout: the server expires the session and its lock.
    let pid = child.id().to_string();
    Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    let expired = archivist_testkit::eventually(Duration::from_secs(20), || async {
        store::exists(&observer, &lock_path)
            .await
            .unwrap()
            .is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(expired, "the frozen consumer's lock never went away");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stdout.contains("processed"),
        "a consumer whose session expired committed stale work: {stdout}"
    );
    assert!(
        !output.status.success() && stderr.contains("session lost"),
        "the consumer must notice the expiry and stop: {stderr}"
    );
    let (stored, _) = jobs::read(&observer, &job.id).await.unwrap();
    assert_eq!(stored.status, JobState::Pending);
    assert!(
        consumer::claim_next(
            &observer,
            JobState::Pending,
            "next",
            &HashSet::new(),
            &CancellationToken::new()
        )
        .await
        .unwrap()
        .is_some(),
        "another consumer can take the job"
    );
}

#[tokio::test]
async fn a_paused_state_claims_nothing() {
    let (_config, session) = archivist_testkit::fresh_tree("paused").await;
    create(&session, 0, 1_700_000_000_000).await;
    session
        .client()
        .create(
            &paths::pause(JobState::Pending),
            b"by: test\n",
            &session.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    assert!(consumer::is_paused(&session, JobState::Pending)
        .await
        .unwrap());
}

/// Outside try 17p F2: for the whole session timeout after ZooKeeper went away, every
/// daemon answered `/readyz` ready and nothing was logged. While the connection is down
/// the daemon is not ready, naming why; once the client reconnects within the session,
/// it is ready again (the session, and the role's work, went on throughout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_is_not_ready_while_its_connection_is_down() {
    use archivist_engine::health;
    use archivist_testkit::switch::Switch;
    let (_config, direct) = archivist_testkit::fresh_tree("engine-readyz").await;
    let switch = Switch::start().await;
    let through = archivist_engine::ZkConfig::new(switch.addr.clone())
        .with_chroot(direct.chroot())
        .with_session_timeout(Duration::from_secs(20))
        .with_connect_timeout(Duration::from_secs(10));
    let name = "readyz-connection-test";
    let why = || health::report().get(name).cloned().flatten();
    let shutdown = CancellationToken::new();
    let sessions = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = sessions.clone();
    let stop = shutdown.clone();
    let daemon = tokio::spawn(async move {
        archivist_engine::daemon::supervise(&through, name, stop.clone(), move |session| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let stop = stop.clone();
            async move {
                let lost = session.lost();
                tokio::select! {
                    _ = lost.cancelled() => Err(archivist_engine::EngineError::SessionLost("test".into())),
                    _ = stop.cancelled() => Ok(()),
                }
            }
        })
        .await
    });
    assert!(
        archivist_testkit::eventually(Duration::from_secs(10), || async {
            sessions.load(std::sync::atomic::Ordering::SeqCst) == 1 && why().is_none()
        })
        .await,
        "never connected: {:?}",
        why()
    );
    switch.cut();
    assert!(
        archivist_testkit::eventually(Duration::from_secs(10), || async {
            why().is_some_and(|w| w.contains("connection lost"))
        })
        .await,
        "still ready with the connection down: {:?}",
        why()
    );
    switch.restore();
    assert!(
        archivist_testkit::eventually(Duration::from_secs(15), || async { why().is_none() }).await,
        "not ready again after reconnecting: {:?}",
        why()
    );
    assert_eq!(
        sessions.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the same session went on"
    );
    shutdown.cancel();
    daemon.await.expect("task").expect("supervise");
}
