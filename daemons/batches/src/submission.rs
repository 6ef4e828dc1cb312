//! `archivist batch submit FILE.yml`: a submission checked whole, then one batch created
//! in `pending` (as light as Merritt's submit step: curation happens in the batcher).
//!
//! ```yaml
//! name: new jingle against the back catalog   # optional
//! webhook: https://hooks.example/archivist    # optional: reports are POSTed here (kept
//!                                             # in a secret node: readers see the host)
//! clips:                                      # catalog manifest entries (docs/catalog.md)
//!   - url: https://cdn.example/jingle.wav
//!     title: Jingle 2024
//! episodes: []                                # none named: every episode
//! episode_ids: [e0000012]                     # records already in the catalog
//! clip_ids: []
//! ```
//!
//! A side (episodes, clips) that names nothing stands for the whole catalog when the
//! batch is curated. Every problem is listed with its entry and line, and nothing is
//! written until the file is right.

use std::path::Path;

use archivist_catalog::manifest::parse_entries;
use archivist_catalog::{CatalogError, CatalogItem, ItemProblem, Kind};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    webhook_origin, BatchRecord, BatchSubmission, JobEvent, SubmittedItem, WebhookSecret,
};
use archivist_engine::schema::{BatchState, SCHEMA_VERSION};
use archivist_engine::{clock, counter, store, EngineError, Session};
use serde::Deserialize;

use crate::error::BatchError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    webhook: Option<String>,
    #[serde(default)]
    episodes: Vec<serde_yaml::Value>,
    #[serde(default)]
    clips: Vec<serde_yaml::Value>,
    #[serde(default)]
    episode_ids: Vec<String>,
    #[serde(default)]
    clip_ids: Vec<String>,
}

/// A checked submission, ready to become a batch. `Debug` shows the webhook's origin
/// only (its URL is a secret).
#[derive(Clone, PartialEq)]
pub struct Submission {
    /// A name for people.
    pub name: Option<String>,
    /// Where reports are POSTed.
    pub webhook: Option<String>,
    /// What it names.
    pub names: BatchSubmission,
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("name", &self.name)
            .field("webhook", &self.webhook.as_deref().map(webhook_origin))
            .field("names", &self.names)
            .finish()
    }
}

/// The 1-based line of the first top-level line that starts with `key:`.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let header = format!("{key}:");
    text.lines()
        .position(|l| l.starts_with(&header))
        .map(|i| i + 1)
}

/// The 1-based line where `value` first appears after the line of `key`.
fn value_line(text: &str, key: &str, value: &str) -> Option<usize> {
    let start = key_line(text, key)?;
    text.lines()
        .enumerate()
        .skip(start - 1)
        .find(|(_, l)| l.contains(value))
        .map(|(i, _)| i + 1)
}

fn label(name: &str, what: &str, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{name}: {what} (line {line})"),
        None => format!("{name}: {what}"),
    }
}

fn submitted(item: CatalogItem) -> SubmittedItem {
    SubmittedItem {
        label: item.label,
        url: item.media_url,
        title: item.title,
        description: item.description,
        media_type: item.media_type,
        air_date: item.air_date,
        priority: item.priority,
    }
}

fn check_ids(
    text: &str,
    name: &str,
    key: &str,
    prefix: char,
    ids: &[String],
    problems: &mut Vec<ItemProblem>,
) {
    for (i, id) in ids.iter().enumerate() {
        let digits = id.strip_prefix(prefix).unwrap_or_default();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            problems.push(ItemProblem::new(
                label(name, &format!("{key}[{i}]"), value_line(text, key, id)),
                format!("{id:?} is not an id (`{prefix}` followed by digits, as `archivist results` shows them)"),
            ));
        }
    }
}

fn check_webhook(text: &str, name: &str, webhook: &str) -> Option<ItemProblem> {
    let problem = match url::Url::parse(webhook) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => return None,
        Ok(u) => format!("{webhook:?}: scheme {} is not http or https", u.scheme()),
        Err(e) => format!("{webhook:?} is not a URL: {e}"),
    };
    Some(ItemProblem::new(
        label(name, "webhook", key_line(text, "webhook")),
        problem,
    ))
}

/// Parses and checks a submission. `name` names it in messages; relative media paths
/// are taken from `base` (the file's directory).
///
/// # Errors
/// [`CatalogError::Invalid`] listing every problem (entry and line); nothing is returned
/// then.
pub fn parse_submission(
    text: &str,
    name: &str,
    base: Option<&Path>,
) -> Result<Submission, CatalogError> {
    let invalid = |problems: Vec<ItemProblem>| CatalogError::Invalid {
        input: name.to_string(),
        problems,
    };
    let doc: Document = serde_yaml::from_str(text)
        .map_err(|e| invalid(vec![ItemProblem::new(name, e.to_string())]))?;
    if doc.episodes.is_empty()
        && doc.clips.is_empty()
        && doc.episode_ids.is_empty()
        && doc.clip_ids.is_empty()
    {
        return Err(invalid(vec![ItemProblem::new(
            name,
            "names nothing: list `episodes:`, `clips:`, `episode_ids:` and/or `clip_ids:` (a side left empty means the whole catalog)",
        )]));
    }
    let mut problems = Vec::new();
    if let Some(webhook) = &doc.webhook {
        problems.extend(check_webhook(text, name, webhook));
    }
    check_ids(
        text,
        name,
        "episode_ids",
        'e',
        &doc.episode_ids,
        &mut problems,
    );
    check_ids(text, name, "clip_ids", 'c', &doc.clip_ids, &mut problems);
    let items = if doc.episodes.is_empty() && doc.clips.is_empty() {
        Vec::new()
    } else {
        match parse_entries(text, name, base, doc.episodes, doc.clips) {
            Ok(items) => items,
            Err(CatalogError::Invalid {
                problems: found, ..
            }) => {
                problems.extend(found);
                Vec::new()
            }
            Err(other) => return Err(other),
        }
    };
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let mut names = BatchSubmission {
        episode_ids: dedup(doc.episode_ids),
        clip_ids: dedup(doc.clip_ids),
        ..BatchSubmission::default()
    };
    for item in items {
        match item.kind {
            Kind::Episode => names.episodes.push(submitted(item)),
            Kind::Clip => names.clips.push(submitted(item)),
        }
    }
    Ok(Submission {
        name: doc
            .name
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty()),
        webhook: doc.webhook,
        names,
    })
}

fn dedup(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids.dedup();
    ids
}

/// Reads and checks a submission file.
///
/// # Errors
/// [`CatalogError::File`] when unreadable; [`CatalogError::Invalid`] as
/// [`parse_submission`].
pub fn load_submission(path: &Path) -> Result<Submission, CatalogError> {
    archivist_catalog::manifest::load_file(path, parse_submission)
}

/// Creates the batch in `pending`: one multi bumping `/counters/batches` at the version
/// read (the new id is the version after the bump), creating `/batches/{batch}`, its
/// `reports` directory and, with a webhook, the secret node holding its URL. A lost race for the counter is retried; a counter behind the
/// batches in use is moved past them (`archivist_engine::counter`), never retried as is.
///
/// # Errors
/// [`BatchError::Engine`] (e.g. `NotInitialised` on a tree from before batches: run
/// `archivist init`).
pub async fn submit(
    session: &Session,
    submission: &Submission,
    by: &str,
) -> Result<BatchRecord, BatchError> {
    loop {
        let stat = store::exists(session, paths::BATCH_COUNTER)
            .await?
            .ok_or_else(|| EngineError::NotInitialised {
                chroot: session.chroot().to_string(),
                missing: paths::BATCH_COUNTER.to_string(),
            })?;
        let id = paths::batch_id(stat.version as u64 + 1);
        let now = clock::stamp_now();
        let record = BatchRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            status: BatchState::Pending,
            name: submission.name.clone(),
            submitted_by: by.to_string(),
            submitted_at: now,
            updated: now,
            webhook: submission.webhook.as_deref().map(webhook_origin),
            submission: submission.names.clone(),
            episodes: Vec::new(),
            clips: Vec::new(),
            problems: Vec::new(),
            progress: Default::default(),
            reports: 0,
            delivery: None,
            message: None,
            events: vec![JobEvent {
                at: now,
                by: by.to_string(),
                step: "submit".into(),
                result: "ok".into(),
            }],
        };
        let path = paths::batch(&id);
        let mut writes = vec![
            Op::SetData {
                path: paths::BATCH_COUNTER.to_string(),
                data: Vec::new(),
                version: Some(stat.version),
            },
            Op::Create {
                path: path.clone(),
                data: store::encode(&path, &record)?,
                mode: Mode::Persistent,
            },
            Op::Create {
                path: paths::batch_reports(&id),
                data: Vec::new(),
                mode: Mode::Persistent,
            },
        ];
        if let Some(url) = &submission.webhook {
            let secret_path = paths::batch_webhook(&id);
            let secret = WebhookSecret {
                schema: SCHEMA_VERSION,
                url: url.clone(),
            };
            writes.push(Op::Create {
                data: store::encode(&secret_path, &secret)?,
                path: secret_path,
                mode: Mode::Secret,
            });
        }
        let result = ops::commit(session, &writes).await;
        match result {
            Ok(_) => {
                metrics::counter!("archivist_batches_submitted_total").increment(1);
                tracing::info!(batch = %id, by, "batch submitted");
                return Ok(record);
            }
            // Another writer took this id first: it made progress; take the next one.
            Err(e) if e.failed_path() == Some(paths::BATCH_COUNTER) => {
                tokio::task::yield_now().await;
            }
            // The batch this id names exists although the counter had not given it out:
            // the counter is behind the ids in use (retrying as is would spin forever).
            Err(e) if counter::taken_id(&counter::BATCHES, &e).is_some() => {
                let taken = counter::taken_id(&counter::BATCHES, &e).unwrap_or_default();
                let what = format!("batch {id}");
                counter::skip_taken(
                    session,
                    &counter::BATCHES,
                    taken,
                    &what,
                    &counter::Archived::NONE,
                )
                .await?;
            }
            Err(EngineError::Precondition { op, source, .. }) if op.contains(paths::BATCHES) => {
                return Err(EngineError::NotInitialised {
                    chroot: format!("{} ({op}: {source})", session.chroot()),
                    missing: paths::BATCHES.to_string(),
                }
                .into())
            }
            // The reply was lost: the batch may exist. Look (reads sent again while their
            // reply is lost too): the batch this submission made, by its first event, is
            // the answer; none means the multi did not apply and trying again is safe
            // (the counter's version check). Before, "write failed" was printed for a
            // batch that existed, and submitting again ran the campaign twice (outside
            // 17i G5).
            Err(e) if e.is_retryable() && !e.is_conflict() && !session.is_lost() => {
                let read = archivist_engine::lock::while_reply_lost(session, || {
                    store::read::<BatchRecord>(session, &path)
                })
                .await;
                match read {
                    Ok(Some((found, _))) if found.events.first() == record.events.first() => {
                        metrics::counter!("archivist_batches_submitted_total").increment(1);
                        tracing::info!(batch = %id, by, "batch submitted (its reply was lost; read again)");
                        return Ok(found);
                    }
                    Ok(_) => tokio::task::yield_now().await,
                    Err(_) => {
                        tracing::error!(batch = %id, error = %e, "the submission's reply was lost and the batch cannot be read: it may exist; check `archivist batch show {id}` before submitting again");
                        return Err(e.into());
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
name: jingle campaign
webhook: http://127.0.0.1:9/hook
clips:
  - url: http://h/jingle.wav
    title: Jingle
episode_ids: [e0000002, e0000001, e0000002]
";

    #[test]
    fn a_good_submission_names_items_and_ids() {
        let s = parse_submission(GOOD, "b.yml", None).unwrap();
        assert_eq!(s.name.as_deref(), Some("jingle campaign"));
        assert_eq!(s.names.clips.len(), 1);
        assert_eq!(s.names.clips[0].label, "b.yml: clips[0] (line 4)");
        assert_eq!(s.names.episode_ids, ["e0000001", "e0000002"]);
        assert!(!s.names.all_episodes());
        assert!(!s.names.all_clips());
    }

    #[test]
    fn clips_alone_mean_every_episode() {
        let s = parse_submission("clip_ids: [c000003]\n", "b.yml", None).unwrap();
        assert!(s.names.all_episodes());
        assert!(!s.names.all_clips());
    }

    #[test]
    fn every_problem_is_listed_with_its_line() {
        let text = "\
webhook: ftp://nowhere/x
episodes:
  - url: http://h/e1.mp3
    title: One
  - url: http://h/e2.mp3
clip_ids:
  - c000001
  - jingle
";
        let err = parse_submission(text, "b.yml", None).unwrap_err();
        let CatalogError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let items: Vec<&str> = problems.iter().map(|p| p.item.as_str()).collect();
        assert_eq!(
            items,
            [
                "b.yml: webhook (line 1)",
                "b.yml: clip_ids[1] (line 8)",
                "b.yml: episodes[1] (line 5)",
            ],
            "{err}"
        );
        assert!(
            problems[2].reason.contains("title"),
            "{}",
            problems[2].reason
        );
    }

    #[test]
    fn unknown_keys_and_empty_submissions_are_refused() {
        let err = parse_submission("clips: []\nwebhok: x\n", "b.yml", None).unwrap_err();
        assert!(err.to_string().contains("webhok"), "{err}");
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse_submission("name: nothing\n", "b.yml", None).unwrap_err();
        assert!(err.to_string().contains("names nothing"), "{err}");
    }
}
