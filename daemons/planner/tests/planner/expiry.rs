use std::time::Duration;

use archivist_engine::schema::records::LeaseRecord;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{jobs, store};
use archivist_planner::expire::REASON;
use archivist_planner::Planner;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn work_and_lease_are_created_together_with_zookeeper_time() {
    for (_config, session, db) in stores("expiry-lease").await {
        let e = put_episode(&session, &db, 1, 3, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let settings = settings()
            .with_lease_duration(Duration::from_secs(42))
            .with_work_item_ttl(Duration::from_secs(41));
        let mut planner = Planner::start(&session, &db, settings, "p").await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        let job = &report.created[0];
        let (lease, stat) = store::read_required::<LeaseRecord>(&session, &paths::lease(&job.id))
            .await
            .unwrap();
        assert_eq!(lease.job, job.id);
        assert_eq!(lease.episode, e);
        assert_eq!(lease.clips, job.clips);
        assert_eq!(lease.duration_ms, 42_000);
        assert_eq!(lease.holder, None);
        let (_, job_stat) = store::read_required::<archivist_engine::schema::records::JobRecord>(
            &session,
            &paths::job(&job.id),
        )
        .await
        .unwrap();
        assert_eq!(
            stat.czxid, job_stat.czxid,
            "lease and job were created by the same multi"
        );
    }
}

/// One episode and one clip planned by a planner with a 400 ms work-item TTL (and a
/// 60 s lease): the planner and the waiting job it created.
async fn one_waiting_item(
    session: &archivist_engine::Session,
    db: &archivist_db::Database,
) -> (Planner, archivist_engine::schema::records::JobRecord) {
    put_episode(session, db, 1, 0, BASE_MS, false).await;
    put_clip(session, db, 1, 0, BASE_MS, false).await;
    let settings = settings()
        .with_lease_duration(Duration::from_secs(60))
        .with_work_item_ttl(Duration::from_millis(400));
    let mut planner = Planner::start(session, db, settings, "p").await.unwrap();
    let first = planner
        .round(&CancellationToken::new())
        .await
        .unwrap()
        .created
        .remove(0);
    (planner, first)
}

#[tokio::test]
async fn a_waiting_item_past_its_ttl_is_expired_and_its_lease_released() {
    for (_config, session, db) in stores("expiry-ttl").await {
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        // Before the TTL: nothing expires, and the leased clips are not planned again.
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(report.expired.is_empty() && report.created.is_empty());
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.expired, std::slice::from_ref(&first.id));
        let (job, _) = jobs::read(&session, &first.id).await.unwrap();
        assert_eq!(job.status, JobState::Expired);
        assert_eq!(job.message.as_deref(), Some(REASON));
        assert!(store::exists(&session, &paths::lease(&first.id))
            .await
            .unwrap()
            .is_none());
        // The released clips are planned again at once, in a new item with a new lease.
        assert_eq!(report.created.len(), 1);
        assert_eq!(report.created[0].clips, first.clips);
        assert_ne!(report.created[0].id, first.id);
        assert!(inconsistencies(&session).await.is_empty());
    }
}

#[tokio::test]
async fn a_waiting_item_being_claimed_is_left_alone() {
    for (_config, session, db) in stores("expiry-locked").await {
        put_episode(&session, &db, 1, 0, BASE_MS, false).await;
        put_clip(&session, &db, 1, 0, BASE_MS, false).await;
        let settings = settings().with_work_item_ttl(Duration::from_millis(100));
        let mut planner = Planner::start(&session, &db, settings, "p").await.unwrap();
        let first = planner
            .round(&CancellationToken::new())
            .await
            .unwrap()
            .created
            .remove(0);
        let other = archivist_testkit::another_session(&_config).await;
        let lock = archivist_engine::lock::JobLock::try_acquire(&other, &first.id, "researcher")
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let expired = archivist_planner::expire::expire_waiting(&session, 100, "p")
            .await
            .unwrap();
        assert!(expired.is_empty());
        assert_eq!(
            jobs::read(&session, &first.id).await.unwrap().0.status,
            JobState::Pending
        );
        lock.release(&other).await.unwrap();
        let expired = archivist_planner::expire::expire_waiting(&session, 100, "p")
            .await
            .unwrap();
        assert_eq!(expired, [first.id]);
    }
}

/// A waiting job whose record does not decode (`{{{{` written by hand) expires by its
/// node's age like any other: the TTL step writes the record the tree still knows
/// (episode and clips from its lease, priority and curation from its queue entry) with a
/// message saying the record did not decode, revokes the lease, and the pairs are
/// planned again. Before, the step failed to read it on every pass ("skipped; the next
/// pass retries") and it waited for ever.
#[tokio::test]
async fn a_waiting_item_whose_record_does_not_decode_expires_by_its_node_age() {
    for (_config, session, db) in stores("expiry-undecodable").await {
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        write(&session, &paths::job(&first.id), b"{{{{").await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.expired, std::slice::from_ref(&first.id));
        let (job, _) = jobs::read(&session, &first.id).await.unwrap();
        assert_eq!(job.status, JobState::Expired);
        let message = job.message.clone().unwrap_or_default();
        assert!(
            message.starts_with(REASON) && message.contains(archivist_engine::lease::UNDECODABLE),
            "{message}"
        );
        assert_eq!(
            job.episode,
            episode_id(1),
            "the episode comes from the lease"
        );
        assert_eq!(job.clips, first.clips);
        assert_eq!(
            job.queue_entry(),
            first.queue_entry(),
            "priority and curation come from the queue entry"
        );
        assert_eq!(
            archivist_testkit::queues_holding(&session, &first.id).await,
            vec![JobState::Expired]
        );
        assert!(store::exists(&session, &paths::lease(&first.id))
            .await
            .unwrap()
            .is_none());
        assert_eq!(report.created.len(), 1, "its pairs are planned again");
        assert_eq!(report.created[0].clips, first.clips);
        assert!(inconsistencies(&session).await.is_empty());
    }
}

/// Outside 17d finding 13 (the pending half): an operator's cancel or hold written on a
/// `pending` job (it was locked at that moment, or a hand-back kept the request) was
/// ignored by the work-item TTL step, which expired the job, so its pairs were planned
/// again at once. The step now honours the request: the job goes to `cancelled`/`held`
/// with the operator's reason, its lease is revoked, and its pairs stay out of planning.
#[tokio::test]
async fn a_waiting_item_with_a_cancel_or_hold_request_is_stopped_not_expired_at_its_ttl() {
    use archivist_engine::schema::records::{JobRecord, JobRequest};
    for (request, to, tree) in [
        (JobRequest::Cancel, JobState::Cancelled, "expiry-cancel-req"),
        (JobRequest::Hold, JobState::Held, "expiry-hold-req"),
    ] {
        for (_config, session, db) in stores(tree).await {
            let (mut planner, first) = one_waiting_item(&session, &db).await;
            let path = paths::job(&first.id);
            let (mut job, _) = store::read_required::<JobRecord>(&session, &path)
                .await
                .unwrap();
            job.request = Some(request);
            job.request_reason = Some("operator says stop".into());
            write(&session, &path, &store::encode(&path, &job).unwrap()).await;
            tokio::time::sleep(Duration::from_millis(600)).await;
            let report = planner.round(&CancellationToken::new()).await.unwrap();
            assert_eq!(report.expired, std::slice::from_ref(&first.id));
            let (job, _) = jobs::read(&session, &first.id).await.unwrap();
            assert_eq!(job.status, to, "{request:?}");
            assert_eq!(job.message.as_deref(), Some("operator says stop"));
            assert_eq!(job.request, None);
            assert_eq!(
                archivist_testkit::queues_holding(&session, &first.id).await,
                vec![to]
            );
            assert!(store::exists(&session, &paths::lease(&first.id))
                .await
                .unwrap()
                .is_none());
            assert!(
                report.created.is_empty(),
                "{request:?}: its pairs are not planned again: {:?}",
                report.created
            );
            let report = planner.round(&CancellationToken::new()).await.unwrap();
            assert!(report.created.is_empty());
            assert!(inconsistencies(&session).await.is_empty());
        }
    }
}

/// Outside 17d finding 17: an undecodable lease (`lease: [garbage` written by hand on a
/// running job's lease) was treated as no lease, and the planner planned the same pairs
/// again one second later while the job ran. It now counts as "leased, what for read
/// from its job" until its node's creation plus the work-item TTL (the rule for an
/// undecodable waiting job), then the pairs are planned again.
#[tokio::test]
async fn an_undecodable_lease_keeps_its_jobs_pairs_leased_until_its_node_age_passes_the_ttl() {
    for (_config, session, db) in stores("expiry-bad-lease").await {
        register_researcher(&session, "r1", 4).await;
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        // The job is claimed (leased, no longer a blocking state): only its lease keeps its
        // pairs out of planning.
        archivist_testkit::place_job(&session, first.clone(), JobState::Leased).await;
        write(&session, &paths::lease(&first.id), b"lease: [garbage").await;
        planner.wait(Duration::from_millis(150)).await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(
            report.created.is_empty(),
            "the running job's pairs were planned again: {:?}",
            report.created
        );
        // Past the lease node's creation plus the 400 ms TTL it counts as expired.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.created.len(), 1, "{report:?}");
        assert_eq!(report.created[0].clips, first.clips);
    }
}

/// Outside 17g finding 7: a running job's lease deleted by hand (the job `leased`, its
/// lock held by a live researcher) was taken for no lease, and the planner planned the
/// episode again at once: researched twice. Its pairs now count as leased while the lock
/// is held; once the lock is gone and the job expired (the reaper's move, made here by
/// hand), they are planned again.
#[tokio::test]
async fn a_deleted_lease_of_a_running_locked_job_keeps_its_pairs_leased_until_the_lock_goes() {
    for (config, session, db) in stores("expiry-deleted-lease").await {
        register_researcher(&session, "r1", 4).await;
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        let running = archivist_testkit::place_job(&session, first.clone(), JobState::Leased).await;
        let researcher = archivist_testkit::another_session(&config).await;
        let lock = archivist_engine::lock::JobLock::try_acquire(&researcher, &first.id, "r1")
            .await
            .unwrap()
            .expect("the researcher's lock");
        session
            .client()
            .delete(&paths::lease(&first.id), None)
            .await
            .unwrap();
        planner.wait(Duration::from_millis(150)).await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(
            report.created.is_empty(),
            "the running job's pairs were planned again: {:?}",
            report.created
        );
        // A planner started now (no lease ever seen) counts them as leased too.
        let mut fresh = archivist_planner::Planner::start(&session, &db, settings(), "p2")
            .await
            .unwrap();
        let report = fresh.round(&CancellationToken::new()).await.unwrap();
        assert!(report.created.is_empty(), "{:?}", report.created);
        drop(fresh);
        // The researcher goes (its lock with its session) and the job is expired.
        drop(lock);
        assert!(researcher.close(Duration::from_secs(5)).await);
        let (job, version) = jobs::read(&session, &first.id).await.unwrap();
        let mut expired = job.clone();
        expired.status = JobState::Expired;
        let entry = running.queue_entry().name();
        archivist_engine::ops::commit(
            &session,
            &[
                archivist_engine::ops::Op::SetData {
                    path: paths::job(&first.id),
                    data: store::encode(&paths::job(&first.id), &expired).unwrap(),
                    version: Some(version),
                },
                archivist_engine::ops::Op::Delete {
                    path: paths::queue_entry(JobState::Leased, &entry),
                    version: None,
                },
                archivist_engine::ops::Op::Create {
                    path: paths::queue_entry(JobState::Expired, &entry),
                    data: Vec::new(),
                    mode: archivist_engine::ops::Mode::Persistent,
                },
            ],
        )
        .await
        .unwrap();
        planner.wait(Duration::from_millis(150)).await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.created.len(), 1, "{report:?}");
        assert_eq!(report.created[0].clips, first.clips);
    }
}

/// Outside 17h F8: a lease whose job does not exist (made by hand, left by a partial
/// restore or a `deleteall /jobs/J`) kept its pairs out of planning for its whole
/// duration, up to 30 days. It now counts as leased only until its node's creation plus
/// the work-item TTL (the rule for an undecodable lease), then its pairs are planned.
#[tokio::test]
async fn a_lease_whose_job_does_not_exist_counts_only_until_its_node_age_passes_the_ttl() {
    for (_config, session, db) in stores("expiry-jobless-lease").await {
        register_researcher(&session, "r1", 4).await;
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        let episode = put_episode(&session, &db, 2, 0, BASE_MS, false).await;
        put_lease(&session, "j0000099999", &episode, &[1], 2_000_000_000).await;
        planner.wait(Duration::from_millis(150)).await.unwrap();
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(
            report.created.iter().all(|j| j.episode != episode),
            "planned before the TTL: {:?}",
            report.created
        );
        // Past the lease node's creation plus the 400 ms TTL its pairs are planned.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        let planned: Vec<_> = report
            .created
            .iter()
            .map(|j| (j.episode.clone(), j.clips.clone()))
            .collect();
        assert!(
            planned.contains(&(episode.clone(), vec![paths::clip_id(1)])),
            "{planned:?}"
        );
        assert!(
            planned.contains(&(first.episode.clone(), first.clips.clone())),
            "the first job expired by its TTL and was planned again: {planned:?}"
        );
    }
}

/// Moves `id` to `to` by the state table (queue entries with it), as a daemon would.
async fn step(session: &archivist_engine::Session, id: &str, to: JobState) {
    use archivist_engine::transition::{machine, Role, Transition};
    let (job, version) = jobs::read(session, id).await.unwrap();
    Transition::new(
        Role::for_move(machine(), job.status, to).expect("a move of the table"),
        &job,
        version,
        to,
    )
    .event("test", "step", "ok")
    .commit(session)
    .await
    .unwrap_or_else(|e| panic!("{id} -> {to}: {e}"));
}

/// Outside try 17p F5: a job claimed longer ago than the TTL and handed back on a
/// researcher's shutdown was expired about 100 ms later ("work-item TTL passed") with
/// 40 s of lease left, and replaced by a new job (its history and retry count lost).
/// Entering `pending` again starts a new wait.
#[tokio::test]
async fn a_job_handed_back_waits_a_whole_ttl_again() {
    for (_config, session, db) in stores("expiry-handback").await {
        let (mut planner, first) = one_waiting_item(&session, &db).await;
        step(&session, &first.id, JobState::Leased).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        step(&session, &first.id, JobState::Pending).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert!(report.expired.is_empty(), "{:?}", report.expired);
        assert!(report.created.is_empty(), "{:?}", report.created);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let report = planner.round(&CancellationToken::new()).await.unwrap();
        assert_eq!(report.expired, std::slice::from_ref(&first.id));
    }
}
