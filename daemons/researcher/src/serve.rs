//! The researcher's loop on one session: register, then run the engine's consumer loop
//! ([`consumer::run`]: a live queue view, batched claims filling every free slot, the
//! watched pause flag, lock + re-check) over `pending` with [`ResearchStep`], and wind
//! down on shutdown.
//!
//! The step adds what the generic loop lacks: a job that could not be claimed because its
//! lease is gone (or that failed in a way retrying at once will not fix) is passed over
//! for a while ([`consumer::Step::pass_over`]) instead of being locked and released again
//! in a tight loop until the reaper expires it; each job in flight reports its progress
//! on a gauge labelled with a free slot number; an unreadable record fails the job; any
//! other error releases the job (at once if it was a dropped connection).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use archivist_engine::consumer::{self, Claimed, ConsumerOptions, Step};
use archivist_engine::member::{self, Identity};
use archivist_engine::schema::JobState;
use archivist_engine::transition::Role;
use archivist_engine::{EngineError, Session};
use tokio_util::sync::CancellationToken;

use crate::job::{Outcome, Worker};

/// What the loop needs beyond the worker.
#[derive(Debug, Clone)]
pub(crate) struct LoopSettings {
    pub concurrency: u32,
    pub poll: Duration,
    pub refused_backoff: Duration,
    pub metrics_addr: Option<String>,
}

/// Research of one claimed `pending` job, as the consumer loop's step. It settles every
/// outcome itself (see the module docs), so it hands the loop an error only when the
/// session is lost.
struct ResearchStep {
    worker: Arc<Worker>,
    me: String,
    backoff: Duration,
    /// Jobs passed over until the instant given.
    refused: Mutex<HashMap<String, Instant>>,
    /// Slot numbers label the per-job progress gauge: one series per slot, not per job,
    /// so the metric's cardinality stays at the concurrency however many jobs pass.
    free_slots: Mutex<BTreeSet<usize>>,
}

impl ResearchStep {
    fn refuse_for_a_while(&self, job: &str) {
        self.pass_over_for(job, self.backoff);
    }

    fn pass_over_for(&self, job: &str, how_long: Duration) {
        if let Ok(mut r) = self.refused.lock() {
            r.insert(job.to_string(), Instant::now() + how_long);
        }
    }
}

impl Step for ResearchStep {
    fn pass_over(&self) -> HashSet<String> {
        let Ok(mut r) = self.refused.lock() else {
            return HashSet::new();
        };
        let now = Instant::now();
        r.retain(|_, until| *until > now);
        r.keys().cloned().collect()
    }

    async fn run(&self, claimed: Claimed) -> Result<(), EngineError> {
        let job_id = claimed.job.id.clone();
        metrics::gauge!("archivist_researcher_jobs_active").increment(1.0);
        let slot = self.free_slots.lock().ok().and_then(|mut s| s.pop_first());
        let gauge = slot
            .map(|n| metrics::gauge!("archivist_researcher_job_progress", "slot" => n.to_string()));
        let lock = claimed.lock.clone();
        let session = claimed.session.clone();
        let mut result = Ok(());
        match self.worker.research(claimed, gauge.clone()).await {
            Ok(outcome) => {
                metrics::counter!("archivist_researcher_jobs_total", "outcome" => outcome.label())
                    .increment(1);
                tracing::info!(outcome = outcome.label(), "job done");
                match &outcome {
                    Outcome::Refused(reason) => {
                        tracing::warn!(%reason, "job left alone");
                        self.refuse_for_a_while(&job_id);
                    }
                    // Affinity: the researcher holding the episode's audio gets it first.
                    Outcome::Deferred { to, for_ } => {
                        tracing::info!(job = %job_id, preferred = %to, ms = for_.as_millis() as u64, "job left to the researcher that holds its episode");
                        self.pass_over_for(&job_id, *for_);
                    }
                    _ => {}
                }
            }
            Err(e) if e.is_session_lost() => {
                tracing::warn!("session lost during the job; its lock went with it");
                result = Err(e);
            }
            // A record that does not decode (the episode's research record, the
            // lease) will not decode on the next try either: fail the job with why,
            // so an operator sees it, instead of retrying it unseen every backoff.
            Err(e @ EngineError::Record(_)) => {
                let reason = format!("unreadable record: {e} (run `archivist fsck`)");
                tracing::error!(%reason, "job failed");
                if let Err(err) =
                    consumer::fail_held_job(&session, lock, Role::Researcher, &self.me, &reason)
                        .await
                {
                    tracing::warn!(error = %err, "could not record the failure");
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "job could not be finished; releasing its lock");
                let _ = lock.release(&session).await;
                // A dropped connection is no reason to wait before resuming the job.
                if !e.is_retryable() {
                    self.refuse_for_a_while(&job_id);
                }
            }
        }
        metrics::gauge!("archivist_researcher_jobs_active").decrement(1.0);
        if let Some(g) = gauge {
            g.set(0.0);
        }
        if let (Some(n), Ok(mut s)) = (slot, self.free_slots.lock()) {
            s.insert(n);
        }
        result
    }
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
    let Some(_membership) = member::register(
        session,
        identity,
        settings.concurrency,
        settings.metrics_addr.clone(),
        &shutdown,
    )
    .await?
    else {
        return Ok(());
    };
    tracing::info!(name = %identity.name, slots = settings.concurrency, "researcher registered");
    let concurrency = settings.concurrency.max(1) as usize;
    let step = Arc::new(ResearchStep {
        worker,
        me: identity.name.clone(),
        backoff: settings.refused_backoff,
        refused: Mutex::default(),
        free_slots: Mutex::new((0..concurrency).collect()),
    });
    // Researchers split the queue's head between them (`/consumers/pending`).
    let options = ConsumerOptions::new(JobState::Pending, identity.name.clone())
        .with_role(Role::Researcher)
        .with_concurrency(concurrency)
        .with_poll_interval(settings.poll);
    consumer::run(session, options, step, shutdown).await
}
