//! Operator actions on batches. Each reads the batch, checks the batch state table and
//! writes the record at the version it read: a batch that moved meanwhile is refused
//! ([`BatchError::Moved`]), never changed blindly.

use archivist_engine::ops::Op;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    BatchProgress, BatchRecord, LockRecord, PauseRecord, WebhookDelivery,
};
use archivist_engine::schema::{BatchState, SCHEMA_VERSION};
use archivist_engine::transition::Role;
use archivist_engine::{clock, store, Session};
use serde::Serialize;
use time::OffsetDateTime;

use crate::error::BatchError;
use crate::report;
use crate::transition::{self, machine, BatchChange};

/// One line of `archivist batch list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchSummary {
    /// Batch id.
    pub id: String,
    /// Name, if any.
    pub name: Option<String>,
    /// State.
    pub status: BatchState,
    /// Pairs by where they are.
    pub progress: BatchProgress,
    /// Reports written.
    pub reports: u32,
    /// Webhook delivery of the latest report.
    pub delivery: Option<WebhookDelivery>,
    /// When submitted.
    #[serde(with = "time::serde::rfc3339")]
    pub submitted_at: OffsetDateTime,
    /// Why it is where it is.
    pub message: Option<String>,
}

impl From<&BatchRecord> for BatchSummary {
    fn from(r: &BatchRecord) -> Self {
        BatchSummary {
            id: r.id.clone(),
            name: r.name.clone(),
            status: r.status,
            progress: r.progress,
            reports: r.reports,
            delivery: r.delivery.clone(),
            submitted_at: r.submitted_at,
            message: r.message.clone(),
        }
    }
}

/// Every batch, oldest first; deleted ones only when `all`.
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails or a record does not decode.
pub async fn list(session: &Session, all: bool) -> Result<Vec<BatchSummary>, BatchError> {
    let names = store::children(session, paths::BATCHES).await?;
    let batch_paths: Vec<String> = names.iter().map(|n| paths::batch(n)).collect();
    Ok(store::read_many::<BatchRecord>(session, &batch_paths, 512)
        .await?
        .into_iter()
        .flatten()
        .map(|(r, _)| r)
        .filter(|r| all || r.status != BatchState::Deleted)
        .map(|r| BatchSummary::from(&r))
        .collect())
}

/// `archivist batch show`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchDetail {
    /// The record.
    pub batch: BatchRecord,
    /// Its data version.
    pub version: i32,
    /// The batcher holding it, if any.
    pub lock: Option<LockRecord>,
    /// Report numbers stored.
    pub report_numbers: Vec<u32>,
    /// Whether the collection-wide batch hold is on.
    pub batches_held: bool,
}

/// One batch in full.
///
/// # Errors
/// [`BatchError::NotFound`] without the batch.
pub async fn show(session: &Session, id: &str) -> Result<BatchDetail, BatchError> {
    let (batch, version) = transition::read(session, id).await?;
    let lock = store::read::<LockRecord>(session, &paths::batch_lock(id))
        .await?
        .map(|(l, _)| l);
    Ok(BatchDetail {
        batch,
        version,
        lock,
        report_numbers: report::numbers(session, id).await?,
        batches_held: store::exists(session, paths::HOLD_BATCHES).await?.is_some(),
    })
}

async fn change(
    session: &Session,
    id: &str,
    to: BatchState,
    action: &'static str,
    by: &str,
    extra: Vec<Op>,
) -> Result<BatchRecord, BatchError> {
    let (record, version) = transition::read(session, id).await?;
    if !machine().allows(record.status, to) {
        return Err(BatchError::Refused {
            batch: id.to_string(),
            status: record.status,
            action,
        });
    }
    let (next, _) = BatchChange::edit_of(Role::Admin, &record, version)
        .to(to)
        .edit(|r| {
            if to == BatchState::UpdateReporting {
                r.message = None;
            }
        })
        .event(by, action, "ok")
        .with_ops(extra)
        .commit(session)
        .await?;
    Ok(next)
}

/// Releases a held batch back to `pending`. Refused while the collection-wide hold is
/// on (the batcher would hold it again at once).
///
/// # Errors
/// [`BatchError::HoldInPlace`], [`BatchError::Refused`] unless held,
/// [`BatchError::Moved`] when it changed meanwhile.
pub async fn release(session: &Session, id: &str, by: &str) -> Result<BatchRecord, BatchError> {
    if store::exists(session, paths::HOLD_BATCHES).await?.is_some() {
        return Err(BatchError::HoldInPlace);
    }
    change(session, id, BatchState::Pending, "release", by, vec![]).await
}

/// Asks for an update report (`failed` or `completed` -> `update-reporting`): the
/// batcher writes it once every pair is settled again.
///
/// # Errors
/// [`BatchError::Refused`] from any other state; [`BatchError::Moved`].
pub async fn update_report(
    session: &Session,
    id: &str,
    by: &str,
) -> Result<BatchRecord, BatchError> {
    change(
        session,
        id,
        BatchState::UpdateReporting,
        "update-report",
        by,
        vec![],
    )
    .await
}

/// Deletes a batch: its record stays as a `deleted` tombstone and its reports and its
/// secret webhook node are removed, in one multi. Research and jobs are untouched (the batch never owned them).
///
/// # Errors
/// [`BatchError::Refused`] where the table has no `-> deleted`; [`BatchError::Moved`].
pub async fn delete(session: &Session, id: &str, by: &str) -> Result<BatchRecord, BatchError> {
    let reports = report::numbers(session, id).await?;
    let mut extra: Vec<Op> = reports
        .iter()
        .map(|n| Op::Delete {
            path: paths::batch_report(id, *n),
            version: None,
        })
        .collect();
    // The webhook URL (its token) goes with the batch: the tombstone keeps only the
    // origin, and an operator deleting a batch to be rid of a token is.
    let webhook = paths::batch_webhook(id);
    if store::exists(session, &webhook).await?.is_some() {
        extra.push(Op::Delete {
            path: webhook,
            version: None,
        });
    }
    change(session, id, BatchState::Deleted, "delete", by, extra).await
}

/// Turns the collection-wide batch hold on: new batches go to `held` instead of being
/// curated. `false` if it was already on.
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails.
pub async fn hold_all(session: &Session, by: &str, reason: &str) -> Result<bool, BatchError> {
    let record = PauseRecord {
        schema: SCHEMA_VERSION,
        by: by.to_string(),
        reason: reason.to_string(),
        at: Some(clock::stamp_now()),
    };
    Ok(store::create_if_absent(session, paths::HOLD_BATCHES, &record).await?)
}

/// Turns the collection-wide hold off and releases every held batch; returns the
/// batches released (a batch that moved meanwhile is left as it is).
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails.
pub async fn release_all(session: &Session, by: &str) -> Result<Vec<String>, BatchError> {
    store::delete_if_present(session, paths::HOLD_BATCHES).await?;
    let mut released = Vec::new();
    for summary in list(session, false).await? {
        if summary.status != BatchState::Held {
            continue;
        }
        match release(session, &summary.id, by).await {
            Ok(_) => released.push(summary.id),
            Err(e) if e.is_refusal() => {
                tracing::warn!(batch = %summary.id, error = %e, "not released")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(released)
}

/// Is the collection-wide batch hold on?
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails.
pub async fn batches_held(session: &Session) -> Result<bool, BatchError> {
    Ok(store::exists(session, paths::HOLD_BATCHES).await?.is_some())
}
