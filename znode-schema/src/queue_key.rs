//! Queue entry names whose lexicographic order is processing order.
//!
//! `<priority key>-<curation key>-<job>`:
//! - priority key: 16 hex digits of `i64::MAX - priority` (computed without overflow), so
//!   a higher priority sorts first, over the whole i64 range;
//! - curation key: 13 digits of `9999999999999 - initial_curated_ms`, so a more recently
//!   curated episode sorts first (dates before 1970 or after year 2286 are clamped);
//! - the job id, so ties go to the older job.

use std::fmt;

/// Largest curation instant that keeps its own key (in unix milliseconds).
pub const MAX_CURATION_MS: i64 = 9_999_999_999_999;

/// The decoded parts of a queue entry name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The job's priority (higher first).
    pub priority: i64,
    /// The episode's initial curation, unix milliseconds (newer first).
    pub curated_ms: i64,
    /// The job id.
    pub job: String,
}

/// A queue entry name that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("queue entry {name:?} is not <16 hex>-<13 digits>-<job id>")]
pub struct BadEntryName {
    /// The offending name.
    pub name: String,
}

impl QueueEntry {
    /// Builds the entry for a job.
    pub fn new(priority: i64, curated_ms: i64, job: impl Into<String>) -> QueueEntry {
        QueueEntry {
            priority,
            curated_ms: curated_ms.clamp(0, MAX_CURATION_MS),
            job: job.into(),
        }
    }

    /// The node name.
    pub fn name(&self) -> String {
        let priority_key = (i64::MAX as i128 - self.priority as i128) as u64;
        let curation_key = MAX_CURATION_MS - self.curated_ms.clamp(0, MAX_CURATION_MS);
        format!("{priority_key:016x}-{curation_key:013}-{}", self.job)
    }

    /// Decodes a node name.
    pub fn parse(name: &str) -> Result<QueueEntry, BadEntryName> {
        let bad = || BadEntryName {
            name: name.to_string(),
        };
        let mut parts = name.splitn(3, '-');
        let (Some(p), Some(c), Some(job)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        if p.len() != 16 || c.len() != 13 || job.is_empty() {
            return Err(bad());
        }
        let priority_key = u64::from_str_radix(p, 16).map_err(|_| bad())?;
        let curation_key: i64 = c.parse().map_err(|_| bad())?;
        let priority = (i64::MAX as i128 - priority_key as i128) as i64;
        Ok(QueueEntry {
            priority,
            curated_ms: MAX_CURATION_MS - curation_key,
            job: job.to_string(),
        })
    }
}

impl fmt::Display for QueueEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_priority_sorts_first_over_the_whole_range() {
        let priorities = [i64::MAX, 1_000_000, 5, 1, 0, -1, -5, -1_000_000, i64::MIN];
        let names: Vec<String> = priorities
            .iter()
            .map(|p| QueueEntry::new(*p, 1_700_000_000_000, "j0000000001").name())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn newer_curation_sorts_first_within_a_priority() {
        let a = QueueEntry::new(3, 1_800_000_000_000, "j0000000009").name();
        let b = QueueEntry::new(3, 1_700_000_000_000, "j0000000001").name();
        assert!(a < b, "{a} should sort before {b}");
    }

    #[test]
    fn job_id_breaks_ties_oldest_first() {
        let a = QueueEntry::new(3, 1_700_000_000_000, "j0000000001").name();
        let b = QueueEntry::new(3, 1_700_000_000_000, "j0000000002").name();
        assert!(a < b);
    }

    #[test]
    fn names_round_trip() {
        for p in [i64::MIN, -7, 0, 42, i64::MAX] {
            for c in [0, 1_700_000_000_123, MAX_CURATION_MS] {
                let entry = QueueEntry::new(p, c, "j0000000042");
                assert_eq!(QueueEntry::parse(&entry.name()), Ok(entry));
            }
        }
    }

    #[test]
    fn bad_names_are_refused_with_the_name() {
        for bad in [
            "",
            "x",
            "zzzzzzzzzzzzzzzz-0000000000000-j1",
            "7fffffffffffffff-12-j1",
        ] {
            let err = QueueEntry::parse(bad).unwrap_err();
            assert_eq!(err.name, bad);
        }
    }
}
