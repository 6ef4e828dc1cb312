//! Storing is idempotent, and the lease is extended only when it is live and this job's.

use std::collections::HashSet;
use std::time::Duration;

use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_recorder::store::store_reports;
use archivist_recorder::watcher;
use tokio_util::sync::CancellationToken;

use crate::support::{self, job, lease, occurrences_for, read_lease, report, research};

#[tokio::test]
async fn replayed_reports_and_duplicate_pairs_are_no_ops() {
    let (_config, session) = archivist_testkit::fresh_tree("replay").await;
    let settings = support::settings();
    let first = job(&session, "e0000001", &[4, 8], JobState::Researching).await;
    let second = job(&session, "e0000001", &[4, 8], JobState::Researching).await;

    let signalled = || async {
        archivist_engine::store::exists(&session, archivist_engine::schema::paths::SIGNAL_RESEARCH)
            .await
            .unwrap()
            .map(|s| s.version)
    };
    let before = signalled().await;
    let name = report(&session, &first, 4, occurrences_for(4, 0.25), false).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &first.id,
        std::slice::from_ref(&name),
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000004"]);
    // The database changed: /signals/research moved (the planner's wake-up).
    let bumped = signalled().await;
    assert!(
        bumped > before,
        "/signals/research did not move after a stored clip"
    );
    let (stored, version) = research(&session, "e0000001").await.unwrap();
    assert_eq!(
        stored.found["c000004"].len(),
        occurrences_for(4, 0.25).len()
    );

    // The researcher re-sends the same report (crash after creating it, say).
    let again = report(&session, &first, 4, occurrences_for(4, 0.25), false).await;
    assert_eq!(again, name);
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &first.id,
        &[again],
    )
    .await
    .unwrap();
    assert!(done.stored.is_empty());
    assert_eq!(done.already, vec!["c000004"]);
    // Another job reports the same pair with other numbers: still the first result.
    let other = report(&session, &second, 4, occurrences_for(4, 99.0), false).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &second.id,
        &[other],
    )
    .await
    .unwrap();
    assert_eq!(done.already, vec!["c000004"]);
    let (after, after_version) = research(&session, "e0000001").await.unwrap();
    assert_eq!(
        signalled().await,
        bumped,
        "a replay stored nothing and signals nothing"
    );
    assert_eq!(after, stored, "a replay changed the research record");
    assert_eq!(
        after_version, version,
        "a replay rewrote the research record"
    );
    // ZooKeeper holds no research (issue 22): the database is the archive.
    assert!(
        archivist_engine::store::exists(&session, &paths::research("e0000001"))
            .await
            .unwrap()
            .is_none(),
        "the recorder wrote /research"
    );
    assert!(support::reports_left(&session).await.is_empty());

    // Both jobs report clip 8 at once; one watcher pass stores exactly one of them.
    report(&session, &first, 8, occurrences_for(8, 0.5), false).await;
    report(&session, &second, 8, occurrences_for(8, 77.0), false).await;
    let mut bad = HashSet::new();
    let totals = watcher::pass(
        &session,
        &support::db(&session).await,
        &settings,
        &mut bad,
        &mut Default::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!((totals.stored, totals.already), (1, 1));
    let (record, _) = research(&session, "e0000001").await.unwrap();
    let counts = support::run_clip_counts(&record);
    assert_eq!(counts.get(&8), Some(&1));
    assert_eq!(counts.get(&4), Some(&1));
    let winner = record.runs.iter().find(|r| r.clips.contains(8)).unwrap();
    let salt = if winner.job == first.id { 0.5 } else { 77.0 };
    assert_eq!(
        record.found["c000008"],
        archivist_recorder::archive::compact(&occurrences_for(8, salt))
    );
    assert!(support::reports_left(&session).await.is_empty());
}

#[tokio::test]
async fn results_on_live_expired_and_revoked_leases_are_stored_and_only_the_live_one_is_extended() {
    let (_config, session) = archivist_testkit::fresh_tree("leases").await;
    let settings = support::settings();

    // Live lease: stored and extended (a write: version, extensions and mtime move).
    let live = job(&session, "e0000002", &[1, 2], JobState::Researching).await;
    lease(&session, &live, 60_000).await;
    let (_, before) = read_lease(&session, &live.id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let name = report(&session, &live, 1, vec![], false).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &live.id,
        &[name],
    )
    .await
    .unwrap();
    assert!(done.extends_lease);
    let (extended, after) = read_lease(&session, &live.id).await.unwrap();
    assert_eq!(extended.extensions, 1);
    assert_eq!(after.version, before.version + 1);
    assert!(after.mtime > before.mtime, "extension did not move mtime");

    // Final report on a live lease: stored, not extended (the close revokes it).
    let name = report(&session, &live, 2, vec![], true).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &live.id,
        &[name],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000002"]);
    assert!(!done.extends_lease);
    assert_eq!(
        read_lease(&session, &live.id).await.unwrap().1.version,
        after.version
    );

    // Expired lease (1 ms): stored, lease untouched.
    let late = job(&session, "e0000002", &[3], JobState::Researching).await;
    lease(&session, &late, 1).await;
    let (_, before) = read_lease(&session, &late.id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let name = report(&session, &late, 3, occurrences_for(4, 1.0), false).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &late.id,
        &[name],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000003"]);
    assert!(!done.extends_lease);
    let (untouched, stat) = read_lease(&session, &late.id).await.unwrap();
    assert_eq!((untouched.extensions, stat.version), (0, before.version));

    // Revoked lease (none): stored, no lease appears.
    let revoked = job(&session, "e0000002", &[5], JobState::Researching).await;
    let name = report(&session, &revoked, 5, vec![], false).await;
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &revoked.id,
        &[name],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000005"]);
    assert!(read_lease(&session, &revoked.id).await.is_none());

    let (record, _) = research(&session, "e0000002").await.unwrap();
    assert_eq!(record.researched().to_string(), "1-3,5");
    assert_eq!(record.found.len(), 1);
    assert!(support::reports_left(&session).await.is_empty());
}

#[tokio::test]
async fn an_unreadable_report_is_left_in_place_and_the_rest_are_stored() {
    let (_config, session) = archivist_testkit::fresh_tree("bad-report").await;
    let settings = support::settings();
    let j = job(&session, "e0000003", &[1, 2], JobState::Researching).await;
    let good = report(&session, &j, 1, vec![], false).await;
    let bad_name = paths::report_name(&j.id, "c000002");
    session
        .client()
        .create(
            &paths::report(&bad_name),
            b"job: [not a report",
            &session.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    let done = store_reports(
        &session,
        &support::db(&session).await,
        &settings,
        &j.id,
        &[good, bad_name.clone()],
    )
    .await
    .unwrap();
    assert_eq!(done.stored, vec!["c000001"]);
    assert_eq!(done.bad.len(), 1);
    assert!(
        done.bad[0].to_string().contains(&bad_name),
        "{}",
        done.bad[0]
    );
    assert_eq!(support::reports_left(&session).await, vec![bad_name]);
}

/// Outside tester (issue 17): reports of a failed job whose research record does not
/// decode were retried every pass, forever, logged with episode and state "unknown".
/// The job is parked once (logged with its real episode and state) and its reports wait
/// until the job changes.
#[tokio::test]
async fn reports_of_a_failed_job_that_cannot_be_stored_are_parked_not_retried_every_pass() {
    let (_config, session) = archivist_testkit::fresh_tree("parked").await;
    let settings = support::settings();
    let failed = job(&session, "e0000009", &[1], JobState::Failed).await;
    report(&session, &failed, 1, occurrences_for(1, 0.5), true).await;
    // Research stored in the database that no longer parses.
    let db = support::db(&session).await;
    archivist_db::research::update(&db, "e0000009", |r| {
        r.runs.push(archivist_engine::schema::records::ResearchRun {
            job: "j0000000777".into(),
            researcher: "r".into(),
            at: archivist_engine::clock::to_datetime(0),
            clips: [2].into_iter().collect(),
        })
    })
    .await
    .unwrap();
    archivist_db::testing::damage_research_runs(&db, "e0000009")
        .await
        .unwrap();
    let mut bad = HashSet::new();
    let mut parked = std::collections::HashMap::new();
    watcher::pass(
        &session,
        &support::db(&session).await,
        &settings,
        &mut bad,
        &mut parked,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let (_, version) = archivist_engine::jobs::read(&session, &failed.id)
        .await
        .unwrap();
    assert_eq!(
        parked.get(&failed.id),
        Some(&version),
        "parked at the version seen"
    );
    // The next pass leaves it alone; the report stays for a retry.
    watcher::pass(
        &session,
        &support::db(&session).await,
        &settings,
        &mut bad,
        &mut parked,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(parked.get(&failed.id), Some(&version));
    assert_eq!(support::reports_left(&session).await.len(), 1);
}

/// Issue 22: the database commit comes before the ZooKeeper multi. A recorder that dies
/// between the two leaves the reports in ZooKeeper; the next store writes nothing to the
/// database (every pair is in it already), runs the multi and deletes the reports. On
/// every test backend.
#[tokio::test]
async fn a_crash_between_the_database_commit_and_the_multi_replays_as_a_no_op() {
    use archivist_db::Counter;
    use archivist_recorder::store;
    for backend in archivist_testkit::db::backends() {
        let (_config, session) = archivist_testkit::fresh_tree("db-crash").await;
        let db = archivist_testkit::db::fresh_database(backend, "db-crash").await;
        let settings = support::settings();
        let j = job(&session, "e0000042", &[4, 8, 9], JobState::Researching).await;
        let mut names = Vec::new();
        for clip in [4, 8, 9] {
            names.push(report(&session, &j, clip, occurrences_for(clip, 0.5), false).await);
        }
        let mut prepared = store::prepare(&session, &j.id, &names).await.unwrap();
        assert_eq!(
            store::record_in_database(&db, &mut prepared).await.unwrap(),
            3
        );
        let seq = db.current_seq(Counter::Research).await.unwrap();
        // The crash: the multi never ran, the reports are all still there.
        assert_eq!(support::reports_left(&session).await.len(), 3);
        assert!(research(&session, "e0000042").await.is_none());

        let done = store_reports(&session, &db, &settings, &j.id, &names)
            .await
            .unwrap();
        assert_eq!(done.deleted.len(), 3);
        assert!(support::reports_left(&session).await.is_empty());
        assert_eq!(
            db.current_seq(Counter::Research).await.unwrap(),
            seq,
            "the replay wrote to the database ({backend:?})"
        );
        let record = archivist_db::research::read(&db, "e0000042")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.researched().len(), 3);
        assert!(support::run_clip_counts(&record).values().all(|n| *n == 1));
        // Clips 4 and 8 were found (support::occurrences_for), 9 was not.
        assert_eq!(
            record.found.keys().collect::<Vec<_>>(),
            ["c000004", "c000008"]
        );
        // Once more (a late duplicate): still nothing written.
        let again = report(&session, &j, 8, occurrences_for(8, 9.0), false).await;
        store_reports(&session, &db, &settings, &j.id, &[again])
            .await
            .unwrap();
        assert_eq!(db.current_seq(Counter::Research).await.unwrap(), seq);
    }
}

/// Outside 17h F2: runs merged by researcher and UTC day, so `results --episode` named
/// as the job of a clip one that never researched it (c000008 shown as found by
/// j0000000001, a job of two other clips). Stored on each backend, each clip's run names
/// its own job; a run written before (merged, naming its first job) still reads and
/// keeps its clips.
#[tokio::test]
async fn each_clips_run_names_the_job_that_researched_it_on_every_backend() {
    use archivist_db::research;
    use archivist_engine::schema::records::ReportRecord;
    use archivist_recorder::archive::merge;
    let now = time::OffsetDateTime::now_utc();
    let report = |job: &str, clip: u32| ReportRecord {
        schema: archivist_engine::schema::SCHEMA_VERSION,
        job: job.into(),
        episode: "e0000002".into(),
        clip: paths::clip_id(clip),
        researcher: "r1".into(),
        occurrences: Vec::new(),
        error: None,
        clip_stamp: None,
        episode_duration_s: 900.0,
        clip_duration_s: 1.0,
        researched_at: now,
        is_final: true,
    };
    for db in archivist_testkit::db::fresh_databases("runs-per-job").await {
        // A run as stored before: j0000000001's run also holding clip 5 of another job.
        research::update(&db, "e0000002", |record| {
            record
                .runs
                .push(archivist_engine::schema::records::ResearchRun {
                    job: paths::job_id(1),
                    researcher: "r1".into(),
                    at: now,
                    clips: [1, 2, 5].into_iter().collect(),
                });
        })
        .await
        .unwrap();
        for (job, clip) in [(34, 7), (83, 8), (34, 9)] {
            research::update(&db, "e0000002", |record| {
                merge(record, &report(&paths::job_id(job), clip), clip, now)
            })
            .await
            .unwrap();
        }
        let record = research::read(&db, "e0000002").await.unwrap().unwrap();
        let job_of = |clip: u32| {
            record
                .runs
                .iter()
                .find(|run| run.clips.contains(clip))
                .map(|run| run.job.clone())
        };
        assert_eq!(job_of(7), Some(paths::job_id(34)), "{:?}", db.backend());
        assert_eq!(job_of(8), Some(paths::job_id(83)), "{:?}", db.backend());
        assert_eq!(job_of(9), Some(paths::job_id(34)), "{:?}", db.backend());
        assert_eq!(
            job_of(5),
            Some(paths::job_id(1)),
            "the old row reads as stored"
        );
        assert_eq!(record.runs.len(), 3, "{:?}", record.runs);
    }
}
