//! Job records: the job, its events, progress and requests, and its lock (`/jobs/{job}`).

use super::*;

/// An admin request to a job that a daemon holds (it acts on it within seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobRequest {
    /// Stop and move to cancelled.
    Cancel,
    /// Stop and move to held.
    Hold,
}

/// One step a daemon did on a job ("daemon D did step S on job J with result R at T").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    /// When (ZooKeeper's clock where known).
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Daemon identity.
    pub by: String,
    /// What it did (`claim`, `download`, `final report`, `retry`, ...).
    pub step: String,
    /// `ok`, or what went wrong.
    pub result: String,
}

/// Progress of a job; only moves forward (the Overview seed's rule).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobProgress {
    /// Fraction done in [0, 1], weighted over steps.
    #[serde(default)]
    pub fraction: f64,
    /// Bytes downloaded so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
    /// Clips reported so far.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub clips_done: u32,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// How a job's `message` starts when the recorder failed it on a report it cannot use
/// (the report stays for an operator): `retry` recognises such a failure by it and says
/// the report must go first.
pub const UNUSABLE_REPORT: &str = "report unusable";

/// `/jobs/{job}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Job id (also the lease id).
    pub id: String,
    /// Current state; the job is in exactly this state's queue.
    pub status: JobState,
    /// The last state whose step succeeded (Merritt's field); retry resumes after it.
    #[serde(default)]
    pub last_successful_status: Option<JobState>,
    /// Times an operator retried it.
    #[serde(default)]
    pub retry_count: u32,
    /// Why it is where it is (failure reason, hold reason, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Priority used in the queue entry name.
    pub priority: i64,
    /// Initial curation of the episode (unix ms), used in the queue entry name.
    pub curated_ms: i64,
    /// Episode to research.
    pub episode: String,
    /// Episode media URL (copied so a researcher need not read the catalog).
    pub media_url: String,
    /// Clips to research (ids).
    pub clips: Vec<String>,
    /// Batch this job belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Researcher working on it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Pending admin request for the daemon that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<JobRequest>,
    /// The operator's reason for `request` (`--reason`); the holder writes it as the
    /// job's message when it obeys, so a reason given to a busy job is not lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_reason: Option<String>,
    /// Progress, forward only.
    #[serde(default)]
    pub progress: JobProgress,
    /// Created.
    #[serde(with = "time::serde::rfc3339")]
    pub created: OffsetDateTime,
    /// Last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated: OffsetDateTime,
    /// The newest [`MAX_JOB_EVENTS`] events, oldest first.
    #[serde(default)]
    pub events: Vec<JobEvent>,
}
record!(JobRecord, "JobRecord");

impl JobRecord {
    /// Appends an event, dropping the oldest beyond [`MAX_JOB_EVENTS`].
    pub fn push_event(&mut self, event: JobEvent) {
        self.events.push(event);
        if self.events.len() > MAX_JOB_EVENTS {
            let excess = self.events.len() - MAX_JOB_EVENTS;
            self.events.drain(..excess);
        }
    }

    /// The queue entry name for this job.
    pub fn queue_entry(&self) -> crate::queue_key::QueueEntry {
        crate::queue_key::QueueEntry::new(self.priority, self.curated_ms, self.id.clone())
    }
}

/// `/jobs/{job}/lock`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Daemon identity.
    pub owner: String,
    /// ZooKeeper session id (hex) that owns the ephemeral node.
    pub session: String,
    /// When taken.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
}
record!(LockRecord, "LockRecord");
