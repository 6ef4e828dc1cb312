//! The `pending` step: curate what the submission names (the catalog's own `curate`,
//! exactly as `archivist curate manifest`), check the ids it names, and fix the batch's
//! pairs. A side that names nothing is the whole catalog as it is now.

use archivist_catalog::{curate, CatalogItem, CurateSettings, Kind};
use archivist_db::{catalog, Database};
use archivist_engine::schema::records::{AliasTarget, BatchSubmission, SubmittedItem};
use archivist_engine::Session;

use crate::error::BatchError;

/// The pairs of a curated batch and what could not be curated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Curated {
    /// Episode ids, sorted.
    pub episodes: Vec<String>,
    /// Clip ids, sorted.
    pub clips: Vec<String>,
    /// Items or ids left out, with why.
    pub problems: Vec<String>,
    /// A side was named but none of it could be used: nothing to research.
    pub unusable: Option<String>,
}

fn item(kind: Kind, s: &SubmittedItem) -> Result<CatalogItem, String> {
    CatalogItem::new(kind, &s.url, &s.title, &s.label)
        .map(|i| {
            i.with_description(s.description.as_deref())
                .with_media_type(s.media_type.clone())
                .with_air_date(s.air_date.clone())
                .with_priority(s.priority)
        })
        .map_err(|e| format!("{}: {e}", s.label))
}

async fn existing(
    db: &Database,
    ids: &[String],
    target: AliasTarget,
    what: &str,
    into: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), BatchError> {
    let found = catalog::existing(db, target, ids).await?;
    for id in ids {
        if found.contains(id) {
            into.push(id.clone());
        } else {
            problems.push(format!("{what} {id} is not in the catalog"));
        }
    }
    Ok(())
}

/// Curates a submission and works out its pairs.
///
/// # Errors
/// [`BatchError::Catalog`] / [`BatchError::Db`] / [`BatchError::Engine`] when curation,
/// the database or ZooKeeper fails
/// (the batch stays `pending` and is tried again).
pub async fn curate_submission(
    session: &Session,
    db: &Database,
    names: &BatchSubmission,
    settings: &CurateSettings,
) -> Result<Curated, BatchError> {
    let mut out = Curated::default();
    let mut items = Vec::new();
    for (kind, list) in [(Kind::Episode, &names.episodes), (Kind::Clip, &names.clips)] {
        for s in list {
            match item(kind, s) {
                Ok(i) => items.push(i),
                Err(problem) => out.problems.push(problem),
            }
        }
    }
    if !items.is_empty() {
        let report = curate(session, db, items.clone(), settings).await?;
        for i in &items {
            match report.outcome(&i.label) {
                Some(done) if i.kind == Kind::Episode => out.episodes.push(done.id.clone()),
                Some(done) => out.clips.push(done.id.clone()),
                None => {}
            }
        }
        out.problems.extend(
            report
                .skipped
                .iter()
                .map(|p| format!("{}: {}", p.item, p.reason)),
        );
    }
    let mut problems = std::mem::take(&mut out.problems);
    existing(
        db,
        &names.episode_ids,
        AliasTarget::Episode,
        "episode",
        &mut out.episodes,
        &mut problems,
    )
    .await?;
    existing(
        db,
        &names.clip_ids,
        AliasTarget::Clip,
        "clip",
        &mut out.clips,
        &mut problems,
    )
    .await?;
    out.problems = problems;
    if names.all_episodes() {
        out.episodes = catalog::ids(db, AliasTarget::Episode).await?;
    } else if out.episodes.is_empty() {
        out.unusable = Some("none of the episodes it names could be curated".into());
    }
    if names.all_clips() {
        out.clips = catalog::ids(db, AliasTarget::Clip).await?;
    } else if out.clips.is_empty() {
        out.unusable = Some("none of the clips it names could be curated".into());
    }
    for list in [&mut out.episodes, &mut out.clips] {
        list.sort();
        list.dedup();
    }
    Ok(out)
}
