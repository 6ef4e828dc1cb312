//! The reaper: expired leases, stale work items, retention; one leader at a time.

use std::time::Duration;

use archivist_engine::lock::JobLock;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::JobState;
use archivist_engine::{jobs, store, Session};
use archivist_recorder::reaper::{sweep, LEASE_EXPIRED, TTL_PASSED};
use archivist_recorder::watcher;
use tokio_util::sync::CancellationToken;

use crate::support::{self, fast_reaper, job, lease, queues_holding, read_lease, report, research};

/// Creates an empty persistent node (a queue entry made by hand).
async fn create_empty(session: &Session, path: &str) {
    archivist_engine::ops::commit(
        session,
        &[archivist_engine::ops::Op::Create {
            path: path.to_string(),
            data: Vec::new(),
            mode: archivist_engine::ops::Mode::Persistent,
        }],
    )
    .await
    .unwrap();
}

/// One sweep of the test tree with the fast reaper settings.
async fn sweep_now(session: &Session) -> sweep::SweepReport {
    sweep::sweep(
        session,
        &support::db(session).await,
        &fast_reaper(),
        "reaper-test",
    )
    .await
    .unwrap()
}

async fn status(session: &Session, job: &JobRecord) -> Option<(JobState, Option<String>)> {
    jobs::read_optional(session, &job.id)
        .await
        .unwrap()
        .map(|(j, _)| (j.status, j.message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_expiring_mid_research_expires_the_job_and_keeps_what_was_recorded() {
    let (config, session) = archivist_testkit::fresh_tree("mid-research").await;
    let clips: Vec<u32> = (1..=10).collect();
    let j = job(&session, "e0000020", &clips, JobState::Researching).await;
    lease(&session, &j, 1_500).await;
    // The researcher holds the job's lock on its own session.
    let researcher = archivist_testkit::another_session(&config).await;
    JobLock::try_acquire(&researcher, &j.id, "researcher-test")
        .await
        .unwrap()
        .expect("researcher locks the job");
    let shutdown = CancellationToken::new();
    let recorder = {
        let s = archivist_testkit::another_session(&config).await;
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            watcher::run(&s, &support::db(&s).await, &support::settings(), shutdown).await
        })
    };
    let reaper = support::spawn_reaper(&config, fast_reaper(), "reaper-test", &shutdown);
    // Three clips reported 400 ms apart: each store extends the 1.5 s lease.
    for n in 1..=3 {
        report(
            &researcher,
            &j,
            n,
            support::occurrences_for(n * 4, 0.0),
            false,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let extended = archivist_testkit::eventually(Duration::from_secs(5), || async {
        read_lease(&session, &j.id).await.map(|(l, _)| l.extensions) == Some(3)
    })
    .await;
    assert!(extended, "every stored report should extend the live lease");
    assert_eq!(
        status(&session, &j).await.map(|s| s.0),
        Some(JobState::Researching),
        "a lease kept alive by reports must not expire"
    );
    // The researcher dies: its lock goes with its session; the lease runs out.
    drop(researcher);
    let unlocked = archivist_testkit::eventually(Duration::from_secs(15), || async {
        !archivist_testkit::locked(&session, &j.id).await
    })
    .await;
    assert!(unlocked, "the dead researcher's lock never went away");
    let expired = archivist_testkit::eventually(Duration::from_secs(20), || async {
        status(&session, &j).await.map(|s| s.0) == Some(JobState::Expired)
    })
    .await;
    shutdown.cancel();
    recorder.await.unwrap().unwrap();
    reaper.await.unwrap().unwrap();
    assert!(
        expired,
        "the reaper never expired the job: {:?}",
        status(&session, &j).await
    );
    // Its researcher died, so the reaper says so (and does not wait for the lease).
    assert_eq!(
        status(&session, &j).await.and_then(|s| s.1).as_deref(),
        Some(archivist_recorder::reaper::sweep::HOLDER_LOST)
    );
    assert_eq!(
        queues_holding(&session, &j.id).await,
        vec![JobState::Expired]
    );
    // What the planner reads: no lease, clips 1-3 researched, 4-10 plannable again.
    assert!(read_lease(&session, &j.id).await.is_none());
    let (record, _) = research(&session, "e0000020").await.unwrap();
    assert_eq!(record.researched().to_string(), "1-3");
    assert!((4..=10).all(|n| !record.is_researched(n)));
    assert!(support::reports_left(&session).await.is_empty());
}

#[tokio::test]
async fn an_expired_lease_of_a_live_researcher_goes_alone_and_late_results_still_count() {
    let (config, session) = archivist_testkit::fresh_tree("live-expired").await;
    let j = job(&session, "e0000021", &[1, 2], JobState::Leased).await;
    lease(&session, &j, 1).await;
    let researcher = archivist_testkit::another_session(&config).await;
    JobLock::try_acquire(&researcher, &j.id, "researcher-test")
        .await
        .unwrap()
        .expect("lock");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &fast_reaper(),
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(swept.leases_deleted, vec![j.id.clone()]);
    assert!(swept.lease_jobs_expired.is_empty());
    assert!(read_lease(&session, &j.id).await.is_none());
    assert_eq!(
        status(&session, &j).await.map(|s| s.0),
        Some(JobState::Leased)
    );
    // A result the live researcher sends afterwards is stored (no lease to extend).
    let name = report(&researcher, &j, 2, vec![], false).await;
    let done = archivist_recorder::store::store_reports(
        &session,
        &support::db(&session).await,
        &support::settings(),
        &j.id,
        &[name],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000002"]);
    assert!(!done.extends_lease);
    // A live lease is never touched.
    let fresh = job(&session, "e0000021", &[3], JobState::Leased).await;
    lease(&session, &fresh, 60_000).await;
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &fast_reaper(),
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(swept, Default::default());
    assert!(read_lease(&session, &fresh.id).await.is_some());
}

#[tokio::test]
async fn an_expired_job_whose_clips_were_all_recorded_says_so() {
    let (_config, session) = archivist_testkit::fresh_tree("all-recorded").await;
    let j = job(&session, "e0000025", &[1, 2], JobState::Researching).await;
    let names = vec![
        report(&session, &j, 1, vec![], false).await,
        report(&session, &j, 2, vec![], false).await,
    ];
    archivist_recorder::store::store_reports(
        &session,
        &support::db(&session).await,
        &support::settings(),
        &j.id,
        &names,
    )
    .await
    .unwrap();
    lease(&session, &j, 1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &fast_reaper(),
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(swept.lease_jobs_expired, vec![j.id.clone()]);
    assert_eq!(
        status(&session, &j).await,
        Some((
            JobState::Expired,
            Some(format!("{LEASE_EXPIRED}; all 2 clips were recorded"))
        ))
    );
}

#[tokio::test]
async fn waiting_work_items_past_their_ttl_expire_and_release_their_lease() {
    let (_config, session) = archivist_testkit::fresh_tree("ttl").await;
    let old = job(&session, "e0000022", &[1], JobState::Pending).await;
    lease(&session, &old, 60_000).await;
    let long_ttl = fast_reaper().with_work_item_ttl(Duration::from_secs(3600));
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &long_ttl,
        "reaper-test",
    )
    .await
    .unwrap();
    assert!(swept.ttl_jobs_expired.is_empty());
    assert_eq!(
        status(&session, &old).await.map(|s| s.0),
        Some(JobState::Pending)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let short_ttl = fast_reaper().with_work_item_ttl(Duration::from_millis(200));
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &short_ttl,
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(swept.ttl_jobs_expired, vec![old.id.clone()]);
    assert_eq!(
        status(&session, &old).await,
        Some((JobState::Expired, Some(TTL_PASSED.to_string())))
    );
    assert!(read_lease(&session, &old.id).await.is_none());
    assert_eq!(
        queues_holding(&session, &old.id).await,
        vec![JobState::Expired]
    );
}

#[tokio::test]
async fn retention_removes_finished_jobs_keeps_failed_and_cancelled_ones_and_all_research() {
    let (_config, session) = archivist_testkit::fresh_tree("retention").await;
    let recorded = job(&session, "e0000023", &[1], JobState::Recorded).await;
    let expired = job(&session, "e0000023", &[2], JobState::Expired).await;
    let cancelled = job(&session, "e0000023", &[3], JobState::Cancelled).await;
    let failed = job(&session, "e0000023", &[4], JobState::Failed).await;
    let name = report(
        &session,
        &recorded,
        1,
        support::occurrences_for(4, 0.0),
        false,
    )
    .await;
    archivist_recorder::store::store_reports(
        &session,
        &support::db(&session).await,
        &support::settings(),
        &recorded.id,
        &[name],
    )
    .await
    .unwrap();
    let (before, _) = research(&session, "e0000023").await.unwrap();

    let keep_all = fast_reaper().with_retention(Duration::from_secs(3600));
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &keep_all,
        "reaper-test",
    )
    .await
    .unwrap();
    assert!(swept.jobs_deleted.is_empty());

    tokio::time::sleep(Duration::from_millis(300)).await;
    let short = fast_reaper().with_retention(Duration::from_millis(200));
    let mut swept = sweep(
        &session,
        &support::db(&session).await,
        &short,
        "reaper-test",
    )
    .await
    .unwrap();
    swept.jobs_deleted.sort();
    let mut expected = vec![recorded.id.clone(), expired.id.clone()];
    expected.sort();
    assert_eq!(swept.jobs_deleted, expected);
    for gone in [&recorded, &expired] {
        assert!(status(&session, gone).await.is_none());
        assert!(queues_holding(&session, &gone.id).await.is_empty());
    }
    // Failed and cancelled jobs stay until an operator deletes them: a cancelled job
    // keeps its pairs out of planning, and the clock must not undo a cancel.
    for (kept, state) in [
        (&failed, JobState::Failed),
        (&cancelled, JobState::Cancelled),
    ] {
        assert_eq!(status(&session, kept).await.map(|s| s.0), Some(state));
        assert_eq!(queues_holding(&session, &kept.id).await, vec![state]);
    }
    let (after, _) = research(&session, "e0000023").await.unwrap();
    assert_eq!(after, before, "research must outlive its jobs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leading_reaper_acts_and_another_takes_over() {
    let (config, session) = archivist_testkit::fresh_tree("one-reaper").await;
    let first_stop = CancellationToken::new();
    let second_stop = CancellationToken::new();
    let spawn = |name: &str, stop: CancellationToken| {
        support::spawn_reaper(&config, fast_reaper(), name, &stop)
    };
    let first = spawn("reaper-one", first_stop.clone());
    let joined = archivist_testkit::eventually(Duration::from_secs(10), || async {
        store::children(&session, &paths::election("reaper"))
            .await
            .unwrap()
            .len()
            == 1
    })
    .await;
    assert!(joined);
    let second = spawn("reaper-two", second_stop.clone());
    let both = archivist_testkit::eventually(Duration::from_secs(10), || async {
        store::children(&session, &paths::election("reaper"))
            .await
            .unwrap()
            .len()
            == 2
    })
    .await;
    assert!(both);
    let reaped_by = |j: JobRecord| {
        let session = session.clone();
        async move {
            let reaped = archivist_testkit::eventually(Duration::from_secs(10), || async {
                status(&session, &j).await.map(|s| s.0) == Some(JobState::Expired)
            })
            .await;
            assert!(reaped, "job {} never expired", j.id);
            let (record, _) = jobs::read(&session, &j.id).await.unwrap();
            record
                .events
                .last()
                .map(|e| e.by.clone())
                .unwrap_or_default()
        }
    };
    let mut leaders = Vec::new();
    for _ in 0..3 {
        let j = job(&session, "e0000024", &[1], JobState::Researching).await;
        lease(&session, &j, 1).await;
        leaders.push(reaped_by(j).await);
    }
    assert_eq!(leaders, vec!["reaper-one"; 3], "only the leader reaps");
    first_stop.cancel();
    first.await.unwrap().unwrap();
    let j = job(&session, "e0000024", &[2], JobState::Researching).await;
    lease(&session, &j, 1).await;
    assert_eq!(reaped_by(j).await, "reaper-two");
    second_stop.cancel();
    second.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_researcher_died_is_expired_at_once_without_waiting_for_its_lease() {
    use archivist_recorder::reaper::sweep::HOLDER_LOST;
    let (config, session) = archivist_testkit::fresh_tree("holder-lost").await;
    let dead = job(&session, "e0000030", &[1, 2, 3], JobState::Researching).await;
    let alive = job(&session, "e0000031", &[1, 2, 3], JobState::Leased).await;
    lease(&session, &dead, 600_000).await;
    lease(&session, &alive, 600_000).await;
    let doomed = archivist_testkit::another_session(&config).await;
    JobLock::try_acquire(&doomed, &dead.id, "researcher-dead")
        .await
        .unwrap()
        .expect("lock");
    let living = archivist_testkit::another_session(&config).await;
    JobLock::try_acquire(&living, &alive.id, "researcher-alive")
        .await
        .unwrap()
        .expect("lock");

    // While its researcher lives, a job with a long lease is left alone.
    let report = sweep_now(&session).await;
    assert!(report.orphans_expired.is_empty());

    // The researcher dies: its session closes and its lock goes with it.
    drop(doomed);
    let gone = archivist_testkit::eventually(Duration::from_secs(20), || async {
        !archivist_testkit::locked(&session, &dead.id).await
    })
    .await;
    assert!(
        gone,
        "the dead researcher's lock should vanish with its session"
    );
    // Past the grace (2 x the interval, at least 1 s) the orphan is expired.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let report = sweep_now(&session).await;
    assert_eq!(report.orphans_expired, vec![dead.id.clone()]);
    assert_eq!(
        status(&session, &dead).await,
        Some((JobState::Expired, Some(HOLDER_LOST.to_string())))
    );
    assert!(
        read_lease(&session, &dead.id).await.is_none(),
        "its lease is released at once"
    );
    assert_eq!(
        status(&session, &alive).await.map(|s| s.0),
        Some(JobState::Leased)
    );
    assert!(read_lease(&session, &alive.id).await.is_some());
}

/// Outside tester (issue 17): `cancel` (or `hold`) of a job whose researcher had just
/// died wrote the request for the holder; the reaper then expired the job ("researcher
/// lost"), dropping the request and its reason, and its pairs were planned again. The
/// reaper now honours the request: `cancelled` (or `held`) with the operator's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_pending_cancel_or_hold_is_honoured_not_expired() {
    use archivist_engine::schema::records::JobRequest;
    let (config, session) = archivist_testkit::fresh_tree("holder-lost-request").await;
    let cancel = job(&session, "e0000032", &[1, 2], JobState::Researching).await;
    let hold = job(&session, "e0000033", &[1, 2], JobState::Leased).await;
    let doomed = archivist_testkit::another_session(&config).await;
    for (j, request, reason) in [
        (&cancel, JobRequest::Cancel, Some("dead-holder-cancel")),
        (&hold, JobRequest::Hold, None),
    ] {
        lease(&session, j, 600_000).await;
        JobLock::try_acquire(&doomed, &j.id, "researcher-dead")
            .await
            .unwrap()
            .expect("lock");
        // What `archivist cancel`/`hold` writes when a researcher holds the lock.
        let (mut record, version) = jobs::read(&session, &j.id).await.unwrap();
        record.request = Some(request);
        record.request_reason = reason.map(str::to_string);
        let path = paths::job(&j.id);
        archivist_engine::ops::commit(
            &session,
            &[archivist_engine::ops::Op::SetData {
                data: store::encode(&path, &record).unwrap(),
                path: path.clone(),
                version: Some(version),
            }],
        )
        .await
        .unwrap();
    }
    drop(doomed);
    let gone = archivist_testkit::eventually(Duration::from_secs(20), || async {
        !archivist_testkit::locked(&session, &cancel.id).await
    })
    .await;
    assert!(gone, "the dead researcher's lock should vanish");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    sweep::sweep(
        &session,
        &support::db(&session).await,
        &fast_reaper(),
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(
        status(&session, &cancel).await,
        Some((JobState::Cancelled, Some("dead-holder-cancel".to_string())))
    );
    assert_eq!(
        status(&session, &hold).await,
        Some((
            JobState::Held,
            Some("hold requested by an operator".to_string())
        ))
    );
    let (record, _) = jobs::read(&session, &cancel.id).await.unwrap();
    assert_eq!(record.request, None, "the request is done");
    assert_eq!(
        queues_holding(&session, &cancel.id).await,
        vec![JobState::Cancelled]
    );
    assert!(read_lease(&session, &cancel.id).await.is_none());
}

/// Outside 17g finding 1: a `leased` job whose queue entry was deleted by hand (and
/// whose researcher had let go of it) stayed `leased` for ever: the orphan rule looked
/// only at queue entries, and every expiry multi deletes the entry it leaves, so the
/// lease rule's move failed every sweep, silently. The reaper now finds jobs in no
/// queue, puts the entry back (one checked multi) and expires them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_whose_queue_entry_was_deleted_is_still_expired() {
    let (_config, session) = archivist_testkit::fresh_tree("unqueued-orphan").await;
    let orphan = job(&session, "e0000034", &[1, 2], JobState::Leased).await;
    let expired = job(&session, "e0000035", &[1], JobState::Researching).await;
    lease(&session, &orphan, 600_000).await;
    lease(&session, &expired, 1).await;
    for j in [&orphan, &expired] {
        let entry = paths::queue_entry(j.status, &j.queue_entry().name());
        archivist_engine::ops::commit(
            &session,
            &[archivist_engine::ops::Op::Delete {
                path: entry,
                version: None,
            }],
        )
        .await
        .unwrap();
        assert!(queues_holding(&session, &j.id).await.is_empty());
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let report = sweep_now(&session).await;
    let mut expired_ids = report.orphans_expired.clone();
    expired_ids.extend(report.lease_jobs_expired.clone());
    expired_ids.sort();
    assert_eq!(expired_ids, vec![orphan.id.clone(), expired.id.clone()]);
    for j in [&orphan, &expired] {
        assert_eq!(
            status(&session, j).await.map(|s| s.0),
            Some(JobState::Expired)
        );
        assert_eq!(
            queues_holding(&session, &j.id).await,
            vec![JobState::Expired]
        );
        assert!(read_lease(&session, &j.id).await.is_none());
        assert!(!archivist_testkit::locked(&session, &j.id).await);
    }
}

/// Outside 17g finding 6: stray entries in `/queues/leased` and `/queues/reported` (no
/// such job; a recorded job's entry copied there) were counted as jobs by the
/// `archivist_jobs{state}` gauge for ever, and no daemon removed them (the planner does
/// for `pending`). The reaper applies the same rule and removes the proven ones; the
/// real job's entry and an unparsable name (left to `fsck --repair`) stay.
#[tokio::test]
async fn stray_entries_in_the_in_flight_queues_are_removed() {
    use archivist_engine::schema::queue_key::QueueEntry;
    let (_config, session) = archivist_testkit::fresh_tree("reaper-strays").await;
    let running = job(&session, "e0000036", &[1], JobState::Leased).await;
    let recorded = job(&session, "e0000037", &[1], JobState::Recorded).await;
    let no_job = QueueEntry::new(0, 1_700_000_000_000, "j0000777777").name();
    let copied = recorded.queue_entry().name();
    let strays = [
        paths::queue_entry(JobState::Leased, &no_job),
        paths::queue_entry(JobState::Leased, &copied),
        paths::queue_entry(JobState::Reported, &no_job),
    ];
    let unparsable = format!("{}/not-an-entry", paths::queue(JobState::Reported));
    for path in strays.iter().chain([&unparsable]) {
        create_empty(&session, path).await;
    }
    let report = sweep_now(&session).await;
    assert_eq!(report.strays_removed, 3);
    for path in &strays {
        assert!(
            store::exists(&session, path).await.unwrap().is_none(),
            "{path} stays"
        );
    }
    assert!(store::exists(&session, &unparsable)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        queues_holding(&session, &running.id).await,
        vec![JobState::Leased]
    );
    assert_eq!(
        queues_holding(&session, &recorded.id).await,
        vec![JobState::Recorded]
    );
}

/// Outside 17g finding 8: while `pending` was paused, every waiting job expired at its
/// work-item TTL and the planner re-created it, a churn for the whole pause. The TTL
/// step (the reaper's and the planner's) expires nothing while `pending` is paused.
#[tokio::test]
async fn a_paused_queues_waiting_jobs_do_not_expire() {
    let (_config, session) = archivist_testkit::fresh_tree("ttl-paused").await;
    let waiting = job(&session, "e0000038", &[1], JobState::Pending).await;
    lease(&session, &waiting, 60_000).await;
    let pause = paths::pause(JobState::Pending);
    archivist_engine::ops::commit(
        &session,
        &[archivist_engine::ops::Op::Create {
            path: pause.clone(),
            data: b"by: ops-test\nreason: zk upgrade\n".to_vec(),
            mode: archivist_engine::ops::Mode::Persistent,
        }],
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let short_ttl = fast_reaper().with_work_item_ttl(Duration::from_millis(200));
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &short_ttl,
        "reaper-test",
    )
    .await
    .unwrap();
    assert!(swept.ttl_jobs_expired.is_empty(), "{swept:?}");
    assert_eq!(
        status(&session, &waiting).await.map(|s| s.0),
        Some(JobState::Pending)
    );
    assert!(read_lease(&session, &waiting.id).await.is_some());
    // Resumed: the TTL step runs again.
    archivist_engine::ops::commit(
        &session,
        &[archivist_engine::ops::Op::Delete {
            path: pause,
            version: None,
        }],
    )
    .await
    .unwrap();
    let swept = sweep(
        &session,
        &support::db(&session).await,
        &short_ttl,
        "reaper-test",
    )
    .await
    .unwrap();
    assert_eq!(swept.ttl_jobs_expired, vec![waiting.id.clone()]);
}

/// Outside 17h F8: a lease whose job does not exist (a running job removed with
/// `deleteall /jobs/J`, a partial restore, a lease made by hand) kept its pairs out of
/// planning until it expired, up to 30 days: the reaper never removed it. It now goes on
/// the next sweep, under proof of the job's absence (decodable or not), while the lease
/// of a job that exists stays.
#[tokio::test]
async fn a_lease_whose_job_does_not_exist_is_removed() {
    let (_config, session) = archivist_testkit::fresh_tree("reaper-jobless-lease").await;
    let kept = job(&session, "e0000039", &[1], JobState::Leased).await;
    lease(&session, &kept, 60_000).await;
    let gone = job(&session, "e0000040", &[1], JobState::Leased).await;
    lease(&session, &gone, 2_000_000_000).await;
    // `deleteall /jobs/J`: the job node goes, its lease and queue entry stay.
    session
        .client()
        .delete(&paths::job(&gone.id), None)
        .await
        .unwrap();
    let garbage = paths::lease("j0000099999");
    archivist_engine::ops::commit(
        &session,
        &[archivist_engine::ops::Op::Create {
            path: garbage.clone(),
            data: b"lease: [unclosed".to_vec(),
            mode: archivist_engine::ops::Mode::Persistent,
        }],
    )
    .await
    .unwrap();
    let report = sweep_now(&session).await;
    let mut removed = report.jobless_leases_removed.clone();
    removed.sort();
    assert_eq!(removed, vec![gone.id.clone(), "j0000099999".to_string()]);
    assert!(read_lease(&session, &gone.id).await.is_none());
    assert!(store::exists(&session, &garbage).await.unwrap().is_none());
    assert!(
        read_lease(&session, &kept.id).await.is_some(),
        "a job's own lease stays"
    );
    // The proof is atomic: asked to remove the lease of a job that exists, it fails
    // whole (the create of `/jobs/J` in its multi fails) and the lease stays.
    let (_, stat) = read_lease(&session, &kept.id).await.unwrap();
    assert!(
        !archivist_engine::lease::remove_jobless(&session, &kept.id, stat.version)
            .await
            .unwrap()
    );
    assert!(read_lease(&session, &kept.id).await.is_some());
    // The proof created nothing: no job node is left behind.
    assert!(store::exists(&session, &paths::job(&gone.id))
        .await
        .unwrap()
        .is_none());
}

/// Outside 17h F10: nothing removed a stray in `held` (a copy of a pending job's entry):
/// `status` showed a held job for ever. The reaper removes proven strays of the queues an
/// operator's move fills too (`held`, `failed`, `cancelled`), including a second entry
/// of a job in its own state, and leaves each job's own entry.
#[tokio::test]
async fn strays_and_duplicates_in_the_operators_queues_are_removed() {
    use archivist_engine::schema::queue_key::QueueEntry;
    let (_config, session) = archivist_testkit::fresh_tree("reaper-held-strays").await;
    let waiting = job(&session, "e0000041", &[1], JobState::Pending).await;
    let cancelled = job(&session, "e0000042", &[1], JobState::Cancelled).await;
    let copied = paths::queue_entry(JobState::Held, &waiting.queue_entry().name());
    let duplicate = paths::queue_entry(
        JobState::Cancelled,
        &QueueEntry::new(0, 0, cancelled.id.clone()).name(),
    );
    for path in [&copied, &duplicate] {
        create_empty(&session, path).await;
    }
    let report = sweep_now(&session).await;
    assert_eq!(report.strays_removed, 2);
    for path in [&copied, &duplicate] {
        assert!(
            store::exists(&session, path).await.unwrap().is_none(),
            "{path} stays"
        );
    }
    assert_eq!(
        queues_holding(&session, &waiting.id).await,
        vec![JobState::Pending]
    );
    assert_eq!(
        queues_holding(&session, &cancelled.id).await,
        vec![JobState::Cancelled]
    );
}

/// Outside 17i G2: a pause of `pending` longer than the lease made the reaper delete the
/// waiting jobs' leases; after `resume` none could be claimed and all were expired and
/// planned again (an operator's retry lost). A job waiting in a paused queue keeps its
/// lease: the reaper renews it (`lease::keeps_its_lease`); once resumed, it expires as
/// before.
#[tokio::test]
async fn a_waiting_job_keeps_its_lease_while_pending_is_paused() {
    let (_config, session) = archivist_testkit::fresh_tree("paused-keeps-lease").await;
    let j = job(&session, "e0000031", &[1, 2], JobState::Pending).await;
    lease(&session, &j, 1_000).await;
    archivist_testkit::write_node(&session, &paths::pause(JobState::Pending), b"").await;
    let mut renewals = 0;
    for _ in 0..4 {
        // Two lease durations in all: without renewal it expires twice over.
        tokio::time::sleep(Duration::from_millis(550)).await;
        let swept = sweep_now(&session).await;
        assert!(swept.leases_deleted.is_empty(), "{swept:?}");
        renewals += swept.leases_renewed.len();
        assert!(
            read_lease(&session, &j.id).await.is_some(),
            "the lease was deleted"
        );
    }
    assert!(renewals >= 2, "renewed {renewals} times");
    assert_eq!(
        status(&session, &j).await.map(|s| s.0),
        Some(JobState::Pending)
    );
    // Resumed: the lease is judged by its age again.
    store::delete_if_present(&session, &paths::pause(JobState::Pending))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let swept = sweep_now(&session).await;
    assert!(swept.leases_renewed.is_empty(), "{swept:?}");
    assert_eq!(swept.leases_deleted, vec![j.id.clone()]);
}

/// Outside 17i G3: while no recorder could store, a `reported` job's lease expired, the
/// reaper deleted it and the planner planned the same pairs again every lease period. A
/// `reported` job holds its answers: the reaper renews its lease until it is recorded,
/// and a recorder that comes back records it once.
#[tokio::test]
async fn a_reported_job_keeps_its_lease_until_it_is_recorded() {
    let (_config, session) = archivist_testkit::fresh_tree("reported-keeps-lease").await;
    let j = job(&session, "e0000032", &[1], JobState::Researching).await;
    let name = report(&session, &j, 1, vec![], true).await;
    support::mark_reported(&session, &j).await;
    lease(&session, &j, 1_000).await;
    let mut renewals = 0;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(550)).await;
        let swept = sweep_now(&session).await;
        assert!(swept.leases_deleted.is_empty(), "{swept:?}");
        renewals += swept.leases_renewed.len();
        let (kept, stat) = read_lease(&session, &j.id)
            .await
            .expect("the lease was deleted");
        let now = archivist_engine::clock::zk_now_ms(&session).await.unwrap();
        assert!(
            !archivist_engine::lease::is_expired(stat.mtime, kept.duration_ms, now),
            "the planner would plan the pairs again"
        );
    }
    assert!(renewals >= 2, "renewed {renewals} times");
    // The recorder comes back: the job is recorded once, its lease goes with it.
    let done = archivist_recorder::store::store_reports(
        &session,
        &support::db(&session).await,
        &support::settings(),
        &j.id,
        &[name],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000001"]);
    let (record, _) = research(&session, "e0000032").await.unwrap();
    assert_eq!(support::run_clip_counts(&record).get(&1), Some(&1));
}
