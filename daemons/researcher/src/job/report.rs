//! Turning a matcher result into the report a recorder stores.

use archivist_engine::schema::records::{Occurrence, ReportRecord};
use archivist_engine::schema::SCHEMA_VERSION;
use archivist_matcher::ClipResult;

/// Tolerance under which a matched part counts as the whole clip, seconds.
const WHOLE_CLIP_SLACK_S: f64 = 0.005;

/// The occurrences of a result as stored in the tree (offsets and confidences; speed and
/// matched part only when they differ from the plain whole-clip case).
pub(crate) fn occurrences(result: &ClipResult) -> Vec<Occurrence> {
    result
        .occurrences
        .iter()
        .map(|o| {
            let whole = o.clip_start_s <= WHOLE_CLIP_SLACK_S
                && o.clip_end_s >= result.clip_duration_s - WHOLE_CLIP_SLACK_S;
            Occurrence {
                at: (o.offset_s * 1000.0).round() / 1000.0,
                conf: o.confidence.clamp(0.0, 1.0),
                speed: ((o.speed - 1.0).abs() > 1e-4).then_some(o.speed),
                part: (!whole).then_some([o.clip_start_s, o.clip_end_s]),
            }
        })
        .collect()
}

/// What one clip's research produced, before it becomes a report.
#[derive(Debug, Clone)]
pub(crate) struct ClipOutcome {
    pub clip: String,
    pub occurrences: Vec<Occurrence>,
    pub error: Option<String>,
    pub clip_duration_s: f64,
    /// The clip's catalog stamp as researched (`clip_stamp`), when its record was read.
    pub clip_stamp: Option<String>,
}

impl ClipOutcome {
    /// A per-clip error (the clip is researched, with this error recorded).
    pub fn error(clip: &str, error: String) -> ClipOutcome {
        ClipOutcome {
            clip: clip.to_string(),
            occurrences: Vec::new(),
            error: Some(error),
            clip_duration_s: 0.0,
            clip_stamp: None,
        }
    }

    /// The same outcome, naming the clip version it was made with.
    pub fn stamped(mut self, stamp: String) -> ClipOutcome {
        self.clip_stamp = Some(stamp);
        self
    }

    /// The report record for this outcome.
    pub fn report(
        &self,
        job: &str,
        episode: &str,
        researcher: &str,
        episode_duration_s: f64,
        is_final: bool,
    ) -> ReportRecord {
        ReportRecord {
            schema: SCHEMA_VERSION,
            job: job.to_string(),
            episode: episode.to_string(),
            clip: self.clip.clone(),
            researcher: researcher.to_string(),
            occurrences: self.occurrences.clone(),
            error: self.error.clone(),
            clip_stamp: self.clip_stamp.clone(),
            episode_duration_s,
            clip_duration_s: self.clip_duration_s,
            researched_at: archivist_engine::clock::stamp_now(),
            is_final,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archivist_matcher::{Detector, Occurrence as Found};

    #[test]
    fn whole_plain_matches_store_offset_and_confidence_only() {
        let result = ClipResult {
            occurrences: vec![
                Found {
                    offset_s: 12.3456,
                    confidence: 0.91,
                    speed: 1.0,
                    clip_start_s: 0.0,
                    clip_end_s: 2.0,
                    detector: Detector::Ncc,
                    also_explained_by: Vec::new(),
                },
                Found {
                    offset_s: 30.0,
                    confidence: 0.6,
                    speed: 1.03,
                    clip_start_s: 0.5,
                    clip_end_s: 2.0,
                    detector: Detector::Warped,
                    also_explained_by: Vec::new(),
                },
            ],
            clip_duration_s: 2.0,
            elapsed_s: 0.1,
            limit_reached: false,
        };
        let occ = occurrences(&result);
        assert_eq!(occ[0].at, 12.346);
        assert_eq!(occ[0].speed, None);
        assert_eq!(occ[0].part, None);
        assert_eq!(occ[1].speed, Some(1.03));
        assert_eq!(occ[1].part, Some([0.5, 2.0]));
    }
}
