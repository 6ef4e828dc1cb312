use archivist_admin::actions::{self, Outcome};
use archivist_admin::control::{self, CatalogTarget};
use archivist_admin::{AdminError, AdminSettings};
use archivist_engine::lock::JobLock;
use archivist_engine::ops::{self, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{JobRequest, PauseRecord};
use archivist_engine::schema::JobState;
use archivist_engine::store;
use archivist_testkit::queues_holding;

use crate::fixtures::{self, drive, failed_job, lease_of, read};

fn settings() -> AdminSettings {
    AdminSettings::default().with_actor("ops-test")
}

#[tokio::test]
async fn retry_resumes_a_failed_job_with_a_fresh_lease() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-retry").await;
    let job = failed_job(&s, "e0000001", "download failed: HTTP 404").await;
    assert_eq!(job.last_successful_status, Some(JobState::Leased));
    assert!(
        lease_of(&s, &job.id).await.is_some(),
        "the planner's lease is still there"
    );
    let report = actions::retry(
        &s,
        &settings()
            .with_lease_duration(std::time::Duration::from_secs(90))
            .with_work_item_ttl(std::time::Duration::from_secs(60)),
        &job.id,
    )
    .await
    .unwrap();
    assert_eq!(
        (report.from, report.to, report.outcome),
        (JobState::Failed, Some(JobState::Pending), Outcome::Done)
    );
    let (stored, _) = read(&s, &job.id).await;
    assert_eq!(stored.status, JobState::Pending);
    assert_eq!(stored.retry_count, 1);
    assert_eq!(stored.message, None);
    assert_eq!(
        stored.last_successful_status,
        Some(JobState::Leased),
        "retry keeps the last success"
    );
    assert_eq!(
        stored
            .events
            .last()
            .map(|e| (e.by.as_str(), e.step.as_str())),
        Some(("ops-test", "retry"))
    );
    assert_eq!(queues_holding(&s, &job.id).await, vec![JobState::Pending]);
    let lease = lease_of(&s, &job.id).await.expect("fresh lease");
    assert_eq!(
        (lease.duration_ms, lease.holder, lease.extensions),
        (90_000, None, 0)
    );
    assert_eq!(lease.clips, job.clips);
    assert!(
        !archivist_testkit::locked(&s, &job.id).await,
        "lock released"
    );
}

#[tokio::test]
async fn retry_after_the_final_report_resumes_at_reported() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-retry-reported").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    // The recorder's step failed: no lease left at all.
    drive(
        &s,
        &job.id,
        &[
            JobState::Leased,
            JobState::Researching,
            JobState::Reported,
            JobState::Failed,
        ],
        "report unusable",
    )
    .await;
    store::delete_if_present(&s, &paths::lease(&job.id))
        .await
        .unwrap();
    let report = actions::retry(&s, &settings(), &job.id).await.unwrap();
    assert_eq!(report.to, Some(JobState::Reported));
    assert_eq!(queues_holding(&s, &job.id).await, vec![JobState::Reported]);
    assert_eq!(
        lease_of(&s, &job.id).await.map(|l| l.duration_ms),
        Some(600_000)
    );
}

#[tokio::test]
async fn retry_refuses_a_job_that_is_not_failed_and_writes_nothing() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-retry-refused").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let (_, before) = read(&s, &job.id).await;
    let err = actions::retry(&s, &settings(), &job.id).await.unwrap_err();
    assert!(
        matches!(
            err,
            AdminError::Refused {
                state: JobState::Pending,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_refusal());
    assert_eq!(read(&s, &job.id).await.1, before);
    let missing = actions::retry(&s, &settings(), "j0000000999")
        .await
        .unwrap_err();
    assert!(matches!(missing, AdminError::NotFound { .. }), "{missing}");
}

#[tokio::test]
async fn an_action_on_a_job_that_changed_after_it_was_read_is_refused() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-cas").await;
    let job = failed_job(&s, "e0000001", "matching failed").await;
    let seen = actions::look(&s, &job.id).await.unwrap();
    // Someone else writes the job between the operator's read and the action.
    let path = paths::job(&job.id);
    let mut changed = seen.job.clone();
    changed.message = Some("edited meanwhile".into());
    ops::commit(
        &s,
        &[Op::SetData {
            data: store::encode(&path, &changed).unwrap(),
            path: path.clone(),
            version: Some(seen.version),
        }],
    )
    .await
    .unwrap();
    for result in [
        actions::retry_seen(&s, &settings(), &seen).await,
        actions::cancel_seen(&s, &settings(), &seen, None).await,
        actions::delete_seen(&s, &settings(), &seen).await,
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, AdminError::Moved { .. }), "{err}");
        assert!(err.to_string().contains("changed meanwhile"), "{err}");
    }
    let (stored, version) = read(&s, &job.id).await;
    assert_eq!(
        (stored.status, stored.message.as_deref(), version),
        (JobState::Failed, Some("edited meanwhile"), seen.version + 1)
    );
    assert!(
        !archivist_testkit::locked(&s, &job.id).await,
        "the admin's lock was released"
    );
    // Looking again and retrying works.
    assert_eq!(
        actions::retry(&s, &settings(), &job.id)
            .await
            .unwrap()
            .outcome,
        Outcome::Done
    );
}

#[tokio::test]
async fn a_locked_failed_job_is_not_retried() {
    let (config, s) = archivist_testkit::fresh_tree("admin-locked").await;
    let job = failed_job(&s, "e0000001", "x").await;
    let other = archivist_testkit::another_session(&config).await;
    let _lock = JobLock::try_acquire(&other, &job.id, "reaper-1")
        .await
        .unwrap()
        .unwrap();
    let err = actions::retry(&s, &settings(), &job.id).await.unwrap_err();
    assert!(err.to_string().contains("locked by reaper-1"), "{err}");
    assert_eq!(read(&s, &job.id).await.0.status, JobState::Failed);
}

/// A session of `config`'s tree through a [`LostReply`] proxy (a long session timeout:
/// the session outlives a cut by far), and the proxy.
async fn through_proxy(
    config: &archivist_engine::ZkConfig,
) -> (
    archivist_testkit::lost_reply::LostReply,
    archivist_engine::Session,
) {
    through_proxy_timing_out(config, std::time::Duration::from_secs(30)).await
}

/// [`through_proxy`] with a session of `timeout`.
async fn through_proxy_timing_out(
    config: &archivist_engine::ZkConfig,
    timeout: std::time::Duration,
) -> (
    archivist_testkit::lost_reply::LostReply,
    archivist_engine::Session,
) {
    let cut =
        archivist_testkit::lost_reply::LostReply::start(archivist_testkit::zk_connect()).await;
    let proxied = archivist_engine::ZkConfig {
        connect: cut.addr().to_string(),
        ..config.clone()
    }
    .with_session_timeout(timeout);
    let through = archivist_engine::Session::connect(&proxied)
        .await
        .expect("connect through the proxy");
    (cut, through)
}

/// Outside 17i G5: `hold --job J` whose multi applied but whose reply was lost exited 1
/// "write failed" while J was held. The job is read again and the hold reported done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_reply_was_lost_is_reported_done() {
    let (config, s) = archivist_testkit::fresh_tree("admin-hold-lost-reply").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let (cut, through) = through_proxy(&config).await;
    cut.cut_next_multi();
    let held = actions::hold(&through, &settings(), &job.id, Some("bad feed"))
        .await
        .expect("a hold that applied is reported done");
    assert!(!cut.armed(), "the proxy never cut the hold's reply");
    assert_eq!(
        (held.to, held.outcome),
        (Some(JobState::Held), Outcome::Done)
    );
    assert_eq!(read(&s, &job.id).await.0.status, JobState::Held);
    assert!(!archivist_testkit::locked(&s, &job.id).await);
}

/// Outside 17m L1: `delete` and `resume` whose reply was lost did what they were asked
/// and exited 1 ("write failed: Connection reset by peer"); a retried `delete` then said
/// "does not exist". Both now find out that they applied.
#[tokio::test]
async fn a_delete_and_a_resume_whose_replies_were_lost_are_reported_done() {
    let (config, s) = archivist_testkit::fresh_tree("admin-delete-lost-reply").await;
    let job = fixtures::failed_job(&s, "e0000001", "not audio").await;
    let (cut, through) = through_proxy(&config).await;
    cut.cut_next_multi();
    let deleted = actions::delete(&through, &settings(), &job.id)
        .await
        .expect("a delete that applied is reported done");
    assert!(!cut.armed(), "the proxy never cut the delete's reply");
    assert_eq!(deleted.outcome, Outcome::Done);
    assert!(store::exists(&s, &paths::job(&job.id))
        .await
        .unwrap()
        .is_none());

    control::pause(&s, &settings(), JobState::Pending, "test")
        .await
        .unwrap();
    cut.cut_next();
    let resumed = control::resume(&through, JobState::Pending)
        .await
        .expect("a resume that applied is reported done");
    assert!(!cut.armed(), "the proxy never cut the resume's reply");
    assert!(resumed.changed && !resumed.paused);
    assert!(store::exists(&s, &paths::pause(JobState::Pending))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn hold_and_release_an_unlocked_pending_job() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-hold").await;
    let job = fixtures::job(&s, "e0000001", &["c000001", "c000002"]).await;
    let held = actions::hold(&s, &settings(), &job.id, Some("bad feed"))
        .await
        .unwrap();
    assert_eq!(
        (held.to, held.outcome),
        (Some(JobState::Held), Outcome::Done)
    );
    let (stored, _) = read(&s, &job.id).await;
    assert_eq!(
        (stored.status, stored.message.as_deref()),
        (JobState::Held, Some("bad feed"))
    );
    assert!(
        lease_of(&s, &job.id).await.is_none(),
        "hold revokes the lease"
    );
    assert_eq!(queues_holding(&s, &job.id).await, vec![JobState::Held]);
    let again = actions::hold(&s, &settings(), &job.id, None).await.unwrap();
    assert_eq!(again.outcome, Outcome::Unchanged);

    let released = actions::release(&s, &settings(), &job.id).await.unwrap();
    assert_eq!(released.to, Some(JobState::Pending));
    assert_eq!(queues_holding(&s, &job.id).await, vec![JobState::Pending]);
    let lease = lease_of(&s, &job.id).await.expect("release leases again");
    assert_eq!(
        lease.clips,
        vec!["c000001".to_string(), "c000002".to_string()]
    );
    let err = actions::release(&s, &settings(), &job.id)
        .await
        .unwrap_err();
    assert!(matches!(err, AdminError::Refused { .. }), "{err}");
}

#[tokio::test]
async fn hold_and_cancel_on_a_job_a_researcher_holds_write_a_request() {
    let (config, s) = archivist_testkit::fresh_tree("admin-request").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    drive(&s, &job.id, &[JobState::Leased], "").await;
    let researcher = archivist_testkit::another_session(&config).await;
    register(&researcher, "r1").await;
    let _lock = JobLock::try_acquire(&researcher, &job.id, "r1")
        .await
        .unwrap()
        .unwrap();
    let started = std::time::Instant::now();
    let report = actions::cancel(&s, &settings(), &job.id, None)
        .await
        .unwrap();
    assert_eq!(
        (report.outcome, report.to),
        (Outcome::Requested, Some(JobState::Leased))
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "a researcher's lock is not waited for"
    );
    let (stored, _) = read(&s, &job.id).await;
    assert_eq!(
        (stored.status, stored.request),
        (JobState::Leased, Some(JobRequest::Cancel))
    );
    assert!(
        lease_of(&s, &job.id).await.is_some(),
        "the holder revokes the lease, not the admin"
    );
    // Outside 17g finding 4: a hold does not replace a pending cancel (it silently did,
    // and `release` then undid what the first operator was told would stick).
    let err = actions::hold(&s, &settings(), &job.id, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdminError::Refused { .. })
            && err.to_string().contains("cancel request is pending"),
        "{err}"
    );
    assert_eq!(read(&s, &job.id).await.0.request, Some(JobRequest::Cancel));
    // Release withdraws a hold request not acted on yet.
    let other = fixtures::job(&s, "e0000002", &["c000001"]).await;
    drive(&s, &other.id, &[JobState::Leased], "").await;
    let _other_lock = JobLock::try_acquire(&researcher, &other.id, "r1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        actions::hold(&s, &settings(), &other.id, None)
            .await
            .unwrap()
            .outcome,
        Outcome::Requested
    );
    assert_eq!(read(&s, &other.id).await.0.request, Some(JobRequest::Hold));
    actions::release(&s, &settings(), &other.id).await.unwrap();
    assert_eq!(read(&s, &other.id).await.0.request, None);
}

#[tokio::test]
async fn cancel_and_delete_follow_the_state_table() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-cancel-delete").await;
    let failed = failed_job(&s, "e0000001", "x").await;
    let pending = fixtures::job(&s, "e0000002", &["c000001"]).await;
    let done = fixtures::recorded_job(&s, "e0000003", &["c000001"]).await;

    let err = actions::cancel(&s, &settings(), &done.id, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("finished"), "{err}");
    let err = actions::delete(&s, &settings(), &pending.id)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("only failed, held or cancelled"),
        "{err}"
    );
    assert_eq!(
        queues_holding(&s, &pending.id).await,
        vec![JobState::Pending]
    );

    actions::delete(&s, &settings(), &failed.id).await.unwrap();
    assert!(store::exists(&s, &paths::job(&failed.id))
        .await
        .unwrap()
        .is_none());
    assert!(queues_holding(&s, &failed.id).await.is_empty());
    assert!(lease_of(&s, &failed.id).await.is_none());

    let cancelled = actions::cancel(&s, &settings(), &pending.id, None)
        .await
        .unwrap();
    assert_eq!(cancelled.to, Some(JobState::Cancelled));
    assert_eq!(
        queues_holding(&s, &pending.id).await,
        vec![JobState::Cancelled]
    );
    assert!(lease_of(&s, &pending.id).await.is_none());
}

#[tokio::test]
async fn retry_all_failed_filters_by_reason() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-retry-all").await;
    let a = failed_job(&s, "e0000001", "download failed: HTTP 404").await;
    let b = failed_job(&s, "e0000002", "not audio").await;
    let c = failed_job(&s, "e0000003", "download failed: HTTP 503").await;
    let items = actions::retry_all_failed(&s, &settings(), Some("download*"))
        .await
        .unwrap();
    let mut retried: Vec<&str> = items
        .iter()
        .filter(|i| i.report.is_some())
        .map(|i| i.job.as_str())
        .collect();
    retried.sort();
    assert_eq!(retried, vec![a.id.as_str(), c.id.as_str()]);
    assert_eq!(read(&s, &b.id).await.0.status, JobState::Failed);
    let rest = actions::retry_all_failed(&s, &settings(), None)
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|i| i.job.as_str()).collect::<Vec<_>>(),
        vec![b.id.as_str()]
    );
}

#[tokio::test]
async fn catalog_holds_and_queue_pauses() {
    let (_c, s) = archivist_testkit::fresh_tree("admin-control").await;
    let db = fixtures::database("admin-control").await;
    let e = fixtures::db_episode(&db, 1, "Episode one").await;
    let target = CatalogTarget::Episode(e.clone());
    let r = control::set_catalog_hold(&s, &db, &target, true, "ops")
        .await
        .unwrap();
    assert!(r.held && r.changed);
    assert_eq!(r.title, "Episode one");
    // A hold is a ZooKeeper node, not a catalog field.
    let (hold, _) = store::read_required::<PauseRecord>(&s, &paths::hold(&e))
        .await
        .unwrap();
    assert_eq!(hold.by, "ops");
    assert!(control::is_held(&s, &e).await.unwrap());
    assert!(
        !control::set_catalog_hold(&s, &db, &target, true, "ops")
            .await
            .unwrap()
            .changed
    );
    let released = control::set_catalog_hold(&s, &db, &target, false, "ops")
        .await
        .unwrap();
    assert!(!released.held && released.changed);
    assert!(!control::is_held(&s, &e).await.unwrap());
    let missing =
        control::set_catalog_hold(&s, &db, &CatalogTarget::Clip("c000404".into()), true, "ops")
            .await
            .unwrap_err();
    assert!(matches!(missing, AdminError::NotFound { .. }));

    let p = control::pause(&s, &settings(), JobState::Pending, "maintenance")
        .await
        .unwrap();
    assert!(p.changed);
    assert!(archivist_engine::consumer::is_paused(&s, JobState::Pending)
        .await
        .unwrap());
    assert!(
        !control::pause(&s, &settings(), JobState::Pending, "again")
            .await
            .unwrap()
            .changed
    );
    let listed = control::pauses(&s).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].record.as_ref().map(|r| r.reason.as_str()),
        Some("maintenance")
    );
    assert!(
        control::resume(&s, JobState::Pending)
            .await
            .unwrap()
            .changed
    );
    assert!(
        !archivist_engine::consumer::is_paused(&s, JobState::Pending)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn an_unusable_report_blocks_retry_with_the_way_out_and_goes_with_delete() {
    // Outside test 17c, defect 8: `retry` re-failed at once on the same report, `delete`
    // left it behind, and it waited for a recorder forever.
    let (_c, s) = archivist_testkit::fresh_tree("admin-unusable-report").await;
    let job = fixtures::job(&s, "e0000001", &["c000001", "c000002"]).await;
    let bad = paths::report(&paths::report_name(&job.id, "c000001"));
    let good = paths::report(&paths::report_name(&job.id, "c000002"));
    let other = fixtures::job(&s, "e0000002", &["c000001"]).await;
    let others = paths::report(&paths::report_name(&other.id, "c000001"));
    for path in [&bad, &good, &others] {
        fixtures::raw(&s, path, b"schema: 1\n").await;
    }
    drive(
        &s,
        &job.id,
        &[
            JobState::Leased,
            JobState::Researching,
            JobState::Reported,
            JobState::Failed,
        ],
        &format!("report unusable: {bad}: unreadable ReportRecord record: report unusable: clip c000004 in a report named for c000001"),
    )
    .await;
    let (_, before) = read(&s, &job.id).await;
    let err = actions::retry(&s, &settings(), &job.id).await.unwrap_err();
    let text = err.to_string();
    assert!(err.is_refusal(), "{text}");
    assert!(
        text.contains(&bad) && text.contains(&format!("archivist delete {}", job.id)),
        "{text}"
    );
    assert_eq!(read(&s, &job.id).await.1, before, "nothing written");

    let report = actions::delete(&s, &settings(), &job.id).await.unwrap();
    assert!(report.detail.contains("reports"), "{}", report.detail);
    for path in [&bad, &good, &paths::job(&job.id)] {
        assert!(
            store::exists(&s, path).await.unwrap().is_none(),
            "{path} left behind"
        );
    }
    assert!(
        store::exists(&s, &others).await.unwrap().is_some(),
        "another job's report deleted"
    );
}

#[tokio::test]
async fn delete_of_a_reported_job_says_what_is_possible() {
    // Outside test 17c, defect 10: "(cancel or hold it first)", though both are refused
    // for a reported job.
    let (_c, s) = archivist_testkit::fresh_tree("admin-delete-reported").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    drive(
        &s,
        &job.id,
        &[JobState::Leased, JobState::Researching, JobState::Reported],
        "",
    )
    .await;
    let text = actions::delete(&s, &settings(), &job.id)
        .await
        .unwrap_err()
        .to_string();
    assert!(!text.contains("cancel or hold it first"), "{text}");
    assert!(text.contains("recorder"), "{text}");
    // And cancel/hold really are refused for it.
    assert!(actions::cancel(&s, &settings(), &job.id, None)
        .await
        .is_err());
}

#[tokio::test]
async fn release_of_a_job_of_a_held_episode_warns_as_delete_does() {
    // Outside test 17c, defect 10: `release --job J` into a held episode said nothing.
    let (_c, s) = archivist_testkit::fresh_tree("admin-release-held-episode").await;
    let db = fixtures::database("admin-release-held-episode").await;
    let e = fixtures::episode(&s, 1, "Episode one").await;
    fixtures::db_episode(&db, 1, "Episode one").await;
    let job = fixtures::job(&s, &e, &["c000001"]).await;
    actions::hold(&s, &settings(), &job.id, None).await.unwrap();
    control::set_catalog_hold(&s, &db, &CatalogTarget::Episode(e.clone()), true, "ops")
        .await
        .unwrap();
    let report = actions::release(&s, &settings(), &job.id).await.unwrap();
    assert!(
        report.detail.contains(&format!("episode {e} is held")),
        "{}",
        report.detail
    );
    // Outside test 17d, finding 16a: the suggested command must parse (`hold J` is a
    // usage error; a job is held with `hold --job J`).
    assert!(
        report
            .detail
            .contains(&format!("`hold --job {}` again", job.id)),
        "{}",
        report.detail
    );
    // Not for an episode that is not held.
    let e2 = fixtures::episode(&s, 2, "Episode two").await;
    let other = fixtures::job(&s, &e2, &["c000001"]).await;
    actions::hold(&s, &settings(), &other.id, None)
        .await
        .unwrap();
    let plain = actions::release(&s, &settings(), &other.id).await.unwrap();
    assert!(!plain.detail.contains("is held"), "{}", plain.detail);
}

#[tokio::test]
async fn pause_without_the_pause_directory_says_run_init() {
    // Outside test 17c, defect 10: "precondition failed" when /control/pause was deleted.
    let (_c, s) = archivist_testkit::fresh_tree("admin-pause-no-dir").await;
    s.client().delete(paths::PAUSES, None).await.unwrap();
    let text = control::pause(&s, &settings(), JobState::Pending, "test")
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("archivist init"), "{text}");
    assert!(!text.contains("precondition"), "{text}");
    let report = archivist_admin::fsck::fsck(
        &s,
        &archivist_testkit::db::tree_database(s.chroot()).await,
        &AdminSettings::default(),
        false,
        &archivist_admin::Silent,
    )
    .await
    .unwrap();
    let missing: Vec<_> = report
        .faults
        .iter()
        .filter(|f| f.kind == archivist_admin::fsck::FaultKind::DirectoryMissing)
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(missing, vec![paths::PAUSES]);
    assert!(!report.is_clean());
}

/// Outside 17g finding 1: `cancel`/`hold` of a running job nobody holds (its researcher
/// let go) failed with "job transition leased -> cancelled is made by researcher,
/// reaper, not by the admin", exit 1. The move is the reaper's: the admin writes the
/// request (the reaper honours it) and says so.
#[tokio::test]
async fn hold_and_cancel_on_an_unlocked_running_job_write_a_request_for_the_reaper() {
    let (_config, s) = archivist_testkit::fresh_tree("admin-request-unlocked").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    drive(&s, &job.id, &[JobState::Leased], "").await;
    let report = actions::cancel(&s, &settings(), &job.id, Some("stop this"))
        .await
        .unwrap();
    assert_eq!(
        (report.outcome, report.to),
        (Outcome::Requested, Some(JobState::Leased))
    );
    assert!(
        report.detail.contains("the reaper moves it to cancelled"),
        "{}",
        report.detail
    );
    let (stored, _) = read(&s, &job.id).await;
    assert_eq!(
        (
            stored.status,
            stored.request,
            stored.request_reason.as_deref()
        ),
        (
            JobState::Leased,
            Some(JobRequest::Cancel),
            Some("stop this")
        )
    );
    assert!(
        !archivist_testkit::locked(&s, &job.id).await,
        "the admin lets go of the lock"
    );
    let again = actions::cancel(&s, &settings(), &job.id, None)
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::Unchanged);
}

/// Registers `member` as a researcher of the tree on `session` (an ephemeral node, as
/// the researcher does).
async fn register(session: &archivist_engine::Session, member: &str) {
    use archivist_engine::zk;
    session
        .client()
        .create(
            &paths::researcher(member),
            b"",
            &session.create_options(zk::CreateMode::Ephemeral),
        )
        .await
        .unwrap();
}

/// Outside 17k N2: a hold racing another admin command that held the job's lock for a
/// moment wrote a request and promised "the holder moves it to held within seconds";
/// the holder was that admin command, which reads no requests, and the request waited
/// for the planner's work-item TTL. A lock held by a session that is no daemon of the
/// tree is waited for (briefly), and the hold is done at once.
#[tokio::test]
async fn an_action_waits_for_a_lock_another_admin_command_holds_for_a_moment() {
    let (config, s) = archivist_testkit::fresh_tree("admin-brief-lock").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    assert_eq!(job.status, JobState::Pending);
    let other_admin = archivist_testkit::another_session(&config).await;
    let lock = JobLock::try_acquire(&other_admin, &job.id, "admin-other")
        .await
        .unwrap()
        .unwrap();
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        lock.release(&other_admin).await.unwrap();
        other_admin
    });
    let report = actions::hold(&s, &settings(), &job.id, None).await.unwrap();
    assert_eq!(
        (report.outcome, report.to),
        (Outcome::Done, Some(JobState::Held)),
        "{}",
        report.detail
    );
    assert_eq!(read(&s, &job.id).await.0.status, JobState::Held);
    releaser.await.unwrap();
}

/// Outside 17m L2: when the other admin command kept the lock past the wait, the hold
/// wrote its request and still promised "the holder moves it to held within seconds",
/// of a holder that reads no requests. It now says the holder is no daemon, and who
/// will act; a daemon holder still gets the promise.
#[tokio::test]
async fn a_request_left_on_a_job_another_admin_command_holds_says_who_will_act() {
    let (config, s) = archivist_testkit::fresh_tree("admin-long-lock").await;
    let job = fixtures::job(&s, "e0000001", &["c000001"]).await;
    let other_admin = archivist_testkit::another_session(&config).await;
    let lock = JobLock::try_acquire(&other_admin, &job.id, "admin-other")
        .await
        .unwrap()
        .unwrap();
    let report = actions::hold(&s, &settings(), &job.id, None).await.unwrap();
    assert_eq!(report.outcome, Outcome::Requested, "{}", report.detail);
    assert!(
        report.detail.contains("no daemon") && !report.detail.contains("within seconds"),
        "{}",
        report.detail
    );
    lock.release(&other_admin).await.unwrap();
    // The same with the lock's session registered as a researcher: the promise holds.
    let second = fixtures::job(&s, "e0000002", &["c000001"]).await;
    let researcher = archivist_testkit::another_session(&config).await;
    register(&researcher, "r-long-lock").await;
    let _held = JobLock::try_acquire(&researcher, &second.id, "r-long-lock")
        .await
        .unwrap()
        .unwrap();
    let report = actions::hold(&s, &settings(), &second.id, None)
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Requested, "{}", report.detail);
    assert!(
        report.detail.contains("within seconds"),
        "{}",
        report.detail
    );
}

/// Outside 17p F6: with ZooKeeper unreachable after a retry's multi applied, the reply
/// was lost and the job could not be read back; `retry --all-failed` reported "error:
/// write failed" and counted it not retried, though it was. Now the outcome is said to
/// be unknown, and `jobs show` named as what tells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_reply_was_lost_with_the_session_is_unconfirmed_not_failed() {
    let (config, s) = archivist_testkit::fresh_tree("admin-retry-unconfirmed").await;
    let job = fixtures::failed_job(&s, "e0000001", "not audio").await;
    let (cut, through) = through_proxy_timing_out(&config, std::time::Duration::from_secs(4)).await;
    cut.cut_next_multi();
    cut.slow_reconnect(std::time::Duration::from_secs(10));
    let items = archivist_admin::actions::retry_all_failed(&through, &settings(), None)
        .await
        .expect("the bulk action runs");
    assert_eq!(items.len(), 1, "{items:?}");
    let item = &items[0];
    assert!(
        item.unconfirmed && item.report.is_none() && !item.refused,
        "{item:?}"
    );
    let text = item.error.clone().unwrap_or_default();
    assert!(
        text.contains("may have been done") && text.contains("jobs show"),
        "{text}"
    );
    // It was done.
    assert_eq!(read(&s, &job.id).await.0.retry_count, 1);
}
