//! Sending a report to the submission's webhook: a JSON POST, retried with exponential
//! backoff. A webhook that keeps failing marks the batch's delivery `failed` with the
//! last error; the report itself stays in ZooKeeper (`archivist batch report`).
//!
//! The URL is a secret (receivers put their token in its path or query): errors and logs
//! name its origin only ([`webhook_origin`]), and reqwest's errors lose their URL.

use std::time::Duration;

use archivist_engine::schema::records::{webhook_origin, BatchRecord, BatchReport};
use serde::Serialize;

use crate::settings::BatcherSettings;

/// The JSON body POSTed to a webhook.
#[derive(Debug, Clone, Serialize)]
pub struct Payload<'a> {
    /// Batch id.
    pub batch: &'a str,
    /// Its name, if any.
    pub name: Option<&'a str>,
    /// Its state after the report (`completed` or `failed`).
    pub status: &'a str,
    /// The report.
    pub report: &'a BatchReport,
}

/// How a delivery went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// HTTP attempts made.
    pub attempts: u32,
    /// `None` when the webhook answered 2xx; the last error otherwise.
    pub error: Option<String>,
}

/// A client for webhooks with the configured timeout.
///
/// # Errors
/// The TLS backend could not be set up.
pub fn client(settings: &BatcherSettings) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(settings.webhook_timeout)
        .user_agent(concat!("archivist-batcher/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// An error with its causes (reqwest's own message leaves out why a request failed).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// POSTs `report` of `batch` to `url`, up to `settings.webhook_attempts` times.
pub async fn deliver(
    client: &reqwest::Client,
    url: &str,
    batch: &BatchRecord,
    report: &BatchReport,
    settings: &BatcherSettings,
) -> Outcome {
    let payload = Payload {
        batch: &batch.id,
        name: batch.name.as_deref(),
        status: batch.status.as_str(),
        report,
    };
    let body = match serde_json::to_vec(&payload) {
        Ok(body) => body,
        Err(e) => {
            return Outcome {
                attempts: 0,
                error: Some(format!("cannot encode the report: {e}")),
            }
        }
    };
    let shown = webhook_origin(url);
    let mut backoff = settings.webhook_backoff;
    let mut last = String::new();
    for attempt in 1..=settings.webhook_attempts.max(1) {
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                metrics::counter!("archivist_batch_webhooks_total", "outcome" => "delivered")
                    .increment(1);
                return Outcome {
                    attempts: attempt,
                    error: None,
                };
            }
            Ok(response) => last = format!("{shown} answered {}", response.status()),
            Err(e) => last = format!("POST {shown}: {}", chain(&e.without_url())),
        }
        tracing::warn!(batch = %batch.id, attempt, error = %last, "webhook attempt failed");
        if attempt < settings.webhook_attempts {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(60));
        }
    }
    metrics::counter!("archivist_batch_webhooks_total", "outcome" => "failed").increment(1);
    Outcome {
        attempts: settings.webhook_attempts.max(1),
        error: Some(last),
    }
}
