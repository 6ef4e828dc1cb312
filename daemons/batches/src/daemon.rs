//! The batcher: passes over `/batches`, acting on each batch under its ephemeral lock
//! (`/batches/{batch}/lock`, the engine's lock recipe), so any number of batchers may
//! run. Every status change is one multi at the batch record's version that also
//! releases the lock (Merritt's "DELETE /batches/BID/lock" in the same step):
//!
//! - `pending`: with the collection-wide hold on, `-> held`; else curate what the
//!   submission names, fix the pairs, `-> processing` (`-> failed` if a side it names is
//!   wholly unusable).
//! - `processing`: evaluate the pairs; keep the progress current; once every pair is
//!   recorded or failed, `-> reporting`, and go on at once:
//! - `reporting`: write report 1 in the multi that moves the batch `-> completed` (no
//!   failed pairs) or `-> failed`.
//! - `update-reporting`: once every pair is settled again, write a report of what
//!   changed since the last one, `-> completed` or `-> failed`.
//! - after a report, with a webhook: POST it (retries, backoff) and record the delivery;
//!   a delivery cut short by a crash is retried by the next pass.

use archivist_db::Database;
use std::collections::BTreeSet;
use std::time::Duration;

use archivist_engine::lock::{JobLock, LockGuard};
use archivist_engine::member::{self, Identity};
use archivist_engine::ops::{Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    BatchRecord, BatchReport, ReportKind, WebhookDelivery, WebhookSecret, WebhookStatus,
};
use archivist_engine::schema::BatchState;
use archivist_engine::transition::{LockAction, Role};
use archivist_engine::{clock, daemon, store, EngineError, Session, ZkConfig};
use tokio_util::sync::CancellationToken;

use crate::curation;
use crate::error::BatchError;
use crate::evaluate::{evaluate, Evaluation, Knowledge};
use crate::report;
use crate::settings::BatcherSettings;
use crate::snapshot;
use crate::transition::{self, BatchChange};
use crate::webhook;

/// A batcher: its settings, its name (in locks, events and curated records) and its
/// HTTP client.
#[derive(Debug, Clone)]
pub struct Batcher {
    settings: BatcherSettings,
    by: String,
    http: reqwest::Client,
    /// The database holding the catalog and the research archive.
    db: Database,
}

/// What one pass did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Batches acted on, with the state they were left in.
    pub acted: Vec<(String, BatchState)>,
    /// Batches another batcher held the lock of.
    pub locked: usize,
}

/// What acting on one batch did.
struct Acted {
    state: Option<BatchState>,
    released: bool,
}

impl Acted {
    fn released(state: BatchState) -> Acted {
        Acted {
            state: Some(state),
            released: true,
        }
    }

    fn nothing() -> Acted {
        Acted {
            state: None,
            released: false,
        }
    }
}

fn needs_work(record: &BatchRecord) -> bool {
    match record.status {
        BatchState::Pending
        | BatchState::Processing
        | BatchState::Reporting
        | BatchState::UpdateReporting => true,
        BatchState::Completed | BatchState::Failed => record
            .delivery
            .as_ref()
            .is_some_and(|d| d.status == WebhookStatus::Pending),
        BatchState::Held | BatchState::Deleted => false,
    }
}

fn evaluates(status: BatchState) -> bool {
    matches!(
        status,
        BatchState::Processing | BatchState::Reporting | BatchState::UpdateReporting
    )
}

/// Sets `archivist_batch_pairs{batch,state}` and `archivist_batches{state}`.
fn observe(records: &[BatchRecord]) {
    for state in BatchState::ALL {
        let n = records.iter().filter(|r| r.status == state).count();
        metrics::gauge!("archivist_batches", "state" => state.as_str()).set(n as f64);
    }
    for r in records.iter().filter(|r| r.status != BatchState::Deleted) {
        let p = r.progress;
        for (state, value) in [
            ("total", p.total),
            ("recorded", p.recorded),
            ("failed", p.failed),
            ("pending", p.pending),
        ] {
            metrics::gauge!("archivist_batch_pairs", "batch" => r.id.clone(), "state" => state)
                .set(value as f64);
        }
    }
}

impl Batcher {
    /// A batcher acting as `by`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (no TLS backend).
    pub fn new(
        settings: BatcherSettings,
        by: impl Into<String>,
        db: Database,
    ) -> Result<Batcher, BatchError> {
        let http = webhook::client(&settings)
            .map_err(|e| EngineError::Config(format!("webhook HTTP client: {e}")))?;
        Ok(Batcher {
            settings,
            by: by.into(),
            http,
            db,
        })
    }

    /// The readable batch records at `paths` (an unreadable one is logged and left out).
    async fn read_batches(
        &self,
        session: &Session,
        paths: &[String],
    ) -> Result<Vec<BatchRecord>, BatchError> {
        Ok(store::read_many_readable(session, paths, self.settings.read_chunk).await?)
    }

    /// One pass over every batch. Problems with one batch are logged and the pass goes
    /// on; a lost session ends it.
    ///
    /// # Errors
    /// [`BatchError`] when the batches cannot be listed or read, or the session is lost.
    pub async fn pass(&self, session: &Session) -> Result<Pass, BatchError> {
        let names = store::children(session, paths::BATCHES).await?;
        let batch_paths: Vec<String> = names.iter().map(|n| paths::batch(n)).collect();
        let records: Vec<BatchRecord> = self.read_batches(session, &batch_paths).await?;
        let hold = store::exists(session, paths::HOLD_BATCHES).await?.is_some();
        let episodes: BTreeSet<String> = records
            .iter()
            .filter(|r| evaluates(r.status))
            .flat_map(|r| r.episodes.iter().cloned())
            .collect();
        let knowledge = if records.iter().any(|r| evaluates(r.status)) {
            snapshot::load(session, &self.db, &episodes, self.settings.read_chunk).await?
        } else {
            Knowledge::default()
        };
        let mut pass = Pass::default();
        for record in records.iter().filter(|r| needs_work(r)) {
            match self.work(session, &record.id, &knowledge, hold).await {
                Ok(Some(Some(state))) => pass.acted.push((record.id.clone(), state)),
                Ok(Some(None)) => {}
                Ok(None) => pass.locked += 1,
                Err(e) if e.is_session_lost() => return Err(e),
                Err(e) if e.is_conflict() => {
                    tracing::debug!(batch = %record.id, error = %e, "batch moved meanwhile; next pass")
                }
                Err(e) => {
                    tracing::warn!(batch = %record.id, error = %e, "batch step failed; next pass")
                }
            }
        }
        let after: Vec<BatchRecord> = self.read_batches(session, &batch_paths).await?;
        observe(&after);
        Ok(pass)
    }

    /// Acts on one batch under its lock. `None`: another batcher holds it.
    async fn work(
        &self,
        session: &Session,
        id: &str,
        knowledge: &Knowledge,
        hold: bool,
    ) -> Result<Option<Option<BatchState>>, BatchError> {
        let Some(lock) =
            JobLock::try_acquire_at(session, &paths::batch_lock(id), id, &self.by).await?
        else {
            return Ok(None);
        };
        let lock = LockGuard::new(session, lock);
        let result = self.locked(session, id, lock.lock(), knowledge, hold).await;
        // Every commit that releases the lock is the last step of its path, so after an
        // error the lock is still ours (a lost session took it already).
        let acted = lock.settle(result, |acted| acted.released).await?;
        Ok(Some(acted.state))
    }

    async fn locked(
        &self,
        session: &Session,
        id: &str,
        lock: &JobLock,
        knowledge: &Knowledge,
        hold: bool,
    ) -> Result<Acted, BatchError> {
        // Re-read under the lock: the batch may have moved since the listing.
        let (record, version) = match transition::read(session, id).await {
            Ok(found) => found,
            Err(BatchError::NotFound(_)) => return Ok(Acted::nothing()),
            Err(e) => return Err(e),
        };
        let release = LockAction::Release(lock.clone());
        match record.status {
            BatchState::Pending if hold => {
                BatchChange::edit_of(Role::Batcher, &record, version)
                    .to(BatchState::Held)
                    .lock(release)
                    .event(&self.by, "hold", "batches are held (/control/hold-batches)")
                    .commit(session)
                    .await?;
                Ok(Acted::released(BatchState::Held))
            }
            BatchState::Pending => self.curate(session, record, version, release).await,
            BatchState::Processing => {
                let eval = evaluate(&record.episodes, &record.clips, knowledge);
                if !eval.progress.settled() {
                    return self
                        .keep_progress(session, record, version, &eval, release)
                        .await;
                }
                let (record, version) = BatchChange::edit_of(Role::Batcher, &record, version)
                    .to(BatchState::Reporting)
                    .lock(LockAction::Keep(lock.clone()))
                    .edit(|r| r.progress = eval.progress)
                    .event(
                        &self.by,
                        "settle",
                        &format!(
                            "{} pairs: {} recorded, {} failed",
                            eval.progress.total, eval.progress.recorded, eval.progress.failed
                        ),
                    )
                    .commit(session)
                    .await?;
                self.write_report(session, record, version, lock, &eval)
                    .await
            }
            BatchState::Reporting => {
                let eval = evaluate(&record.episodes, &record.clips, knowledge);
                self.write_report(session, record, version, lock, &eval)
                    .await
            }
            BatchState::UpdateReporting => {
                let eval = evaluate(&record.episodes, &record.clips, knowledge);
                if !eval.progress.settled() {
                    return self
                        .keep_progress(session, record, version, &eval, release)
                        .await;
                }
                self.write_report(session, record, version, lock, &eval)
                    .await
            }
            BatchState::Completed | BatchState::Failed => match record.delivery.as_ref() {
                Some(d) if d.status == WebhookStatus::Pending => {
                    let report = report::read(session, id, Some(d.report)).await?;
                    self.deliver(session, record, version, lock, &report).await
                }
                _ => Ok(Acted::nothing()),
            },
            BatchState::Held | BatchState::Deleted => Ok(Acted::nothing()),
        }
    }

    async fn curate(
        &self,
        session: &Session,
        record: BatchRecord,
        version: i32,
        release: LockAction,
    ) -> Result<Acted, BatchError> {
        let curated = curation::curate_submission(
            session,
            &self.db,
            &record.submission,
            &self.settings.curate,
        )
        .await?;
        let total = curated.episodes.len() as u64 * curated.clips.len() as u64;
        if let Some(why) = &curated.unusable {
            let message = if curated.problems.is_empty() {
                format!("nothing to research: {why}")
            } else {
                format!(
                    "nothing to research: {why}: {}",
                    curated.problems.join("; ")
                )
            };
            BatchChange::edit_of(Role::Batcher, &record, version)
                .to(BatchState::Failed)
                .lock(release)
                .edit(|r| {
                    r.problems = curated.problems.clone();
                    r.message = Some(message.clone());
                })
                .event(&self.by, "curate", &message)
                .commit(session)
                .await?;
            return Ok(Acted::released(BatchState::Failed));
        }
        let summary = format!(
            "{} episode(s) x {} clip(s) = {total} pairs; {} problem(s)",
            curated.episodes.len(),
            curated.clips.len(),
            curated.problems.len()
        );
        BatchChange::edit_of(Role::Batcher, &record, version)
            .to(BatchState::Processing)
            .lock(release)
            .edit(|r| {
                r.episodes = curated.episodes.clone();
                r.clips = curated.clips.clone();
                r.problems = curated.problems.clone();
                r.progress.total = total;
                r.progress.pending = total;
            })
            .event(&self.by, "curate", &summary)
            .commit(session)
            .await?;
        Ok(Acted::released(BatchState::Processing))
    }

    async fn keep_progress(
        &self,
        session: &Session,
        record: BatchRecord,
        version: i32,
        eval: &Evaluation,
        release: LockAction,
    ) -> Result<Acted, BatchError> {
        let status = record.status;
        if record.progress == eval.progress {
            return Ok(Acted {
                state: Some(status),
                released: false,
            });
        }
        BatchChange::edit_of(Role::Batcher, &record, version)
            .lock(release)
            .edit(|r| r.progress = eval.progress)
            .commit(session)
            .await?;
        Ok(Acted::released(status))
    }

    /// Writes the next report in the multi that moves the batch to `completed` or
    /// `failed`, then delivers it when the batch has a webhook.
    async fn write_report(
        &self,
        session: &Session,
        record: BatchRecord,
        version: i32,
        lock: &JobLock,
        eval: &Evaluation,
    ) -> Result<Acted, BatchError> {
        let number = record.reports + 1;
        let now = clock::stamp_now();
        let report = match (record.status, record.reports) {
            (BatchState::UpdateReporting, previous) if previous > 0 => {
                let before = report::read(session, &record.id, Some(previous)).await?;
                report::update(&record, eval, &before, number, now)
            }
            _ => report::initial(&record, eval, number, now),
        };
        let path = paths::batch_report(&record.id, number);
        let data = match store::encode(&path, &report) {
            Ok(data) => data,
            Err(e) => {
                let message = format!("report {number} cannot be stored: {e}");
                BatchChange::edit_of(Role::Batcher, &record, version)
                    .to(BatchState::Failed)
                    .lock(LockAction::Release(lock.clone()))
                    .edit(|r| r.message = Some(message.clone()))
                    .event(&self.by, "report", &message)
                    .commit(session)
                    .await?;
                return Ok(Acted::released(BatchState::Failed));
            }
        };
        let p = eval.progress;
        let (to, message) = if p.failed > 0 {
            (
                BatchState::Failed,
                Some(format!(
                    "{} of {} pairs failed in {} job(s): retry them, then `archivist batch update-report {}`",
                    p.failed,
                    p.total,
                    eval.failed_jobs.len(),
                    record.id
                )),
            )
        } else {
            (BatchState::Completed, None)
        };
        let webhook = record.webhook.is_some();
        let lock_action = if webhook {
            LockAction::Keep(lock.clone())
        } else {
            LockAction::Release(lock.clone())
        };
        let what = match report.kind {
            ReportKind::Initial => "report",
            ReportKind::Update => "update report",
        };
        let (record, version) = BatchChange::edit_of(Role::Batcher, &record, version)
            .to(to)
            .lock(lock_action)
            .edit(|r| {
                r.reports = number;
                r.progress = p;
                r.message = message.clone();
                r.delivery = webhook.then_some(WebhookDelivery {
                    report: number,
                    status: WebhookStatus::Pending,
                    attempts: 0,
                    error: None,
                    at: None,
                });
            })
            .event(
                &self.by,
                what,
                &format!(
                    "{} {number}: {} recorded, {} failed of {}",
                    what, p.recorded, p.failed, p.total
                ),
            )
            .with_ops([Op::Create {
                path,
                data,
                mode: Mode::Persistent,
            }])
            .commit(session)
            .await?;
        metrics::counter!("archivist_batch_reports_total", "kind" => what).increment(1);
        if webhook {
            self.deliver(session, record, version, lock, &report).await
        } else {
            Ok(Acted::released(to))
        }
    }

    async fn deliver(
        &self,
        session: &Session,
        record: BatchRecord,
        version: i32,
        lock: &JobLock,
        report: &BatchReport,
    ) -> Result<Acted, BatchError> {
        let status = record.status;
        let Some(shown) = record.webhook.clone() else {
            return Ok(Acted::nothing());
        };
        // The URL is in the batch's secret node; the record shows its origin only
        // (a batch submitted before secret nodes existed has the URL in the record).
        let secret = paths::batch_webhook(&record.id);
        let url = match store::read::<WebhookSecret>(session, &secret).await? {
            Some((secret, _)) => Some(secret.url),
            None => (!shown.ends_with("/…")).then_some(shown),
        };
        let outcome = match url {
            Some(url) => webhook::deliver(&self.http, &url, &record, report, &self.settings).await,
            None => webhook::Outcome {
                attempts: 0,
                error: Some(format!(
                    "the webhook URL is missing: {secret} does not exist (deleted by hand?)"
                )),
            },
        };
        let (delivery, result) = match &outcome.error {
            None => (
                WebhookStatus::Delivered,
                format!("report {} delivered", report.number),
            ),
            Some(e) => (
                WebhookStatus::Failed,
                format!("report {} not delivered: {e}", report.number),
            ),
        };
        BatchChange::edit_of(Role::Batcher, &record, version)
            .lock(LockAction::Release(lock.clone()))
            .edit(|r| {
                r.delivery = Some(WebhookDelivery {
                    report: report.number,
                    status: delivery,
                    attempts: outcome.attempts,
                    error: outcome.error.clone(),
                    at: Some(clock::stamp_now()),
                })
            })
            .event(&self.by, "webhook", &result)
            .commit(session)
            .await?;
        Ok(Acted::released(status))
    }
}

/// Runs a batcher until `shutdown` fires, on a new session whenever one is lost.
/// Several batchers may run at once.
///
/// # Errors
/// [`BatchError`] when the batcher cannot start; otherwise it keeps retrying.
pub async fn run(
    config: &ZkConfig,
    db: &Database,
    settings: BatcherSettings,
    identity: Identity,
    metrics_addr: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), BatchError> {
    let batcher = Batcher::new(settings, identity.name.clone(), db.clone())?;
    let name = identity.name.clone();
    daemon::supervise(config, &name, shutdown.clone(), |session| {
        let batcher = batcher.clone();
        let identity = identity.clone();
        let metrics_addr = metrics_addr.clone();
        let shutdown = shutdown.clone();
        async move {
            batcher
                .run_on_session(&session, &identity, metrics_addr, &shutdown)
                .await
        }
    })
    .await?;
    Ok(())
}

impl Batcher {
    /// On one session: registers under `/daemons` and passes every poll interval until
    /// `shutdown` fires or the session is lost.
    ///
    /// # Errors
    /// [`EngineError`] when registering fails or the session is lost.
    pub async fn run_on_session(
        &self,
        session: &Session,
        identity: &Identity,
        metrics_addr: Option<String>,
        shutdown: &CancellationToken,
    ) -> Result<(), EngineError> {
        let Some(_membership) =
            member::register(session, identity, 0, metrics_addr, shutdown).await?
        else {
            return Ok(());
        };
        let lost = session.lost();
        loop {
            match self.pass(session).await {
                Ok(pass) if !pass.acted.is_empty() => {
                    tracing::debug!(acted = ?pass.acted, "batch pass")
                }
                Ok(_) => {}
                Err(e) if e.is_session_lost() => {
                    return Err(EngineError::SessionLost(e.to_string()))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "batch pass failed; next one in {:?}", self.settings.poll_interval)
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.settings.poll_interval.max(Duration::from_millis(10))) => {}
                _ = shutdown.cancelled() => return Ok(()),
                _ = lost.cancelled() => return Err(EngineError::SessionLost("session lost".into())),
            }
        }
    }
}
