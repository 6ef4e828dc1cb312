//! The operations defects of issue 17 in the admin commands, each with a test that
//! failed before: pause of a state nothing claims from (4), cancel/delete semantics said
//! plainly (3), a reason kept on a busy job (7), a counter behind its ids and a lease
//! that is expired when written flagged by fsck (1, 7), unreadable research surfaced by
//! status and export (5), and the read-only role running status and fsck (6).

use archivist_admin::actions::{self, Outcome};
use archivist_admin::{control, fsck, results, status, AdminError, AdminSettings, Silent};
use archivist_engine::config::Credentials;
use archivist_engine::lock::JobLock;
use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::{store, Session};

use crate::fixtures::{self, drive, read};

fn settings() -> AdminSettings {
    AdminSettings::default().with_actor("ops-test")
}

#[tokio::test]
async fn pause_is_refused_for_states_nothing_claims_from() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-pause").await;
    for state in [
        JobState::Leased,
        JobState::Researching,
        JobState::Failed,
        JobState::Held,
        JobState::Recorded,
    ] {
        let err = control::pause(&s, &settings(), state, "")
            .await
            .expect_err("a pause that stops nothing must be refused");
        assert!(matches!(err, AdminError::Invalid(_)), "{err}");
        assert!(err.to_string().contains("would stop nothing"), "{err}");
        assert!(
            !archivist_engine::consumer::is_paused(&s, state)
                .await
                .unwrap(),
            "{state} shows as paused"
        );
    }
    for state in [JobState::Pending, JobState::Reported] {
        assert!(
            control::pause(&s, &settings(), state, "")
                .await
                .unwrap()
                .changed
        );
    }
}

#[tokio::test]
async fn cancel_says_the_pairs_stay_unplanned_until_delete_which_is_allowed() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-cancel").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let report = actions::cancel(&s, &settings(), &job.id, None)
        .await
        .unwrap();
    assert_eq!(report.to, Some(JobState::Cancelled));
    assert!(
        report.detail.contains("not planned again until")
            && report.detail.contains(&format!("delete {}", job.id)),
        "{}",
        report.detail
    );
    let deleted = actions::delete(&s, &settings(), &job.id).await.unwrap();
    assert!(
        deleted.detail.contains("plans its unrecorded pairs again"),
        "{}",
        deleted.detail
    );
    assert!(store::exists(&s, &paths::job(&job.id))
        .await
        .unwrap()
        .is_none());
}

/// Outside tester (issue 17): `delete` of a job on a held episode said its pairs would
/// be planned again within seconds; a held episode is not planned at all.
#[tokio::test]
async fn delete_on_a_held_episode_says_the_pairs_wait_for_release() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-delete-held").await;
    let db = fixtures::database("rules-delete-held").await;
    let e = fixtures::episode(&s, 1, "One").await;
    fixtures::db_episode(&db, 1, "One").await;
    let job = fixtures::job(&s, &e, &["c000001"]).await;
    archivist_admin::control::set_catalog_hold(
        &s,
        &db,
        &archivist_admin::control::CatalogTarget::Episode(e.clone()),
        true,
        "ops",
    )
    .await
    .unwrap();
    actions::cancel(&s, &settings(), &job.id, None)
        .await
        .unwrap();
    let deleted = actions::delete(&s, &settings(), &job.id).await.unwrap();
    assert!(
        deleted.detail.contains("is held") && !deleted.detail.contains("again within seconds"),
        "{}",
        deleted.detail
    );
}

#[tokio::test]
async fn a_reason_given_to_a_busy_job_travels_with_the_request() {
    let (config, s) = archivist_testkit::fresh_tree("rules-reason").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    drive(&s, &job.id, &[JobState::Leased], "").await;
    let researcher = archivist_testkit::another_session(&config).await;
    let _lock = JobLock::try_acquire(&researcher, &job.id, "r1")
        .await
        .unwrap()
        .unwrap();
    let report = actions::cancel(&s, &settings(), &job.id, Some("wrong feed"))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Requested);
    let (stored, _) = read(&s, &job.id).await;
    assert_eq!(stored.request_reason.as_deref(), Some("wrong feed"));
}

#[tokio::test]
async fn fsck_flags_a_counter_behind_its_ids_and_repairs_it() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-counter").await;
    fixtures::job(&s, "e0000001", &["c000001"]).await;
    fixtures::job(&s, "e0000002", &["c000001"]).await;
    s.client().delete(paths::JOB_COUNTER, None).await.unwrap();
    fixtures::raw(&s, paths::JOB_COUNTER, b"").await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert!(!report.is_clean(), "{:#?}", report.faults);
    let fault = report
        .faults
        .iter()
        .find(|f| f.path == paths::JOB_COUNTER)
        .expect("a fault on /counters/jobs");
    assert!(fault.detail.contains("ids up to 2"), "{}", fault.detail);
    let repaired = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        true,
        &Silent,
    )
    .await
    .unwrap();
    assert!(repaired.is_clean(), "{:#?}", repaired.faults);
    let stat = store::exists(&s, paths::JOB_COUNTER)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stat.version, 2);
}

/// Outside tester (issue 17): a counter deleted by hand was reported clean while every
/// allocation of its ids failed. It is an error now, and `--repair` re-creates it past
/// the ids in use.
#[tokio::test]
async fn fsck_flags_a_missing_counter_and_repairs_it() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-counter-missing").await;
    fixtures::job(&s, "e0000001", &["c000001"]).await;
    fixtures::job(&s, "e0000002", &["c000001"]).await;
    s.client().delete(paths::JOB_COUNTER, None).await.unwrap();
    s.client().delete(paths::CLIP_COUNTER, None).await.unwrap();
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert!(!report.is_clean(), "{:#?}", report.faults);
    for path in [paths::JOB_COUNTER, paths::CLIP_COUNTER] {
        let fault = report
            .faults
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("no fault on {path}: {:#?}", report.faults));
        assert_eq!(fault.kind, fsck::FaultKind::CounterMissing);
        assert_eq!(fault.severity, fsck::Severity::Error);
    }
    let repaired = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        true,
        &Silent,
    )
    .await
    .unwrap();
    assert!(repaired.is_clean(), "{:#?}", repaired.faults);
    let stat = store::exists(&s, paths::JOB_COUNTER)
        .await
        .unwrap()
        .expect("re-created");
    assert_eq!(stat.version, 2);
    assert!(store::exists(&s, paths::CLIP_COUNTER)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn a_lease_that_is_expired_when_written_is_flagged_and_refused() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-negative").await;
    let job = fixtures::job_with_lease(&s, "e0000001", &["c000001"], -600_000).await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    let fault = report
        .faults
        .iter()
        .find(|f| f.path == paths::lease(&job.id) && f.detail.contains("positive"))
        .unwrap_or_else(|| panic!("fsck is silent on a negative lease: {:#?}", report.faults));
    assert_eq!(fault.kind, fsck::FaultKind::LeaseInvalid);
    // retry/release refuse to write one.
    let failed = fixtures::failed_job(&s, "e0000002", "x").await;
    let err = actions::retry(
        &s,
        &settings().with_lease_duration(std::time::Duration::ZERO),
        &failed.id,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("positive"), "{err}");
    assert_eq!(read(&s, &failed.id).await.0.status, JobState::Failed);
}

/// Outside 17d finding 11: `retry --lease-duration-s 1` was accepted ("fresh lease of
/// 1 s") under a planner whose work-item TTL is 60 s, and the job was expired within
/// seconds; a lease that does not outlast the TTL is now refused, naming the TTL, and
/// nothing is written. Release is held to the same rule.
#[tokio::test]
async fn a_fresh_lease_shorter_than_the_work_item_ttl_is_refused_naming_the_ttl() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-short-lease").await;
    let failed = fixtures::failed_job(&s, "e0000001", "x").await;
    let before = fixtures::lease_of(&s, &failed.id).await;
    let short = settings()
        .with_lease_duration(std::time::Duration::from_secs(1))
        .with_work_item_ttl(std::time::Duration::from_secs(60));
    let err = actions::retry(&s, &short, &failed.id).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("work-item TTL (60 s)") && text.contains("--lease-duration-s 1 s"),
        "{text}"
    );
    assert_eq!(read(&s, &failed.id).await.0.status, JobState::Failed);
    assert_eq!(
        fixtures::lease_of(&s, &failed.id).await,
        before,
        "nothing written"
    );
    let ok = settings()
        .with_lease_duration(std::time::Duration::from_secs(61))
        .with_work_item_ttl(std::time::Duration::from_secs(60));
    actions::retry(&s, &ok, &failed.id).await.unwrap();
    assert_eq!(read(&s, &failed.id).await.0.status, JobState::Pending);
}

/// Outside 17g finding 2: `retry`/`release --lease-duration-s` was checked against the
/// CLI's own TTL (300 s by default), not the running planner's: a valid 100 s lease
/// was refused under a 60 s planner, and a 600 s one accepted under a 900 s planner
/// (then expired as "work-item TTL passed"). The planners publish their TTL in their
/// `/daemons/{name}` record; the CLI checks against the longest, and says when it falls
/// back to its own.
#[tokio::test]
async fn a_fresh_lease_is_checked_against_the_running_planners_ttl() {
    use archivist_engine::member::{self, Identity};
    let (config, s) = archivist_testkit::fresh_tree("rules-published-ttl").await;
    let first = fixtures::failed_job(&s, "e0000001", "x").await;
    let second = fixtures::failed_job(&s, "e0000002", "x").await;
    let third = fixtures::failed_job(&s, "e0000003", "x").await;
    let cli = |lease_s| settings().with_lease_duration(std::time::Duration::from_secs(lease_s));
    // No planner publishes a TTL: the CLI's own (300 s), saying so.
    let err = actions::retry(&s, &cli(100), &first.id).await.unwrap_err();
    assert!(
        err.to_string().contains("work-item TTL (300 s)")
            && err
                .to_string()
                .contains("no running planner publishes its TTL"),
        "{err}"
    );
    let planners = archivist_testkit::another_session(&config).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let publish = |name: &str, ttl_ms: i64| {
        let identity = Identity::named("planner", name);
        let mut record = member::record(&identity, 0, None);
        record.work_item_ttl_ms = Some(ttl_ms);
        (identity, record)
    };
    let (short, record) = publish("p-short", 60_000);
    let _short = member::register_record(&planners, &short, &record, &shutdown)
        .await
        .unwrap()
        .expect("registered");
    // A 60 s planner: a 100 s lease is valid.
    let done = actions::retry(&s, &cli(100), &first.id).await.unwrap();
    assert_eq!(done.outcome, Outcome::Done);
    assert!(!done.detail.contains("this CLI"), "{}", done.detail);
    assert_eq!(read(&s, &first.id).await.0.status, JobState::Pending);
    // A 900 s planner joins: the lease must outlast the longest TTL in force.
    let (long, record) = publish("p-long", 900_000);
    let _long = member::register_record(&planners, &long, &record, &shutdown)
        .await
        .unwrap()
        .expect("registered");
    let err = actions::retry(&s, &cli(600), &second.id).await.unwrap_err();
    assert!(
        err.to_string().contains("work-item TTL (900 s)")
            && err.to_string().contains("running planner p-long"),
        "{err}"
    );
    assert_eq!(read(&s, &second.id).await.0.status, JobState::Failed);
    actions::retry(&s, &cli(901), &second.id).await.unwrap();
    drop((_short, _long));
    drop(planners);
    // Gone with their session: the CLI falls back and says so in the report.
    let gone = archivist_testkit::eventually(std::time::Duration::from_secs(20), || async {
        store::children(&s, paths::DAEMONS)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    assert!(
        gone,
        "the planners' registrations should go with their session"
    );
    let done = actions::retry(&s, &cli(301), &third.id).await.unwrap();
    assert!(
        done.detail.contains("checked against this CLI's"),
        "{}",
        done.detail
    );
}

#[tokio::test]
async fn unreadable_research_is_named_by_status() {
    // Status reads the research archive from the database (issue 22), a page at a
    // time: the record that does not parse there is named, the others counted.
    let (_c, s) = archivist_testkit::fresh_tree("rules-unreadable").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let good = fixtures::episode(&s, 1, "One").await;
    let bad = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::research(&s, &good, "j0000000042", &[1], &[(1, 3.0, 0.9)]).await;
    fixtures::research(&s, &bad, "j0000000043", &[1], &[]).await;
    archivist_db::testing::damage_research_runs(&db, &bad)
        .await
        .unwrap();
    let settings = AdminSettings {
        batch_size: 1,
        ..AdminSettings::default()
    };
    let progress = status::research_progress(&s, &db, &settings, None, &Silent)
        .await
        .unwrap();
    assert_eq!(
        progress
            .unreadable
            .iter()
            .map(|u| u.path.as_str())
            .collect::<Vec<_>>(),
        [archivist_db::research::place(&bad)]
    );
    assert_eq!(
        (
            progress.researched_pairs,
            progress.found_pairs,
            progress.episodes_with_research
        ),
        (1, 1, 1)
    );
}

/// `status` shows the episodes pinned to a rendition and those whose server started
/// serving other audio, and `results --episode` each rendition with the runs measured
/// on it (issue 23), from the database's renditions.
#[tokio::test]
async fn status_and_results_show_pinned_and_changed_renditions() {
    use archivist_db::renditions::{self, Rendition};
    let (_c, s) = archivist_testkit::fresh_tree("rules-renditions").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let one = fixtures::episode(&s, 1, "One").await;
    let two = fixtures::episode(&s, 2, "Two").await;
    let rendition = |episode: &str, sha: char| Rendition {
        episode: episode.into(),
        sha256: sha.to_string().repeat(64),
        bytes: 100,
        duration_s: Some(60.0),
        fetched_at: time::OffsetDateTime::now_utc(),
        url: format!("http://h/{episode}.mp3"),
        final_url: format!("http://h/{episode}.mp3"),
        etag: None,
        last_modified: None,
    };
    let counts = |p: status::ResearchProgress| {
        (
            p.renditions.pinned,
            p.renditions.changed,
            p.renditions.serving_other,
        )
    };
    let before = status::research_progress(&s, &db, &AdminSettings::default(), None, &Silent)
        .await
        .unwrap();
    assert_eq!(counts(before), (0, 0, 0));
    for r in [
        rendition(&one, 'a'),
        rendition(&two, 'b'),
        rendition(&two, 'c'),
    ] {
        renditions::record(&db, &r).await.unwrap();
        // Sightings are ordered by their millisecond.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    renditions::record_run(&db, &two, "j0000000007", &"c".repeat(64), true)
        .await
        .unwrap();
    let after = status::research_progress(&s, &db, &AdminSettings::default(), None, &Silent)
        .await
        .unwrap();
    // Two's server served 'c' last, not its pin 'b'.
    assert_eq!(counts(after), (2, 1, 1));
    // Then it went back to the pin (a `304` naming it): changed once, serving the pin.
    assert!(renditions::saw(&db, &two, &"b".repeat(64), None)
        .await
        .unwrap());
    let back = status::research_progress(&s, &db, &AdminSettings::default(), None, &Silent)
        .await
        .unwrap();
    assert_eq!(counts(back), (2, 1, 0));
    let lines = results::episode_results(&db, &two)
        .await
        .unwrap()
        .renditions;
    let seen: Vec<(char, bool, Vec<String>)> = lines
        .iter()
        .map(|l| (l.sha256.chars().next().unwrap(), l.pinned, l.jobs.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            ('b', true, vec![]),
            ('c', false, vec!["j0000000007".to_string()])
        ]
    );
}

/// Each exported row names the audio its run researched (issue 23): the first 12 hex
/// digits of the run's rendition, in every format and in `results`; runs stored before
/// renditions were recorded have none.
#[tokio::test]
async fn each_exported_row_names_the_rendition_its_run_researched() {
    use archivist_admin::export::{csv_line, CSV_HEADER};
    let (_c, s) = archivist_testkit::fresh_tree("rules-export-renditions").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let one = fixtures::episode(&s, 1, "One").await;
    let two = fixtures::episode(&s, 2, "Two").await;
    let three = fixtures::episode(&s, 3, "Three").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    fixtures::research(&s, &one, "j0000000011", &[1, 2], &[(1, 3.0, 0.9)]).await;
    fixtures::research(&s, &two, "j0000000012", &[1, 2], &[(2, 7.5, 0.8)]).await;
    fixtures::research(&s, &three, "j0000000013", &[1], &[]).await;
    let (a, b) = ("a1".repeat(32), "b2".repeat(32));
    archivist_db::renditions::record_run(&db, &one, "j0000000011", &a, true)
        .await
        .unwrap();
    archivist_db::renditions::record_run(&db, &two, "j0000000012", &b, true)
        .await
        .unwrap();
    // A run of another episode and another job of the episode: not these rows'.
    archivist_db::renditions::record_run(&db, &two, "j0000000099", &a, true)
        .await
        .unwrap();
    let settings = AdminSettings {
        batch_size: 2,
        ..AdminSettings::default()
    };
    let rows = results::export(&db, &settings, &Silent).await.unwrap().rows;
    let seen: Vec<(String, String, bool, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.episode.clone(),
                r.clip.clone(),
                r.found,
                r.rendition.clone(),
            )
        })
        .collect();
    let short = |x: &str| Some(x[..12].to_string());
    assert_eq!(
        seen,
        vec![
            (one.clone(), "c000001".into(), true, short(&a)),
            (one.clone(), "c000002".into(), false, short(&a)),
            (two.clone(), "c000001".into(), false, short(&b)),
            (two.clone(), "c000002".into(), true, short(&b)),
            (three.clone(), "c000001".into(), false, None),
        ]
    );
    assert!(CSV_HEADER.ends_with(",error,rendition"));
    assert!(
        csv_line(&rows[0]).ends_with(",a1a1a1a1a1a1"),
        "{}",
        csv_line(&rows[0])
    );
    assert!(csv_line(&rows[4]).ends_with(','), "{}", csv_line(&rows[4]));
    let json = serde_json::to_value(&rows[2]).unwrap();
    assert_eq!(json["rendition"], "b2b2b2b2b2b2");
    let by_episode = results::episode_results(&db, &two).await.unwrap().rows;
    assert!(by_episode.iter().all(|r| r.rendition == short(&b)));
}

/// Research stored in the database that no longer parses: `export` and `results --clip`
/// (which read the archive from the database since issue 22e) fail with an error naming
/// the episode, never rows that leave it out silently (issue 17's rule).
#[tokio::test]
async fn unreadable_research_fails_export_and_results_for_a_clip_naming_it() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-unreadable-db").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let good = fixtures::episode(&s, 1, "One").await;
    let bad = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::research(&s, &good, "j0000000042", &[1], &[(1, 3.0, 0.9)]).await;
    fixtures::research(&s, &bad, "j0000000043", &[1], &[]).await;
    assert_eq!(
        archivist_db::testing::damage_research_runs(&db, &bad)
            .await
            .unwrap(),
        1
    );
    let err = results::export(&db, &AdminSettings::default(), &Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            archivist_admin::AdminError::Db(archivist_db::DbError::Corrupt { .. })
        ) && err.to_string().contains(&bad),
        "{err}"
    );
    let err = results::clip_results(&db, &AdminSettings::default(), "c000001", &Silent)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&bad), "{err}");
}

/// Outside tester (issue 17): the manual pause docs/operations.md gives
/// (`create .../control/pause/pending "by: ops"`) was flagged by fsck as unparsable
/// (missing `at`). `at` is optional: the documented record is clean and pauses.
#[tokio::test]
async fn the_documented_manual_pause_is_clean() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-pause-by-hand").await;
    fixtures::raw(&s, &paths::pause(JobState::Pending), b"by: ops").await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert!(report.is_clean(), "{:#?}", report.faults);
    let (record, _) = store::read::<archivist_engine::schema::records::PauseRecord>(
        &s,
        &paths::pause(JobState::Pending),
    )
    .await
    .unwrap()
    .expect("pause");
    assert_eq!(record.by, "ops");
    assert_eq!(record.at, None);
}

#[tokio::test]
async fn the_read_only_role_runs_status_and_fsck() {
    let base = archivist_testkit::config("rules-reader");
    let daemons = base
        .clone()
        .with_credentials(Credentials::parse("archivist:s3cret"))
        .with_reader(Credentials::parse("ops:look"));
    let s = Session::connect(&daemons).await.unwrap();
    archivist_engine::tree::init(&s, "test").await.unwrap();
    let e = fixtures::episode(&s, 1, "One").await;
    fixtures::job(&s, &e, &["c000001"]).await;
    // A daemon stamps the clock (the planner does every round).
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();

    let reader = Session::connect(&base.with_credentials(Credentials::parse("ops:look")))
        .await
        .unwrap();
    let report = status::status(
        &reader,
        &archivist_testkit::db::tree_database(reader.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .expect("status must not write");
    assert_eq!(report.jobs.get(&JobState::Pending), Some(&1));
    assert!(report.now_ms > 0);
    let checked = fsck::fsck(
        &reader,
        &archivist_testkit::db::tree_database(reader.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .expect("fsck without --repair must not write");
    assert!(checked.nodes > 0);
}

/// Outside 17d finding 16c: a job locked by a persistent (hand-made) lock was refused
/// with "it is locked by ghost (session 0x0, ...)" and nothing more; the refusal now
/// says the lock never goes by itself and which node to delete.
#[tokio::test]
async fn a_refusal_for_a_hand_made_lock_says_it_never_goes_and_what_to_delete() {
    let (_c, s) = archivist_testkit::fresh_tree("rules-ghost-lock").await;
    let failed = fixtures::failed_job(&s, "e0000001", "x").await;
    let path = paths::job_lock(&failed.id);
    fixtures::raw(
        &s,
        &path,
        b"schema: 1\nowner: ghost\nsession: '0x0'\nsince: 2026-11-24T08:00:00Z\n",
    )
    .await;
    let err = actions::retry(&s, &settings(), &failed.id)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("persistent lock made by hand") && err.contains(&path),
        "{err}"
    );
    assert_eq!(read(&s, &failed.id).await.0.status, JobState::Failed);
}

/// Outside 17g finding 3: `fsck` checked the job counter only against the ids left in
/// ZooKeeper, while the research archive keeps the ids of jobs the reaper deleted; a
/// counter behind those was "clean" and `--repair` stopped short of them. On each
/// database backend.
#[tokio::test]
async fn fsck_flags_a_job_counter_behind_the_research_archive_and_repairs_past_it() {
    for (_c, s, db) in archivist_testkit::db::fresh_stores("rules-counter-archive").await {
        fixtures::job(&s, "e0000001", &["c000001"]).await;
        archivist_db::research::update(&db, "e0000002", |r| {
            r.runs.push(archivist_engine::schema::records::ResearchRun {
                job: paths::job_id(9),
                researcher: "r-old".into(),
                at: time::OffsetDateTime::UNIX_EPOCH,
                clips: [1].into_iter().collect(),
            });
        })
        .await
        .unwrap();
        let report = fsck::fsck(&s, &db, &AdminSettings::default(), false, &Silent)
            .await
            .unwrap();
        let fault = report
            .faults
            .iter()
            .find(|f| f.path == paths::JOB_COUNTER)
            .unwrap_or_else(|| panic!("no fault on /counters/jobs: {:#?}", report.faults));
        assert_eq!(fault.kind, fsck::FaultKind::CounterBehind);
        assert!(
            fault.detail.contains("ids up to 9") && fault.detail.contains("j0000000009"),
            "{}",
            fault.detail
        );
        let repaired = fsck::fsck(&s, &db, &AdminSettings::default(), true, &Silent)
            .await
            .unwrap();
        // (The archive's episode is in no catalog here: that fault is fsck's research
        // check's, with no repair; the counter is what this test is about.)
        assert!(
            repaired
                .faults
                .iter()
                .all(|f| f.path != paths::JOB_COUNTER || f.repaired),
            "{:#?}",
            repaired.faults
        );
        let stat = store::exists(&s, paths::JOB_COUNTER)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stat.version, 9, "{:?}", db.backend());
        // `init` never leaves the counter behind the archive either.
        s.client().delete(paths::JOB_COUNTER, None).await.unwrap();
        let archived = archivist_engine::counter::Archived::from_highest_job(
            archivist_db::research::highest_job(&db)
                .await
                .unwrap()
                .as_deref(),
        );
        let known = archivist_engine::tree::FromDatabase {
            archived,
            deployment: None,
        };
        archivist_engine::tree::init_past(&s, "test", &known)
            .await
            .unwrap();
        let stat = store::exists(&s, paths::JOB_COUNTER)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stat.version, 9);
    }
}

/// Outside 17g finding 7: `fsck` said nothing about a running job whose lease was
/// deleted by hand. It names the job and what to do (a warning: the planner counts its
/// pairs as leased while the lock is held).
#[tokio::test]
async fn fsck_names_a_running_job_without_a_lease() {
    let (config, s) = archivist_testkit::fresh_tree("rules-running-no-lease").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    drive(&s, &job.id, &[JobState::Leased], "").await;
    let researcher = archivist_testkit::another_session(&config).await;
    let _lock = JobLock::try_acquire(&researcher, &job.id, "r1")
        .await
        .unwrap()
        .unwrap();
    let _ = s.client().delete(&paths::lease(&job.id), None).await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    let fault = report
        .faults
        .iter()
        .find(|f| f.kind == fsck::FaultKind::RunningWithoutLease)
        .unwrap_or_else(|| panic!("no running_without_lease: {:#?}", report.faults));
    assert_eq!(fault.job.as_deref(), Some(job.id.as_str()));
    assert_eq!(fault.severity, fsck::Severity::Warning);
    assert!(
        fault
            .detail
            .contains(&format!("archivist cancel {}", job.id)),
        "{}",
        fault.detail
    );
}

/// Outside 17i G6: `/meta` overwritten with garbage stopped every admin command, fsck
/// too, and `init` said "already initialised" and repaired nothing. fsck runs and names
/// it; `init` rewrites it; a newer schema is never rewritten.
#[tokio::test]
async fn a_damaged_meta_is_named_by_fsck_and_rewritten_by_init() {
    use archivist_engine::tree;
    let (_c, s) = archivist_testkit::fresh_tree("rules-meta-garbage").await;
    s.client()
        .set_data(paths::META, b"garbage: [unclosed", None)
        .await
        .unwrap();
    assert!(tree::check_initialised(&s).await.is_err());
    tree::check_present(&s)
        .await
        .expect("fsck may run on a tree whose /meta is damaged");
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let report = fsck::fsck(&s, &db, &AdminSettings::default(), false, &Silent)
        .await
        .unwrap();
    let meta = report
        .faults
        .iter()
        .find(|f| f.path == paths::META)
        .unwrap_or_else(|| panic!("/meta not named: {:#?}", report.faults));
    assert!(meta.detail.contains("archivist init"), "{meta:?}");
    let init = tree::init(&s, "test").await.unwrap();
    assert!(init.meta_rewritten.is_some(), "{init:?}");
    tree::check_initialised(&s)
        .await
        .expect("init rewrote /meta");
    // A newer schema is left for an upgrade of archivist.
    s.client()
        .set_data(paths::META, b"schema: 99\n", None)
        .await
        .unwrap();
    assert!(tree::check_present(&s).await.is_err());
    let init = tree::init(&s, "test").await.unwrap();
    assert!(init.meta_rewritten.is_none());
}
