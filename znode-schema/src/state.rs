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
