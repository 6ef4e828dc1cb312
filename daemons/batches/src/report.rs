//! Reports: the first one (written in `reporting`) and update reports (written in
//! `update-reporting`: what changed since the report before). Building them is pure;
//! they are stored at `/batches/{batch}/reports/r<number>` in the multi that moves the
//! batch on.

use std::collections::BTreeSet;

use archivist_engine::schema::paths;
use archivist_engine::schema::records::{BatchRecord, BatchReport, Pair, ReportKind};
use archivist_engine::schema::SCHEMA_VERSION;
use archivist_engine::{store, Session};
use time::OffsetDateTime;

use crate::error::BatchError;
use crate::evaluate::Evaluation;

/// The first report: every pair's outcome.
pub fn initial(
    batch: &BatchRecord,
    eval: &Evaluation,
    number: u32,
    now: OffsetDateTime,
) -> BatchReport {
    BatchReport {
        schema: SCHEMA_VERSION,
        batch: batch.id.clone(),
        number,
        kind: ReportKind::Initial,
        since: None,
        written: now,
        pairs: eval.progress,
        resolved: Vec::new(),
        found: eval.found.clone(),
        failed_jobs: eval.failed_jobs.values().cloned().collect(),
        still_failed: Vec::new(),
        errors: eval.errors.clone(),
    }
}

/// An update report: the pairs failed in `previous` that are researched now (with where
/// their clips were found), those still failed, and every failed job now.
pub fn update(
    batch: &BatchRecord,
    eval: &Evaluation,
    previous: &BatchReport,
    number: u32,
    now: OffsetDateTime,
) -> BatchReport {
    let failed_now: BTreeSet<Pair> = eval.failed_pairs().into_iter().collect();
    let before = previous.failed_pairs();
    let still_failed: Vec<Pair> = before
        .iter()
        .filter(|p| failed_now.contains(*p))
        .cloned()
        .collect();
    // Settled and not failed now: recorded (an update is written once nothing is pending).
    let resolved: Vec<Pair> = before
        .iter()
        .filter(|p| !failed_now.contains(*p))
        .cloned()
        .collect();
    let resolved_set: BTreeSet<&Pair> = resolved.iter().collect();
    let mut found = eval.found.clone();
    for (clip, episodes) in found.iter_mut() {
        episodes.retain(|episode, _| {
            resolved_set.contains(&Pair {
                episode: episode.clone(),
                clip: clip.clone(),
            })
        });
    }
    found.retain(|_, episodes| !episodes.is_empty());
    let errors = eval
        .errors
        .iter()
        .filter(|e| {
            resolved_set.contains(&Pair {
                episode: e.episode.clone(),
                clip: e.clip.clone(),
            })
        })
        .cloned()
        .collect();
    BatchReport {
        schema: SCHEMA_VERSION,
        batch: batch.id.clone(),
        number,
        kind: ReportKind::Update,
        since: Some(previous.number),
        written: now,
        pairs: eval.progress,
        resolved,
        found,
        failed_jobs: eval.failed_jobs.values().cloned().collect(),
        still_failed,
        errors,
    }
}

/// Reads report `number` of a batch, or its latest when `None`.
///
/// # Errors
/// [`BatchError::NotFound`] without the batch, [`BatchError::NoReport`] without the
/// report, [`BatchError::Deleted`] for a deleted batch.
pub async fn read(
    session: &Session,
    batch: &str,
    number: Option<u32>,
) -> Result<BatchReport, BatchError> {
    let (record, _) = crate::transition::read(session, batch).await?;
    if record.status == archivist_engine::schema::BatchState::Deleted {
        return Err(BatchError::Deleted(batch.to_string()));
    }
    let n = match number {
        Some(n) => n,
        None if record.reports > 0 => record.reports,
        None => {
            return Err(BatchError::NoReport {
                batch: batch.to_string(),
                number: None,
            })
        }
    };
    match store::read::<BatchReport>(session, &paths::batch_report(batch, n)).await? {
        Some((report, _)) => Ok(report),
        None => Err(BatchError::NoReport {
            batch: batch.to_string(),
            number: Some(n),
        }),
    }
}

/// The numbers of the reports a batch has, oldest first.
///
/// # Errors
/// [`BatchError::Engine`] when ZooKeeper fails.
pub async fn numbers(session: &Session, batch: &str) -> Result<Vec<u32>, BatchError> {
    let mut out: Vec<u32> = store::children(session, &paths::batch_reports(batch))
        .await?
        .iter()
        .filter_map(|n| paths::batch_report_number(n))
        .collect();
    out.sort_unstable();
    Ok(out)
}
