//! Report records: one clip's result on its way from a researcher to the recorder (`/reports/{report}`).

use super::*;

/// `/reports/{report}`: one clip's result, reported by a researcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Job (and lease) id.
    pub job: String,
    /// Episode id.
    pub episode: String,
    /// Clip id.
    pub clip: String,
    /// Researcher identity.
    pub researcher: String,
    /// Where the clip occurs (empty: not found).
    #[serde(default)]
    pub occurrences: Vec<Occurrence>,
    /// Per-clip error, if the clip could not be researched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The [`clip_stamp`] of the clip as researched (from its catalog record), so an
    /// error can be re-opened once the clip changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_stamp: Option<String>,
    /// Episode duration, seconds.
    pub episode_duration_s: f64,
    /// Clip duration, seconds.
    #[serde(default)]
    pub clip_duration_s: f64,
    /// When researched.
    #[serde(with = "time::serde::rfc3339")]
    pub researched_at: OffsetDateTime,
    /// Last report of its job.
    #[serde(default, rename = "final")]
    pub is_final: bool,
}
record!(ReportRecord, "ReportRecord");
