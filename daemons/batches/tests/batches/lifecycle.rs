//! The happy path with the daemon running, and a batch whose pairs are already
//! researched.

use std::time::Duration;

use archivist_batches::daemon;
use archivist_batches::report;
use archivist_engine::member::Identity;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::ReportKind;
use archivist_engine::schema::BatchState;
use archivist_engine::store;
use archivist_testkit::eventually;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_curates_watches_and_reports_with_the_daemon_running() {
    for (config, session, db) in stores("batch-happy").await {
        let submitted = submit_text(&session, &submission(&["e1", "e2"], &["jingle"], None)).await;
        assert_eq!(submitted.status, BatchState::Pending);
        assert_eq!(submitted.id, paths::batch_id(1));

        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn({
            let (config, stop, db) = (config.clone(), shutdown.clone(), db.clone());
            async move {
                daemon::run(
                    &config,
                    &db,
                    settings(),
                    Identity::named("batcher", "batcher-happy"),
                    None,
                    stop,
                )
                .await
            }
        });

        let id = submitted.id.clone();
        assert!(
            eventually(Duration::from_secs(20), || async {
                batch(&session, &id).await.status == BatchState::Processing
            })
            .await,
            "the batcher curates the submission"
        );
        let processing = batch(&session, &id).await;
        assert_eq!(processing.episodes.len(), 2);
        assert_eq!(processing.clips.len(), 1);
        assert_eq!(processing.progress.total, 2);
        assert_eq!(processing.progress.pending, 2);
        assert!(store::exists(&session, &paths::daemon("batcher-happy"))
            .await
            .unwrap()
            .is_some());
        // Curated into the catalog like any manifest.
        assert!(archivist_db::catalog::episode(&db, &processing.episodes[0])
            .await
            .unwrap()
            .is_some());

        let clip = processing.clips[0].clone();
        record(
            &session,
            &processing.episodes[0],
            std::slice::from_ref(&clip),
            &[(clip.as_str(), 42.5)],
        )
        .await;
        assert!(
            eventually(Duration::from_secs(20), || async {
                batch(&session, &id).await.progress.recorded == 1
            })
            .await,
            "progress follows the research archive"
        );
        assert_eq!(batch(&session, &id).await.status, BatchState::Processing);
        record(
            &session,
            &processing.episodes[1],
            std::slice::from_ref(&clip),
            &[],
        )
        .await;
        assert!(
            eventually(Duration::from_secs(20), || async {
                batch(&session, &id).await.status == BatchState::Completed
            })
            .await,
            "every pair recorded: reported and completed"
        );
        shutdown.cancel();
        daemon.await.unwrap().unwrap();

        let done = batch(&session, &id).await;
        assert_eq!(done.reports, 1);
        assert_eq!(done.progress.recorded, 2);
        assert!(done.message.is_none());
        assert!(done.delivery.is_none(), "no webhook, no delivery");
        let r = report::read(&session, &id, None).await.unwrap();
        assert_eq!(r.number, 1);
        assert_eq!(r.kind, ReportKind::Initial);
        assert_eq!(r.pairs.total, 2);
        assert!(r.failed_jobs.is_empty());
        let found = &r.found[&clip];
        assert_eq!(found.len(), 1, "found in the first episode only: {found:?}");
        assert_eq!(found[&processing.episodes[0]][0].at, 42.5);
        let steps: Vec<&str> = done.events.iter().map(|e| e.step.as_str()).collect();
        assert_eq!(steps, ["submit", "curate", "settle", "report"]);
        assert!(
            store::exists(&session, &paths::batch_lock(&id))
                .await
                .unwrap()
                .is_none(),
            "the lock went with the last multi"
        );
    }
}

#[tokio::test]
async fn a_batch_whose_pairs_are_already_researched_completes_at_once() {
    for (_config, session, db) in stores("batch-researched").await {
        let b = batcher(&db);
        // A first campaign puts two episodes and a clip in the catalog and researches them.
        let first = submit_text(&session, &submission(&["e1", "e2"], &["jingle"], None)).await;
        let first = drive(&session, &b, &first.id, BatchState::Processing).await;
        let clip = first.clips[0].clone();
        for episode in &first.episodes {
            record(
                &session,
                episode,
                std::slice::from_ref(&clip),
                &[(clip.as_str(), 7.0)],
            )
            .await;
        }
        // "Clip C against all episodes": everything is already in the archive.
        let second = submit_text(&session, &format!("clip_ids: [{clip}]\n")).await;
        b.pass(&session).await.unwrap();
        let curated = batch(&session, &second.id).await;
        assert_eq!(curated.status, BatchState::Processing, "{curated:#?}");
        assert_eq!(
            curated.episodes, first.episodes,
            "every episode of the catalog"
        );
        b.pass(&session).await.unwrap();
        let done = batch(&session, &second.id).await;
        assert_eq!(
            done.status,
            BatchState::Completed,
            "one pass after curation: {done:#?}"
        );
        let r = report::read(&session, &second.id, Some(1)).await.unwrap();
        assert_eq!(r.pairs.recorded, 2);
        assert_eq!(r.found[&clip].len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_batchers_at_once_curate_and_report_a_batch_once() {
    for (config, session, db) in stores("batch-race").await {
        let other = archivist_testkit::another_session(&config).await;
        let a =
            archivist_batches::daemon::Batcher::new(settings(), "batcher-a", db.clone()).unwrap();
        let b =
            archivist_batches::daemon::Batcher::new(settings(), "batcher-b", db.clone()).unwrap();
        let submitted = submit_text(&session, &submission(&["e1", "e2"], &["c1"], None)).await;
        let id = submitted.id.clone();
        let mut curated = None;
        for _ in 0..100 {
            let (x, y) = tokio::join!(a.pass(&session), b.pass(&other));
            x.unwrap();
            y.unwrap();
            let record = batch(&session, &id).await;
            if record.status == BatchState::Processing {
                curated = Some(record);
                break;
            }
        }
        let curated = curated.expect("curated by one of them");
        for episode in &curated.episodes {
            record(&session, episode, &curated.clips, &[]).await;
        }
        let mut done = None;
        for _ in 0..100 {
            let (x, y) = tokio::join!(a.pass(&session), b.pass(&other));
            x.unwrap();
            y.unwrap();
            let record = batch(&session, &id).await;
            if record.status == BatchState::Completed {
                done = Some(record);
                break;
            }
        }
        let done = done.expect("completed");
        let count = |step: &str| done.events.iter().filter(|e| e.step == step).count();
        assert_eq!(
            (count("curate"), count("settle"), count("report")),
            (1, 1, 1),
            "{:#?}",
            done.events
        );
        assert_eq!(done.reports, 1);
        assert_eq!(report::numbers(&session, &id).await.unwrap(), [1]);
        assert_eq!(
            archivist_db::catalog::counts(&db).await.unwrap().episodes,
            2
        );
    }
}

/// A hand-edited batch record and an unreadable job in a live queue are left out (and
/// logged); the batcher's passes still succeed and the good batch completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_records_are_left_out_and_other_batches_go_on() {
    use archivist_engine::ops::{self, Mode, Op};
    use archivist_engine::schema::queue_key::QueueEntry;
    use archivist_engine::schema::JobState;

    for (_config, session, db) in stores("batch-unreadable").await {
        let b = batcher(&db);
        let first = submit_text(&session, &submission(&["e1"], &["jingle"], None)).await;
        let first = drive(&session, &b, &first.id, BatchState::Processing).await;
        let clip = first.clips[0].clone();
        let poison = [
            (paths::batch(&paths::batch_id(99)), b"{{{ not yaml".to_vec()),
            (
                paths::job("j0000000777"),
                b"schema: 99\nid: j0000000777\n".to_vec(),
            ),
            (
                paths::queue_entry(
                    JobState::Failed,
                    &QueueEntry::new(0, 0, "j0000000777").name(),
                ),
                Vec::new(),
            ),
        ];
        for (path, data) in &poison {
            ops::commit(
                &session,
                &[Op::Create {
                    path: path.clone(),
                    data: data.clone(),
                    mode: Mode::Persistent,
                }],
            )
            .await
            .unwrap();
        }
        record(
            &session,
            &first.episodes[0],
            std::slice::from_ref(&clip),
            &[(clip.as_str(), 7.0)],
        )
        .await;
        b.pass(&session).await.expect("a pass despite bad records");
        let done = batch(&session, &first.id).await;
        assert_eq!(done.status, BatchState::Completed, "{done:#?}");
        for (path, data) in &poison {
            let (bytes, _) = store::read_raw(&session, path).await.unwrap().unwrap();
            assert_eq!(&bytes, data, "{path} left as it was");
        }
    }
}

/// Outside tester (issue 17): with `/counters/batches` re-created behind the batches in
/// use, `batch submit` retried the same taken id forever (~1,200 requests/s, never
/// returned). The counter is now moved past the batches in use and the submit returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_moves_a_counter_behind_the_batches_in_use() {
    for (_config, session, _db) in stores("batch-counter-behind").await {
        let text = submission(&["e1"], &["jingle"], None);
        let first = submit_text(&session, &text).await;
        assert_eq!(first.id, paths::batch_id(1));
        session
            .client()
            .delete(paths::BATCH_COUNTER, None)
            .await
            .expect("delete counter");
        session
            .client()
            .create(
                paths::BATCH_COUNTER,
                &[],
                &session.create_options(archivist_engine::zk::CreateMode::Persistent),
            )
            .await
            .expect("re-create counter at version 0");
        let second = tokio::time::timeout(Duration::from_secs(10), submit_text(&session, &text))
            .await
            .expect("submit returns instead of spinning");
        assert_eq!(second.id, paths::batch_id(2));
    }
}
