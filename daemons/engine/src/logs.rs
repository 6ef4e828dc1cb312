//! Log context for job work: every event about a job carries its id, episode and state.
//!
//! Operators grep logs by job or episode, so a line that names a job without its episode
//! and state sends them to ZooKeeper to find the rest. Work on a job runs inside
//! [`job_span`]; [`crate::transition::Transition::commit`] updates the span's `state`
//! as the job moves, so lines logged later in the same work show the state it is in now.

use znode_schema::records::JobRecord;

/// The span for work on `job`: fields `job`, `episode` and `state` (JSON logs list them
/// under `spans`, human logs prefix the line with them).
pub fn job_span(job: &JobRecord) -> tracing::Span {
    tracing::info_span!(
        "job",
        job = %job.id,
        episode = %job.episode,
        state = %job.status
    )
}

/// Records the job's new state on the current span (a no-op outside a [`job_span`]).
pub fn record_state(state: &str) {
    tracing::Span::current().record("state", tracing::field::display(state));
}
