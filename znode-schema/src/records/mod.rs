//! The YAML records stored in the tree's nodes.
//!
//! Every record carries `schema`, the version of its shape. [`decode`] refuses a record
//! from a newer schema (instead of silently dropping fields it does not know) and says
//! which node was unreadable, so an operator can find it with `zkCli.sh get`.
//!
//! One file per section of the schema (catalog, research, jobs, leases, reports,
//! daemons, batches); everything is re-exported here, so callers name `records::X`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::clipset::ClipSet;
use crate::{JobState, SCHEMA_VERSION};

/// Largest node data this code writes or reads (ZooKeeper's default limit is 1 MiB).
pub const MAX_NODE_BYTES: usize = 1_000_000;

/// How many events a job keeps; older ones are dropped first.
pub const MAX_JOB_EVENTS: usize = 20;

/// A node's data could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The bytes are not UTF-8 YAML of the expected shape.
    #[error("{path}: unreadable {kind} record: {reason}")]
    Malformed {
        /// Node path.
        path: String,
        /// Record type.
        kind: &'static str,
        /// Parser message.
        reason: String,
    },
    /// The record was written by a newer schema.
    #[error("{path}: {kind} record has schema version {found}, this build reads up to {supported}: upgrade archivist")]
    NewerSchema {
        /// Node path.
        path: String,
        /// Record type.
        kind: &'static str,
        /// Version in the node.
        found: u32,
        /// Version this build knows.
        supported: u32,
    },
    /// The data is larger than any record should be.
    #[error("{path}: {size} bytes is over the {limit}-byte limit for a node")]
    TooLarge {
        /// Node path.
        path: String,
        /// Size found.
        size: usize,
        /// Limit.
        limit: usize,
    },
}

/// A record type stored in a node.
pub trait Record: Serialize + DeserializeOwned {
    /// Name used in errors and in `schema.yml`'s `data` column.
    const KIND: &'static str;
    /// The schema version stored in this record.
    fn schema(&self) -> u32;
}

#[derive(Deserialize)]
struct VersionProbe {
    #[serde(default)]
    schema: Option<u32>,
}

/// Parses a node's data, checking size and schema version.
pub fn decode<T: Record>(path: &str, bytes: &[u8]) -> Result<T, RecordError> {
    if bytes.len() > MAX_NODE_BYTES {
        return Err(RecordError::TooLarge {
            path: path.to_string(),
            size: bytes.len(),
            limit: MAX_NODE_BYTES,
        });
    }
    let malformed = |reason: String| RecordError::Malformed {
        path: path.to_string(),
        kind: T::KIND,
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| malformed(e.to_string()))?;
    if let Ok(VersionProbe {
        schema: Some(found),
    }) = serde_yaml::from_str::<VersionProbe>(text)
    {
        if found > SCHEMA_VERSION {
            return Err(RecordError::NewerSchema {
                path: path.to_string(),
                kind: T::KIND,
                found,
                supported: SCHEMA_VERSION,
            });
        }
    }
    serde_yaml::from_str(text).map_err(|e| malformed(e.to_string()))
}

/// Serialises a record as YAML.
pub fn encode<T: Record>(path: &str, record: &T) -> Result<Vec<u8>, RecordError> {
    let text = serde_yaml::to_string(record).map_err(|e| RecordError::Malformed {
        path: path.to_string(),
        kind: T::KIND,
        reason: e.to_string(),
    })?;
    if text.len() > MAX_NODE_BYTES {
        return Err(RecordError::TooLarge {
            path: path.to_string(),
            size: text.len(),
            limit: MAX_NODE_BYTES,
        });
    }
    Ok(text.into_bytes())
}

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

macro_rules! record {
    ($ty:ident, $kind:literal) => {
        impl Record for $ty {
            const KIND: &'static str = $kind;
            fn schema(&self) -> u32 {
                self.schema
            }
        }
    };
}

/// `/meta`: what this tree is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeMeta {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// When `init` created the tree.
    #[serde(with = "time::serde::rfc3339")]
    pub created: OffsetDateTime,
    /// Version of archivist that created it.
    pub created_by: String,
    /// The deployment this tree belongs to: a random id made by `init`, also kept in the
    /// database, so a daemon pointed at another deployment's database (or at a new, empty
    /// file where the deployment's was deleted) is refused instead of mixing the two
    /// (outside 22 finding 8). Absent in trees made before deployment ids: the first
    /// daemon that opens the database then binds the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    /// Whether the database has been given [`TreeMeta::deployment`] (set after the
    /// database's commit). A bound tree whose database holds no deployment id is looking
    /// at the wrong database; an unbound one (a crash between the two writes, or a fresh
    /// `init`) still binds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub database_bound: bool,
}
record!(TreeMeta, "TreeMeta");

mod batches;
mod catalog;
mod daemons;
mod jobs;
mod leases;
mod reports;
mod research;

pub use batches::*;
pub use catalog::*;
pub use daemons::*;
pub use jobs::*;
pub use leases::*;
pub use reports::*;
pub use research::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TreeMeta {
        TreeMeta {
            schema: SCHEMA_VERSION,
            created: OffsetDateTime::UNIX_EPOCH,
            created_by: "test".into(),
            deployment: None,
            database_bound: false,
        }
    }

    #[test]
    fn records_round_trip_as_readable_yaml() {
        let bytes = encode("/meta", &meta()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("created: 1970-01-01T00:00:00Z"), "{text}");
        assert_eq!(decode::<TreeMeta>("/meta", &bytes).unwrap(), meta());
    }

    #[test]
    fn newer_schema_is_refused_with_the_path() {
        let err = decode::<TreeMeta>(
            "/meta",
            b"schema: 99\ncreated: 1970-01-01T00:00:00Z\ncreated_by: x\n",
        )
        .unwrap_err();
        assert!(matches!(err, RecordError::NewerSchema { found: 99, .. }));
        assert!(err.to_string().starts_with("/meta:"));
    }

    #[test]
    fn malformed_and_oversized_data_are_refused() {
        assert!(matches!(
            decode::<TreeMeta>("/meta", b"\xff\xfe"),
            Err(RecordError::Malformed { .. })
        ));
        assert!(matches!(
            decode::<TreeMeta>("/meta", b"created: [not a date"),
            Err(RecordError::Malformed { .. })
        ));
        let huge = vec![b'a'; MAX_NODE_BYTES + 1];
        assert!(matches!(
            decode::<TreeMeta>("/meta", &huge),
            Err(RecordError::TooLarge { .. })
        ));
    }

    #[test]
    fn job_events_stay_bounded() {
        let mut job = JobRecord {
            schema: SCHEMA_VERSION,
            id: "j0000000001".into(),
            status: JobState::Pending,
            last_successful_status: None,
            retry_count: 0,
            message: None,
            priority: 0,
            curated_ms: 0,
            episode: "e0000001".into(),
            media_url: "http://x/e.mp3".into(),
            clips: vec![],
            batch: None,
            holder: None,
            request: None,
            request_reason: None,
            progress: JobProgress::default(),
            created: OffsetDateTime::UNIX_EPOCH,
            updated: OffsetDateTime::UNIX_EPOCH,
            events: vec![],
        };
        for i in 0..50 {
            job.push_event(JobEvent {
                at: OffsetDateTime::UNIX_EPOCH,
                by: "t".into(),
                step: format!("s{i}"),
                result: "ok".into(),
            });
        }
        assert_eq!(job.events.len(), MAX_JOB_EVENTS);
        assert_eq!(job.events.last().unwrap().step, "s49");
    }

    #[test]
    fn a_webhook_shows_its_origin_only() {
        assert_eq!(
            webhook_origin("https://hooks.example:8443/services/T0/B0/s3cr3t?k=v"),
            "https://hooks.example:8443/…"
        );
        assert_eq!(
            webhook_origin("http://user:pw@127.0.0.1:9/hook"),
            "http://127.0.0.1:9/…"
        );
        assert_eq!(webhook_origin("no url s3cr3t"), "…");
        let secret = WebhookSecret {
            schema: SCHEMA_VERSION,
            url: "https://h/s3cr3t".into(),
        };
        assert!(!format!("{secret:?}").contains("s3cr3t"));
    }
}
