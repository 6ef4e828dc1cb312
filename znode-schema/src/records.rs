//! The YAML records stored in the tree's nodes.
//!
//! Every record carries `schema`, the version of its shape. [`decode`] refuses a record
//! from a newer schema (instead of silently dropping fields it does not know) and says
//! which node was unreadable, so an operator can find it with `zkCli.sh get`.

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
}
record!(TreeMeta, "TreeMeta");

/// Fields shared by episodes and clips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogFields {
    /// Title shown to people.
    pub title: String,
    /// Longer description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the media is (http, https or file URL).
    pub media_url: String,
    /// MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Name of the curator that registered it.
    pub curator: String,
    /// Higher wins; absent means 0.
    #[serde(default)]
    pub priority: i64,
    /// First curation; never moves.
    #[serde(with = "time::serde::rfc3339")]
    pub initial_curated: OffsetDateTime,
    /// Latest curation; moves on every re-curation.
    #[serde(with = "time::serde::rfc3339")]
    pub last_curated: OffsetDateTime,
    /// Content hash (sha256 hex) once downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Duration in seconds once decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Feed GUID, for feed items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guid: Option<String>,
    /// Held by an operator: the planner leaves it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

/// `/catalog/episodes/{episode}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Episode id (`e` + number).
    pub id: String,
    /// Air date (`YYYY-MM-DD` or RFC 3339), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub air_date: Option<String>,
    /// Shared catalog fields.
    #[serde(flatten)]
    pub fields: CatalogFields,
}
record!(EpisodeRecord, "EpisodeRecord");

/// `/catalog/clips/{clip}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClipRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Clip id (`c` + number).
    pub id: String,
    /// Shared catalog fields.
    #[serde(flatten)]
    pub fields: CatalogFields,
}
record!(ClipRecord, "ClipRecord");

/// What an alias points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AliasTarget {
    /// An episode.
    Episode,
    /// A clip.
    Clip,
}

/// `/catalog/aliases/{alias}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AliasRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Episode or clip.
    pub target: AliasTarget,
    /// The record id.
    pub id: String,
    /// The normalized URL or GUID this alias stands for.
    pub key: String,
}
record!(AliasRecord, "AliasRecord");

/// One place a clip was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Occurrence {
    /// Start offset in the episode, seconds (millisecond precision).
    pub at: f64,
    /// Confidence in [0, 1].
    pub conf: f32,
    /// Speed factor when not 1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f32>,
    /// Part of the clip matched `[start, end]` in seconds, when not the whole clip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<[f64; 2]>,
}

/// One researcher's contribution to an episode's research.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchRun {
    /// Job (and lease) id.
    pub job: String,
    /// Researcher identity.
    pub researcher: String,
    /// When the first result of this run was stored.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Clip numbers researched in this run.
    pub clips: ClipSet,
}

/// `/research/{episode}`: the research archive for one episode.
///
/// Sized for 2,000 clips: the researched set is ranges per run, and only clips that were
/// found list occurrences, so a typical record is a few KB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Episode id.
    pub episode: String,
    /// Episode duration in seconds, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode_duration_s: Option<f64>,
    /// Runs that stored results, oldest first.
    #[serde(default)]
    pub runs: Vec<ResearchRun>,
    /// Occurrences of the clips that were found, by clip id. Written compactly, one
    /// string per clip (see [`crate::occurrences`]).
    #[serde(default, with = "crate::occurrences")]
    pub found: BTreeMap<String, Vec<Occurrence>>,
    /// Clips whose research ended in a per-clip error (e.g. undecodable clip), by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
    /// For each error, the [`clip_stamp`] of the clip it was made with: once the clip
    /// changes (new content hash, re-curation), the error is about a clip that no longer
    /// exists and the pair is open again ([`ResearchRecord::error_is_stale`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_stamps: BTreeMap<String, String>,
}
record!(ResearchRecord, "ResearchRecord");

/// Which version of a clip a result was made with: its latest curation (unix ms) and
/// content hash. A per-clip error holds only for the version that caused it.
pub fn clip_stamp(fields: &CatalogFields) -> String {
    format!(
        "{}/{}",
        fields.last_curated.unix_timestamp_nanos() / 1_000_000,
        fields.content_hash.as_deref().unwrap_or("-")
    )
}

/// The one rule for re-opening an errored pair: the error was made with another version
/// of the clip (its stamp differs from the clip's now), or, for errors stored before
/// stamps existed, the clip was re-curated after the run that holds the error.
pub fn error_reopened(
    error_stamp: Option<&str>,
    run_at: Option<OffsetDateTime>,
    clip_stamp_now: &str,
    clip_curated_now: OffsetDateTime,
) -> bool {
    match error_stamp {
        Some(stamp) => stamp != clip_stamp_now,
        None => run_at.is_some_and(|at| clip_curated_now > at),
    }
}

impl ResearchRecord {
    /// An empty record for an episode.
    pub fn new(episode: &str) -> ResearchRecord {
        ResearchRecord {
            schema: SCHEMA_VERSION,
            episode: episode.to_string(),
            episode_duration_s: None,
            runs: Vec::new(),
            found: BTreeMap::new(),
            errors: BTreeMap::new(),
            error_stamps: BTreeMap::new(),
        }
    }

    /// When the run holding this clip number was started, if it was researched.
    pub fn run_at(&self, clip_number: u32) -> Option<OffsetDateTime> {
        self.runs
            .iter()
            .find(|r| r.clips.contains(clip_number))
            .map(|r| r.at)
    }

    /// Is the stored error of `clip` (if any) about an older version of the clip than
    /// `now` ([`error_reopened`])? Then the pair is to be researched again.
    pub fn error_is_stale(&self, clip: &str, clip_number: u32, now: &CatalogFields) -> bool {
        self.errors.contains_key(clip)
            && error_reopened(
                self.error_stamps.get(clip).map(String::as_str),
                self.run_at(clip_number),
                &clip_stamp(now),
                now.last_curated,
            )
    }

    /// Forgets a clip's result (its run membership, occurrences and error), so a new
    /// result can be stored: only for a stale error.
    pub fn reopen(&mut self, clip: &str, clip_number: u32) {
        for run in &mut self.runs {
            if run.clips.contains(clip_number) {
                run.clips = run.clips.iter().filter(|n| *n != clip_number).collect();
            }
        }
        self.found.remove(clip);
        self.errors.remove(clip);
        self.error_stamps.remove(clip);
    }

    /// Every researched clip number.
    pub fn researched(&self) -> ClipSet {
        self.runs.iter().flat_map(|r| r.clips.iter()).collect()
    }

    /// Was this clip number researched?
    pub fn is_researched(&self, clip_number: u32) -> bool {
        self.runs.iter().any(|r| r.clips.contains(clip_number))
    }
}

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

/// How many events a batch keeps; older ones are dropped first.
pub const MAX_BATCH_EVENTS: usize = 30;

/// One episode or clip as a batch submission names it, checked and normalized at
/// submission (the batcher curates it later, exactly as `archivist curate manifest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmittedItem {
    /// Where it is in the submission (`batch.yml: clips[0] (line 4)`), for messages.
    pub label: String,
    /// Normalized media URL.
    pub url: String,
    /// Title.
    pub title: String,
    /// Description, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type, if given or known from the file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Air date (episodes), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub air_date: Option<String>,
    /// Priority, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

/// What a batch submission names. A side that names nothing (no episodes, or no clips)
/// stands for the whole catalog at curation time: `clips: [C]` alone is "clip C against
/// all episodes".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSubmission {
    /// Episodes to curate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<SubmittedItem>,
    /// Clips to curate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clips: Vec<SubmittedItem>,
    /// Episodes already in the catalog, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episode_ids: Vec<String>,
    /// Clips already in the catalog, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clip_ids: Vec<String>,
}

impl BatchSubmission {
    /// Does it name no episode (so the batch covers every episode)?
    pub fn all_episodes(&self) -> bool {
        self.episodes.is_empty() && self.episode_ids.is_empty()
    }

    /// Does it name no clip (so the batch covers every clip)?
    pub fn all_clips(&self) -> bool {
        self.clips.is_empty() && self.clip_ids.is_empty()
    }
}

/// Pairs of a batch by where they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchProgress {
    /// episodes x clips.
    #[serde(default)]
    pub total: u64,
    /// Pairs in the research archive.
    #[serde(default)]
    pub recorded: u64,
    /// Pairs whose latest job failed.
    #[serde(default)]
    pub failed: u64,
    /// Pairs neither recorded nor failed (planned, being researched, or not planned yet).
    #[serde(default)]
    pub pending: u64,
}

impl BatchProgress {
    /// Recorded or failed.
    pub fn done(&self) -> u64 {
        self.recorded + self.failed
    }

    /// Is every pair recorded or failed?
    pub fn settled(&self) -> bool {
        self.pending == 0
    }
}

/// Where sending a report to the webhook is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookStatus {
    /// Not sent yet.
    Pending,
    /// The webhook answered 2xx.
    Delivered,
    /// Every attempt failed; the report is kept and readable.
    Failed,
}

/// The delivery of the latest report to the submission's webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookDelivery {
    /// Report number being delivered.
    pub report: u32,
    /// Where it is.
    pub status: WebhookStatus,
    /// HTTP attempts made.
    #[serde(default)]
    pub attempts: u32,
    /// The last error, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When delivered or given up.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub at: Option<OffsetDateTime>,
}

/// `/batches/{batch}`: a research campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Batch id (`b` + number).
    pub id: String,
    /// Current state.
    pub status: crate::BatchState,
    /// A name for people, from the submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who submitted it.
    pub submitted_by: String,
    /// When submitted.
    #[serde(with = "time::serde::rfc3339")]
    pub submitted_at: OffsetDateTime,
    /// Last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated: OffsetDateTime,
    /// Where reports are POSTed, if anywhere, as shown to every role: scheme, host and
    /// port only (`https://hooks.example/…`). The URL itself is in the secret node
    /// `/batches/{batch}/webhook` ([`WebhookSecret`]), which reader roles cannot read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// What the submission names.
    pub submission: BatchSubmission,
    /// Episode ids of its pairs, fixed at curation.
    #[serde(default)]
    pub episodes: Vec<String>,
    /// Clip ids of its pairs, fixed at curation.
    #[serde(default)]
    pub clips: Vec<String>,
    /// Submitted items that could not be curated, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Pairs by where they are, as of the batcher's last look.
    #[serde(default)]
    pub progress: BatchProgress,
    /// Reports written (the latest is `/batches/{batch}/reports/r<reports>`).
    #[serde(default)]
    pub reports: u32,
    /// Delivery of the latest report to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<WebhookDelivery>,
    /// Why it is where it is (failure reason, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The newest [`MAX_BATCH_EVENTS`] events, oldest first.
    #[serde(default)]
    pub events: Vec<JobEvent>,
}
record!(BatchRecord, "BatchRecord");

impl BatchRecord {
    /// Appends an event, dropping the oldest beyond [`MAX_BATCH_EVENTS`].
    pub fn push_event(&mut self, event: JobEvent) {
        self.events.push(event);
        if self.events.len() > MAX_BATCH_EVENTS {
            let excess = self.events.len() - MAX_BATCH_EVENTS;
            self.events.drain(..excess);
        }
    }
}

/// One (episode, clip) pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair {
    /// Episode id.
    pub episode: String,
    /// Clip id.
    pub clip: String,
}

/// A failed job and the batch's pairs it covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedJob {
    /// Job id.
    pub job: String,
    /// Its episode.
    pub episode: String,
    /// The batch's clips it covered that are not recorded.
    pub clips: Vec<String>,
    /// Why it failed (the job's message).
    pub reason: String,
    /// Times it was retried.
    #[serde(default)]
    pub retry_count: u32,
}

impl FailedJob {
    /// The (episode, clip) pairs this failed job leaves unrecorded.
    pub fn pairs(&self) -> impl Iterator<Item = Pair> + '_ {
        self.clips.iter().map(|c| Pair {
            episode: self.episode.clone(),
            clip: c.clone(),
        })
    }
}

/// A pair researched with a per-clip error (the research archive's `errors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairError {
    /// Episode id.
    pub episode: String,
    /// Clip id.
    pub clip: String,
    /// The error.
    pub error: String,
}

/// First report or update report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// Written in `reporting`: everything.
    Initial,
    /// Written in `update-reporting`: what changed since the report before.
    Update,
}

/// `/batches/{batch}/reports/{report}`: what a batch found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Batch id.
    pub batch: String,
    /// Report number (1 is the first).
    pub number: u32,
    /// First report or update.
    pub kind: ReportKind,
    /// For an update: the report it compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u32>,
    /// When written.
    #[serde(with = "time::serde::rfc3339")]
    pub written: OffsetDateTime,
    /// Pairs by where they are now.
    pub pairs: BatchProgress,
    /// For an update: pairs failed in the report before that are researched now (the
    /// retries that worked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<Pair>,
    /// Where each clip was found (clip -> episode -> occurrences): among every pair in a
    /// first report, among `resolved` in an update.
    #[serde(default)]
    pub found: BTreeMap<String, BTreeMap<String, Vec<Occurrence>>>,
    /// Jobs that failed, with why, covering the pairs that are failed now.
    #[serde(default)]
    pub failed_jobs: Vec<FailedJob>,
    /// For an update: pairs failed in the report before and still failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_failed: Vec<Pair>,
    /// Researched pairs with a per-clip error (among `resolved` in an update).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<PairError>,
}
record!(BatchReport, "BatchReport");

/// `/batches/{batch}/webhook`: the full webhook URL of a batch. A secret node: its ACL
/// gives the reader roles no READ, since the URL (path or query) usually is the
/// credential that lets anyone post to the receiver.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookSecret {
    /// Schema version.
    pub schema: u32,
    /// The URL reports are POSTed to.
    pub url: String,
}
record!(WebhookSecret, "WebhookSecret");

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WebhookSecret {{ schema: {}, url: {:?} }}",
            self.schema,
            webhook_origin(&self.url)
        )
    }
}

/// What every role may see of a webhook URL: its scheme, host and port followed by `/…`
/// (`https://hooks.example:8443/…`); the path and query, where receivers put their
/// tokens, are left out. Text that is no URL shows as `…`.
pub fn webhook_origin(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "…".to_string();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // user:password@ would be a credential too.
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}/…")
}

impl BatchReport {
    /// The pairs failed in this report.
    pub fn failed_pairs(&self) -> Vec<Pair> {
        let mut pairs: Vec<Pair> = self.failed_jobs.iter().flat_map(FailedJob::pairs).collect();
        pairs.sort();
        pairs.dedup();
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TreeMeta {
        TreeMeta {
            schema: SCHEMA_VERSION,
            created: OffsetDateTime::UNIX_EPOCH,
            created_by: "test".into(),
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
