//! A batch with failures, then retries, then an update report of what changed.

use archivist_admin::actions;
use archivist_admin::AdminSettings;
use archivist_batches::{admin, report, BatchError};
use archivist_engine::schema::records::{Pair, ReportKind};
use archivist_engine::schema::BatchState;

use crate::support::*;

#[tokio::test]
async fn failures_then_retries_then_an_update_report_of_what_changed() {
    for (_config, session, db) in stores("batch-retries").await {
        let b = batcher(&db);
        let submitted =
            submit_text(&session, &submission(&["e1", "e2"], &["c1", "c2"], None)).await;
        let batch0 = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        let id = batch0.id.clone();
        let (e1, e2) = (batch0.episodes[0].clone(), batch0.episodes[1].clone());
        let clips = batch0.clips.clone();
        assert_eq!(batch0.progress.total, 4);

        // Asking for an update report while processing is refused, nothing written.
        let refused = admin::update_report(&session, &id, "admin-test")
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                BatchError::Refused {
                    status: BatchState::Processing,
                    ..
                }
            ),
            "{refused}"
        );

        record(&session, &e1, &clips, &[(clips[1].as_str(), 3.25)]).await;
        let failed_job = fail(&session, &e2, &clips, "download failed: HTTP 404").await;
        let failed = drive(&session, &b, &id, BatchState::Failed).await;
        assert_eq!(failed.progress.recorded, 2);
        assert_eq!(failed.progress.failed, 2);
        assert!(
            failed
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("2 of 4 pairs failed"),
            "{:?}",
            failed.message
        );

        let first = report::read(&session, &id, None).await.unwrap();
        assert_eq!(first.number, 1);
        assert_eq!(first.failed_jobs.len(), 1);
        assert_eq!(first.failed_jobs[0].job, failed_job.id);
        assert_eq!(first.failed_jobs[0].reason, "download failed: HTTP 404");
        assert_eq!(first.failed_jobs[0].clips, clips);
        assert_eq!(first.found[&clips[1]][&e1][0].at, 3.25);

        // The operator retries the job and asks for an update report at once: the batcher
        // waits until the retried pairs are settled again.
        actions::retry(
            &session,
            &AdminSettings::default().with_actor("admin-test"),
            &failed_job.id,
        )
        .await
        .unwrap();
        let asked = admin::update_report(&session, &id, "admin-test")
            .await
            .unwrap();
        assert_eq!(asked.status, BatchState::UpdateReporting);
        b.pass(&session).await.unwrap();
        let waiting = batch(&session, &id).await;
        assert_eq!(waiting.status, BatchState::UpdateReporting);
        assert_eq!(
            waiting.progress.pending, 2,
            "the retried pairs are pending again"
        );
        assert_eq!(waiting.reports, 1);

        archivist_engine::jobs::read(&session, &failed_job.id)
            .await
            .unwrap();
        crate::support::complete(&session, &failed_job.id, &[(clips[0].as_str(), 99.0)]).await;
        let done = drive(&session, &b, &id, BatchState::Completed).await;
        assert_eq!(done.reports, 2);
        assert_eq!(done.progress.recorded, 4);
        assert!(done.message.is_none());

        let update = report::read(&session, &id, None).await.unwrap();
        assert_eq!(update.number, 2);
        assert_eq!(update.kind, ReportKind::Update);
        assert_eq!(update.since, Some(1));
        let expected: Vec<Pair> = clips
            .iter()
            .map(|c| Pair {
                episode: e2.clone(),
                clip: c.clone(),
            })
            .collect();
        assert_eq!(update.resolved, expected, "what changed: the retried pairs");
        assert!(update.still_failed.is_empty());
        assert!(update.failed_jobs.is_empty());
        assert_eq!(
            update.found.len(),
            1,
            "only what the retry found: {:?}",
            update.found
        );
        assert_eq!(update.found[&clips[0]][&e2][0].at, 99.0);
        // The first report is kept.
        assert_eq!(report::read(&session, &id, Some(1)).await.unwrap(), first);
    }
}

#[tokio::test]
async fn an_update_report_lists_what_is_still_failed() {
    for (_config, session, db) in stores("batch-still-failed").await {
        let b = batcher(&db);
        let submitted = submit_text(&session, &submission(&["e1"], &["c1"], None)).await;
        let processing = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        let (episode, clips) = (processing.episodes[0].clone(), processing.clips.clone());
        let job = fail(&session, &episode, &clips, "decode failed").await;
        drive(&session, &b, &submitted.id, BatchState::Failed).await;
        // Retried, failed again with another reason.
        actions::retry(&session, &AdminSettings::default(), &job.id)
            .await
            .unwrap();
        let (again, version) = archivist_engine::jobs::read(&session, &job.id)
            .await
            .unwrap();
        archivist_engine::transition::Transition::new(
            archivist_engine::transition::Role::for_move(
                archivist_engine::transition::machine(),
                again.status,
                archivist_engine::schema::JobState::Failed,
            )
            .expect("a move of the table"),
            &again,
            version,
            archivist_engine::schema::JobState::Failed,
        )
        .failed()
        .edit(|j| j.message = Some("decode failed again".into()))
        .commit(&session)
        .await
        .unwrap();
        admin::update_report(&session, &submitted.id, "admin-test")
            .await
            .unwrap();
        let still = drive(&session, &b, &submitted.id, BatchState::Failed).await;
        assert_eq!(still.reports, 2);
        let update = report::read(&session, &submitted.id, Some(2))
            .await
            .unwrap();
        assert_eq!(
            update.still_failed,
            vec![Pair {
                episode,
                clip: clips[0].clone()
            }]
        );
        assert!(update.resolved.is_empty());
        assert_eq!(update.failed_jobs[0].reason, "decode failed again");
        assert_eq!(update.failed_jobs[0].retry_count, 1);
    }
}
