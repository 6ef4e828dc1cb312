//! `tree [PATH]`: the subtree with every node's data decoded (like zkCli's `ls -R` and
//! `get`, but readable), and the walk `fsck` uses to look at every node.

use std::sync::OnceLock;

use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::records::{
    self, AliasRecord, BatchRecord, BatchReport, ClipRecord, EpisodeRecord, JobRecord, LeaseRecord,
    LockRecord, MemberRecord, PauseRecord, Record, ReportRecord, ResearchRecord, TreeMeta,
    WebhookSecret,
};
use archivist_engine::schema::spec::Schema;
use archivist_engine::{zk, EngineError, Session};
use serde::Serialize;

use crate::error::{AdminError, Result};
use crate::scan::NodeStat;
use crate::settings::{AdminSettings, Progress};

/// A node as read by [`walk`].
#[derive(Debug, Clone)]
pub struct RawNode {
    /// Path relative to the chroot.
    pub path: String,
    /// Its stat.
    pub stat: NodeStat,
    /// Its data.
    pub data: Vec<u8>,
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Reads every node under `root` (included), parents before children, siblings sorted.
/// Requests of one level are pipelined in batches. Nodes that vanish meanwhile are
/// left out, and so are secret nodes (and what is under them) this session may not read
/// (`NoAuth`: a reader role walking past `/batches/{batch}/webhook`), so the read-only
/// role can run `tree` and `fsck`; the root itself unreadable is an error.
pub async fn walk(
    session: &Session,
    settings: &AdminSettings,
    root: &str,
    progress: &dyn Progress,
) -> Result<Vec<RawNode>> {
    let root = if root.len() > 1 {
        root.trim_end_matches('/')
    } else {
        root
    };
    if !root.starts_with('/') {
        return Err(AdminError::Invalid(format!(
            "{root:?} is not an absolute path (start it with /)"
        )));
    }
    progress.begin("tree", 0);
    let mut out = Vec::new();
    let mut level = vec![root.to_string()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for chunk in level.chunks(settings.batch_size.max(1)) {
            let data: Vec<_> = chunk.iter().map(|p| session.client().get_data(p)).collect();
            let kids: Vec<_> = chunk
                .iter()
                .map(|p| session.client().list_children(p))
                .collect();
            let data = archivist_engine::ops::await_all(data).await;
            let kids = archivist_engine::ops::await_all(kids).await;
            for ((path, data), kids) in chunk.iter().zip(data).zip(kids) {
                let (bytes, stat) = match data {
                    Ok(found) => found,
                    Err(zk::Error::NoNode | zk::Error::NoAuth) if path != root => continue,
                    Err(zk::Error::NoNode) => {
                        return Err(AdminError::NotFound {
                            what: "node",
                            id: path.clone(),
                            path: path.clone(),
                        });
                    }
                    Err(e) => return Err(EngineError::zk("get", path.as_str(), e).into()),
                };
                let mut names = match kids {
                    Ok(names) => names,
                    Err(zk::Error::NoNode) => Vec::new(),
                    Err(e) => return Err(EngineError::zk("list", path.as_str(), e).into()),
                };
                names.sort_unstable();
                next.extend(names.iter().map(|n| join(path, n)));
                out.push(RawNode {
                    path: path.clone(),
                    stat: NodeStat::from(&stat),
                    data: bytes,
                });
            }
            progress.advance(chunk.len() as u64);
        }
        level = next;
    }
    progress.end();
    out.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    Ok(out)
}

/// A queue entry name, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryView {
    /// Priority (higher first).
    pub priority: i64,
    /// Initial curation of the episode (RFC 3339).
    pub curated: String,
    /// Job id.
    pub job: String,
}

/// A node's data, decoded for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decoded {
    /// Record type the schema says the node holds (`none` for empty nodes, absent for
    /// paths the schema does not know).
    pub data_type: Option<String>,
    /// The data as YAML, when there is any and it decodes.
    pub data: Option<serde_yaml::Value>,
    /// Decoded queue entry name.
    pub entry: Option<EntryView>,
    /// Why the data does not decode.
    pub error: Option<String>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(Schema::embedded)
}

/// The schema's record type for a path, if the path matches a pattern.
pub fn data_type(path: &str) -> Option<&'static str> {
    schema().path_spec(path).map(|p| p.data.as_str())
}

/// Does the schema know this path?
pub fn known_path(path: &str) -> bool {
    path == "/"
        || schema().path_spec(path).is_some()
        || ["/counters", "/catalog", "/queues", "/election", "/control"].contains(&path)
}

fn typed<T: Record>(path: &str, bytes: &[u8]) -> std::result::Result<serde_yaml::Value, String> {
    let record = records::decode::<T>(path, bytes).map_err(|e| e.to_string())?;
    serde_yaml::to_value(&record).map_err(|e| format!("{path}: {e}"))
}

/// Decodes a node's data by the record type the schema gives its path; data of unknown
/// types is shown as plain YAML.
pub fn decode(path: &str, bytes: &[u8]) -> Decoded {
    let kind = data_type(path);
    let result = match kind {
        Some("TreeMeta") => typed::<TreeMeta>(path, bytes).map(Some),
        Some("EpisodeRecord") => typed::<EpisodeRecord>(path, bytes).map(Some),
        Some("ClipRecord") => typed::<ClipRecord>(path, bytes).map(Some),
        Some("AliasRecord") => typed::<AliasRecord>(path, bytes).map(Some),
        Some("ResearchRecord") => typed::<ResearchRecord>(path, bytes).map(Some),
        Some("JobRecord") => typed::<JobRecord>(path, bytes).map(Some),
        Some("LockRecord") => typed::<LockRecord>(path, bytes).map(Some),
        Some("LeaseRecord") => typed::<LeaseRecord>(path, bytes).map(Some),
        Some("ReportRecord") => typed::<ReportRecord>(path, bytes).map(Some),
        Some("MemberRecord") => typed::<MemberRecord>(path, bytes).map(Some),
        Some("PauseRecord") => typed::<PauseRecord>(path, bytes).map(Some),
        Some("BatchRecord") => typed::<BatchRecord>(path, bytes).map(Some),
        Some("BatchReport") => typed::<BatchReport>(path, bytes).map(Some),
        // A secret shows what every role sees of it, even to the role that may read it.
        Some("WebhookSecret") => records::decode::<WebhookSecret>(path, bytes)
            .map_err(|e| e.to_string())
            .map(|s| {
                let mut shown = serde_yaml::Mapping::new();
                shown.insert("schema".into(), s.schema.into());
                shown.insert("url".into(), records::webhook_origin(&s.url).into());
                Some(serde_yaml::Value::Mapping(shown))
            }),
        _ if bytes.is_empty() => Ok(None),
        _ => match std::str::from_utf8(bytes) {
            Ok(text) => serde_yaml::from_str::<serde_yaml::Value>(text)
                .map(Some)
                .map_err(|e| format!("{path}: not YAML: {e}")),
            Err(_) => Err(format!("{path}: {} bytes of binary data", bytes.len())),
        },
    };
    let entry = if path.starts_with("/queues/") && path.matches('/').count() == 3 {
        let name = path.rsplit('/').next().unwrap_or_default();
        QueueEntry::parse(name).ok().map(|e| EntryView {
            priority: e.priority,
            curated: archivist_engine::clock::to_datetime(e.curated_ms)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| e.curated_ms.to_string()),
            job: e.job,
        })
    } else {
        None
    };
    let (data, error) = match result {
        Ok(v) => (v, None),
        Err(e) => (None, Some(e)),
    };
    Decoded {
        data_type: kind.map(str::to_string),
        data,
        entry,
        error,
    }
}

/// One node of `tree`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeNode {
    /// Path relative to the chroot.
    pub path: String,
    /// `persistent` or `ephemeral`.
    pub kind: &'static str,
    /// Its stat.
    pub stat: NodeStat,
    /// Owning session of an ephemeral node (`0x...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Decoded data.
    #[serde(flatten)]
    pub decoded: Decoded,
}

/// `tree [PATH]`.
pub async fn tree(
    session: &Session,
    settings: &AdminSettings,
    root: &str,
    progress: &dyn Progress,
) -> Result<Vec<TreeNode>> {
    Ok(walk(session, settings, root, progress)
        .await?
        .into_iter()
        .map(|node| TreeNode {
            kind: if node.stat.ephemeral_owner != 0 {
                "ephemeral"
            } else {
                "persistent"
            },
            owner: node.stat.owner_hex(),
            decoded: decode(&node.path, &node.data),
            stat: node.stat,
            path: node.path,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_entries_and_bad_records_decode_readably() {
        let entry = QueueEntry::new(5, 1_700_000_000_000, "j0000000007").name();
        let d = decode(&format!("/queues/pending/{entry}"), b"");
        assert_eq!(
            d.entry.as_ref().map(|e| (e.priority, e.job.as_str())),
            Some((5, "j0000000007"))
        );
        assert_eq!(d.error, None);
        let d = decode("/jobs/j0000000001", b"{{{ not yaml");
        assert_eq!(d.data_type.as_deref(), Some("JobRecord"));
        assert!(
            d.error
                .as_deref()
                .is_some_and(|e| e.contains("/jobs/j0000000001")),
            "{d:?}"
        );
    }
}
