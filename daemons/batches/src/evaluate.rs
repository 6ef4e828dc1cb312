//! Where each pair of a batch is, decided from what was read (pure, so it is tested
//! without ZooKeeper).
//!
//! A pair is **recorded** when its episode's research record covers the clip; **failed**
//! when it is not recorded and the latest job covering it (highest job id among the jobs
//! that can still decide a pair, [`crate::snapshot::LIVE_STATES`]) is `failed` (the
//! reason being the job's message) or `cancelled` (an operator stopped it, and its pairs
//! stay out of planning until the job is deleted, so waiting for them would never end);
//! **pending** otherwise (planned, being researched, or not planned yet).

use std::collections::{BTreeMap, HashMap};

use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    BatchProgress, FailedJob, JobRecord, Occurrence, Pair, PairError, ResearchRecord,
};
use archivist_engine::schema::JobState;

/// The latest job seen for a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSeen {
    /// Job id (ids sort in creation order).
    pub id: String,
    /// Its state.
    pub status: JobState,
    /// Its message.
    pub message: Option<String>,
    /// Times retried.
    pub retry_count: u32,
}

/// What is known about pairs: research records by episode and the latest job per pair.
#[derive(Debug, Clone, Default)]
pub struct Knowledge {
    research: HashMap<String, ResearchRecord>,
    latest: HashMap<(String, String), JobSeen>,
}

impl Knowledge {
    /// Builds from research records and the jobs of non-terminal queues.
    pub fn new(
        research: impl IntoIterator<Item = ResearchRecord>,
        jobs: impl IntoIterator<Item = JobRecord>,
    ) -> Knowledge {
        let research = research
            .into_iter()
            .map(|r| (r.episode.clone(), r))
            .collect();
        let mut latest: HashMap<(String, String), JobSeen> = HashMap::new();
        for job in jobs {
            for clip in &job.clips {
                let key = (job.episode.clone(), clip.clone());
                let newer = latest.get(&key).is_none_or(|seen| seen.id < job.id);
                if newer {
                    latest.insert(
                        key,
                        JobSeen {
                            id: job.id.clone(),
                            status: job.status,
                            message: job.message.clone(),
                            retry_count: job.retry_count,
                        },
                    );
                }
            }
        }
        Knowledge { research, latest }
    }
}

/// Where one pair is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairState {
    /// In the research archive.
    Recorded,
    /// Its latest job failed.
    Failed(JobSeen),
    /// Neither.
    Pending,
}

/// Where a batch's pairs are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// Counts.
    pub progress: BatchProgress,
    /// Where each clip was found among recorded pairs: clip -> episode -> occurrences.
    pub found: BTreeMap<String, BTreeMap<String, Vec<Occurrence>>>,
    /// Failed jobs (by id) with the batch's failed pairs they cover.
    pub failed_jobs: BTreeMap<String, FailedJob>,
    /// Recorded pairs whose research ended in a per-clip error.
    pub errors: Vec<PairError>,
}

impl Evaluation {
    /// The failed pairs, sorted.
    pub fn failed_pairs(&self) -> Vec<Pair> {
        let mut pairs: Vec<Pair> = self
            .failed_jobs
            .values()
            .flat_map(FailedJob::pairs)
            .collect();
        pairs.sort();
        pairs
    }
}

/// Where one pair is.
pub fn pair_state(episode: &str, clip: &str, knowledge: &Knowledge) -> PairState {
    let recorded = knowledge
        .research
        .get(episode)
        .is_some_and(|r| paths::clip_number(clip).is_some_and(|n| r.is_researched(n)));
    if recorded {
        return PairState::Recorded;
    }
    match knowledge
        .latest
        .get(&(episode.to_string(), clip.to_string()))
    {
        Some(seen) if seen.status == JobState::Failed => PairState::Failed(seen.clone()),
        Some(seen) if seen.status == JobState::Cancelled => {
            let why = seen
                .message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "by an operator".into());
            PairState::Failed(JobSeen {
                message: Some(format!(
                    "cancelled ({why}); its pairs are not planned again until the job is deleted (`archivist delete {}`)",
                    seen.id
                )),
                ..seen.clone()
            })
        }
        _ => PairState::Pending,
    }
}

/// Evaluates every pair of `episodes` x `clips`.
pub fn evaluate(episodes: &[String], clips: &[String], knowledge: &Knowledge) -> Evaluation {
    let mut out = Evaluation::default();
    for episode in episodes {
        for clip in clips {
            out.progress.total += 1;
            match pair_state(episode, clip, knowledge) {
                PairState::Recorded => {
                    out.progress.recorded += 1;
                    if let Some(record) = knowledge.research.get(episode) {
                        if let Some(occ) = record.found.get(clip).filter(|o| !o.is_empty()) {
                            out.found
                                .entry(clip.clone())
                                .or_default()
                                .insert(episode.clone(), occ.clone());
                        }
                        if let Some(error) = record.errors.get(clip) {
                            out.errors.push(PairError {
                                episode: episode.clone(),
                                clip: clip.clone(),
                                error: error.clone(),
                            });
                        }
                    }
                }
                PairState::Failed(seen) => {
                    out.progress.failed += 1;
                    out.failed_jobs
                        .entry(seen.id.clone())
                        .or_insert_with(|| FailedJob {
                            job: seen.id.clone(),
                            episode: episode.clone(),
                            clips: Vec::new(),
                            reason: seen
                                .message
                                .clone()
                                .unwrap_or_else(|| "(no message)".into()),
                            retry_count: seen.retry_count,
                        })
                        .clips
                        .push(clip.clone());
                }
                PairState::Pending => out.progress.pending += 1,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use archivist_engine::schema::clipset::ClipSet;
    use archivist_engine::schema::records::{JobProgress, ResearchRun};
    use archivist_engine::schema::SCHEMA_VERSION;
    use time::OffsetDateTime;

    fn research(episode: &str, clips: &[u32], found: &[u32]) -> ResearchRecord {
        let mut r = ResearchRecord::new(episode);
        r.runs.push(ResearchRun {
            job: "j0000000001".into(),
            researcher: "r".into(),
            at: OffsetDateTime::UNIX_EPOCH,
            clips: clips.iter().copied().collect::<ClipSet>(),
        });
        for n in found {
            r.found.insert(
                paths::clip_id(*n),
                vec![Occurrence {
                    at: 12.5,
                    conf: 0.9,
                    speed: None,
                    part: None,
                }],
            );
        }
        r
    }

    fn job(id: u64, episode: &str, clips: &[u32], status: JobState, msg: &str) -> JobRecord {
        JobRecord {
            schema: SCHEMA_VERSION,
            id: paths::job_id(id),
            status,
            last_successful_status: None,
            retry_count: 0,
            message: Some(msg.into()),
            priority: 0,
            curated_ms: 0,
            episode: episode.into(),
            media_url: "http://x".into(),
            clips: clips.iter().map(|n| paths::clip_id(*n)).collect(),
            batch: None,
            holder: None,
            request: None,
            request_reason: None,
            progress: JobProgress::default(),
            created: OffsetDateTime::UNIX_EPOCH,
            updated: OffsetDateTime::UNIX_EPOCH,
            events: vec![],
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pairs_are_recorded_failed_or_pending() {
        let k = Knowledge::new(
            [research("e0000001", &[1, 2], &[2])],
            [
                job(
                    1,
                    "e0000002",
                    &[1, 2],
                    JobState::Failed,
                    "download failed: 404",
                ),
                job(2, "e0000002", &[2], JobState::Pending, ""),
                // A failed job for a pair that is recorded anyway does not count.
                job(3, "e0000001", &[1], JobState::Failed, "old failure"),
            ],
        );
        let e = evaluate(
            &ids(&["e0000001", "e0000002"]),
            &ids(&["c000001", "c000002"]),
            &k,
        );
        assert_eq!(e.progress.total, 4);
        assert_eq!(e.progress.recorded, 2);
        assert_eq!(e.progress.failed, 1, "e2/c1: latest job j1 failed");
        assert_eq!(e.progress.pending, 1, "e2/c2: a newer pending job j2");
        assert!(!e.progress.settled());
        let failed = &e.failed_jobs[&paths::job_id(1)];
        assert_eq!(failed.clips, ["c000001"]);
        assert_eq!(failed.reason, "download failed: 404");
        assert_eq!(e.found["c000002"]["e0000001"][0].at, 12.5);
        assert!(!e.found.contains_key("c000001"));
    }

    /// Outside try: a batch covering pairs of a cancelled job stayed `processing` at
    /// "2 pending" forever, because cancelled pairs are never planned again.
    #[test]
    fn pairs_of_a_cancelled_job_settle_as_failed_with_the_way_out() {
        let k = Knowledge::new(
            [],
            [job(
                10,
                "e0000005",
                &[2, 3],
                JobState::Cancelled,
                "wrong feed",
            )],
        );
        let e = evaluate(&ids(&["e0000005"]), &ids(&["c000002", "c000003"]), &k);
        assert_eq!((e.progress.failed, e.progress.pending), (2, 0));
        assert!(e.progress.settled());
        let failed = &e.failed_jobs[&paths::job_id(10)];
        assert!(
            failed.reason.starts_with("cancelled (wrong feed)"),
            "{}",
            failed.reason
        );
        assert!(
            failed.reason.contains("archivist delete j0000000010"),
            "{}",
            failed.reason
        );
    }

    #[test]
    fn nothing_known_is_pending_and_no_pairs_is_settled() {
        let k = Knowledge::default();
        let e = evaluate(&ids(&["e0000001"]), &ids(&["c000001"]), &k);
        assert_eq!(e.progress.pending, 1);
        let e = evaluate(&[], &ids(&["c000001"]), &k);
        assert_eq!(e.progress.total, 0);
        assert!(e.progress.settled());
    }
}
