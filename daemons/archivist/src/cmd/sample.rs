//! `archivist sample DIR`: generates a small sample catalog for the quickstart and the
//! full-pipeline test: a few episodes of several minutes with known clips spliced in or
//! mixed over speech and music, the clip files, a curation manifest pointing at a base
//! URL, and `truth.yml` saying where every clip really is. Deterministic for a seed.
//! `--clips N` adds synthetic clips placed in no episode (so every one of their pairs
//! must come back "not found"), for benchmarks that need a large clip library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use archivist_testaudio as corpus;
use archivist_testaudio::{BedKind, ClipKind, Placement, Scenario};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::cli::GlobalOpts;

/// `archivist sample ...`
#[derive(Debug, clap::Subcommand)]
pub enum SampleCommand {
    /// Write a sample catalog (media, manifest.yml, truth.yml) into a directory.
    Generate(SampleArgs),
    /// Wait until every sample pair is researched, then compare the research archive with
    /// truth.yml and print the results table (exit 1 on any mismatch).
    Check(super::sample_check::CheckArgs),
}

/// Arguments of `archivist sample generate`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Directory to write into (created if missing).
    pub dir: PathBuf,
    /// Base URL the directory will be served at (for the manifest).
    #[arg(long)]
    pub base_url: String,
    /// Number of episodes.
    #[arg(long, default_value_t = 3)]
    pub episodes: usize,
    /// Length of each episode, in minutes.
    #[arg(long, default_value_t = 4.0)]
    pub minutes: f64,
    /// Seed (the same seed writes the same files).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Clips in the manifest: the 4 placed in the episodes, then synthetic clips
    /// (spoken drops and jingles of 2.5-8.5 s) placed in none of them, which must all
    /// come back "not found". At least 4.
    #[arg(long, default_value_t = CLIPS.len(), value_parser = parse_clip_count)]
    pub clips: usize,
}

fn parse_clip_count(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n < CLIPS.len() {
        return Err(format!(
            "at least {} (the clips placed in the episodes)",
            CLIPS.len()
        ));
    }
    Ok(n)
}

/// Where every clip is in every episode (`truth.yml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SampleTruth {
    /// Episodes in manifest order.
    pub episodes: Vec<SampleEpisode>,
    /// Clip titles in manifest order.
    pub clips: Vec<String>,
}

/// One episode of the sample.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SampleEpisode {
    /// Title in the manifest.
    pub title: String,
    /// Media URL in the manifest.
    pub url: String,
    /// Every occurrence: clip title and start offset (s).
    pub occurrences: Vec<SampleOccurrence>,
}

/// One placed clip.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SampleOccurrence {
    /// Clip title.
    pub clip: String,
    /// Start offset in the episode (s).
    pub offset_s: f64,
}

const CLIPS: [(&str, ClipKind, f64); 4] = [
    ("sting", ClipKind::Sting, 1.0),
    ("drop", ClipKind::SpokenDrop, 2.5),
    ("jingle", ClipKind::Jingle, 5.0),
    ("theme", ClipKind::Theme, 15.0),
];

/// A synthetic clip of the sample's library, placed in no episode.
#[derive(Debug, Clone, PartialEq)]
struct ExtraClip {
    title: String,
    kind: ClipKind,
    len: f64,
    seed: u64,
}

/// The synthetic clips that bring the library to `clips` (none when `clips` is at most
/// the placed ones): spoken drops and jingles of 2.5 to 8.5 s, each with a seed of its
/// own in the same series as the placed clips' seeds.
fn extra_clips(clips: usize, seed: u64) -> Vec<ExtraClip> {
    (CLIPS.len()..clips)
        .map(|i| {
            let n = i - CLIPS.len();
            ExtraClip {
                title: format!("extra-{:04}", n + 1),
                kind: if n % 2 == 0 {
                    ClipKind::SpokenDrop
                } else {
                    ClipKind::Jingle
                },
                len: 2.5 + (n % 7) as f64,
                seed: clip_seed(seed, i),
            }
        })
        .collect()
}

/// The synthesis seed of clip `index` of the library: it depends on the sample seed
/// only, so the same clip sounds the same in every episode.
fn clip_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(1_000_003)
        .wrapping_add(index as u64 * 7919 + 17)
}

/// Generates the sample into `dir` with `clips` clips in the manifest (the placed ones,
/// then [`extra_clips`]); returns the truth.
pub fn generate(
    dir: &Path,
    base_url: &str,
    episodes: usize,
    minutes: f64,
    seed: u64,
    clips: usize,
) -> Result<SampleTruth> {
    std::fs::create_dir_all(dir.join("clips"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let base = base_url.trim_end_matches('/');
    let duration = (minutes * 60.0).max(60.0);
    let extras = extra_clips(clips, seed);
    let mut truth = SampleTruth {
        episodes: Vec::new(),
        clips: CLIPS
            .iter()
            .map(|c| c.0.to_string())
            .chain(extras.iter().map(|c| c.title.clone()))
            .collect(),
    };
    let beds = [BedKind::Speech, BedKind::Music, BedKind::Mixed];
    let mut clip_files_written = false;
    for e in 0..episodes {
        let mut scenario = Scenario::new(
            seed.wrapping_mul(31).wrapping_add(e as u64),
            duration,
            beds[e % beds.len()],
        );
        for (i, (name, kind, len)) in CLIPS.iter().enumerate() {
            let index = scenario.add_clip(name, *kind, *len);
            // The same clip in every episode: its seed depends on the sample seed only.
            scenario.clips[index].seed = clip_seed(seed, i);
        }
        // Spread placements over the episode: each clip once or twice, one clip left out
        // of each episode in turn, alternately spliced and mixed over the bed.
        let slots = 8;
        let slot_len = duration / slots as f64;
        let mut slot = 0;
        let mut occurrences = Vec::new();
        for (i, (name, _, len)) in CLIPS.iter().enumerate() {
            if i == e % CLIPS.len() && episodes > 1 {
                continue;
            }
            let copies = if i % 2 == 0 { 2 } else { 1 };
            for c in 0..copies {
                if slot >= slots {
                    break;
                }
                let jitter = ((seed as usize + e * 13 + i * 7 + c * 3) % 10) as f64 / 10.0;
                let offset =
                    ((slot as f64 + 0.1 + 0.5 * jitter) * slot_len).min(duration - len - 1.0);
                let offset = (offset * 1000.0).round() / 1000.0;
                let placement = if (i + c + e) % 2 == 0 {
                    Placement::Splice
                } else {
                    Placement::Mix { clip_db: -3.0 }
                };
                scenario.place(i, offset, placement);
                occurrences.push(SampleOccurrence {
                    clip: name.to_string(),
                    offset_s: offset,
                });
                slot += 1;
            }
        }
        scenario.episode_mp3_kbps = corpus::tool_available("lame").then_some(64);
        let episode_dir = dir.join(format!("work/ep{e}"));
        let written = scenario
            .write_to(&episode_dir)
            .with_context(|| format!("writing episode {e}"))?;
        let ext = Path::new(&written.episode)
            .extension()
            .and_then(|x| x.to_str())
            .unwrap_or("wav")
            .to_string();
        let file = format!("episode-{}.{ext}", e + 1);
        std::fs::rename(episode_dir.join(&written.episode), dir.join(&file))?;
        if !clip_files_written {
            for clip in &written.clips {
                std::fs::rename(
                    episode_dir.join(&clip.file),
                    dir.join("clips").join(format!("{}.wav", clip.name)),
                )?;
            }
            clip_files_written = true;
        }
        std::fs::remove_dir_all(&episode_dir)?;
        occurrences.sort_by(|a, b| a.offset_s.total_cmp(&b.offset_s));
        truth.episodes.push(SampleEpisode {
            title: format!("Sample episode {}", e + 1),
            url: format!("{base}/{file}"),
            occurrences,
        });
    }
    let _ = std::fs::remove_dir(dir.join("work"));
    for clip in &extras {
        let audio = corpus::synth_clip(clip.kind, clip.len, clip.seed, 8000, false);
        let path = dir.join("clips").join(format!("{}.wav", clip.title));
        corpus::write_wav(&path, &audio, 8000, 1)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut manifest = String::from("# Sample catalog written by `archivist sample`.\nepisodes:\n");
    for (e, episode) in truth.episodes.iter().enumerate() {
        manifest.push_str(&format!(
            "  - url: {}\n    title: {}\n    air_date: {}\n    priority: {}\n",
            episode.url,
            episode.title,
            sample_air_date(e),
            e % 2
        ));
    }
    manifest.push_str("clips:\n");
    for (i, (name, _, _)) in CLIPS.iter().enumerate() {
        manifest.push_str(&format!(
            "  - url: {base}/clips/{name}.wav\n    title: {name}\n    priority: {}\n",
            CLIPS.len() - i
        ));
    }
    for clip in &extras {
        manifest.push_str(&format!(
            "  - url: {base}/clips/{title}.wav\n    title: {title}\n    priority: 0\n",
            title = clip.title
        ));
    }
    std::fs::write(dir.join("manifest.yml"), manifest)?;
    std::fs::write(dir.join("truth.yml"), serde_yaml::to_string(&truth)?)?;
    Ok(truth)
}

/// Runs `archivist sample ...`.
pub async fn run(global: &GlobalOpts, command: SampleCommand) -> Result<ExitCode> {
    match command {
        SampleCommand::Generate(args) => generate_command(args).await,
        SampleCommand::Check(args) => super::sample_check::run(global, args).await,
    }
}

async fn generate_command(args: SampleArgs) -> Result<ExitCode> {
    let dir = args.dir.clone();
    let truth = tokio::task::spawn_blocking(move || {
        generate(
            &args.dir,
            &args.base_url,
            args.episodes,
            args.minutes,
            args.seed,
            args.clips,
        )
    })
    .await??;
    let placed: usize = truth.episodes.iter().map(|e| e.occurrences.len()).sum();
    outln!(
        "wrote {} episodes, {} clips and {placed} placements to {} (manifest.yml, truth.yml)",
        truth.episodes.len(),
        truth.clips.len(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The air date of sample episode `index`: one a day from 2026-01-01 (a real date for any
/// number of episodes; the catalog refuses impossible ones such as 2026-01-40).
fn sample_air_date(index: usize) -> String {
    let first =
        time::Date::from_calendar_date(2026, time::Month::January, 1).unwrap_or(time::Date::MIN);
    let day = first
        .checked_add(time::Duration::days(index as i64))
        .unwrap_or(first);
    format!(
        "{:04}-{:02}-{:02}",
        day.year(),
        u8::from(day.month()),
        day.day()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_air_dates_are_real_days_one_apart() {
        assert_eq!(sample_air_date(0), "2026-01-01");
        assert_eq!(sample_air_date(30), "2026-01-31");
        assert_eq!(sample_air_date(39), "2026-02-09");
        assert_eq!(sample_air_date(365), "2027-01-01");
        for i in 0..800 {
            assert!(
                archivist_catalog::item::check_air_date(&sample_air_date(i)).is_ok(),
                "{}",
                sample_air_date(i)
            );
        }
    }

    #[test]
    fn the_default_library_is_the_placed_clips_and_fewer_is_refused() {
        assert!(extra_clips(CLIPS.len(), 7).is_empty());
        assert_eq!(parse_clip_count("4"), Ok(4));
        assert!(parse_clip_count("3").unwrap_err().contains("at least 4"));
        let extras = extra_clips(12, 7);
        assert_eq!(extras.len(), 8);
        assert_eq!(extras[0].title, "extra-0001");
        let seeds: std::collections::BTreeSet<u64> = (0..12).map(|i| clip_seed(7, i)).collect();
        assert_eq!(
            seeds.len(),
            12,
            "every clip of the library has a seed of its own"
        );
    }

    #[test]
    fn extra_clips_are_in_the_manifest_and_the_truth_and_placed_nowhere() {
        let dir =
            std::env::temp_dir().join(format!("archivist-sample-clips-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let truth = generate(&dir, "http://127.0.0.1:1/", 2, 1.0, 7, 7).unwrap();
        let names = [
            "sting",
            "drop",
            "jingle",
            "theme",
            "extra-0001",
            "extra-0002",
            "extra-0003",
        ];
        assert_eq!(truth.clips, names);
        assert!(truth
            .episodes
            .iter()
            .flat_map(|e| &e.occurrences)
            .all(|o| CLIPS.iter().any(|c| c.0 == o.clip)));
        let written: SampleTruth =
            serde_yaml::from_str(&std::fs::read_to_string(dir.join("truth.yml")).unwrap()).unwrap();
        assert_eq!(written, truth);
        let manifest: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(dir.join("manifest.yml")).unwrap())
                .unwrap();
        let titles: Vec<&str> = manifest["clips"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|c| c["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, names);
        for name in names {
            let clip =
                archivist_matcher::decode::decode_file(&dir.join(format!("clips/{name}.wav")))
                    .unwrap();
            assert!(
                clip.samples.len() >= 8000,
                "{name} is at least a second long"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
