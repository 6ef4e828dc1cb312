//! `results` and `export`: the research archive read back as rows, one per occurrence
//! plus one "not found" row per researched pair where the clip does not occur.

use std::collections::BTreeMap;

use archivist_db::{catalog, research, Database};
use archivist_engine::schema::clipset::ClipSet;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{AliasTarget, ResearchRecord};
use serde::{Deserialize, Serialize};

use crate::error::{AdminError, Result};
use crate::settings::{AdminSettings, Progress};

/// One row of the archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Episode id.
    pub episode: String,
    /// Episode title (empty if not in the catalog).
    pub episode_title: String,
    /// Clip id.
    pub clip: String,
    /// Clip title (empty if not in the catalog).
    pub clip_title: String,
    /// Does the clip occur here? (one row per occurrence when it does)
    pub found: bool,
    /// Start offset in the episode, seconds.
    pub at: Option<f64>,
    /// Confidence in [0, 1].
    pub conf: Option<f32>,
    /// Speed factor when not 1.0.
    pub speed: Option<f32>,
    /// Matched part of the clip, start (s), when not the whole clip.
    pub part_start: Option<f64>,
    /// Matched part of the clip, end (s).
    pub part_end: Option<f64>,
    /// Job that researched the pair.
    pub job: Option<String>,
    /// Researcher that researched it.
    pub researcher: Option<String>,
    /// Per-clip error instead of a result.
    pub error: Option<String>,
    /// The audio the row's run researched: the first 12 hex digits of its rendition's
    /// sha256 (as `results --episode` names renditions); none for runs stored before
    /// renditions were recorded (issue 23).
    pub rendition: Option<String>,
}

/// How many hex digits of a rendition's sha256 name it in rows and listings.
pub const RENDITION_PREFIX: usize = 12;

/// A rendition's short name: the first [`RENDITION_PREFIX`] hex digits of its sha256.
pub fn rendition_prefix(sha256: &str) -> String {
    sha256.get(..RENDITION_PREFIX).unwrap_or(sha256).to_string()
}

/// Every row of one research record (optionally only for one clip).
/// `renditions` is the rendition of each of the episode's runs, by job.
pub(crate) fn rows_of(
    record: &ResearchRecord,
    episode_title: &str,
    clip_titles: &BTreeMap<String, String>,
    renditions: &BTreeMap<String, String>,
    keep: &dyn Fn(u32) -> bool,
) -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for run in &record.runs {
        let rendition = renditions.get(&run.job).map(|sha| rendition_prefix(sha));
        for number in run.clips.iter() {
            if !keep(number) {
                continue;
            }
            let clip = paths::clip_id(number);
            let base = ResultRow {
                episode: record.episode.clone(),
                episode_title: episode_title.to_string(),
                clip_title: clip_titles.get(&clip).cloned().unwrap_or_default(),
                found: false,
                at: None,
                conf: None,
                speed: None,
                part_start: None,
                part_end: None,
                job: Some(run.job.clone()),
                researcher: Some(run.researcher.clone()),
                error: record.errors.get(&clip).cloned(),
                rendition: rendition.clone(),
                clip,
            };
            match record.found.get(&base.clip).filter(|o| !o.is_empty()) {
                Some(occurrences) => rows.extend(occurrences.iter().map(|o| ResultRow {
                    found: true,
                    at: Some(o.at),
                    conf: Some(o.conf),
                    speed: o.speed,
                    part_start: o.part.map(|p| p[0]),
                    part_end: o.part.map(|p| p[1]),
                    ..base.clone()
                })),
                None => rows.push(base),
            }
        }
    }
    rows.sort_by(|a, b| {
        (&a.episode, &a.clip, a.at.map(|x| (x * 1000.0) as i64)).cmp(&(
            &b.episode,
            &b.clip,
            b.at.map(|x| (x * 1000.0) as i64),
        ))
    });
    // A clip listed in two runs (a re-run) is one pair: keep the first rows.
    rows.dedup_by(|a, b| {
        a.clip == b.clip && a.episode == b.episode && a.at == b.at && a.conf == b.conf
    });
    rows
}

/// `results --episode E`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeResults {
    /// Episode id.
    pub episode: String,
    /// Title.
    pub title: String,
    /// Episode duration, seconds, once known.
    pub duration_s: Option<f64>,
    /// Catalog clips researched in it.
    pub researched: usize,
    /// Clips its research names that are not in the catalog (deleted, or a hand-edited
    /// record): left out of the rows and the counts, as `status` leaves them out.
    pub researched_not_in_catalog: usize,
    /// Clips found in it.
    pub found: usize,
    /// The audio its results were measured on: every rendition recorded, the pinned one
    /// flagged, each with the jobs whose runs used it (issue 23; runs from before
    /// renditions were recorded name none).
    pub renditions: Vec<RenditionLine>,
    /// Rows.
    pub rows: Vec<ResultRow>,
}

/// One rendition of an episode in `results --episode`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RenditionLine {
    /// sha256 of its bytes.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// The catalog URL it was last fetched from.
    pub url: String,
    /// Whether it is the pin (the audio later research is measured on).
    pub pinned: bool,
    /// Whether it is what the server served when last asked (a download, or a
    /// re-validation naming it): the audio a player of the episode's URL plays now, as
    /// far as the system knows.
    pub served_last: bool,
    /// Jobs whose research runs were measured on it.
    pub jobs: Vec<String>,
}

/// The episode's renditions with the runs that used each, the pin first.
async fn rendition_lines(db: &Database, episode: &str) -> Result<Vec<RenditionLine>> {
    use archivist_db::renditions;
    let pin = renditions::pin(db, episode)
        .await?
        .map(|p| p.rendition.sha256);
    let runs = renditions::of_runs(db, episode).await?;
    let last = renditions::recently_seen(db, episode)
        .await?
        .into_iter()
        .next()
        .map(|r| r.sha256);
    let mut lines: Vec<RenditionLine> = renditions::list(db, episode)
        .await?
        .into_iter()
        .map(|r| RenditionLine {
            pinned: pin.as_deref() == Some(r.sha256.as_str()),
            served_last: last.as_deref() == Some(r.sha256.as_str()),
            jobs: runs
                .iter()
                .filter(|(_, sha)| **sha == r.sha256)
                .map(|(job, _)| job.clone())
                .collect(),
            sha256: r.sha256,
            bytes: r.bytes,
            url: r.url,
        })
        .collect();
    lines.sort_by_key(|l| !l.pinned);
    Ok(lines)
}

/// The rendition of each run of a page of the research archive (in episode order), by
/// episode and job: one query for the page.
pub(crate) async fn page_renditions(
    db: &Database,
    page: &[ResearchRecord],
) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
    let (Some(first), Some(last)) = (page.first(), page.last()) else {
        return Ok(BTreeMap::new());
    };
    Ok(archivist_db::renditions::of_runs_between(db, &first.episode, &last.episode).await?)
}

/// The catalog's clips, id to title: the clips are few (thousands), read a page at a
/// time from the database, the catalog's home since issue 22.
pub(crate) async fn clip_titles(db: &Database) -> Result<BTreeMap<String, String>> {
    let mut titles = BTreeMap::new();
    catalog::each_record(db, AliasTarget::Clip, |page| {
        titles.extend(
            page.into_iter()
                .map(|r| (r.id().to_string(), r.fields().title.clone())),
        )
    })
    .await?;
    Ok(titles)
}

/// The titles of those of `episodes` that are in the catalog, by id.
pub(crate) async fn episode_titles(
    db: &Database,
    episodes: &[String],
) -> Result<BTreeMap<String, String>> {
    Ok(catalog::records(db, AliasTarget::Episode, episodes)
        .await?
        .into_iter()
        .map(|(id, v)| (id, v.record.fields().title.clone()))
        .collect())
}

/// Where the catalog is, for "does not exist" errors.
const IN_DATABASE: &str = "not in the catalog database";

/// Where the episode's clips occur (researched clips only). The catalog and the
/// research archive are read from the database.
pub async fn episode_results(db: &Database, episode: &str) -> Result<EpisodeResults> {
    let title = match catalog::episode(db, episode).await? {
        Some(e) => e.fields.title,
        None => {
            return Err(AdminError::NotFound {
                what: "episode",
                id: episode.to_string(),
                path: IN_DATABASE.to_string(),
            })
        }
    };
    let Some(record) = research::read(db, episode).await? else {
        return Ok(EpisodeResults {
            episode: episode.to_string(),
            title,
            duration_s: None,
            researched: 0,
            researched_not_in_catalog: 0,
            found: 0,
            renditions: rendition_lines(db, episode).await?,
            rows: Vec::new(),
        });
    };
    // Only clips in the catalog count, as in `status` (a run's clip set may name numbers
    // the catalog never had): one read of the catalog's clips.
    let clip_titles = clip_titles(db).await?;
    let catalog: ClipSet = clip_titles
        .keys()
        .filter_map(|c| paths::clip_number(c))
        .collect();
    let researched = record.researched();
    let in_catalog = researched.count_in(&catalog);
    let keep = |n: u32| catalog.contains(n);
    let runs = archivist_db::renditions::of_runs(db, episode).await?;
    let rows = rows_of(&record, &title, &clip_titles, &runs, &keep);
    Ok(EpisodeResults {
        episode: episode.to_string(),
        title,
        duration_s: record.episode_duration_s,
        researched: in_catalog,
        researched_not_in_catalog: researched.len() - in_catalog,
        found: record
            .found
            .iter()
            .filter(|(c, o)| {
                !o.is_empty() && paths::clip_number(c).is_some_and(|n| catalog.contains(n))
            })
            .count(),
        renditions: rendition_lines(db, episode).await?,
        rows,
    })
}

/// `results --clip C`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipResults {
    /// Clip id.
    pub clip: String,
    /// Title.
    pub title: String,
    /// Episodes it was researched in.
    pub episodes_researched: usize,
    /// Episodes it was found in.
    pub episodes_found: usize,
    /// Episodes where its research ended in an error (the clip could not be used): not
    /// "not found", and shown so an operator can fix the clip and re-curate it.
    pub episodes_errored: usize,
    /// One row per occurrence, plus one per error.
    pub rows: Vec<ResultRow>,
    /// Research records that do not decode: the clip may occur in their episodes, so
    /// they are named (the CLI exits non-zero), never left out silently. The database
    /// refuses a record it cannot decode with an error instead, so this is empty since
    /// the research archive is read from it (issue 22); kept so the output's shape stays.
    pub unreadable: Vec<crate::status::Unreadable>,
}

/// `results --clip C` without its rows: what [`clip_results_each`] returns after handing
/// every row to its sink.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipSummary {
    /// Clip id.
    pub clip: String,
    /// Title.
    pub title: String,
    /// Episodes it was researched in.
    pub episodes_researched: usize,
    /// Episodes it was found in.
    pub episodes_found: usize,
    /// Episodes where its research ended in an error.
    pub episodes_errored: usize,
}

/// Where a clip occurs, across all episodes, every row in memory: [`clip_results_each`]
/// collected (tests and small archives; the CLI spools the rows instead).
pub async fn clip_results(
    db: &Database,
    settings: &AdminSettings,
    clip: &str,
    progress: &dyn Progress,
) -> Result<ClipResults> {
    let mut rows = Vec::new();
    let summary = clip_results_each(db, settings, clip, progress, &mut |row| {
        rows.push(row);
        Ok(())
    })
    .await?;
    Ok(ClipResults {
        clip: summary.clip,
        title: summary.title,
        episodes_researched: summary.episodes_researched,
        episodes_found: summary.episodes_found,
        episodes_errored: summary.episodes_errored,
        rows,
        unreadable: Vec::new(),
    })
}

/// Where a clip occurs, across all episodes: the research archive walked a page of
/// `settings.batch_size` episodes at a time, titles from the catalog (both in the
/// database), each row handed to `sink` as it is made, in episode order, so memory
/// stays flat however many episodes the clip occurs in (outside 22 finding 9: the rows
/// were collected, 234 MB for 50k episodes).
pub async fn clip_results_each(
    db: &Database,
    settings: &AdminSettings,
    clip: &str,
    progress: &dyn Progress,
    sink: &mut (dyn FnMut(ResultRow) -> Result<()> + Send),
) -> Result<ClipSummary> {
    let title = match catalog::clip(db, clip).await? {
        Some(c) => c.fields.title,
        None => {
            return Err(AdminError::NotFound {
                what: "clip",
                id: clip.to_string(),
                path: IN_DATABASE.to_string(),
            })
        }
    };
    let number = paths::clip_number(clip)
        .ok_or_else(|| AdminError::Invalid(format!("{clip:?} is not a clip id (c + digits)")))?;
    let total = research::counts(db).await?.episodes;
    progress.begin("research", u64::try_from(total).unwrap_or(0));
    let mut summary = ClipSummary {
        clip: clip.to_string(),
        title,
        episodes_researched: 0,
        episodes_found: 0,
        episodes_errored: 0,
    };
    let walked = clip_rows(db, settings, number, progress, &mut summary, sink).await;
    progress.end();
    walked?;
    Ok(summary)
}

/// Walks the archive for clip `number`: counts into `summary`, and hands each row that
/// says something (found, or an error) to `sink` with its titles.
async fn clip_rows(
    db: &Database,
    settings: &AdminSettings,
    number: u32,
    progress: &dyn Progress,
    summary: &mut ClipSummary,
    sink: &mut (dyn FnMut(ResultRow) -> Result<()> + Send),
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = research::page(db, after.as_deref(), settings.batch_size.max(1)).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(last.episode.clone());
        let runs = page_renditions(db, &page).await?;
        let mut page_rows = Vec::new();
        let mut in_page = Vec::new();
        let none = BTreeMap::new();
        for record in page.iter().filter(|r| r.is_researched(number)) {
            summary.episodes_researched += 1;
            let of_runs = runs.get(&record.episode).unwrap_or(&none);
            let mine: Vec<ResultRow> =
                rows_of(record, "", &BTreeMap::new(), of_runs, &|n| n == number)
                    .into_iter()
                    .filter(|r| r.found || r.error.is_some())
                    .collect();
            if mine.iter().any(|r| r.found) {
                summary.episodes_found += 1;
            }
            if mine.iter().any(|r| r.error.is_some()) {
                summary.episodes_errored += 1;
            }
            if !mine.is_empty() {
                in_page.push(record.episode.clone());
            }
            page_rows.extend(mine);
        }
        let titles = episode_titles(db, &in_page).await?;
        for mut row in page_rows {
            row.episode_title = titles.get(&row.episode).cloned().unwrap_or_default();
            row.clip_title = summary.title.clone();
            sink(row)?;
        }
        progress.advance(page.len() as u64);
    }
    Ok(())
}

/// What `export` read: the rows, and the research records it could not read (never
/// left out silently: the CLI names them and exits non-zero).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Export {
    /// Every row.
    pub rows: Vec<ResultRow>,
    /// Research records that do not decode, whose episodes have no rows.
    pub unreadable: Vec<crate::status::Unreadable>,
}

/// `export` into memory: every row of [`crate::export::export_to`]. For tests and small
/// archives; the CLI streams instead.
pub async fn export(
    db: &Database,
    settings: &AdminSettings,
    progress: &dyn Progress,
) -> Result<Export> {
    let mut rows = Vec::new();
    let summary = crate::export::export_to(db, settings, progress, &mut rows).await?;
    Ok(Export {
        rows,
        unreadable: summary.unreadable,
    })
}

/// CSV of export rows (RFC 4180 quoting), with a header line.
pub fn to_csv(rows: &[ResultRow]) -> String {
    let mut out = format!("{}\n", crate::export::CSV_HEADER);
    for r in rows {
        out.push_str(&crate::export::csv_line(r));
        out.push('\n');
    }
    out
}
