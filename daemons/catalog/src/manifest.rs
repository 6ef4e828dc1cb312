//! YAML manifests: `archivist curate manifest FILE.yml` (format in `docs/catalog.md`).
//!
//! A manifest is checked whole before anything is written: YAML syntax, unknown or
//! missing fields, bad URLs, local files that do not exist, duplicates inside the
//! manifest. Any problem refuses the whole manifest, listing every problem with its entry
//! (`episodes[3]`) and line, so the operator fixes the file and runs it again.

use std::path::Path;

use archivist_db::Database;
use archivist_engine::Session;
use serde::Deserialize;

use crate::error::{CatalogError, ItemProblem};
use crate::item::{CatalogItem, Kind};
use crate::local::resolve_media;
use crate::report::CurationReport;
use crate::settings::CurateSettings;
use crate::upsert;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    episodes: Vec<serde_yaml::Value>,
    #[serde(default)]
    clips: Vec<serde_yaml::Value>,
}

/// One entry of `episodes:` or `clips:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    url: String,
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    air_date: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    media_type: Option<String>,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Line numbers (1-based) of the block-list entries of a top-level key, in order. Flow
/// lists (`episodes: [...]`) give none; messages then name the entry without a line.
fn entry_lines(text: &str, key: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut in_section = false;
    let mut dash_indent: Option<usize> = None;
    let header = format!("{key}:");
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent(line) == 0 && !trimmed.starts_with('-') {
            in_section = trimmed.starts_with(&header);
            dash_indent = None;
            continue;
        }
        if !in_section {
            continue;
        }
        if trimmed == "-" || trimmed.starts_with("- ") {
            let d = indent(line);
            match dash_indent {
                None => {
                    dash_indent = Some(d);
                    lines.push(i + 1);
                }
                Some(first) if first == d => lines.push(i + 1),
                Some(_) => {}
            }
        }
    }
    lines
}

fn entry_label(name: &str, section: &str, index: usize, line: Option<&usize>) -> String {
    match line {
        Some(line) => format!("{name}: {section}[{index}] (line {line})"),
        None => format!("{name}: {section}[{index}]"),
    }
}

/// Parses and checks a manifest. `name` names it in messages; relative media paths are
/// taken from `base` (the manifest's directory).
///
/// # Errors
/// [`CatalogError::Invalid`] listing every problem; no item is returned then.
pub fn parse_manifest(
    text: &str,
    name: &str,
    base: Option<&Path>,
) -> Result<Vec<CatalogItem>, CatalogError> {
    let invalid = |problems: Vec<ItemProblem>| CatalogError::Invalid {
        input: name.to_string(),
        problems,
    };
    let doc: Document = serde_yaml::from_str(text)
        .map_err(|e| invalid(vec![ItemProblem::new(name, e.to_string())]))?;
    if doc.episodes.is_empty() && doc.clips.is_empty() {
        return Err(invalid(vec![ItemProblem::new(
            name,
            "no entries: expected `episodes:` and/or `clips:` lists",
        )]));
    }
    parse_entries(text, name, base, doc.episodes, doc.clips)
}

/// Checks the `episodes:` and `clips:` entries of a document that embeds manifest lists
/// (a batch submission does), already split out of `text` by the caller. Labels and line
/// numbers are as in [`parse_manifest`].
///
/// # Errors
/// [`CatalogError::Invalid`] listing every problem; no item is returned then.
pub fn parse_entries(
    text: &str,
    name: &str,
    base: Option<&Path>,
    episodes: Vec<serde_yaml::Value>,
    clips: Vec<serde_yaml::Value>,
) -> Result<Vec<CatalogItem>, CatalogError> {
    let invalid = |problems: Vec<ItemProblem>| CatalogError::Invalid {
        input: name.to_string(),
        problems,
    };
    let mut items = Vec::new();
    let mut problems = Vec::new();
    for (section, kind, values) in [
        ("episodes", Kind::Episode, episodes),
        ("clips", Kind::Clip, clips),
    ] {
        let lines = entry_lines(text, section);
        let cuts = comment_cuts(text);
        for (index, value) in values.into_iter().enumerate() {
            let label = entry_label(name, section, index, lines.get(index));
            match entry_item(kind, value, &label, base) {
                Ok(mut item) => {
                    if let Some(&first) = lines.get(index) {
                        let next = lines.get(index + 1).copied().unwrap_or(usize::MAX);
                        item.warnings.extend(
                            cuts.iter()
                                .filter(|c| c.line >= first && c.line < next)
                                .map(CommentCut::warning),
                        );
                    }
                    items.push(item)
                }
                Err(reason) => problems.push(ItemProblem::new(label, reason)),
            }
        }
    }
    problems.extend(upsert::duplicates(&items));
    if problems.is_empty() {
        Ok(items)
    } else {
        Err(invalid(problems))
    }
}

fn entry_item(
    kind: Kind,
    value: serde_yaml::Value,
    label: &str,
    base: Option<&Path>,
) -> Result<CatalogItem, String> {
    let entry: Entry = serde_yaml::from_value(value).map_err(|e| e.to_string())?;
    if kind == Kind::Clip && entry.air_date.is_some() {
        return Err("clips have no air_date".to_string());
    }
    let media = resolve_media(&entry.url, base).map_err(|e| e.to_string())?;
    let item = CatalogItem::new(kind, &media.url, &entry.title, label).map_err(|e| match e {
        CatalogError::BadInput { reason, .. } => reason,
        other => other.to_string(),
    })?;
    let media_type = entry.media_type.or(media.media_type);
    let mut item = item
        .with_description(entry.description.as_deref())
        .with_checked_air_date(entry.air_date)?
        .with_priority(entry.priority);
    if media_type.is_none() {
        let warning = format!(
            "url {:?} has no audio file extension and no media_type: give media_type, or check \
             the URL is whole (an unquoted \" #\" starts a YAML comment)",
            item.media_url
        );
        item = item.with_warning(warning);
    }
    Ok(item.with_media_type(media_type))
}

/// A plain YAML value cut by what YAML reads as a comment: `url: http://h/ep #12.mp3` is
/// `http://h/ep`. A comment whose `#` is followed by a space (`# required`) is taken as
/// meant; one glued to its text (`#12.mp3`, `#5`) most likely belonged to the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CommentCut {
    line: usize,
    key: String,
    value: String,
    comment: String,
}

impl CommentCut {
    fn warning(&self) -> String {
        format!(
            "line {}: `{}` reads as {:?} because \" {}\" is a YAML comment; if it belongs to the \
             value, quote it ({}: \"{} {}\")",
            self.line, self.key, self.value, self.comment, self.key, self.value, self.comment
        )
    }
}

/// Every `key: value #text` line (1-based) of a manifest (see [`CommentCut`]).
fn comment_cuts(text: &str) -> Vec<CommentCut> {
    let mut cuts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.trim_start();
        let body = body.strip_prefix("- ").unwrap_or(body).trim_start();
        let Some((key, rest)) = body.split_once(": ") else {
            continue;
        };
        let value = rest.trim_start();
        if key.is_empty()
            || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || value.starts_with(['"', '\'', '|', '>', '#', '[', '{'])
        {
            continue;
        }
        let Some(at) = value.find(" #") else { continue };
        let comment = value[at + 1..].trim_end();
        let glued = comment[1..]
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '#');
        if glued {
            cuts.push(CommentCut {
                line: i + 1,
                key: key.to_string(),
                value: value[..at].trim_end().to_string(),
                comment: comment.to_string(),
            });
        }
    }
    cuts
}

/// Reads and checks a manifest file.
///
/// # Errors
/// [`CatalogError::File`] when unreadable; [`CatalogError::Invalid`] as
/// [`parse_manifest`].
pub fn load_manifest(path: &Path) -> Result<Vec<CatalogItem>, CatalogError> {
    load_file(path, parse_manifest)
}

/// Reads a YAML file and hands its text, its name (for error labels) and its directory
/// (relative media paths resolve against it) to `parse`: manifests and batch
/// submissions are read the same way.
///
/// # Errors
/// [`CatalogError::File`] when unreadable, or what `parse` returns.
pub fn load_file<T>(
    path: &Path,
    parse: impl FnOnce(&str, &str, Option<&Path>) -> Result<T, CatalogError>,
) -> Result<T, CatalogError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CatalogError::File {
        path: name.clone(),
        reason: format!("cannot read it: {e}"),
    })?;
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    parse(&text, &name, base)
}

/// `archivist curate manifest FILE.yml`: checks the whole manifest, then curates it.
///
/// # Errors
/// As [`load_manifest`] (nothing written) and [`crate::upsert::curate`].
pub async fn curate_manifest(
    session: &Session,
    db: &Database,
    path: &Path,
    settings: &CurateSettings,
) -> Result<CurationReport, CatalogError> {
    let items = load_manifest(path)?;
    upsert::curate(session, db, items, settings).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# a manifest
episodes:
  - url: http://h/e1.mp3
    title: One
    air_date: 2024-01-02
    priority: 5
  - url: http://h/e2.mp3
    title: Two
clips:
- url: http://h/c1.wav
  title: Jingle
";

    #[test]
    fn values_cut_by_a_comment_and_untyped_urls_are_warned_about() {
        let text = "\
episodes:
  - url: http://h/show/episode #12.mp3
    title: Episode #12
  - url: http://h/e2.mp3   # the second one
    title: Two
  - url: \"http://h/e3 #3.mp3\"
    title: Three
";
        let items = parse_manifest(text, "m.yml", None).unwrap();
        let w = &items[0].warnings;
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(w[0].contains("no audio file extension"), "{w:#?}");
        assert!(
            w[1].contains("line 2")
                && w[1].contains("\"http://h/show/episode\"")
                && w[1].contains("#12.mp3"),
            "{w:#?}"
        );
        assert!(
            w[2].contains("line 3") && w[2].contains("`title`"),
            "{w:#?}"
        );
        assert!(
            items[1].warnings.is_empty(),
            "a spaced comment is meant: {:?}",
            items[1].warnings
        );
        assert_eq!(
            items[2].media_url,
            "http://h/e3%20#3.mp3".replace("#3.mp3", ""),
            "quoted: kept whole"
        );
    }

    #[test]
    fn good_manifest_gives_items_with_labels() {
        let items = parse_manifest(GOOD, "m.yml", None).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].label, "m.yml: episodes[0] (line 3)");
        assert_eq!(items[1].label, "m.yml: episodes[1] (line 7)");
        assert_eq!(items[2].label, "m.yml: clips[0] (line 10)");
        assert_eq!(items[0].priority, Some(5));
        assert_eq!(items[0].air_date.as_deref(), Some("2024-01-02"));
        assert_eq!(items[2].kind, Kind::Clip);
        assert_eq!(items[2].media_type.as_deref(), Some("audio/wav"));
    }

    #[test]
    fn every_problem_is_listed_with_entry_and_line() {
        let text = "\
episodes:
  - url: http://h/e1.mp3
    title: One
  - title: No url
  - url: http://h/e1.mp3
    title: Same again
  - url: ftp://h/x.mp3
    title: Bad scheme
  - url: http://h/e5.mp3
    title: Typo
    priorty: 3
";
        let err = parse_manifest(text, "m.yml", None).unwrap_err();
        let CatalogError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let items: Vec<&str> = problems.iter().map(|p| p.item.as_str()).collect();
        assert_eq!(
            items,
            [
                "m.yml: episodes[1] (line 4)",
                "m.yml: episodes[3] (line 7)",
                "m.yml: episodes[4] (line 9)",
                "m.yml: episodes[2] (line 5)",
            ],
            "{err}"
        );
        assert!(problems[0].reason.contains("url"), "{}", problems[0].reason);
        assert!(problems[3].reason.contains("duplicate"));
        assert!(err.to_string().contains("nothing written"));
    }

    #[test]
    fn syntax_errors_and_empty_manifests_are_refused() {
        let err = parse_manifest("episodes:\n  - url: [unclosed\n", "m.yml", None).unwrap_err();
        assert!(err.to_string().contains("line"), "{err}");
        assert!(parse_manifest("{}\n", "m.yml", None).is_err());
        assert!(parse_manifest("shows: []\n", "m.yml", None).is_err());
    }

    #[test]
    fn absurd_air_dates_are_refused_with_their_line() {
        let text = "\
episodes:
  - url: http://h/e1.mp3
    title: Leap day that is not
    air_date: 2023-02-29
  - url: http://h/e2.mp3
    title: Five-digit year
    air_date: 20244-01-01
  - url: http://h/e3.mp3
    title: Words
    air_date: last tuesday
  - url: http://h/e4.mp3
    title: Before radio
    air_date: 1066-10-14
  - url: http://h/e5.mp3
    title: Fine
    air_date: 2024-02-29
  - url: http://h/e6.mp3
    title: Fine too
    air_date: 2024-03-01T06:00:00+01:00
";
        let err = parse_manifest(text, "m.yml", None).unwrap_err();
        let CatalogError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let lines: Vec<(&str, bool)> = problems
            .iter()
            .map(|p| (p.item.as_str(), p.reason.contains("air_date")))
            .collect();
        assert_eq!(
            lines,
            [
                ("m.yml: episodes[0] (line 2)", true),
                ("m.yml: episodes[1] (line 5)", true),
                ("m.yml: episodes[2] (line 8)", true),
                ("m.yml: episodes[3] (line 11)", true),
            ],
            "{err}"
        );
        assert!(problems[3].reason.contains("outside the years"), "{err}");
    }

    #[test]
    fn absurd_priorities_are_refused_and_extreme_ones_kept_exactly() {
        let too_big = "\
episodes:
  - url: http://h/e1.mp3
    title: Too big for i64
    priority: 99999999999999999999
";
        let err = parse_manifest(too_big, "m.yml", None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("episodes[0].priority") && text.contains("line 4"),
            "{text}"
        );
        let text = "\
episodes:
  - url: http://h/e2.mp3
    title: Not a number
    priority: urgent
  - url: http://h/e3.mp3
    title: Fractional
    priority: 2.5
";
        let err = parse_manifest(text, "m.yml", None).unwrap_err();
        let CatalogError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(problems.len(), 2, "{err}");
        assert!(
            problems[0].item.contains("line 2") && problems[1].item.contains("line 5"),
            "{err}"
        );
        // The whole i64 range is a valid priority: queue names order it exactly
        // (engine test `queues_list_and_serve_by_priority_then_newest_curation`).
        let text = format!(
            "episodes:\n  - url: http://h/a.mp3\n    title: Max\n    priority: {}\n  - url: http://h/b.mp3\n    title: Min\n    priority: {}\n",
            i64::MAX,
            i64::MIN
        );
        let items = parse_manifest(&text, "m.yml", None).unwrap();
        assert_eq!(
            items.iter().map(|i| i.priority).collect::<Vec<_>>(),
            [Some(i64::MAX), Some(i64::MIN)]
        );
    }
}
