//! Research records: where clips were found in an episode, run by run (`/research/{episode}`).

use super::*;

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
        let mut all = ClipSet::new();
        for run in &self.runs {
            all.extend_from(&run.clips);
        }
        all
    }

    /// Was this clip number researched?
    pub fn is_researched(&self, clip_number: u32) -> bool {
        self.runs.iter().any(|r| r.clips.contains(clip_number))
    }
}
