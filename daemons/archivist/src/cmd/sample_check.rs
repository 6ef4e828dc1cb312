//! `archivist sample check DIR`: waits until every (episode, clip) pair of a generated
//! sample is researched, then compares the research archive with `truth.yml`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{ClipRecord, EpisodeRecord, Occurrence, ResearchRecord};
use clap::Args;
use serde::Serialize;

use super::sample::SampleTruth;
use crate::cli::{GlobalOpts, OutputFormat};
use crate::context::connect_initialised;

/// Arguments of `archivist sample check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The directory `archivist sample generate` wrote.
    pub dir: PathBuf,
    /// How long to wait for every pair to be researched, in seconds.
    #[arg(long, default_value_t = 600)]
    pub wait_s: u64,
    /// Largest offset error counted as a match, in milliseconds.
    #[arg(long, default_value_t = 50.0)]
    pub tolerance_ms: f64,
}

/// One row of the comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// Episode title.
    pub episode: String,
    /// Clip title.
    pub clip: String,
    /// Expected start offsets (s).
    pub expected: Vec<f64>,
    /// Found occurrences (offset s, confidence).
    pub found: Vec<(f64, f32)>,
    /// `ok`, `missing`, `extra` or `missing+extra`.
    pub verdict: String,
}

struct Catalog {
    episodes: BTreeMap<String, EpisodeRecord>,
    clips: BTreeMap<String, ClipRecord>,
}

async fn catalog(db: &archivist_db::Database, truth: &SampleTruth) -> Result<Catalog> {
    use archivist_db::catalog::{each_record, CatalogRecord};
    use archivist_engine::schema::records::AliasTarget;
    let mut episodes = BTreeMap::new();
    let mut clips = BTreeMap::new();
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        each_record(db, target, |page| {
            for record in page {
                match record {
                    CatalogRecord::Episode(e) => {
                        if let Some(t) = truth.episodes.iter().find(|t| t.url == e.fields.media_url)
                        {
                            episodes.insert(t.title.clone(), e);
                        }
                    }
                    CatalogRecord::Clip(c) => {
                        if truth.clips.contains(&c.fields.title) {
                            clips.insert(c.fields.title.clone(), c);
                        }
                    }
                }
            }
        })
        .await?;
    }
    if episodes.len() != truth.episodes.len() || clips.len() != truth.clips.len() {
        bail!(
            "the catalog has {} of {} sample episodes and {} of {} clips: run `archivist curate manifest {}/manifest.yml` first",
            episodes.len(),
            truth.episodes.len(),
            clips.len(),
            truth.clips.len(),
            "DIR"
        );
    }
    Ok(Catalog { episodes, clips })
}

/// The pairs of the sample recorded so far, and the research of each episode, from the
/// database's research archive.
async fn researched_pairs(
    db: &archivist_db::Database,
    cat: &Catalog,
) -> Result<(usize, BTreeMap<String, ResearchRecord>)> {
    let mut done = 0;
    let mut records = BTreeMap::new();
    for (title, episode) in &cat.episodes {
        let record = archivist_db::research::read(db, &episode.id)
            .await
            .with_context(|| format!("reading the research of episode {}", episode.id))?;
        if let Some(record) = record {
            done += cat
                .clips
                .values()
                .filter(|c| paths::clip_number(&c.id).is_some_and(|n| record.is_researched(n)))
                .count();
            records.insert(title.clone(), record);
        }
    }
    Ok((done, records))
}

/// Compares expected offsets with found occurrences (pure).
pub fn compare(expected: &[f64], found: &[Occurrence], tolerance_s: f64) -> String {
    let missing = expected
        .iter()
        .any(|e| !found.iter().any(|f| (f.at - e).abs() <= tolerance_s));
    let extra = found
        .iter()
        .any(|f| !expected.iter().any(|e| (f.at - e).abs() <= tolerance_s));
    match (missing, extra) {
        (false, false) => "ok",
        (true, false) => "missing",
        (false, true) => "extra",
        (true, true) => "missing+extra",
    }
    .to_string()
}

/// Runs `archivist sample check`.
pub async fn run(global: &GlobalOpts, args: CheckArgs) -> Result<ExitCode> {
    let truth_path = args.dir.join("truth.yml");
    let truth: SampleTruth = serde_yaml::from_str(
        &std::fs::read_to_string(&truth_path)
            .with_context(|| format!("reading {}", truth_path.display()))?,
    )
    .with_context(|| format!("parsing {}", truth_path.display()))?;
    // The tree must be initialised (the daemons of the sample run on it).
    connect_initialised(global).await?;
    let db = crate::context::database(global).await?;
    let cat = catalog(&db, &truth).await?;
    let total = cat.episodes.len() * cat.clips.len();
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "researching {bar:30} {pos}/{len} pairs recorded ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let records = loop {
        let (done, records) = researched_pairs(&db, &cat).await?;
        bar.set_position(done as u64);
        if done >= total {
            break records;
        }
        if started.elapsed() > Duration::from_secs(args.wait_s) {
            bar.abandon();
            bail!(
                "only {done} of {total} pairs were recorded within {} s (see `archivist status`)",
                args.wait_s
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    bar.finish();
    let mut rows = Vec::new();
    for episode in &truth.episodes {
        let record = &records[&episode.title];
        for clip_title in &truth.clips {
            let clip = &cat.clips[clip_title];
            let expected: Vec<f64> = episode
                .occurrences
                .iter()
                .filter(|o| &o.clip == clip_title)
                .map(|o| o.offset_s)
                .collect();
            let found = record.found.get(&clip.id).cloned().unwrap_or_default();
            rows.push(Row {
                episode: episode.title.clone(),
                clip: clip_title.clone(),
                verdict: compare(&expected, &found, args.tolerance_ms / 1000.0),
                expected,
                found: found.iter().map(|o| (o.at, o.conf)).collect(),
            });
        }
    }
    let bad = rows.iter().filter(|r| r.verdict != "ok").count();
    match global.output {
        OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&rows)?),
        OutputFormat::Yaml => out!("{}", serde_yaml::to_string(&rows)?),
        OutputFormat::Table => {
            outln!(
                "{:<18} {:<8} {:<22} {:<34} verdict",
                "episode",
                "clip",
                "expected (s)",
                "found (s @ confidence)"
            );
            for r in &rows {
                let expected = r
                    .expected
                    .iter()
                    .map(|e| format!("{e:.3}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let found = r
                    .found
                    .iter()
                    .map(|(at, c)| format!("{at:.3}@{c:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                outln!(
                    "{:<18} {:<8} {:<22} {:<34} {}",
                    r.episode,
                    r.clip,
                    if expected.is_empty() {
                        "-".into()
                    } else {
                        expected
                    },
                    if found.is_empty() {
                        "not found".into()
                    } else {
                        found
                    },
                    r.verdict
                );
            }
            outln!(
                "{} pairs, {} as expected, {} not (offset tolerance {} ms)",
                rows.len(),
                rows.len() - bad,
                bad,
                args.tolerance_ms
            );
        }
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(at: f64) -> Occurrence {
        Occurrence {
            at,
            conf: 0.9,
            speed: None,
            part: None,
        }
    }

    #[test]
    fn verdicts_follow_the_tolerance() {
        assert_eq!(compare(&[10.0], &[occ(10.004)], 0.05), "ok");
        assert_eq!(compare(&[10.0], &[occ(10.2)], 0.05), "missing+extra");
        assert_eq!(compare(&[10.0, 20.0], &[occ(10.0)], 0.05), "missing");
        assert_eq!(compare(&[], &[occ(3.0)], 0.05), "extra");
        assert_eq!(compare(&[], &[], 0.05), "ok");
    }
}
