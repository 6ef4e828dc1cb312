use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A job's status. Every variant is a state of the table in `schema.yml` and has a
/// queue directory `/queues/<name>`; a test checks that the two lists are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for a researcher; its lease is held but unclaimed.
    Pending,
    /// Claimed by a researcher that is downloading and decoding the episode.
    Leased,
    /// Clips are being matched and reported one by one.
    Researching,
    /// The final report is in; the recorder closes the job.
    Reported,
    /// Terminal: every reported clip is in the research archive.
    Recorded,
    /// Needs an operator; `retry` resumes it.
    Failed,
    /// Held by an operator.
    Held,
    /// Terminal: its lease or work-item TTL ran out.
    Expired,
    /// Terminal: cancelled by an operator.
    Cancelled,
}

impl JobState {
    /// Every state, in table order.
    pub const ALL: [JobState; 9] = [
        JobState::Pending,
        JobState::Leased,
        JobState::Researching,
        JobState::Reported,
        JobState::Recorded,
        JobState::Failed,
        JobState::Held,
        JobState::Expired,
        JobState::Cancelled,
    ];

    /// The name used in YAML, queue paths and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Leased => "leased",
            JobState::Researching => "researching",
            JobState::Reported => "reported",
            JobState::Recorded => "recorded",
            JobState::Failed => "failed",
            JobState::Held => "held",
            JobState::Expired => "expired",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name is not a job state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?} (expected one of pending, leased, researching, reported, recorded, failed, held, expired, cancelled)")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .iter()
            .copied()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// A batch's status (Merritt's batch states). Every variant is a state of
/// `batch_state_machine` in `schema.yml`; a test checks that the two lists are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchState {
    /// Submitted; waiting for the batcher to curate it.
    Pending,
    /// Stopped by the collection-wide batch hold until an operator releases it.
    Held,
    /// Curated; waiting for every pair to be recorded or failed.
    Processing,
    /// Every pair is settled; the first report is being written.
    Reporting,
    /// Reported with every pair researched.
    Completed,
    /// Reported with failed pairs, or not curatable.
    Failed,
    /// An operator asked for a report of what changed since the last one.
    UpdateReporting,
    /// Terminal: deleted by an operator.
    Deleted,
}

impl BatchState {
    /// Every state, in table order.
    pub const ALL: [BatchState; 8] = [
        BatchState::Pending,
        BatchState::Held,
        BatchState::Processing,
        BatchState::Reporting,
        BatchState::Completed,
        BatchState::Failed,
        BatchState::UpdateReporting,
        BatchState::Deleted,
    ];

    /// The name used in YAML and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Pending => "pending",
            BatchState::Held => "held",
            BatchState::Processing => "processing",
            BatchState::Reporting => "reporting",
            BatchState::Completed => "completed",
            BatchState::Failed => "failed",
            BatchState::UpdateReporting => "update-reporting",
            BatchState::Deleted => "deleted",
        }
    }
}

impl fmt::Display for BatchState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name is not a batch state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown batch state {0:?} (expected one of pending, held, processing, reporting, completed, failed, update-reporting, deleted)")]
pub struct UnknownBatchState(pub String);

impl FromStr for BatchState {
    type Err = UnknownBatchState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BatchState::ALL
            .iter()
            .copied()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownBatchState(s.to_string()))
    }
}

/// A state enum that a table of `schema.yml` describes, so one validator serves both
/// the job and the batch state machines.
pub trait TableState: Copy + Ord + fmt::Display + fmt::Debug + 'static {
    /// Every state, in table order.
    fn all() -> &'static [Self];
    /// The name used in `schema.yml`.
    fn name(self) -> &'static str;
    /// The state with this name.
    fn named(name: &str) -> Option<Self> {
        Self::all().iter().copied().find(|s| s.name() == name)
    }
}

impl TableState for JobState {
    fn all() -> &'static [Self] {
        &JobState::ALL
    }
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl TableState for BatchState {
    fn all() -> &'static [Self] {
        &BatchState::ALL
    }
    fn name(self) -> &'static str {
        self.as_str()
    }
}
