//! Reports sent to a local HTTP server, and a failing webhook marking the batch without
//! losing the report. Webhook URLs carry a token: it stays in the secret node and out of
//! the batch record and its errors.

use std::sync::{Arc, Mutex};

use archivist_batches::report;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{WebhookSecret, WebhookStatus};
use archivist_engine::schema::BatchState;
use archivist_engine::store;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

use crate::support::*;

type Seen = Arc<Mutex<Vec<serde_json::Value>>>;

/// The receiver's token, in the webhook URLs' query.
const TOKEN: &str = "s3cr3t-hook-token";

/// Serves `/hook` (200) and `/broken` (500), recording every body.
async fn server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let (ok, broken) = (seen.clone(), seen.clone());
    let app = Router::new()
        .route(
            "/hook",
            post(move |body: String| async move {
                ok.lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                StatusCode::NO_CONTENT
            }),
        )
        .route(
            "/broken",
            post(move |body: String| async move {
                broken
                    .lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                StatusCode::INTERNAL_SERVER_ERROR
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn the_report_is_posted_to_the_webhook() {
    for (_config, session, db) in stores("batch-webhook").await {
        let (base, seen) = server().await;
        let b = batcher(&db);
        let hook = format!("{base}/hook?token={TOKEN}");
        let submitted = submit_text(&session, &submission(&["e1"], &["c1"], Some(&hook))).await;
        // The record shows the origin; the URL is in the secret node.
        assert_eq!(submitted.webhook, Some(format!("{base}/…")));
        let (secret, _) =
            store::read::<WebhookSecret>(&session, &paths::batch_webhook(&submitted.id))
                .await
                .unwrap()
                .expect("the secret node");
        assert_eq!(secret.url, hook);
        let processing = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        let clip = processing.clips[0].clone();
        record(
            &session,
            &processing.episodes[0],
            &processing.clips,
            &[(clip.as_str(), 5.5)],
        )
        .await;
        let done = drive(&session, &b, &submitted.id, BatchState::Completed).await;
        let delivery = done.delivery.expect("delivery recorded");
        assert_eq!(delivery.status, WebhookStatus::Delivered);
        assert_eq!(delivery.attempts, 1);
        assert_eq!(delivery.report, 1);
        let bodies = seen.lock().unwrap().clone();
        assert_eq!(bodies.len(), 1, "{bodies:?}");
        assert_eq!(bodies[0]["batch"], submitted.id.as_str());
        assert_eq!(bodies[0]["status"], "completed");
        assert_eq!(bodies[0]["report"]["number"], 1);
        assert_eq!(
            bodies[0]["report"]["found"][&clip][&processing.episodes[0]][0]["at"],
            5.5
        );
    }
}

#[tokio::test]
async fn a_failing_webhook_marks_the_batch_and_the_report_stays() {
    for (_config, session, db) in stores("batch-webhook-fail").await {
        let (base, seen) = server().await;
        let b = batcher(&db);
        let hook = format!("{base}/broken?token={TOKEN}");
        let submitted = submit_text(&session, &submission(&["e1"], &["c1"], Some(&hook))).await;
        let processing = drive(&session, &b, &submitted.id, BatchState::Processing).await;
        record(&session, &processing.episodes[0], &processing.clips, &[]).await;
        let done = drive(&session, &b, &submitted.id, BatchState::Completed).await;
        let delivery = done.delivery.expect("delivery recorded");
        assert_eq!(delivery.status, WebhookStatus::Failed);
        assert_eq!(delivery.attempts, 3, "retried as configured");
        let error = delivery.error.unwrap_or_default();
        assert!(error.contains("500"), "{error}");
        assert!(
            !done.events.iter().any(|e| e.result.contains(TOKEN)),
            "{:?}",
            done.events
        );
        assert!(
            !error.contains(TOKEN),
            "the error shows the webhook's token: {error}"
        );
        assert_eq!(seen.lock().unwrap().len(), 3);
        // Not retried forever: later passes leave the delivery alone.
        b.pass(&session).await.unwrap();
        assert_eq!(seen.lock().unwrap().len(), 3);
        let r = report::read(&session, &submitted.id, None).await.unwrap();
        assert_eq!(r.number, 1);
        assert_eq!(r.pairs.recorded, 1);
        // Deleting the batch removes its webhook URL and token with it (outside try of
        // issue 21: the secret node outlived the batch).
        let webhook = archivist_engine::schema::paths::batch_webhook(&submitted.id);
        assert!(archivist_engine::store::exists(&session, &webhook)
            .await
            .unwrap()
            .is_some());
        archivist_batches::admin::delete(&session, &submitted.id, "test")
            .await
            .unwrap();
        assert!(
            archivist_engine::store::exists(&session, &webhook)
                .await
                .unwrap()
                .is_none(),
            "the webhook's secret node outlived the batch"
        );
    }
}
