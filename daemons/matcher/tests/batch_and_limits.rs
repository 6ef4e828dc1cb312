//! A clip's answer does not depend on the other clips researched with it (issue 20,
//! defect 1), and every occurrence up to `max_occurrences` is reported, with the limit
//! flagged when it is hit (defect 2).

use archivist_matcher::{ClipResult, MatchConfig, MatchError, MatchMode, Matcher, Occurrence};
use archivist_testaudio::{BedKind, ClipKind, Degrade, Placement, Scenario};

const RATE: f64 = archivist_matcher::ANALYSIS_RATE as f64;

/// What must not depend on the batch: every field of every occurrence except the
/// cross-clip annotation (which names the other clips of the request, by design).
fn key(r: &Result<ClipResult, MatchError>) -> Vec<(i64, i64, i64, i64, i64, String)> {
    r.as_ref()
        .expect("clip should match")
        .occurrences
        .iter()
        .map(|o: &Occurrence| {
            (
                (o.offset_s * 1000.0).round() as i64,
                (o.confidence * 1e6).round() as i64,
                (o.speed * 1e4).round() as i64,
                (o.clip_start_s * 1000.0).round() as i64,
                (o.clip_end_s * 1000.0).round() as i64,
                format!("{:?}", o.detector),
            )
        })
        .collect()
}

/// Clips cut from one episode's own audio: a theme and its cut-down sting (its first
/// 2 s), the theme's last 3 s, a drop and its longer version, and a clip that overlaps
/// the theme's end. The theme's passage is spliced into the episode twice, so every
/// clip cut from it occurs twice. Light noise is added to the episode after cutting, so
/// nested clips score slightly differently at the same place (as they do in real audio).
fn nested_clips() -> (Vec<f32>, Vec<(String, Vec<f32>)>) {
    let mut s = Scenario::new(41, 60.0, BedKind::Mixed);
    let theme = s.add_clip("theme", ClipKind::Theme, 12.0);
    let drop = s.add_clip("drop", ClipKind::SpokenDrop, 3.5);
    s.place(theme, 6.0, Placement::Splice)
        .place(theme, 38.0, Placement::Splice)
        .place(drop, 25.0, Placement::Splice);
    let master = s.render().episode;
    let cut = |a: f64, b: f64| master[(a * RATE) as usize..(b * RATE) as usize].to_vec();
    let clips = vec![
        ("theme".to_string(), cut(6.0, 18.0)),
        ("theme_sting".to_string(), cut(6.0, 8.0)),
        ("theme_tail".to_string(), cut(15.0, 18.0)),
        ("drop_long".to_string(), cut(24.0, 29.5)),
        ("drop".to_string(), cut(25.0, 28.5)),
        ("overlap".to_string(), cut(14.0, 21.0)),
    ];
    let mut noise = 77u64;
    let rms = (master.iter().map(|v| v * v).sum::<f32>() / master.len() as f32).sqrt();
    let episode: Vec<f32> = master
        .iter()
        .map(|v| {
            noise = noise
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = ((noise >> 33) as f64 / (1u64 << 31) as f64 - 0.5) as f32;
            v + 0.35 * rms * n
        })
        .collect();
    (episode, clips)
}

#[test]
fn nested_and_overlapping_clips_get_the_same_answer_in_any_batch() {
    let (episode, clips) = nested_clips();
    for mode in [MatchMode::Full, MatchMode::Fast] {
        let m = Matcher::new(
            &episode,
            MatchConfig {
                mode,
                ..Default::default()
            },
        );
        let alone: Vec<_> = clips.iter().map(|(l, c)| key(&m.find(c, l))).collect();
        // Each clip cut from the theme's passage occurs at both copies of it.
        for (i, name) in ["theme", "theme_sting", "theme_tail"].iter().enumerate() {
            let at: Vec<i64> = alone[i].iter().map(|k| k.0).collect();
            assert_eq!(at.len(), 2, "{mode:?} {name} alone: {:?}", alone[i]);
        }
        let n = clips.len();
        let orders: Vec<Vec<usize>> = vec![
            (0..n).collect(),
            (0..n).rev().collect(),
            vec![1, 4, 0, 3, 5, 2],
            vec![5, 2, 3, 1, 0, 4],
        ];
        let splits: Vec<Vec<Vec<usize>>> = vec![
            vec![vec![0, 1, 2], vec![3, 4, 5]],
            vec![vec![0, 4], vec![1, 3], vec![2, 5]],
            vec![vec![5, 1], vec![2, 3, 4, 0]],
        ];
        let batches = orders
            .into_iter()
            .map(|o| vec![o])
            .chain(splits)
            .collect::<Vec<_>>();
        for jobs in batches {
            for job in &jobs {
                let batch: Vec<(String, Vec<f32>)> =
                    job.iter().map(|&i| clips[i].clone()).collect();
                let got = m.find_all(&batch);
                for (k, &i) in job.iter().enumerate() {
                    assert_eq!(
                        key(&got[k]),
                        alone[i],
                        "{mode:?}: clip {} in batch {:?} differs from the clip alone",
                        clips[i].0,
                        job.iter().map(|&j| clips[j].0.as_str()).collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}

/// A 2 s drop placed 120 times and a 1 s sting 60 times in 9 minutes of speech and
/// music: every copy is reported (the old matcher verified its 32 best coarse candidates
/// and reported at most about 40 per clip).
/// Episode, clips and how many copies of each were placed.
type ManyCopies = (Vec<f32>, Vec<(String, Vec<f32>)>, Vec<usize>);

fn many_copies() -> ManyCopies {
    let mut s = Scenario::new(52, 540.0, BedKind::Mixed);
    let drop = s.add_clip("drop", ClipKind::SpokenDrop, 2.0);
    let sting = s.add_clip("sting", ClipKind::Sting, 1.0);
    let mut want = vec![0usize; 2];
    for k in 0..120 {
        let at = 1.0 + 4.45 * k as f64;
        let placement = if k % 3 == 0 {
            Placement::Mix { clip_db: -3.0 }
        } else {
            Placement::Splice
        };
        s.place(drop, at, placement);
        want[0] += 1;
        if k % 2 == 0 {
            s.place(sting, at + 2.6, Placement::Splice);
            want[1] += 1;
        }
    }
    let r = s.render();
    (r.episode, r.clips, want)
}

#[test]
fn every_copy_is_reported_up_to_max_occurrences() {
    let (episode, clips, want) = many_copies();
    let m = Matcher::new(&episode, MatchConfig::default());
    let res = m.find_all(&clips);
    for (k, r) in res.iter().enumerate() {
        let r = r.as_ref().expect("valid clip");
        assert_eq!(
            r.occurrences.len(),
            want[k],
            "{}: {} of {} copies",
            clips[k].0,
            r.occurrences.len(),
            want[k]
        );
        assert!(!r.limit_reached, "{} flagged below the limit", clips[k].0);
    }
}

#[test]
fn hitting_max_occurrences_is_flagged_and_keeps_the_most_confident() {
    let (episode, clips, _) = many_copies();
    let m = Matcher::new(
        &episode,
        MatchConfig {
            max_occurrences: 25,
            ..Default::default()
        },
    );
    let r = m.find(&clips[0].1, "drop").expect("valid clip");
    assert_eq!(r.occurrences.len(), 25, "{:?}", r.occurrences);
    assert!(r.limit_reached, "the limit was hit silently");
    // The mixed copies (-3 dB under the bed) score lower than the spliced ones: the
    // limit keeps the most confident, so none of the kept ones is a mixed copy.
    for o in &r.occurrences {
        assert!(o.confidence > 0.9, "{o:?}");
    }
}

/// 24 copies of a 4 s jingle played 3% fast: the warped detector verified its 8 best
/// candidates per clip before.
#[test]
fn every_speed_changed_copy_is_reported() {
    let mut s = Scenario::new(63, 200.0, BedKind::Speech);
    let jingle = s.add_clip("jingle", ClipKind::Jingle, 4.0);
    for k in 0..24 {
        s.place_degraded(
            jingle,
            2.0 + 8.2 * k as f64,
            Placement::Splice,
            Degrade {
                speed: if k % 2 == 0 { 1.03 } else { 0.97 },
                ..Default::default()
            },
        );
    }
    let r = s.render();
    let m = Matcher::new(&r.episode, MatchConfig::default());
    let res = m.find(&r.clips[0].1, "jingle").expect("valid clip");
    let truth: Vec<f64> = r.truth.occurrences.iter().map(|o| o.offset_s).collect();
    assert_eq!(res.occurrences.len(), 24, "{:?}", res.occurrences);
    for (o, t) in res.occurrences.iter().zip(&truth) {
        let anchor = o.offset_s - o.clip_start_s / f64::from(o.speed);
        assert!((anchor - t).abs() < 0.05, "{o:?} vs {t}");
    }
}
