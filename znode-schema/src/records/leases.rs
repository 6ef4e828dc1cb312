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
    /// Affinity: the researcher whose own media store holds the episode's pinned audio
    /// (anywhere else it is downloaded again). Others pass the job over until
    /// `prefer_until_ms`, while that researcher is registered: a hint, never a wait
    /// longer than the planner's `affinity_grace_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// Until when (unix ms, ZooKeeper's clock) `prefer` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer_until_ms: Option<i64>,
}
record!(LeaseRecord, "LeaseRecord");
