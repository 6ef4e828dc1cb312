use super::*;

fn ep(priority: i64, curated_ms: i64) -> EpisodeInfo {
    EpisodeInfo {
        priority,
        curated_ms,
        held: false,
        media_url: "http://x/e.mp3".into(),
    }
}

fn clip(n: u32, priority: i64, curated_ms: i64) -> ClipInfo {
    ClipInfo {
        id: format!("c{n:06}"),
        priority,
        curated_ms,
        held: false,
    }
}

fn index_with(clips: &[(u32, i64, i64)]) -> Index {
    let mut index = Index::new();
    for &(n, p, c) in clips {
        index.upsert_clip(n, clip(n, p, c));
    }
    index
}

#[test]
fn episodes_go_by_priority_then_newest_curation() {
    let mut index = index_with(&[(1, 0, 0)]);
    index.upsert_episode("e0000001", ep(1, 100));
    index.upsert_episode("e0000002", ep(5, 100));
    index.upsert_episode("e0000003", ep(5, 200));
    index.upsert_episode("e0000004", ep(-3, 900));
    let mut seen = Vec::new();
    while let Some(p) = index.pick(1, 10) {
        seen.push(p.episode.clone());
        index.upsert_lease(
            &format!("j{}", seen.len()),
            &p.episode,
            p.clip_numbers,
            1_000,
        );
    }
    assert_eq!(seen, ["e0000003", "e0000002", "e0000001", "e0000004"]);
}

#[test]
fn clips_go_by_priority_then_newest_curation_and_are_limited() {
    let mut index = index_with(&[(1, 0, 10), (2, 9, 10), (3, 0, 30), (4, 9, 5), (5, -1, 99)]);
    index.upsert_episode("e0000001", ep(0, 0));
    let p = index.pick(1, 3).unwrap();
    assert_eq!(p.clips, ["c000002", "c000004", "c000003"]);
    assert_eq!(p.clip_numbers, [2, 4, 3]);
    let p = index.pick(1, 50).unwrap();
    assert_eq!(p.clip_numbers, [2, 4, 3, 1, 5]);
}

#[test]
fn complete_episodes_are_skipped_and_researched_clips_left_out() {
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0), (3, 0, 0)]);
    index.upsert_episode("e0000001", ep(9, 0));
    index.upsert_episode("e0000002", ep(1, 0));
    index.set_research("e0000001", [1, 2, 3]);
    index.set_research("e0000002", [2]);
    let p = index.pick(1, 10).unwrap();
    assert_eq!(p.episode, "e0000002");
    assert_eq!(p.clip_numbers, [1, 3]);
    index.set_research("e0000002", [1, 2, 3]);
    assert_eq!(index.pick(1, 10), None);
}

#[test]
fn leased_clips_are_left_out_until_the_lease_expires() {
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0)]);
    index.upsert_episode("e0000001", ep(9, 0));
    index.upsert_episode("e0000002", ep(1, 0));
    index.upsert_lease("j1", "e0000001", vec![1, 2], 1_000);
    index.upsert_lease("j2", "e0000002", vec![1], 2_000);
    let p = index.pick(500, 10).unwrap();
    assert_eq!((p.episode.as_str(), p.clip_numbers), ("e0000002", vec![2]));
    // j1 expired at 1000: an expired lease counts as no lease.
    let p = index.pick(1_000, 10).unwrap();
    assert_eq!(
        (p.episode.as_str(), p.clip_numbers),
        ("e0000001", vec![1, 2])
    );
    // An extension (a write to the lease) blocks again.
    index.upsert_lease("j1", "e0000001", vec![1, 2], 5_000);
    let p = index.pick(1_500, 10).unwrap();
    assert_eq!(p.episode, "e0000002");
    index.remove_lease("j1");
    assert_eq!(index.pick(1_500, 10).unwrap().episode, "e0000001");
}

#[test]
fn held_episodes_and_clips_are_skipped() {
    let mut index = index_with(&[(1, 5, 0), (2, 0, 0)]);
    index.upsert_episode(
        "e0000001",
        EpisodeInfo {
            held: true,
            ..ep(9, 0)
        },
    );
    index.upsert_episode("e0000002", ep(1, 0));
    index.upsert_clip(
        1,
        ClipInfo {
            held: true,
            ..clip(1, 5, 0)
        },
    );
    let p = index.pick(1, 10).unwrap();
    assert_eq!((p.episode.as_str(), p.clip_numbers), ("e0000002", vec![2]));
    index.upsert_clip(
        2,
        ClipInfo {
            held: true,
            ..clip(2, 0, 0)
        },
    );
    assert_eq!(index.pick(1, 10), None, "every clip held: nothing to plan");
    index.upsert_episode("e0000001", ep(9, 0));
    index.upsert_clip(1, clip(1, 5, 0));
    assert_eq!(index.pick(1, 10).unwrap().episode, "e0000001");
}

#[test]
fn blocking_jobs_keep_their_clips_out_until_their_last_entry_goes() {
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0)]);
    index.upsert_episode("e0000001", ep(0, 0));
    index.add_job("j1", JobState::Pending, "e0000001", vec![1]);
    index.add_job("j1", JobState::Pending, "e0000001", vec![1]);
    assert_eq!(index.pick(1, 10).unwrap().clip_numbers, [2]);
    // A transition pending -> held, seen in either order.
    index.add_job("j1", JobState::Held, "e0000001", vec![1]);
    index.remove_job("j1", JobState::Pending);
    assert_eq!(index.pick(1, 10).unwrap().clip_numbers, [2]);
    index.remove_job("j1", JobState::Held);
    assert_eq!(index.pick(1, 10).unwrap().clip_numbers, [1, 2]);
    // A replayed delete of an unknown job changes nothing.
    index.remove_job("j1", JobState::Held);
    assert_eq!(index.pick(1, 10).unwrap().clip_numbers, [1, 2]);
}

#[test]
fn removed_clips_and_episodes_are_not_planned() {
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0)]);
    index.upsert_episode("e0000001", ep(0, 0));
    index.remove_clip(1);
    assert_eq!(index.pick(1, 10).unwrap().clips, ["c000002"]);
    index.remove_episode("e0000001");
    assert_eq!(index.pick(1, 10), None);
}

#[test]
fn priority_changes_reorder_episodes() {
    let mut index = index_with(&[(1, 0, 0)]);
    index.upsert_episode("e0000001", ep(1, 0));
    index.upsert_episode("e0000002", ep(2, 0));
    assert_eq!(index.pick(1, 10).unwrap().episode, "e0000002");
    index.upsert_episode("e0000001", ep(3, 0));
    assert_eq!(index.pick(1, 10).unwrap().episode, "e0000001");
    let stats = index.stats();
    assert_eq!(
        (stats.episodes, stats.plannable_episodes, stats.active_clips),
        (2, 2, 1)
    );
}

/// The naive selection, straight from the seed, over the same state.
fn naive_pick(
    episodes: &[(String, EpisodeInfo)],
    clips: &[Option<ClipInfo>],
    researched: &std::collections::HashMap<String, Vec<u32>>,
    leases: &[(String, Vec<u32>, i64)],
    now: i64,
    max: usize,
) -> Option<(String, Vec<u32>)> {
    let mut order: Vec<&(String, EpisodeInfo)> = episodes.iter().filter(|(_, e)| !e.held).collect();
    order.sort_by(|a, b| {
        (b.1.priority, b.1.curated_ms, &a.0).cmp(&(a.1.priority, a.1.curated_ms, &b.0))
    });
    let mut clip_order: Vec<(u32, &ClipInfo)> = clips
        .iter()
        .enumerate()
        .filter_map(|(n, c)| c.as_ref().filter(|c| !c.held).map(|c| (n as u32, c)))
        .collect();
    clip_order.sort_by(|a, b| {
        (b.1.priority, b.1.curated_ms, a.0).cmp(&(a.1.priority, a.1.curated_ms, b.0))
    });
    for (id, _) in order {
        let free: Vec<u32> = clip_order
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !researched.get(id).is_some_and(|r| r.contains(n)))
            .filter(|n| {
                !leases
                    .iter()
                    .any(|(e, c, exp)| e == id && *exp > now && c.contains(n))
            })
            .collect();
        if !free.is_empty() {
            return Some((id.clone(), free.into_iter().take(max).collect()));
        }
    }
    None
}

#[test]
fn random_changes_pick_what_the_naive_selection_picks() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut index = Index::new();
    let mut episodes: Vec<(String, EpisodeInfo)> = Vec::new();
    let mut clips: Vec<Option<ClipInfo>> = vec![None; 40];
    let mut researched = std::collections::HashMap::new();
    let mut leases: Vec<(String, Vec<u32>, i64)> = Vec::new();
    let mut now = 1;
    for step in 0..3000 {
        match rng.gen_range(0..7) {
            0 => {
                let n = rng.gen_range(1..30u64);
                let id = format!("e{n:07}");
                let info = EpisodeInfo {
                    held: rng.gen_bool(0.1),
                    ..ep(rng.gen_range(-2..3), rng.gen_range(0..5))
                };
                index.upsert_episode(&id, info.clone());
                episodes.retain(|(e, _)| *e != id);
                episodes.push((id, info));
            }
            1 => {
                let n = rng.gen_range(1..40u32);
                if rng.gen_bool(0.15) {
                    index.remove_clip(n);
                    clips[n as usize] = None;
                } else {
                    let c = ClipInfo {
                        held: rng.gen_bool(0.1),
                        ..clip(n, rng.gen_range(0..3), rng.gen_range(0..5))
                    };
                    index.upsert_clip(n, c.clone());
                    clips[n as usize] = Some(c);
                }
            }
            2 | 3 => {
                let id = format!("e{:07}", rng.gen_range(1..30u64));
                let set: Vec<u32> = (1..40).filter(|_| rng.gen_bool(0.7)).collect();
                index.set_research(&id, set.iter().copied());
                researched.insert(id, set);
            }
            4 => {
                let job = format!("j{}", rng.gen_range(0..20));
                if rng.gen_bool(0.3) {
                    index.remove_lease(&job);
                    lease_ids_remove(&mut leases, &job);
                } else {
                    let id = format!("e{:07}", rng.gen_range(1..30u64));
                    let set: Vec<u32> = (1..40).filter(|_| rng.gen_bool(0.3)).collect();
                    let exp = now + rng.gen_range(-5..20);
                    index.upsert_lease(&job, &id, set.clone(), exp);
                    lease_ids_remove(&mut leases, &job);
                    leases.push((format!("{job}|{id}"), set, exp));
                }
            }
            5 => now += rng.gen_range(0..4),
            _ => {
                let max = rng.gen_range(1..8);
                let got = index.pick(now, max).map(|p| (p.episode, p.clip_numbers));
                let plain: Vec<(String, Vec<u32>, i64)> = leases
                    .iter()
                    .map(|(k, c, e)| {
                        (
                            k.split('|').nth(1).unwrap_or_default().to_string(),
                            c.clone(),
                            *e,
                        )
                    })
                    .collect();
                let want = naive_pick(&episodes, &clips, &researched, &plain, now, max);
                assert_eq!(got, want, "step {step}");
            }
        }
    }
}

fn lease_ids_remove(leases: &mut Vec<(String, Vec<u32>, i64)>, job: &str) {
    leases.retain(|(k, _, _)| k.split('|').next() != Some(job));
}

#[test]
fn pair_counts_follow_research_leases_holds_and_the_clip_catalog() {
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0), (3, 0, 0)]);
    index.upsert_episode("e0000001", ep(0, 0));
    index.upsert_episode("e0000002", ep(0, 0));
    let counts = |index: &Index| {
        let s = index.stats();
        (s.pairs, s.pairs_researched, s.pairs_unplanned)
    };
    assert_eq!(counts(&index), (6, 0, 6));
    index.set_research("e0000001", [1, 2]);
    assert_eq!(counts(&index), (6, 2, 4));
    index.upsert_lease("j1", "e0000002", vec![1], 1_000);
    assert_eq!(
        counts(&index),
        (6, 2, 3),
        "a leased pair is planned, not researched"
    );
    // A clip researched and then removed from the catalog no longer counts.
    index.remove_clip(2);
    assert_eq!(counts(&index), (4, 1, 2));
    // A held episode asks for nothing.
    index.upsert_episode(
        "e0000002",
        EpisodeInfo {
            held: true,
            ..ep(0, 0)
        },
    );
    assert_eq!(counts(&index), (2, 1, 1));
}

/// Issue 18: a clip error is not permanent. Once the clip changes (fixed and re-curated:
/// a new stamp), its errored pairs are plannable again; an unchanged clip's error stays
/// settled, and errors stored before stamps existed re-open when the clip was curated
/// after their run.
#[test]
fn a_fixed_and_recurated_clip_reopens_its_errored_pairs() {
    let t = |s: i64| time::OffsetDateTime::from_unix_timestamp(s).unwrap();
    let mut index = index_with(&[(1, 0, 0), (2, 0, 0)]);
    index.set_clip_stamp(1, "1000/aaaa".into(), t(1));
    index.set_clip_stamp(2, "1000/bbbb".into(), t(1));
    index.upsert_episode("e0000001", ep(9, 0));
    index.upsert_episode("e0000002", ep(1, 0));
    let mark = |clip: u32, stamp: Option<&str>| ErrorMark {
        clip,
        stamp: stamp.map(str::to_string),
        run_at: Some(t(50)),
    };
    // Clip 1 errored in both episodes with the clip as it is; clip 2 was researched.
    index.set_research_with_errors("e0000001", [1, 2], vec![mark(1, Some("1000/aaaa"))]);
    index.set_research_with_errors("e0000002", [1, 2], vec![mark(1, None)]);
    assert_eq!(index.pick(1, 10), None, "unchanged clip: its errors stand");
    // The clip is fixed and re-curated: a new stamp, curated after the runs.
    index.set_clip_stamp(1, "2000/cccc".into(), t(100));
    let p = index.pick(1, 10).expect("errored pairs plannable again");
    assert_eq!(
        (p.episode.as_str(), p.clip_numbers.clone()),
        ("e0000001", vec![1])
    );
    index.upsert_lease("j1", &p.episode, p.clip_numbers, 1_000);
    let p = index.pick(1, 10).expect("the pre-stamp error re-opens too");
    assert_eq!(
        (p.episode.as_str(), p.clip_numbers.clone()),
        ("e0000002", vec![1])
    );
    // Re-researched with the new version, erroring again: settled, not planned again.
    index.set_research_with_errors("e0000002", [1, 2], vec![mark(1, Some("2000/cccc"))]);
    assert!(!index.is_researched("e0000001", 1));
    assert!(index.is_researched("e0000002", 1));
}
