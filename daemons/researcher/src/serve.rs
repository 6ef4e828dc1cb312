//! The researcher's loop on one session: register, claim pending jobs up to the
//! concurrency, research each on its own task, and wind down on shutdown.
//!
//! It is the engine's consumer loop (a live queue view via [`consumer::Claimer`], pause
//! honoured, lock + re-check) plus one thing the generic loop lacks: a job that could not
//! be claimed because its lease is gone is passed over for a while instead of being
//! locked and released again in a tight loop until the reaper expires it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use archivist_engine::consumer;
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::JobState;
use archivist_engine::transition::Role;
use archivist_engine::{EngineError, Session};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::job::{Outcome, Worker};

/// What the loop needs beyond the worker.
#[derive(Debug, Clone)]
pub(crate) struct LoopSettings {
    pub concurrency: u32,
    pub poll: Duration,
    pub refused_backoff: Duration,
    pub metrics_addr: Option<String>,
}

type Refused = Arc<Mutex<HashMap<String, Instant>>>;

fn skip_set(active: &Mutex<HashSet<String>>, refused: &Refused) -> HashSet<String> {
    let mut skip = active.lock().map(|a| a.clone()).unwrap_or_default();
    if let Ok(mut r) = refused.lock() {
        let now = Instant::now();
        r.retain(|_, until| *until > now);
        skip.extend(r.keys().cloned());
    }
    skip
}

/// Runs until `shutdown` (then waits for the jobs in flight to wind down) or until the
/// session is lost ([`EngineError::SessionLost`]).
pub(crate) async fn serve(
    worker: Arc<Worker>,
    session: &Session,
    identity: &Identity,
    settings: &LoopSettings,
    shutdown: CancellationToken,
) -> Result<(), EngineError> {
    member::register(
        session,
        identity,
        settings.concurrency,
        settings.metrics_addr.clone(),
    )
    .await?;
    tracing::info!(name = %identity.name, slots = settings.concurrency, "researcher registered");
    let slots = Arc::new(Semaphore::new(settings.concurrency.max(1) as usize));
    // Slot numbers label the per-job progress gauge: one series per slot, not per job,
    // so the metric's cardinality stays at the concurrency however many jobs pass.
    let free_slots: Arc<Mutex<BTreeSet<usize>>> = Arc::new(Mutex::new(
        (0..settings.concurrency.max(1) as usize).collect(),
    ));
    let active: Arc<Mutex<HashSet<String>>> = Arc::default();
    let refused: Refused = Arc::default();
    let tracker = TaskTracker::new();
    let lost = session.lost();
    // A live view of the pending queue (the engine's claimer: a persistent watch, one
    // listing, lock and re-read in one round trip) instead of a listing per claim.
    let mut claimer = consumer::Claimer::new(
        JobState::Pending,
        identity.name.clone(),
        settings.poll,
        consumer::DEFAULT_SPREAD,
    );
    // Researchers split the queue's head between them (`/consumers/pending`).
    claimer
        .join_group(session, settings.concurrency.max(1) as usize)
        .await;
    let result = loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break Ok(()),
            },
            _ = shutdown.cancelled() => break Ok(()),
            _ = lost.cancelled() => break Err(EngineError::SessionLost("waiting for a slot".into())),
        };
        let paused = match consumer::is_paused(session, JobState::Pending).await {
            Ok(p) => p,
            Err(e) if e.is_session_lost() => break Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "checking pause failed");
                false
            }
        };
        let claimed = if paused || shutdown.is_cancelled() {
            None
        } else {
            let skip = skip_set(&active, &refused);
            match claimer.claim(session, &skip, &shutdown).await {
                Ok(c) => c,
                Err(e) if e.is_session_lost() => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "claim failed; retrying");
                    claimer.invalidate();
                    None
                }
            }
        };
        let Some(claimed) = claimed else {
            drop(permit);
            tokio::select! {
                _ = claimer.changed() => {}
                // The fallback for a missed event, and the pause's re-check.
                _ = tokio::time::sleep(settings.poll) => claimer.invalidate(),
                _ = shutdown.cancelled() => break Ok(()),
                _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
            }
            continue;
        };
        let job_id = claimed.job.id.clone();
        if let Ok(mut a) = active.lock() {
            a.insert(job_id.clone());
        }
        let worker = worker.clone();
        let active = active.clone();
        let refused = refused.clone();
        let free_slots = free_slots.clone();
        let backoff = settings.refused_backoff;
        let me = identity.name.clone();
        let span = archivist_engine::logs::job_span(&claimed.job);
        tracker.spawn(async move {
            metrics::gauge!("archivist_researcher_jobs_active").increment(1.0);
            let slot = free_slots.lock().ok().and_then(|mut s| s.pop_first());
            let gauge = slot.map(|n| {
                metrics::gauge!("archivist_researcher_job_progress", "slot" => n.to_string())
            });
            let lock = claimed.lock.clone();
            let session = claimed.session.clone();
            match worker.research(claimed, gauge.clone()).await {
                Ok(outcome) => {
                    metrics::counter!("archivist_researcher_jobs_total", "outcome" => outcome.label())
                        .increment(1);
                    tracing::info!(outcome = outcome.label(), "job done");
                    if let Outcome::Refused(reason) = &outcome {
                        tracing::warn!(%reason, "job left alone");
                        if let Ok(mut r) = refused.lock() {
                            r.insert(job_id.clone(), Instant::now() + backoff);
                        }
                    }
                }
                Err(e) if e.is_session_lost() => {
                    tracing::warn!("session lost during the job; its lock went with it");
                }
                // A record that does not decode (the episode's research record, the
                // lease) will not decode on the next try either: fail the job with why,
                // so an operator sees it, instead of retrying it unseen every backoff.
                Err(e @ EngineError::Record(_)) => {
                    let reason = format!("unreadable record: {e} (run `archivist fsck`)");
                    tracing::error!(%reason, "job failed");
                    if let Err(err) = consumer::fail_held_job(&session, lock, Role::Researcher, &me, &reason).await {
                        tracing::warn!(error = %err, "could not record the failure");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "job could not be finished; releasing its lock");
                    let _ = lock.release(&session).await;
                    // A dropped connection is no reason to wait before resuming the job.
                    if !e.is_retryable() {
                        if let Ok(mut r) = refused.lock() {
                            r.insert(job_id.clone(), Instant::now() + backoff);
                        }
                    }
                }
            }
            metrics::gauge!("archivist_researcher_jobs_active").decrement(1.0);
            if let Some(g) = gauge {
                g.set(0.0);
            }
            if let (Some(n), Ok(mut s)) = (slot, free_slots.lock()) {
                s.insert(n);
            }
            if let Ok(mut a) = active.lock() {
                a.remove(&job_id);
            }
            drop(permit);
        }.instrument(span));
    };
    tracker.close();
    tracker.wait().await;
    result
}
