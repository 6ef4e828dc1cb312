//! Merging clip reports into an episode's research record.
//!
//! Pure (no ZooKeeper), so the idempotence rule and the record's size can be tested on
//! their own. The rule: a clip number already in any run's set is never stored again,
//! whatever job reports it, so replays and late duplicates are no-ops.

use archivist_engine::schema::clipset::ClipSet;
use archivist_engine::schema::occurrences::{round_3, round_ms};
use archivist_engine::schema::records::{Occurrence, ReportRecord, ResearchRecord, ResearchRun};
use time::OffsetDateTime;

/// Most occurrences kept per clip, so one noisy clip cannot blow the episode's record up.
/// Beyond it the most confident are kept (ties: the earlier), the rule the matcher
/// applies at its own `max_occurrences`, and the merge says how many were left out
/// ([`Merge::Stored`]) so the recorder can warn and count them.
pub const MAX_OCCURRENCES_PER_CLIP: usize = 64;

/// Longest per-clip error message kept, in characters.
pub const MAX_ERROR_CHARS: usize = 200;

/// What merging one report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// The clip was added to the run of the report's job; `dropped` occurrences of the
    /// report were left out by [`MAX_OCCURRENCES_PER_CLIP`] (0 almost always).
    Stored {
        /// Occurrences over the limit, not stored.
        dropped: usize,
    },
    /// The clip was already researched (by this job or another): nothing changed.
    AlreadyResearched,
}

/// Adds one report to the record unless its clip number was researched already.
///
/// A run is one job's work on the episode: the clip joins the run of its job, else a new
/// run stamped `now` (ZooKeeper's clock) and named after the job. So every stored
/// answer names the job that researched it. Runs once merged by researcher and UTC day
/// (and folded past 16 runs) to keep a ZooKeeper node small; the archive is database
/// rows now, one per (episode, job), and a merged run named a job that never
/// researched the clip (outside 17h F2). Runs written before are read as they are.
pub fn merge(
    record: &mut ResearchRecord,
    report: &ReportRecord,
    clip_number: u32,
    now: OffsetDateTime,
) -> Merge {
    // A stored error made with an older version of the clip gives way to the result for
    // the clip as it is now (the clip was fixed and re-curated).
    let replaces_stale_error = record.errors.contains_key(&report.clip)
        && report.clip_stamp.is_some()
        && record.error_stamps.get(&report.clip) != report.clip_stamp.as_ref();
    if replaces_stale_error && record.is_researched(clip_number) {
        record.reopen(&report.clip, clip_number);
    }
    if record.is_researched(clip_number) {
        return Merge::AlreadyResearched;
    }
    let found = record.runs.iter().position(|r| r.job == report.job);
    let index = match found {
        Some(i) => i,
        None => {
            record.runs.push(ResearchRun {
                job: report.job.clone(),
                researcher: report.researcher.clone(),
                at: now,
                clips: ClipSet::new(),
            });
            record.runs.len() - 1
        }
    };
    if let Some(run) = record.runs.get_mut(index) {
        run.clips.insert(clip_number);
    }
    let mut dropped = 0;
    if !report.occurrences.is_empty() {
        let kept = compact(&report.occurrences);
        let readable = report
            .occurrences
            .iter()
            .filter(|o| o.at.is_finite() && o.conf.is_finite())
            .count();
        dropped = readable - kept.len();
        record.found.insert(report.clip.clone(), kept);
    }
    if let Some(error) = &report.error {
        record.errors.insert(
            report.clip.clone(),
            error.chars().take(MAX_ERROR_CHARS).collect(),
        );
        if let Some(stamp) = &report.clip_stamp {
            record
                .error_stamps
                .insert(report.clip.clone(), stamp.clone());
        }
    }
    if record.episode_duration_s.is_none()
        && report.episode_duration_s.is_finite()
        && report.episode_duration_s > 0.0
    {
        record.episode_duration_s = Some(round_ms(report.episode_duration_s));
    }
    Merge::Stored { dropped }
}

/// One occurrence as the archive stores it: offsets to the millisecond, confidence and
/// speed to 3 decimals, a non-finite speed or part dropped; `None` when its offset or
/// confidence is not finite (the archive drops it). The rounding rule of [`compact`],
/// alone, for a check of one occurrence that needs no list (the recorder's
/// `usable_occurrences`).
pub fn rounded(o: &Occurrence) -> Option<Occurrence> {
    (o.at.is_finite() && o.conf.is_finite()).then(|| Occurrence {
        at: round_ms(o.at),
        conf: round_3(o.conf),
        speed: o.speed.filter(|s| s.is_finite()).map(round_3),
        part: o
            .part
            .filter(|[s, e]| s.is_finite() && e.is_finite())
            .map(|[s, e]| [round_ms(s), round_ms(e)]),
    })
}

/// The occurrences as the archive keeps them: in episode order, at most
/// [`MAX_OCCURRENCES_PER_CLIP`] (the most confident, ties: the earlier), each
/// [`rounded`] (non-finite values dropped).
pub fn compact(occurrences: &[Occurrence]) -> Vec<Occurrence> {
    let mut out: Vec<Occurrence> = occurrences.iter().filter_map(rounded).collect();
    if out.len() > MAX_OCCURRENCES_PER_CLIP {
        out.sort_by(|a, b| b.conf.total_cmp(&a.conf).then(a.at.total_cmp(&b.at)));
        out.truncate(MAX_OCCURRENCES_PER_CLIP);
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use archivist_engine::schema::paths;
    use archivist_engine::schema::records::encode;
    use archivist_engine::schema::SCHEMA_VERSION;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    fn report(job: &str, clip: u32, occurrences: Vec<Occurrence>) -> ReportRecord {
        ReportRecord {
            schema: SCHEMA_VERSION,
            job: job.into(),
            episode: "e0000001".into(),
            clip: paths::clip_id(clip),
            researcher: "researcher-host-1234".into(),
            occurrences,
            error: None,
            clip_stamp: None,
            episode_duration_s: 5_400.123_456,
            clip_duration_s: 4.5,
            researched_at: OffsetDateTime::UNIX_EPOCH,
            is_final: false,
        }
    }

    /// `rounded` is the rounding `compact` applies, one occurrence at a time: the same
    /// values, the same drops, no list needed.
    #[test]
    fn one_occurrence_rounds_as_the_archive_stores_it() {
        let o = |at: f64, conf: f32, speed: Option<f32>, part: Option<[f64; 2]>| Occurrence {
            at,
            conf,
            speed,
            part,
        };
        assert_eq!(
            rounded(&o(
                12.345_678,
                0.876_54,
                Some(1.000_49),
                Some([1.000_4, 2.999_9])
            )),
            Some(o(12.346, 0.877, Some(1.0), Some([1.0, 3.0])))
        );
        assert_eq!(
            rounded(&o(1.0, 0.9, Some(f32::NAN), Some([f64::INFINITY, 2.0]))),
            Some(o(1.0, 0.9, None, None))
        );
        assert_eq!(rounded(&o(f64::NAN, 0.9, None, None)), None);
        assert_eq!(rounded(&o(1.0, f32::INFINITY, None, None)), None);
        let many = vec![
            o(3.000_4, 0.5, None, None),
            o(f64::INFINITY, 0.9, None, None),
            o(1.234_56, 0.999_9, Some(1.5), None),
        ];
        let one_by_one: Vec<Occurrence> = many.iter().filter_map(rounded).collect();
        let mut sorted = one_by_one.clone();
        sorted.sort_by(|a, b| a.at.total_cmp(&b.at));
        assert_eq!(compact(&many), sorted);
    }

    /// Issue 18: an error made with an older version of a clip gives way to the result
    /// for the fixed clip; a replay of the same version stays a no-op.
    #[test]
    fn a_stale_error_gives_way_to_the_new_result() {
        let mut record = ResearchRecord::new("e0000001");
        let now = OffsetDateTime::UNIX_EPOCH;
        let mut broken = report("j1", 2, Vec::new());
        broken.error = Some("clip download failed: not audio".into());
        broken.clip_stamp = Some("1000/aaaa".into());
        assert_eq!(
            merge(&mut record, &broken, 2, now),
            Merge::Stored { dropped: 0 }
        );
        assert_eq!(record.error_stamps["c000002"], "1000/aaaa");
        assert_eq!(
            merge(&mut record, &broken, 2, now),
            Merge::AlreadyResearched
        );
        let mut fixed = report(
            "j2",
            2,
            vec![Occurrence {
                at: 12.5,
                conf: 0.9,
                speed: None,
                part: None,
            }],
        );
        fixed.clip_stamp = Some("2000/cccc".into());
        assert_eq!(
            merge(&mut record, &fixed, 2, now),
            Merge::Stored { dropped: 0 }
        );
        assert!(record.errors.is_empty() && record.error_stamps.is_empty());
        assert_eq!(record.found["c000002"].len(), 1);
        assert!(record.is_researched(2));
        assert_eq!(merge(&mut record, &fixed, 2, now), Merge::AlreadyResearched);
    }

    fn occ(at: f64, conf: f32) -> Occurrence {
        Occurrence {
            at,
            conf,
            speed: None,
            part: None,
        }
    }

    #[test]
    fn a_clip_is_stored_once_whatever_job_reports_it() {
        let mut record = ResearchRecord::new("e0000001");
        let now = OffsetDateTime::UNIX_EPOCH;
        let first = report("j0000000001", 7, vec![occ(10.000_4, 0.912_34)]);
        assert_eq!(
            merge(&mut record, &first, 7, now),
            Merge::Stored { dropped: 0 }
        );
        let once = record.clone();
        assert_eq!(merge(&mut record, &first, 7, now), Merge::AlreadyResearched);
        let other = report("j0000000002", 7, vec![occ(99.0, 0.5)]);
        assert_eq!(merge(&mut record, &other, 7, now), Merge::AlreadyResearched);
        assert_eq!(record, once);
        assert_eq!(record.runs.len(), 1);
        assert_eq!(record.found["c000007"], vec![occ(10.0, 0.912)]);
        assert_eq!(record.episode_duration_s, Some(5400.123));
    }

    #[test]
    fn not_found_and_errored_clips_count_as_researched() {
        let mut record = ResearchRecord::new("e0000001");
        let now = OffsetDateTime::UNIX_EPOCH;
        merge(&mut record, &report("j0000000001", 1, vec![]), 1, now);
        let mut bad = report("j0000000001", 2, vec![]);
        bad.error = Some("x".repeat(1000));
        merge(&mut record, &bad, 2, now);
        assert!(record.is_researched(1) && record.is_researched(2));
        assert!(record.found.is_empty());
        assert_eq!(record.errors["c000002"].len(), MAX_ERROR_CHARS);
        assert_eq!(record.runs[0].clips.to_string(), "1-2");
    }

    #[test]
    fn occurrences_are_sorted_bounded_and_rounded() {
        let many: Vec<Occurrence> = (0..200)
            .rev()
            .map(|i| occ(i as f64 + 0.123_456, 0.5))
            .chain([occ(f64::NAN, 0.5)])
            .collect();
        let kept = compact(&many);
        assert_eq!(kept.len(), MAX_OCCURRENCES_PER_CLIP);
        assert_eq!(kept[0].at, 0.123);
        assert!(kept.windows(2).all(|w| w[0].at <= w[1].at));
    }

    /// Issue 17's leftover: the cap was silent and kept the earliest occurrences, so a
    /// clip's strongest matches late in an episode were lost without a word. Now the cap
    /// keeps the most confident (the matcher's rule at its own `max_occurrences`) and the
    /// merge says how many it left out.
    #[test]
    fn the_cap_keeps_the_most_confident_and_says_how_many_it_dropped() {
        let t0 = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        // 100 occurrences: the 40 earliest weak, the 60 later ones strong.
        let many: Vec<Occurrence> = (0..100)
            .map(|i| occ(i as f64 * 10.0, if i < 40 { 0.3 } else { 0.9 }))
            .collect();
        let mut r = report(&paths::job_id(1), 1, many);
        r.occurrences[0].conf = 0.95;
        let mut record = ResearchRecord::new("e0000001");
        let merged = merge(&mut record, &r, 1, t0);
        assert_eq!(
            merged,
            Merge::Stored {
                dropped: 100 - MAX_OCCURRENCES_PER_CLIP
            }
        );
        let kept = &record.found[&r.clip];
        assert_eq!(kept.len(), MAX_OCCURRENCES_PER_CLIP);
        assert!(kept.windows(2).all(|w| w[0].at < w[1].at), "episode order");
        // All 60 strong ones and the strongest early one; then the earliest weak ones.
        assert_eq!(kept.iter().filter(|o| o.conf >= 0.9).count(), 61);
        assert_eq!(kept[0].at, 0.0);
        assert!(
            kept.iter().any(|o| o.at == 990.0),
            "the last, strong one is kept"
        );
        let weak: Vec<f64> = kept.iter().filter(|o| o.conf < 0.9).map(|o| o.at).collect();
        assert_eq!(weak, vec![10.0, 20.0, 30.0]);
        // Under the cap nothing is dropped.
        let mut record = ResearchRecord::new("e0000001");
        let few = report(&paths::job_id(2), 2, vec![occ(1.0, 0.5)]);
        assert_eq!(
            merge(&mut record, &few, 2, t0),
            Merge::Stored { dropped: 0 }
        );
    }

    /// A research record for `clips` clips researched in runs of 50 (the planner's
    /// default max clips), `found` of them found with 1-3 occurrences each, a few per-clip
    /// errors. `shuffled` spreads each run's clip numbers over the catalog (the worst case
    /// for the range encoding).
    pub(crate) fn representative(
        clips: u32,
        found: f64,
        shuffled: bool,
        seed: u64,
    ) -> ResearchRecord {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut numbers: Vec<u32> = (1..=clips).collect();
        if shuffled {
            numbers.shuffle(&mut rng);
        }
        let mut record = ResearchRecord::new("e0001234");
        let mut at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        for (run, chunk) in numbers.chunks(50).enumerate() {
            at += time::Duration::minutes(7);
            let job = paths::job_id(1_000_000 + run as u64);
            for &n in chunk {
                let mut r = report(&job, n, vec![]);
                r.researcher = format!("researcher-worker-{:02}-{}", run % 8, 40_000 + run % 8);
                if rng.gen_bool(found) {
                    r.occurrences = (0..rng.gen_range(1..=3))
                        .map(|_| occ(rng.gen_range(0.0..7200.0), rng.gen_range(0.55..1.0)))
                        .collect();
                } else if rng.gen_bool(0.002) {
                    r.error = Some("clip media is not decodable audio".into());
                }
                merge(&mut record, &r, n, at);
            }
        }
        record
    }

    /// Outside 17h F2: a clip researched by job 83 joined job 1's run (same researcher,
    /// same UTC day), so `results` named job 1, whose record never mentions the clip.
    /// Every clip now lands in the run of the job that researched it, also when clips
    /// trickle in one job at a time for years.
    #[test]
    fn each_clip_is_stored_in_the_run_of_the_job_that_researched_it() {
        let mut record = ResearchRecord::new("e0000001");
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        for n in 0..2000u32 {
            let mut r = report(&paths::job_id(n as u64 + 1), n + 1, vec![]);
            r.researcher = format!("researcher-worker-{:02}-{}", n % 8, 40_000 + n % 8);
            // Two jobs a day by the same researchers: once merged into one run.
            let now = start + time::Duration::days(i64::from(n / 16));
            assert_eq!(
                merge(&mut record, &r, n + 1, now),
                Merge::Stored { dropped: 0 }
            );
        }
        assert_eq!(record.runs.len(), 2000);
        assert_eq!(record.researched().len(), 2000);
        for n in 0..2000u32 {
            let run = record
                .runs
                .iter()
                .find(|run| run.clips.contains(n + 1))
                .expect("a run holds the clip");
            assert_eq!(run.job, paths::job_id(n as u64 + 1), "clip {}", n + 1);
        }
    }

    fn size(record: &ResearchRecord) -> usize {
        encode("/research/e0001234", record)
            .map(|b| b.len())
            .unwrap_or(usize::MAX)
    }

    #[test]
    fn two_thousand_clips_stay_under_100_kb_even_fragmented_and_twice_as_found() {
        for (found, shuffled) in [(0.05, false), (0.05, true), (0.10, true), (1.0, true)] {
            let record = representative(2000, found, shuffled, 7);
            assert_eq!(record.researched().len(), 2000);
            let bytes = size(&record);
            println!(
                "2000 clips, {:.0}% found, shuffled={shuffled}: {bytes} bytes",
                found * 100.0
            );
            let limit = if found < 1.0 { 100_000 } else { 400_000 };
            assert!(
                bytes <= limit,
                "{bytes} bytes for found={found} shuffled={shuffled}"
            );
        }
    }

    #[test]
    fn ten_thousand_episodes_of_two_thousand_clips_stay_under_100_mb() {
        // The representative episode: 2,000 clips backfilled in 40 jobs of 50 (the
        // planner's default) by 8 researchers on one day, 5 % found with 1-3 occurrences,
        // 0.2 % per-clip errors. Averaged over 5 seeds, scaled to 10k episodes. One run
        // per job (each answer names its job: outside 17h F2) costs ~78 MB where runs
        // merged by researcher and day cost ~47 MB; database rows, not ZooKeeper nodes.
        let total: usize = (0..5)
            .map(|seed| size(&representative(2000, 0.05, false, seed)))
            .sum();
        let per_episode = total / 5;
        let archive = per_episode * 10_000;
        println!(
            "{per_episode} bytes per episode, {:.1} MB for 10k episodes",
            archive as f64 / 1e6
        );
        assert!(archive <= 100_000_000, "{archive} bytes for 10k episodes");
    }
}
