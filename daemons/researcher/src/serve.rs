//! The researcher's loop on one session: register, claim pending jobs up to the
//! concurrency, research each on its own task, and wind down on shutdown.
//!
//! It is the engine's consumer loop (watch + poll, pause honoured, lock + re-check via
//! [`consumer::claim_next`]) plus one thing the generic loop lacks: a job that could not
//! be claimed because its lease is gone is passed over for a while instead of being
//! locked and released again in a tight loop until the reaper expires it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use archivist_engine::consumer;
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::paths;
use archivist_engine::schema::JobState;
use archivist_engine::{EngineError, Session};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    let active: Arc<Mutex<HashSet<String>>> = Arc::default();
    let refused: Refused = Arc::default();
    let tracker = TaskTracker::new();
    let lost = session.lost();
    let queue = paths::queue(JobState::Pending);
    let result = loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break Ok(()),
            },
            _ = shutdown.cancelled() => break Ok(()),
            _ = lost.cancelled() => break Err(EngineError::SessionLost("waiting for a slot".into())),
        };
        let watch = session.client().get_and_watch_children(&queue).await;
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
            match consumer::claim_next(session, JobState::Pending, &identity.name, &skip, &shutdown)
                .await
            {
                Ok(c) => c,
                Err(e) if e.is_session_lost() => break Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "claim failed; retrying");
                    None
                }
            }
        };
        let Some(claimed) = claimed else {
            drop(permit);
            let poll = tokio::time::sleep(settings.poll);
            match watch {
                Ok((_, _, watcher)) => tokio::select! {
                    _ = watcher.changed() => {}
                    _ = poll => {}
                    _ = shutdown.cancelled() => break Ok(()),
                    _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
                },
                Err(_) => tokio::select! {
                    _ = poll => {}
                    _ = shutdown.cancelled() => break Ok(()),
                    _ = lost.cancelled() => break Err(EngineError::SessionLost("while idle".into())),
                },
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
        let backoff = settings.refused_backoff;
        tracker.spawn(async move {
            metrics::gauge!("archivist_researcher_jobs_active").increment(1.0);
            let lock = claimed.lock.clone();
            let session = claimed.session.clone();
            let episode = claimed.job.episode.clone();
            match worker.research(claimed).await {
                Ok(outcome) => {
                    metrics::counter!("archivist_researcher_jobs_total", "outcome" => outcome.label())
                        .increment(1);
                    tracing::info!(job = %job_id, episode = %episode, outcome = outcome.label(), "job done");
                    if let Outcome::Refused(reason) = &outcome {
                        tracing::warn!(job = %job_id, episode = %episode, state = "pending", %reason, "job left alone");
                        if let Ok(mut r) = refused.lock() {
                            r.insert(job_id.clone(), Instant::now() + backoff);
                        }
                    }
                }
                Err(e) if e.is_session_lost() => {
                    tracing::warn!(job = %job_id, episode = %episode, "session lost during the job; its lock went with it");
                }
                Err(e) => {
                    tracing::error!(job = %job_id, episode = %episode, error = %e, "job could not be finished; releasing its lock");
                    let _ = lock.release(&session).await;
                    if let Ok(mut r) = refused.lock() {
                        r.insert(job_id.clone(), Instant::now() + backoff);
                    }
                }
            }
            metrics::gauge!("archivist_researcher_jobs_active").decrement(1.0);
            if let Ok(mut a) = active.lock() {
                a.remove(&job_id);
            }
            drop(permit);
        });
    };
    tracker.close();
    tracker.wait().await;
    result
}
