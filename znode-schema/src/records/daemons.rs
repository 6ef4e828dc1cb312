//! Daemon records: live members, queue consumers and pause flags (`/daemons`, `/consumers`, `/control/pause`).

use super::*;

/// `/researchers/{member}` and `/daemons/{member}`: a live daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Role (`researcher`, `planner`, ...).
    pub role: String,
    /// Daemon identity.
    pub name: String,
    /// Jobs it runs at once (researchers).
    #[serde(default)]
    pub slots: u32,
    /// archivist version.
    pub version: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Metrics endpoint, if served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Started.
    #[serde(with = "time::serde::rfc3339")]
    pub started: OffsetDateTime,
    /// The work-item TTL a planner runs with, in ms (planners only). Published so
    /// `retry`/`release --lease-duration-s` check a lease against the TTL in force,
    /// not against the admin CLI's own configuration (outside 17g finding 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_item_ttl_ms: Option<i64>,
}
record!(MemberRecord, "MemberRecord");

/// `/consumers/{state}/{member}`: one live consumer loop of a state's queue. The
/// consumers of a state split the head of its queue between them by their number and
/// their rank in name order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Daemon identity.
    pub owner: String,
    /// ZooKeeper session id (hex) that owns the ephemeral node.
    pub session: String,
    /// Jobs it runs at once.
    pub slots: u32,
    /// When it joined.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
}
record!(ConsumerRecord, "ConsumerRecord");

/// `/control/pause/{state}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Who paused it.
    pub by: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// When (optional: the documented manual pause, `create .../control/pause/pending
    /// "by: ops"`, has no time; the node's `ctime` tells it).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub at: Option<OffsetDateTime>,
}
record!(PauseRecord, "PauseRecord");

/// `/signals/{catalog,research}`: who committed the latest change to the database and
/// when. The node's data version counts the bumps; watchers re-read the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// The daemon that committed the change.
    pub by: String,
    /// When (its host's clock).
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}
record!(SignalRecord, "SignalRecord");
