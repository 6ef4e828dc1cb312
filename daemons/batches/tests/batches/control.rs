//! Held and released, deleted, and a malformed submission refused.

use archivist_batches::submission::load_submission;
use archivist_batches::{admin, report, BatchError};
use archivist_engine::schema::paths;
use archivist_engine::schema::BatchState;
use archivist_engine::store;

use crate::support::*;

#[tokio::test]
async fn a_collection_hold_moves_new_batches_to_held_until_released() {
    for (_config, session, db) in stores("batch-held").await {
        let b = batcher(&db);
        assert!(admin::hold_all(&session, "admin-test", "catalog migration")
            .await
            .unwrap());
        assert!(!admin::hold_all(&session, "admin-test", "again")
            .await
            .unwrap());
        let submitted = submit_text(&session, &submission(&["e1"], &["c1"], None)).await;
        let held = drive(&session, &b, &submitted.id, BatchState::Held).await;
        assert!(held.episodes.is_empty(), "held before curation");
        assert_eq!(
            archivist_db::catalog::counts(&db).await.unwrap().episodes,
            0
        );
        // Passes leave it alone.
        b.pass(&session).await.unwrap();
        assert_eq!(
            batch(&session, &submitted.id).await.status,
            BatchState::Held
        );

        let err = admin::release(&session, &submitted.id, "admin-test")
            .await
            .unwrap_err();
        assert!(matches!(err, BatchError::HoldInPlace), "{err}");
        let released = admin::release_all(&session, "admin-test").await.unwrap();
        assert_eq!(released, vec![submitted.id.clone()]);
        assert!(!admin::batches_held(&session).await.unwrap());
        assert_eq!(
            batch(&session, &submitted.id).await.status,
            BatchState::Pending
        );
        let processing = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        assert_eq!(processing.progress.total, 1);

        // Release applies to held batches only.
        let err = admin::release(&session, &submitted.id, "admin-test")
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::Refused {
                    status: BatchState::Processing,
                    ..
                }
            ),
            "{err}"
        );
        let steps: Vec<&str> = processing.events.iter().map(|e| e.step.as_str()).collect();
        assert_eq!(steps, ["submit", "hold", "release", "curate"]);
    }
}

#[tokio::test]
async fn a_deleted_batch_keeps_a_tombstone_and_loses_its_reports() {
    for (_config, session, db) in stores("batch-deleted").await {
        let b = batcher(&db);
        let submitted = submit_text(&session, &submission(&["e1"], &["c1"], None)).await;
        let processing = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        let job = record(&session, &processing.episodes[0], &processing.clips, &[]).await;
        drive(&session, &b, &submitted.id, BatchState::Completed).await;
        assert_eq!(report::numbers(&session, &submitted.id).await.unwrap(), [1]);

        let deleted = admin::delete(&session, &submitted.id, "admin-test")
            .await
            .unwrap();
        assert_eq!(deleted.status, BatchState::Deleted);
        assert!(report::numbers(&session, &submitted.id)
            .await
            .unwrap()
            .is_empty());
        assert!(matches!(
            report::read(&session, &submitted.id, Some(1)).await,
            Err(BatchError::Deleted(_))
        ));
        assert!(
            store::exists(&session, &paths::batch_report(&submitted.id, 1))
                .await
                .unwrap()
                .is_none()
        );
        // The research and the job are not the batch's to delete.
        let db = archivist_testkit::db::tree_database(session.chroot()).await;
        assert!(archivist_db::research::read(&db, &processing.episodes[0])
            .await
            .unwrap()
            .is_some());
        assert!(store::exists(&session, &paths::job(&job.id))
            .await
            .unwrap()
            .is_some());
        let pass = b.pass(&session).await.unwrap();
        assert!(pass.acted.is_empty(), "{pass:?}");
        assert!(admin::list(&session, false).await.unwrap().is_empty());
        assert_eq!(admin::list(&session, true).await.unwrap().len(), 1);
        let err = admin::delete(&session, &submitted.id, "admin-test")
            .await
            .unwrap_err();
        assert!(err.is_refusal(), "{err}");

        // A held batch is deleted before it is ever curated.
        admin::hold_all(&session, "admin-test", "").await.unwrap();
        let other = submit_text(&session, &submission(&["e9"], &["c9"], None)).await;
        drive(&session, &b, &other.id, BatchState::Held).await;
        admin::delete(&session, &other.id, "admin-test")
            .await
            .unwrap();
        admin::release_all(&session, "admin-test").await.unwrap();
        b.pass(&session).await.unwrap();
        assert_eq!(batch(&session, &other.id).await.status, BatchState::Deleted);
    }
}

#[tokio::test]
async fn a_malformed_submission_is_refused_with_its_line_and_nothing_is_written() {
    for (_config, session, _db) in stores("batch-malformed").await {
        let dir = std::env::temp_dir().join(format!("archivist-batch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.yml");
        std::fs::write(
        &file,
        "name: bad\nclips:\n  - url: http://h/c1.wav\n    title: One\n  - url: gopher://h/c2.wav\n    title: Two\n",
    )
    .unwrap();
        let err = load_submission(&file).unwrap_err().to_string();
        assert!(err.contains("clips[1] (line 5)"), "{err}");
        assert!(err.contains("nothing written"), "{err}");
        assert!(store::children(&session, paths::BATCHES)
            .await
            .unwrap()
            .is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// One builder for jobs and batches (issue 17): the batch table's `by` column is checked
/// too, so an operator command cannot make the batcher's moves.
#[tokio::test]
async fn a_batch_move_by_a_role_the_table_does_not_list_is_refused_and_writes_nothing() {
    use archivist_batches::transition::{self, BatchChange};
    use archivist_engine::transition::Role;
    use archivist_engine::EngineError;

    for (_config, session, _db) in stores("batch-wrong-role").await {
        let record = submit_text(&session, &submission(&["e0000001"], &["c000001"], None)).await;
        let (before, version) = transition::read(&session, &record.id).await.unwrap();
        assert_eq!(before.status, archivist_engine::schema::BatchState::Pending);
        let err = BatchChange::edit_of(Role::Admin, &before, version)
            .to(archivist_engine::schema::BatchState::Processing)
            .commit(&session)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::NotAllowedBy {
                    table: "batch",
                    role: Role::Admin,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            transition::read(&session, &record.id).await.unwrap(),
            (before, version),
            "nothing written"
        );
        // A move the batch table does not list at all keeps its batch error.
        let err: archivist_batches::BatchError =
            BatchChange::edit_of(Role::Batcher, &record, version)
                .to(archivist_engine::schema::BatchState::Completed)
                .commit(&session)
                .await
                .unwrap_err()
                .into();
        assert!(
            matches!(err, archivist_batches::BatchError::IllegalTransition { .. }),
            "{err}"
        );
    }
}

/// Outside 17i G5: a `batch submit` whose multi applied but whose reply was lost exited 1
/// "write failed" while its batch existed; submitting again ran the campaign twice. The
/// batch is read again: the submission is reported done, and exactly one batch exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_whose_reply_was_lost_makes_one_batch_and_says_so() {
    use archivist_testkit::lost_reply::LostReply;
    let Some((config, session, _db)) = stores("batch-lost-reply").await.into_iter().next() else {
        return;
    };
    let cut = LostReply::start(archivist_testkit::zk_connect()).await;
    let proxied = archivist_engine::ZkConfig {
        connect: cut.addr().to_string(),
        ..config.clone()
    }
    .with_session_timeout(std::time::Duration::from_secs(30));
    let through = archivist_engine::Session::connect(&proxied)
        .await
        .expect("connect through the proxy");
    cut.cut_next_multi();
    let submitted = submit_text(&through, &submission(&["e1"], &["c1"], None)).await;
    assert!(!cut.armed(), "the proxy never cut the submission's reply");
    let batches = store::children(&session, paths::BATCHES).await.unwrap();
    assert_eq!(
        batches,
        vec![submitted.id.clone()],
        "one batch, the one reported"
    );
}
