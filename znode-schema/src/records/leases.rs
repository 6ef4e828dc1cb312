//! Lease records: a lease on (episode, clips) (`/leases/{job}`).

use super::*;

/// `/leases/{job}`: a lease on (episode, clips). Expires at the node's mtime plus
/// `duration_ms`; mtime is ZooKeeper's clock, so no host clock is trusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Job (and lease) id.
    pub job: String,
    /// Leased episode.
    pub episode: String,
    /// Leased clips.
    pub clips: Vec<String>,
    /// Lease length from the last write.
    pub duration_ms: i64,
    /// Researcher that took it, once taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Times it was extended.
    #[serde(default)]
    pub extensions: u32,
}
record!(LeaseRecord, "LeaseRecord");
