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

/// Whether this process has not said `key` before: a daemon loop that meets the same
/// unchanging fault on every pass (an undecodable node, keyed by its path and `mzxid`
/// or its error) logs it once instead of every round (outside 17d finding 16f: ~100k
/// warnings a day per fault). Keys are kept for the process's life; there are as many
/// as distinct faults met.
pub fn first_time(key: &str) -> bool {
    static TOLD: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    TOLD.get_or_init(Default::default)
        .lock()
        .map(|mut told| told.insert(key.to_string()))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_is_new_once() {
        assert!(super::first_time("logs-test-key"));
        assert!(!super::first_time("logs-test-key"));
        assert!(super::first_time("logs-test-key-2"));
    }
}
