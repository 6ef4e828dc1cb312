//! Batch records: submissions, their progress, webhook deliveries and reports (`/batches/...`).

use super::*;

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
