use std::time::Duration;

use archivist_admin::jobs::{self, JobFilter};
use archivist_admin::{results, status, tree, AdminSettings, Silent};
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::JobState;

use crate::fixtures::{self, drive};

#[tokio::test]
async fn status_counts_researchers_load_leases_and_research_progress() {
    let (config, s) = archivist_testkit::fresh_tree("admin-status").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    let e2 = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    let researcher = archivist_testkit::another_session(&config).await;
    let _membership = member::register(
        &researcher,
        &Identity::named("researcher", "r1"),
        3,
        None,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap();

    let oldest = fixtures::job(&s, &e1, &["c000001"]).await;
    let working = fixtures::job(&s, &e2, &["c000001", "c000002"]).await;
    drive(
        &s,
        &working.id,
        &[JobState::Leased, JobState::Researching],
        "",
    )
    .await;
    let _short = fixtures::job_with_lease(&s, &e2, &["c000002"], 1).await;
    fixtures::research(&s, &e1, "j0000000099", &[1, 2, 7], &[(1, 12.5, 0.9)]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    // `status` reads ZooKeeper's clock as the daemons last stamped it (it writes
    // nothing); the planner and the reaper stamp it every round.
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();

    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        true,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(report.researchers.len(), 1);
    let r1 = &report.researchers[0];
    assert_eq!((r1.name.as_str(), r1.slots, r1.load), ("r1", 3, 1));
    assert_eq!(r1.jobs, vec![working.id.clone()]);
    assert_eq!(report.slots, 3);
    let active: Vec<_> = report
        .active_jobs
        .iter()
        .map(|j| (j.job.as_str(), j.episode.as_str(), j.state, j.clips))
        .collect();
    assert_eq!(
        active,
        vec![(working.id.as_str(), e2.as_str(), JobState::Researching, 2)]
    );
    assert_eq!(report.jobs[&JobState::Pending], 2);
    assert_eq!(report.jobs[&JobState::Researching], 1);
    assert_eq!((report.leases.active, report.leases.expired), (2, 1));
    assert_eq!((report.catalog.episodes, report.catalog.clips), (2, 2));
    // Clip 7 is not in the catalog: 2 of 2 x 2 pairs researched.
    assert_eq!(
        (
            report.research.researched_pairs,
            report.research.total_pairs,
            report.research.found_pairs
        ),
        (2, 4, 1)
    );
    assert!((report.research.fraction - 0.5).abs() < 1e-9);
    let per = report.research.per_episode.as_ref().unwrap();
    assert_eq!(
        per.iter()
            .map(|p| (p.episode.as_str(), p.researched))
            .collect::<Vec<_>>(),
        vec![(e1.as_str(), 2), (e2.as_str(), 0)]
    );
    let waiting = report.oldest_waiting.as_ref().unwrap();
    assert_eq!(waiting.job, oldest.id);
    assert!(waiting.waiting_ms >= 0);
}

#[tokio::test]
async fn jobs_list_filters_and_show_tells_everything() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-jobs").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let a = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let b = fixtures::failed_job(&s, "e0000002", "download failed").await;
    let settings = AdminSettings::default();
    let all = jobs::list(&s, &db, &settings, &JobFilter::default(), &Silent)
        .await
        .unwrap();
    assert_eq!(
        all.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec![a.id.as_str(), b.id.as_str()]
    );
    let failed = jobs::list(
        &s,
        &db,
        &settings,
        &JobFilter {
            state: Some(JobState::Failed),
            episode: None,
        },
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(
        failed
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>(),
        vec![b.id.as_str()]
    );
    let by_episode = jobs::list(
        &s,
        &db,
        &settings,
        &JobFilter {
            state: None,
            episode: Some("e0000001".into()),
        },
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(by_episode.jobs.len(), 1);
    fixtures::raw(&s, "/jobs/j0000000077", b"status: [broken").await;
    let with_bad = jobs::list(&s, &db, &settings, &JobFilter::default(), &Silent)
        .await
        .unwrap();
    assert_eq!(with_bad.unreadable.len(), 1);

    fixtures::raw(
        &s,
        &format!("/reports/{}-c000001", b.id),
        b"{{ not a report",
    )
    .await;
    let detail = jobs::show(&s, &settings, &b.id).await.unwrap();
    assert_eq!(detail.job.status, JobState::Failed);
    assert_eq!(detail.queued_in, vec![JobState::Failed]);
    assert!(detail.lock.is_none());
    let lease = detail.lease.as_ref().expect("lease");
    assert!(!lease.expired && lease.remaining_ms > 500_000);
    assert_eq!(detail.reports.len(), 1);
    assert!(detail.reports[0].error.is_some());
    assert_eq!(detail.events().len(), 4, "create + three transitions");
}

#[tokio::test]
async fn results_by_episode_and_clip_and_the_export() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-results").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    let e2 = fixtures::episode(&s, 2, "Two, \"quoted\"").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    fixtures::research(
        &s,
        &e1,
        "j0000000001",
        &[1, 2],
        &[(1, 12.5, 0.91), (1, 300.0, 0.8)],
    )
    .await;
    fixtures::research(&s, &e2, "j0000000002", &[1], &[(1, 5.0, 0.7)]).await;
    let settings = AdminSettings::default();

    let by_episode = results::episode_results(&db, &e1).await.unwrap();
    assert_eq!(
        (
            by_episode.researched,
            by_episode.found,
            by_episode.rows.len()
        ),
        (2, 1, 3)
    );
    let not_found: Vec<_> = by_episode.rows.iter().filter(|r| !r.found).collect();
    assert_eq!(not_found.len(), 1);
    assert_eq!(
        (not_found[0].clip.as_str(), not_found[0].clip_title.as_str()),
        ("c000002", "Sting")
    );

    let by_clip = results::clip_results(&db, &settings, "c000001", &Silent)
        .await
        .unwrap();
    assert_eq!(
        (
            by_clip.episodes_researched,
            by_clip.episodes_found,
            by_clip.rows.len()
        ),
        (2, 2, 3)
    );
    assert!(by_clip
        .rows
        .iter()
        .any(|r| r.episode_title == "Two, \"quoted\"" && r.at == Some(5.0)));
    let none = results::clip_results(&db, &settings, "c000002", &Silent)
        .await
        .unwrap();
    assert_eq!((none.episodes_researched, none.episodes_found), (1, 0));

    let rows = results::export(&db, &settings, &Silent).await.unwrap().rows;
    assert_eq!(rows.len(), 4);
    let csv = results::to_csv(&rows);
    assert_eq!(csv.lines().count(), 5);
    assert!(csv.contains("\"Two, \"\"quoted\"\"\""), "{csv}");
    assert!(
        csv.contains("e0000001,One,c000001,Jingle,true,12.5,0.91"),
        "{csv}"
    );
}

/// `results --episode` reads only the catalog's clips: a research record whose run names
/// clips 1-20000 (hand-edited, or clips since deleted) against a catalog of two used to
/// cost one read per number (20,106 requests; `1-999999` ran past a minute) and listed
/// 20,000 rows and "20000 clips researched" where `status` counts two.
#[tokio::test]
async fn episode_results_count_and_read_only_catalog_clips() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-results-catalog").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    let numbers: Vec<u32> = (1..=20_000).collect();
    fixtures::research(
        &s,
        &e1,
        "j0000000001",
        &numbers,
        &[(1, 12.5, 0.91), (7, 3.0, 0.8)],
    )
    .await;
    let started = std::time::Instant::now();
    let r = results::episode_results(&db, &e1).await.unwrap();
    let took = started.elapsed();
    assert_eq!(
        (
            r.researched,
            r.researched_not_in_catalog,
            r.found,
            r.rows.len()
        ),
        (2, 19_998, 1, 2),
        "{:?}",
        &r.rows[..r.rows.len().min(3)]
    );
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}

/// Issue 18: `results --clip` shows the episodes where the clip errored, instead of
/// "found in 0" with the errors hidden.
#[tokio::test]
async fn clip_results_show_errors_instead_of_hiding_them() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-results-errors").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    let e2 = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Broken").await;
    fixtures::research(&s, &e1, "j0000000001", &[1], &[]).await;
    fixtures::research(&s, &e2, "j0000000002", &[1], &[]).await;
    // The recorder stores a clip's error with the research (in the database).
    archivist_db::research::update(&db, &e1, |record| {
        record
            .errors
            .insert("c000001".into(), "clip download failed: not audio".into());
    })
    .await
    .unwrap();
    let by_clip = results::clip_results(&db, &AdminSettings::default(), "c000001", &Silent)
        .await
        .unwrap();
    assert_eq!(
        (
            by_clip.episodes_researched,
            by_clip.episodes_found,
            by_clip.episodes_errored
        ),
        (2, 0, 1)
    );
    assert_eq!(by_clip.rows.len(), 1, "the errored episode is listed");
    assert_eq!(by_clip.rows[0].episode, e1);
    assert!(by_clip.rows[0]
        .error
        .as_deref()
        .unwrap_or("")
        .contains("not audio"));
}

#[tokio::test]
async fn tree_decodes_records_and_queue_entries() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-tree").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let nodes = tree::tree(&s, &AdminSettings::default(), "/queues", &Silent)
        .await
        .unwrap();
    assert_eq!(nodes[0].path, "/queues");
    let entry = nodes
        .iter()
        .find(|n| n.path.starts_with("/queues/pending/"))
        .expect("entry");
    let decoded = entry.decoded.entry.as_ref().expect("decoded name");
    assert_eq!(
        (decoded.job.as_str(), decoded.priority),
        (job.id.as_str(), 0)
    );
    assert_eq!(decoded.curated, "2023-11-14T22:13:20Z");
    let jobs = tree::tree(&s, &AdminSettings::default(), "/jobs", &Silent)
        .await
        .unwrap();
    let node = jobs
        .iter()
        .find(|n| n.path == format!("/jobs/{}", job.id))
        .unwrap();
    assert_eq!(node.decoded.data_type.as_deref(), Some("JobRecord"));
    let data = node.decoded.data.as_ref().unwrap();
    assert_eq!(data["status"], serde_yaml::Value::from("pending"));
    assert!(tree::tree(&s, &AdminSettings::default(), "/nope", &Silent)
        .await
        .is_err());
}

#[tokio::test]
async fn status_counts_only_pending_entries_that_are_work_and_names_the_strays() {
    // Outside test 17c, defect 6: "pending 4" with one job; the planner stalled on the
    // same count. Status and planner now share the engine's rule.
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-strays").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let real = fixtures::job(&s, &e1, &["c000001"]).await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let queue = archivist_engine::schema::paths::queue(JobState::Pending);
    let orphan =
        archivist_engine::schema::queue_key::QueueEntry::new(0, 1_700_000_000_000, "j0000009999")
            .name();
    for name in ["garbage1", "zz-j0000009999", orphan.as_str()] {
        fixtures::raw(&s, &format!("{queue}/{name}"), b"").await;
    }
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(report.jobs[&JobState::Pending], 1);
    let mut strays = report.pending_strays.clone();
    strays.sort();
    let mut expected = vec![orphan, "garbage1".to_string(), "zz-j0000009999".to_string()];
    expected.sort();
    assert_eq!(strays, expected);
    assert_eq!(report.oldest_waiting.map(|w| w.job), Some(real.id));
}

#[tokio::test]
async fn status_does_not_count_a_pending_entry_whose_job_is_in_another_state() {
    // Outside test 17d, finding 3: a recorded job's entry copied into `/queues/pending`
    // showed as "pending 1" and as the oldest waiting job, while `jobs list --state
    // pending` said 0.
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-other-state").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let recorded = fixtures::job(&s, &e1, &["c000001"]).await;
    let entry = recorded.queue_entry().name();
    archivist_testkit::place_job(&s, recorded.clone(), JobState::Recorded).await;
    let waiting = fixtures::job(&s, &e1, &["c000001"]).await;
    let queue = archivist_engine::schema::paths::queue(JobState::Pending);
    fixtures::raw(&s, &format!("{queue}/{entry}"), b"").await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(report.jobs[&JobState::Pending], 1);
    assert_eq!(report.jobs[&JobState::Recorded], 1);
    assert_eq!(report.pending_strays, vec![entry]);
    assert_eq!(report.oldest_waiting.map(|w| w.job), Some(waiting.id));
}

/// `status` of the test tree now (ZooKeeper's clock stamped first).
async fn status_now(s: &archivist_engine::Session) -> status::StatusReport {
    archivist_engine::clock::zk_now_ms(s).await.unwrap();
    status::status(
        s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap()
}

/// Outside 17g finding 6: strays in `/queues/leased` and `/queues/reported` were counted
/// as jobs ("leased 2, reported 1" while `jobs list` said 0), with no note. The
/// pending rule now applies to the in-flight queues.
#[tokio::test]
async fn status_counts_only_in_flight_entries_that_are_work_and_names_the_strays() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-queue-strays").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let running = fixtures::job(&s, &e1, &["c000001"]).await;
    drive(&s, &running.id, &[JobState::Leased], "").await;
    let recorded = fixtures::job(&s, &e1, &["c000001"]).await;
    archivist_testkit::place_job(&s, recorded.clone(), JobState::Recorded).await;
    let no_job =
        archivist_engine::schema::queue_key::QueueEntry::new(0, 1_700_000_000_000, "j0000777777")
            .name();
    let copied = recorded.queue_entry().name();
    let leased = archivist_engine::schema::paths::queue(JobState::Leased);
    let reported = archivist_engine::schema::paths::queue(JobState::Reported);
    for path in [
        format!("{leased}/{no_job}"),
        format!("{leased}/{copied}"),
        format!("{reported}/{no_job}"),
        format!("{reported}/not-an-entry"),
    ] {
        fixtures::raw(&s, &path, b"").await;
    }
    let report = status_now(&s).await;
    assert_eq!(report.jobs[&JobState::Leased], 1);
    assert_eq!(report.jobs[&JobState::Reported], 0);
    let mut strays = report.queue_strays[&JobState::Leased].clone();
    strays.sort();
    let mut expected = vec![no_job.clone(), copied];
    expected.sort();
    assert_eq!(strays, expected);
    let mut strays = report.queue_strays[&JobState::Reported].clone();
    strays.sort();
    assert_eq!(strays, vec![no_job, "not-an-entry".to_string()]);
}

#[tokio::test]
async fn status_names_a_waiting_job_whose_record_does_not_decode() {
    // Outside test 17c, defect 7: shown as the oldest waiting job like any other, while
    // no daemon can claim or expire it.
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-undecodable").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let broken = fixtures::job(&s, &e1, &["c000001"]).await;
    let fine = fixtures::job(&s, &e1, &["c000001"]).await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    s.client()
        .set_data(
            &archivist_engine::schema::paths::job(&broken.id),
            b"{{{{",
            None,
        )
        .await
        .unwrap();
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    let oldest = report.oldest_waiting.clone().unwrap();
    assert_eq!(oldest.job, broken.id);
    assert!(oldest.unreadable.is_some(), "{oldest:?}");
    let named: Vec<&str> = report
        .unreadable_waiting
        .iter()
        .map(|u| u.job.as_str())
        .collect();
    assert_eq!(named, vec![broken.id.as_str()]);
    assert_ne!(broken.id, fine.id);
}

/// Outside 17d finding 5: a `leased` job hand-edited to garbage was only a count in
/// `status` ("leased 1", no "In progress" row, no word why); an undecodable job in any
/// queue outside `pending` is now named with its queue and the decode error.
#[tokio::test]
async fn status_names_a_job_outside_pending_whose_record_does_not_decode() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-undecodable-leased").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let running = fixtures::job(&s, &e1, &["c000001"]).await;
    let running = archivist_testkit::place_job(&s, running, JobState::Leased).await;
    let failed = fixtures::failed_job(&s, "e0000001", "x").await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    for job in [&running.id, &failed.id] {
        s.client()
            .set_data(
                &archivist_engine::schema::paths::job(job),
                b"garbage: [",
                None,
            )
            .await
            .unwrap();
    }
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(report.jobs[&JobState::Leased], 1);
    let mut named: Vec<(String, JobState)> = report
        .unreadable_jobs
        .iter()
        .map(|u| (u.job.clone(), u.queue))
        .collect();
    named.sort();
    let mut expected = vec![
        (running.id.clone(), JobState::Leased),
        (failed.id.clone(), JobState::Failed),
    ];
    expected.sort();
    assert_eq!(named, expected);
    assert!(report.unreadable_jobs.iter().all(|u| !u.error.is_empty()));
    assert!(report.unreadable_waiting.is_empty());
    // An undecodable lease is named as such, not counted as an expired lease (finding 17).
    archivist_testkit::write_node(
        &s,
        &archivist_engine::schema::paths::lease(&running.id),
        b"lease: [garbage",
    )
    .await;
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(report.leases.undecodable, vec![running.id.clone()]);
    assert!(report
        .leases
        .expired_leases
        .iter()
        .all(|l| l.job != running.id));
}

#[tokio::test]
async fn status_counts_a_lease_with_a_duration_that_is_not_positive_as_invalid() {
    // Outside test 17c, defect 10: `duration_ms: -5` was counted as an active lease
    // (status judges by the clock the daemons last stamped, which may be older).
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-invalid-lease").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let job = fixtures::job(&s, &e1, &["c000001"]).await;
    let path = archivist_engine::schema::paths::lease(&job.id);
    let (mut lease, _) =
        archivist_engine::store::read::<archivist_engine::schema::records::LeaseRecord>(&s, &path)
            .await
            .unwrap()
            .unwrap();
    lease.duration_ms = -5;
    // Written well after the clock's last stamp, as in the outside test.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let data = archivist_engine::store::encode(&path, &lease).unwrap();
    s.client().set_data(&path, &data, None).await.unwrap();
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(
        (report.leases.active, report.leases.invalid),
        (0, 1),
        "{:?}",
        report.leases
    );
}

/// Outside 17d finding 16d: `jobs list --episode e9999999` (no such episode) printed
/// "0 job(s)" and exited 0 where `results --episode` says the episode does not exist.
#[tokio::test]
async fn jobs_of_an_episode_that_does_not_exist_is_not_found_not_zero_jobs() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-jobs-no-episode").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    let filter = |episode: &str| JobFilter {
        episode: Some(episode.to_string()),
        ..JobFilter::default()
    };
    let err = jobs::list(
        &s,
        &db,
        &AdminSettings::default(),
        &filter("e9999999"),
        &Silent,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            archivist_admin::AdminError::NotFound {
                what: "episode",
                ..
            }
        ),
        "{err}"
    );
    // An episode that exists with no jobs is still "0 jobs".
    let none = jobs::list(&s, &db, &AdminSettings::default(), &filter(&e1), &Silent)
        .await
        .unwrap();
    assert!(none.jobs.is_empty());
}

/// Outside 17d finding 16e: with `/clock` deleted by hand, `status` refused entirely
/// ("not initialised (missing /clock)") and the daily view showed nothing; it now shows
/// the rest with a note naming `/clock` and `archivist init`.
#[tokio::test]
async fn status_without_the_clock_shows_the_rest_and_says_to_run_init() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-no-clock").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::job(&s, &e1, &["c000001"]).await;
    s.client()
        .delete(archivist_engine::schema::paths::CLOCK, None)
        .await
        .unwrap();
    let report = status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    let note = report
        .clock_note
        .clone()
        .expect("a note on the missing clock");
    assert!(
        note.contains("/clock") && note.contains("archivist init"),
        "{note}"
    );
    assert_eq!(report.jobs[&JobState::Pending], 1);
    assert_eq!(report.catalog.episodes, 1);
}

/// Outside 17h F8: a lease whose job does not exist was counted as an ordinary "active"
/// lease, with no word that its job is gone. It is now named apart.
#[tokio::test]
async fn status_names_a_lease_whose_job_does_not_exist_apart_from_the_active_ones() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-jobless-lease").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let kept = fixtures::job(&s, &e1, &["c000001"]).await;
    let gone = fixtures::job(&s, &e1, &["c000001"]).await;
    // `deleteall /jobs/J`: the job node goes, its lease stays.
    s.client()
        .delete(&archivist_engine::schema::paths::job(&gone.id), None)
        .await
        .unwrap();
    let report = status_now(&s).await;
    assert_eq!(report.leases.without_job, vec![gone.id.clone()]);
    assert_eq!(report.leases.active, 1, "{:?}", report.leases);
    assert!(report.leases.without_job.iter().all(|j| *j != kept.id));
}

/// Outside 17h F10: a hand-made copy of a pending job's entry in `/queues/held` showed as
/// "held 1" for ever (also after the job was recorded) while `jobs list --state held`
/// said 0, and a second entry of the job in `/queues/pending` made "pending 2" for one
/// job. One rule for every queue: an entry counts when it is its job's own entry in that
/// state; the others are named apart.
#[tokio::test]
async fn status_counts_a_job_once_in_its_own_queue_and_names_strays_in_every_queue() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-status-held-stray").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let waiting = fixtures::job(&s, &e1, &["c000001"]).await;
    let own = waiting.queue_entry().name();
    let duplicate =
        archivist_engine::schema::queue_key::QueueEntry::new(0, 0, waiting.id.clone()).name();
    assert_ne!(own, duplicate);
    let pending = archivist_engine::schema::paths::queue(JobState::Pending);
    let held = archivist_engine::schema::paths::queue(JobState::Held);
    fixtures::raw(&s, &format!("{pending}/{duplicate}"), b"").await;
    fixtures::raw(&s, &format!("{held}/{own}"), b"").await;
    let report = status_now(&s).await;
    assert_eq!(report.jobs[&JobState::Pending], 1, "{:?}", report.jobs);
    assert_eq!(report.jobs[&JobState::Held], 0, "{:?}", report.jobs);
    assert_eq!(report.pending_strays, vec![duplicate]);
    assert_eq!(report.queue_strays[&JobState::Held], vec![own]);
    assert_eq!(report.oldest_waiting.map(|w| w.job), Some(waiting.id));
}
