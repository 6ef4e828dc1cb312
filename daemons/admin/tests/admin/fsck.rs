use std::time::Duration;

use archivist_admin::fsck::{self, FaultKind, FsckReport};
use archivist_admin::{AdminSettings, Silent};
use archivist_engine::lock::JobLock;
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::JobState;
use archivist_engine::store;

use archivist_testkit::queues_holding;

use crate::fixtures::{self, drive};

fn kinds(report: &FsckReport) -> Vec<(FaultKind, Option<String>)> {
    report
        .faults
        .iter()
        .map(|f| (f.kind, f.job.clone()))
        .collect()
}

async fn check(s: &archivist_engine::Session, repair: bool) -> FsckReport {
    fsck::fsck(
        s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        repair,
        &Silent,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_healthy_tree_is_clean() {
    let (_c, s) = archivist_testkit::fresh_tree("fsck-clean").await;
    let e = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let job = fixtures::job(&s, &e, &["c000001"]).await;
    drive(&s, &job.id, &[JobState::Leased], "").await;
    // Researched by a job the counter gave out: an archived id past the counter is a
    // fault (`counter_behind`).
    fixtures::research(&s, &e, &job.id, &[1], &[(1, 3.0, 0.9)]).await;
    let report = check(&s, false).await;
    assert!(
        report.is_clean() && report.faults.is_empty(),
        "{:#?}",
        report.faults
    );
    assert!(report.nodes > 30);
}

#[tokio::test]
async fn queue_faults_are_found_and_repaired() {
    let (_c, s) = archivist_testkit::fresh_tree("fsck-queues").await;
    // The clip the jobs name is in the catalog (a job naming an unknown one is a fault of
    // its own, `job_clips`).
    fixtures::clip(&s, 1, "Jingle").await;
    // An orphan entry: its job does not exist.
    let orphan = paths::queue_entry(
        JobState::Pending,
        &QueueEntry::new(0, 0, "j0000000500").name(),
    );
    fixtures::raw(&s, &orphan, b"").await;
    // A job in two queues.
    let twice = fixtures::job(&s, "e0000001", &["c000001"]).await;
    fixtures::raw(
        &s,
        &paths::queue_entry(JobState::Failed, &twice.queue_entry().name()),
        b"",
    )
    .await;
    // A job in the wrong queue only.
    let wrong = fixtures::job(&s, "e0000002", &["c000001"]).await;
    ops::commit(
        &s,
        &[
            Op::Delete {
                path: paths::queue_entry(JobState::Pending, &wrong.queue_entry().name()),
                version: None,
            },
            Op::Create {
                path: paths::queue_entry(JobState::Held, &wrong.queue_entry().name()),
                data: vec![],
                mode: Mode::Persistent,
            },
        ],
    )
    .await
    .unwrap();
    // A job in no queue.
    let lost = fixtures::job(&s, "e0000003", &["c000001"]).await;
    store::delete_if_present(
        &s,
        &paths::queue_entry(JobState::Pending, &lost.queue_entry().name()),
    )
    .await
    .unwrap();
    // A lease without its job.
    fixtures::raw(
        &s,
        &paths::lease("j0000000600"),
        &store::encode(
            "/l",
            &fixtures::lease_record("j0000000600", "e0000009", &[], 600_000),
        )
        .unwrap(),
    )
    .await;
    // A queue entry name that does not decode.
    fixtures::raw(&s, "/queues/leased/garbage", b"").await;

    let found = check(&s, false).await;
    let k = kinds(&found);
    for expected in [
        (FaultKind::OrphanQueueEntry, Some("j0000000500".to_string())),
        (FaultKind::JobInSeveralQueues, Some(twice.id.clone())),
        (FaultKind::JobInWrongQueue, Some(wrong.id.clone())),
        (FaultKind::JobNotQueued, Some(lost.id.clone())),
        (FaultKind::LeaseWithoutJob, Some("j0000000600".to_string())),
        (FaultKind::BadQueueEntryName, None),
    ] {
        assert!(k.contains(&expected), "{expected:?} not in {k:?}");
    }
    assert_eq!(found.errors, 6, "{:#?}", found.faults);
    assert!(
        store::exists(&s, &orphan).await.unwrap().is_some(),
        "fsck without --repair writes nothing"
    );

    let repaired = check(&s, true).await;
    assert_eq!(repaired.repaired, 6, "{:#?}", repaired.faults);
    assert!(repaired.is_clean());
    assert!(repaired.faults.iter().all(|f| f.repair.is_some()));
    for job in [&twice, &wrong, &lost] {
        assert_eq!(
            queues_holding(&s, &job.id).await,
            vec![JobState::Pending],
            "{}",
            job.id
        );
    }
    let again = check(&s, false).await;
    assert!(again.faults.is_empty(), "{:#?}", again.faults);
}

#[tokio::test]
async fn stale_locks_unparsable_nodes_and_overdue_leases_are_reported_not_repaired() {
    let (config, s) = archivist_testkit::fresh_tree("fsck-unsafe").await;
    let e = fixtures::episode(&s, 1, "One").await;
    let done = fixtures::recorded_job(&s, &e, &["c000001"]).await;
    store::delete_if_present(&s, &paths::lease(&done.id))
        .await
        .unwrap();
    let other = archivist_testkit::another_session(&config).await;
    let lock = JobLock::try_acquire(&other, &done.id, "zombie")
        .await
        .unwrap()
        .unwrap();
    fixtures::raw(&s, &paths::episode("e0000002"), b"title: [unclosed").await;
    archivist_engine::counter::catch_up(
        &s,
        &archivist_engine::counter::EPISODES,
        &archivist_engine::counter::Archived::NONE,
    )
    .await
    .unwrap();
    let overdue = fixtures::job_with_lease(&s, &e, &["c000001"], 1).await;
    fixtures::research(&s, "e0000077", "j0000000001", &[1, 3], &[]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let settings = AdminSettings::default().with_reaper_interval(Duration::ZERO);
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &settings,
        true,
        &Silent,
    )
    .await
    .unwrap();
    let k = kinds(&report);
    assert!(
        k.contains(&(FaultKind::StaleLock, Some(done.id.clone()))),
        "{k:?}"
    );
    assert!(k.contains(&(FaultKind::Unparsable, None)), "{k:?}");
    assert!(
        k.contains(&(FaultKind::LeaseOverdue, Some(overdue.id.clone()))),
        "{k:?}"
    );
    let research = report
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::ResearchMismatch)
        .expect("research fault");
    assert!(
        research.detail.contains("e0000077 is not in the catalog")
            && research.detail.contains("c000001, c000003"),
        "{}",
        research.detail
    );
    assert_eq!(report.repaired, 0);
    assert!(!report.is_clean());
    assert!(
        store::exists(&s, &lock.path).await.unwrap().is_some(),
        "the lock is left to an operator"
    );

    // Once its owner's session ends, the stale lock is gone.
    drop(lock);
    drop(other);
    let settled = archivist_testkit::eventually(Duration::from_secs(10), || async {
        !kinds(&check(&s, false).await)
            .iter()
            .any(|(k, _)| *k == FaultKind::StaleLock)
    })
    .await;
    assert!(settled);
}

#[tokio::test]
async fn two_records_on_one_media_url_and_a_wrong_alias_are_reported() {
    use archivist_engine::schema::records::{AliasRecord, AliasTarget, EpisodeRecord};
    use archivist_engine::schema::SCHEMA_VERSION;
    let (_c, s) = archivist_testkit::fresh_tree("fsck-catalog").await;
    // An old tree's catalog, in ZooKeeper (what fsck checks there until it is migrated).
    let e1 = fixtures::zk_episode(&s, 1, "One").await;
    let e2 = fixtures::zk_episode(&s, 2, "Two").await;
    assert!(check(&s, false).await.is_clean());
    // e2 now holds e1's media URL (what swapped feed enclosures used to leave).
    let path = paths::episode(&e1);
    let (one, _) = store::read::<EpisodeRecord>(&s, &path)
        .await
        .unwrap()
        .unwrap();
    let path2 = paths::episode(&e2);
    let (mut two, st2) = store::read::<EpisodeRecord>(&s, &path2)
        .await
        .unwrap()
        .unwrap();
    let e2_url = two.fields.media_url.clone();
    two.fields.media_url = one.fields.media_url.clone();
    ops::commit(
        &s,
        &[Op::SetData {
            path: path2.clone(),
            data: store::encode(&path2, &two).unwrap(),
            version: Some(st2.version),
        }],
    )
    .await
    .unwrap();
    // And the alias of e2's old URL still points at e2.
    let alias = AliasRecord {
        schema: SCHEMA_VERSION,
        target: AliasTarget::Episode,
        id: e2.clone(),
        key: e2_url,
    };
    let apath = paths::alias("url-00000000000000000000000000000001");
    fixtures::raw(&s, &apath, &store::encode(&apath, &alias).unwrap()).await;
    let report = check(&s, false).await;
    let found: Vec<FaultKind> = report.faults.iter().map(|f| f.kind).collect();
    assert!(found.contains(&FaultKind::SharedMediaUrl), "{found:?}");
    assert!(found.contains(&FaultKind::AliasMismatch), "{found:?}");
    assert!(!report.is_clean());
}

/// Outside testing of issue 21: a lock created by a claim whose reply was lost sat on a
/// pending job, owned by a live session that did not know it held it. fsck warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_job_locked_for_long_is_flagged() {
    let (config, s) = archivist_testkit::fresh_tree("fsck-pending-locked").await;
    let e = fixtures::episode(&s, 1, "One").await;
    let pending = fixtures::job(&s, &e, &["c000001"]).await;
    let other = archivist_testkit::another_session(&config).await;
    let settings = AdminSettings::default().with_reaper_interval(Duration::ZERO);
    let _lock = JobLock::try_acquire(&other, &pending.id, "researcher-1")
        .await
        .unwrap()
        .unwrap();
    // Just taken: a claim in progress, not a fault.
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &settings,
        true,
        &Silent,
    )
    .await
    .unwrap();
    assert!(
        !kinds(&report).contains(&(FaultKind::PendingLocked, Some(pending.id.clone()))),
        "{:?}",
        kinds(&report)
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &settings,
        true,
        &Silent,
    )
    .await
    .unwrap();
    let fault = report
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::PendingLocked)
        .unwrap_or_else(|| panic!("{:?}", kinds(&report)));
    assert_eq!(fault.job.as_deref(), Some(pending.id.as_str()));
    assert!(fault.detail.contains("researcher-1"), "{}", fault.detail);
}

/// Outside 17m L7: jobs edited by hand to name a clip twice, a clip the catalog does
/// not hold, or another waiting job's pairs passed fsck clean; they are `job_clips`
/// warnings now, naming the job and what is wrong.
#[tokio::test]
async fn a_waiting_job_naming_a_clip_twice_an_unknown_clip_or_another_jobs_pair_is_flagged() {
    let (_c, s) = archivist_testkit::fresh_tree("fsck-job-clips").await;
    let e = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    let fine = fixtures::job(&s, &e, &["c000001"]).await;
    let twice = fixtures::job(&s, "e0000002", &["c000001", "c000001"]).await;
    let unknown = fixtures::job(&s, "e0000003", &["c999999"]).await;
    let again = fixtures::job(&s, &e, &["c000001", "c000002"]).await;
    let done = fixtures::recorded_job(&s, &e, &["c000002"]).await;
    let report = check(&s, false).await;
    let of = |id: &str| -> Vec<String> {
        report
            .faults
            .iter()
            .filter(|f| f.kind == FaultKind::JobClips && f.job.as_deref() == Some(id))
            .map(|f| f.detail.clone())
            .collect()
    };
    assert!(of(&fine.id).is_empty(), "{:?}", of(&fine.id));
    assert!(
        of(&done.id).is_empty(),
        "a finished job names what it named"
    );
    assert!(
        of(&twice.id)[0].contains("names clip c000001 twice"),
        "{:?}",
        of(&twice.id)
    );
    assert!(
        of(&unknown.id)[0].contains("c999999, which the catalog does not hold"),
        "{:?}",
        of(&unknown.id)
    );
    let other = of(&again.id);
    assert!(
        other[0].contains(&format!("that job {} names too", fine.id)),
        "{other:?}"
    );
    assert!(report.is_clean(), "warnings only: {:#?}", report.faults);
}

/// Outside 17m L5: a persistent lock made by hand on a pending job got, besides its
/// `stale_lock` error, a `pending_locked` warning saying "restart that daemon" for a
/// session that does not exist. Only the error, which says what to do, is given.
#[tokio::test]
async fn a_persistent_lock_on_a_pending_job_is_one_error_not_a_restart_hint() {
    let (_config, s) = archivist_testkit::fresh_tree("fsck-persistent-lock").await;
    let e = fixtures::episode(&s, 1, "One").await;
    let pending = fixtures::job(&s, &e, &["c000001"]).await;
    fixtures::raw(
        &s,
        &paths::job_lock(&pending.id),
        b"schema: 1\nowner: r9\nsession: '0x1234'\nsince: 2026-11-24T21:00:00Z\n",
    )
    .await;
    let settings = AdminSettings::default().with_reaper_interval(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let report = fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &settings,
        false,
        &Silent,
    )
    .await
    .unwrap();
    let k = kinds(&report);
    assert!(
        k.contains(&(FaultKind::StaleLock, Some(pending.id.clone()))),
        "{k:?}"
    );
    assert!(
        !k.contains(&(FaultKind::PendingLocked, Some(pending.id.clone()))),
        "{k:?}"
    );
}

#[tokio::test]
async fn a_report_whose_job_does_not_exist_is_flagged_and_repaired() {
    // Outside test 17c, defect 8: a report left by a deleted job waited for a recorder
    // forever and fsck said clean.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-orphan-report").await;
    let live = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let kept = paths::report(&paths::report_name(&live.id, "c000001"));
    let orphan = paths::report(&paths::report_name("j0000000777", "c000003"));
    let nameless = paths::report("garbage");
    for path in [&kept, &orphan, &nameless] {
        fixtures::raw(&s, path, b"schema: 1\n").await;
    }
    let report = check(&s, false).await;
    let found: Vec<_> = report
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::ReportWithoutJob)
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(found, vec![nameless.clone(), orphan.clone()]);
    assert!(!report.is_clean());
    let repaired = check(&s, true).await;
    assert!(repaired
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::ReportWithoutJob)
        .all(|f| f.repaired));
    for path in [&orphan, &nameless] {
        assert!(store::exists(&s, path).await.unwrap().is_none(), "{path}");
    }
    assert!(store::exists(&s, &kept).await.unwrap().is_some());
    assert!(!check(&s, false)
        .await
        .faults
        .iter()
        .any(|f| f.kind == FaultKind::ReportWithoutJob));
}

#[tokio::test]
async fn a_node_a_repair_deleted_is_not_counted_as_left() {
    // Outside test 17d, finding 9: an undecodable report of no job is `unparsable` and
    // `report_without_job`; `--repair` deleted it and still said "1 error(s) left" (exit
    // 1), while a plain `fsck` right after said clean. Warnings likewise.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-gone-node").await;
    let junk = paths::report(&paths::report_name("j0000000098", "c000001"));
    fixtures::raw(&s, &junk, b"junk").await;
    let bogus = format!("{}/bogus", paths::PAUSES);
    fixtures::raw(&s, &bogus, b"").await;
    let repaired = check(&s, true).await;
    assert!(store::exists(&s, &junk).await.unwrap().is_none());
    assert!(repaired.is_clean(), "{:#?}", repaired.faults);
    assert_eq!(repaired.errors, 0);
    assert_eq!(repaired.warnings, 0, "{:#?}", repaired.faults);
    assert!(check(&s, false).await.is_clean());
}

/// A well-formed member record named `ghost`, as an operator would write by hand.
fn ghost_record(role: &str, slots: u32) -> archivist_engine::schema::records::MemberRecord {
    archivist_engine::schema::records::MemberRecord {
        schema: 1,
        role: role.to_string(),
        name: "ghost".to_string(),
        slots,
        version: "0.1.0".to_string(),
        host: "nowhere".to_string(),
        pid: 1,
        metrics: None,
        started: archivist_engine::clock::stamp_now(),
        work_item_ttl_ms: None,
    }
}

#[tokio::test]
async fn a_hand_made_persistent_registration_is_not_capacity_and_is_flagged() {
    // Outside test 17d, finding 7: `/researchers/ghost` made by hand (persistent) was
    // counted by `status` and the planner as a live researcher with 1000 slots, for
    // ever, and fsck said clean.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-ghost-member").await;
    let path = paths::researcher("ghost");
    let ghost = ghost_record("researcher", 1000);
    fixtures::raw(&s, &path, &store::encode(&path, &ghost).unwrap()).await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let status = archivist_admin::status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert!(status.researchers.is_empty(), "{:?}", status.researchers);
    assert_eq!(status.slots, 0);
    let report = check(&s, false).await;
    assert!(
        report
            .faults
            .iter()
            .any(|f| f.kind == FaultKind::MemberNotEphemeral && f.path == path),
        "{:#?}",
        report.faults
    );
    let repaired = check(&s, true).await;
    assert_eq!(repaired.warnings, 0, "{:#?}", repaired.faults);
    assert!(store::exists(&s, &path).await.unwrap().is_none());
}

#[tokio::test]
async fn hand_made_persistent_election_and_consumer_nodes_are_flagged_and_repaired() {
    // Outside 17i G1/G10: a persistent node in `/election/planner` blocked every real
    // planner for ever and fsck said clean; persistent `/consumers/pending` nodes too.
    // `status` names no leader for a role without a live candidate.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-ghost-election").await;
    let ghost = ghost_record("planner", 0);
    let election = format!(
        "{}/n_0000000000000000_0000000000",
        paths::election("planner")
    );
    let consumer = format!("{}/ghost-0x1", paths::consumers(JobState::Pending));
    fixtures::raw(&s, &election, &store::encode(&election, &ghost).unwrap()).await;
    fixtures::raw(&s, &consumer, b"").await;
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let status = archivist_admin::status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(
        status.leaders.get("planner"),
        Some(&None),
        "the ghost is not the planner's leader: {:?}",
        status.leaders
    );
    let report = check(&s, false).await;
    for path in [&election, &consumer] {
        assert!(
            report
                .faults
                .iter()
                .any(|f| f.kind == FaultKind::MemberNotEphemeral && &f.path == path),
            "{path}: {:#?}",
            report.faults
        );
    }
    let repaired = check(&s, true).await;
    assert_eq!(repaired.warnings, 0, "{:#?}", repaired.faults);
    assert!(store::exists(&s, &election).await.unwrap().is_none());
    assert!(store::exists(&s, &consumer).await.unwrap().is_none());
}

#[tokio::test]
async fn plain_fsck_reports_no_error_for_jobs_moving_while_it_reads() {
    // Outside test 17c, defect 2: on a busy tree fsck reported `job_not_queued`,
    // `job_in_wrong_queue` or `orphan_queue_entry` for jobs mid-transition (8 runs of 30
    // exited 1). Jobs move between queues here as researchers claim and hand them back.
    let (config, s) = archivist_testkit::fresh_tree("fsck-busy").await;
    let e = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(fixtures::job(&s, &e, &["c000001"]).await.id);
    }
    let mover = archivist_testkit::another_session(&config).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let moving = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut moves = 0u64;
            while !stop.is_cancelled() {
                for id in &ids {
                    drive(&mover, id, &[JobState::Leased, JobState::Pending], "").await;
                    moves += 2;
                }
            }
            moves
        }
    });
    let mut unclean = Vec::new();
    for _ in 0..30 {
        let report = check(&s, false).await;
        if !report.is_clean() {
            unclean.push(
                report
                    .faults
                    .iter()
                    .filter(|f| f.is_open_error())
                    .map(|f| format!("{:?} {}", f.kind, f.path))
                    .collect::<Vec<_>>(),
            );
        }
    }
    stop.cancel();
    let moves = moving.await.unwrap();
    assert!(moves > 100, "the jobs hardly moved ({moves} moves)");
    assert!(unclean.is_empty(), "false errors: {unclean:?}");
}

#[tokio::test]
async fn hand_made_pauses_of_states_nothing_claims_from_are_flagged_not_shown_as_paused() {
    // Outside test 17c, defect 10: `/control/pause/researching` and `/control/pause/bogus`
    // made by hand were shown as "paused" by status and fsck was silent.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-hand-made-pauses").await;
    let researching = format!("{}/researching", paths::PAUSES);
    let bogus = format!("{}/bogus", paths::PAUSES);
    for path in [&researching, &bogus] {
        fixtures::raw(&s, path, b"by: ops\nreason: test\n").await;
    }
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let status = archivist_admin::status::status(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &Silent,
    )
    .await
    .unwrap();
    assert!(status.paused.is_empty(), "{:?}", status.paused);
    let mut ignored = status.ignored_pauses.clone();
    ignored.sort();
    assert_eq!(
        ignored,
        vec!["bogus".to_string(), "researching".to_string()]
    );
    let flagged: Vec<_> = check(&s, false)
        .await
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::PauseIgnored)
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(flagged, vec![bogus.clone(), researching.clone()]);
    check(&s, true).await;
    for path in [&researching, &bogus] {
        assert!(store::exists(&s, path).await.unwrap().is_none(), "{path}");
    }
}

#[tokio::test]
async fn the_research_archive_is_checked_in_the_database() {
    // Issue 22: fsck reads research from the database, a page at a time. A record that
    // does not parse there, and one about an episode the catalog lacks, are both found
    // and named by episode, whatever ZooKeeper holds.
    let (_c, s) = archivist_testkit::fresh_tree("fsck-research-db").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let e = fixtures::episode(&s, 1, "One").await;
    let damaged = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::research(&s, &e, "j0000000042", &[1], &[(1, 3.0, 0.9)]).await;
    fixtures::research(&s, &damaged, "j0000000043", &[1], &[]).await;
    fixtures::research(&s, "e0000077", "j0000000044", &[1], &[]).await;
    archivist_db::testing::damage_research_runs(&db, &damaged)
        .await
        .unwrap();
    let settings = AdminSettings {
        batch_size: 1,
        ..AdminSettings::default()
    };
    let report = fsck::fsck(&s, &db, &settings, false, &Silent)
        .await
        .unwrap();
    let research: Vec<(FaultKind, &str)> = report
        .faults
        .iter()
        .filter(|f| f.path.starts_with("database research"))
        .map(|f| (f.kind, f.path.as_str()))
        .collect();
    assert_eq!(
        research,
        [
            (
                FaultKind::Unparsable,
                archivist_db::research::place(&damaged).as_str()
            ),
            (
                FaultKind::ResearchMismatch,
                archivist_db::research::place("e0000077").as_str()
            ),
        ],
        "{:#?}",
        report.faults
    );
    // The third error: the archive names jobs up to j0000000044, past this tree's job
    // counter (outside 17g finding 3: the counter must be past the archive's ids).
    let others: Vec<FaultKind> = report
        .faults
        .iter()
        .filter(|f| !f.path.starts_with("database research"))
        .map(|f| f.kind)
        .collect();
    assert_eq!(others, [FaultKind::CounterBehind], "{:#?}", report.faults);
    assert_eq!(report.errors, 3, "{:#?}", report.faults);
}

#[tokio::test]
async fn an_old_trees_catalog_and_research_are_migrate_then_delete_warnings() {
    // Issue 22: nothing writes or reads `/catalog/*` and `/research/*` but `archivist
    // migrate`; a tree from before keeps them until migrated. fsck says what to do,
    // as a warning (the tree is not broken).
    let (_c, s) = archivist_testkit::fresh_tree("fsck-old-tree").await;
    let e = fixtures::zk_episode(&s, 1, "One").await;
    let research = paths::research(&e);
    fixtures::raw(
        &s,
        &research,
        format!("schema: 1\nepisode: {e}\nruns: []\n").as_bytes(),
    )
    .await;
    let report = check(&s, false).await;
    let old: Vec<(&str, fsck::Severity)> = report
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::OldTreeRecord)
        .map(|f| (f.path.as_str(), f.severity))
        .collect();
    assert_eq!(
        old,
        [
            (paths::episode(&e).as_str(), fsck::Severity::Warning),
            (research.as_str(), fsck::Severity::Warning),
        ],
        "{:#?}",
        report.faults
    );
    assert!(report
        .faults
        .iter()
        .all(|f| f.kind != FaultKind::OldTreeRecord || f.detail.contains("archivist migrate")));
    assert_eq!(report.errors, 0, "{:#?}", report.faults);
}

/// Outside 17h F5: a live daemon's registration overwritten with garbage was reported
/// "unparsable ... left to an operator", with no word of whose node it is or what fixes
/// it. fsck now names the owning session, says a live owner writes it again, and its
/// repair deletes the node (a live daemon registers again at once).
#[tokio::test]
async fn an_unparsable_registration_of_a_live_session_says_what_fixes_it() {
    let (config, s) = archivist_testkit::fresh_tree("fsck-garbage-member").await;
    let owner = archivist_testkit::another_session(&config).await;
    let path = paths::researcher("r-garbage");
    owner
        .client()
        .create(
            &path,
            b"garbage: [unclosed",
            &owner.create_options(archivist_engine::zk::CreateMode::Ephemeral),
        )
        .await
        .unwrap();
    let report = check(&s, false).await;
    let fault = report
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::Unparsable && f.path == path)
        .unwrap_or_else(|| panic!("{:#?}", report.faults));
    assert!(
        fault.detail.contains(&format!("{:#x}", owner.id_number()))
            && fault.detail.contains("register again"),
        "{}",
        fault.detail
    );
    assert!(fault.repair.is_some(), "{fault:#?}");
    let repaired = check(&s, true).await;
    assert!(repaired.faults.iter().any(|f| f.path == path && f.repaired));
    assert!(store::exists(&s, &path).await.unwrap().is_none());
}
