//! Record invariants: node sizes and parsing, id counters ahead of their ids, research
//! records matching the catalog, one record per media URL.

use std::collections::BTreeMap;

use archivist_engine::counter;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    self, AliasRecord, CatalogFields, ClipRecord, EpisodeRecord, ResearchRecord, MAX_NODE_BYTES,
};

use archivist_db::{research, Database};

use crate::error::Result;
use crate::settings::AdminSettings;
use crate::tree::{self, RawNode};

use super::index::{parts, Index};
use super::{CatalogIds, Fault, FaultKind, Plan, Severity};

/// A record under `/catalog/{episodes,clips,aliases}` or `/research`: written only by
/// trees from before issue 22, read only by `archivist migrate`.
fn is_old_archive(path: &str) -> bool {
    [
        paths::EPISODES,
        paths::CLIPS,
        paths::ALIASES,
        paths::RESEARCH,
    ]
    .iter()
    .any(|dir| {
        path.strip_prefix(dir)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    })
}

pub(super) fn check_nodes(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    for node in nodes {
        let size = node.data.len();
        if size > MAX_NODE_BYTES {
            faults.push(Fault::new(
                FaultKind::TooLarge,
                Severity::Error,
                &node.path,
                format!("{size} bytes, over the {MAX_NODE_BYTES}-byte limit"),
            ));
            continue;
        }
        if !tree::known_path(&node.path) {
            faults.push(Fault::new(
                FaultKind::UnknownNode,
                Severity::Warning,
                &node.path,
                "the schema has no such path",
            ));
        }
        if let Some(error) = tree::decode(&node.path, &node.data).error {
            if is_member(node) && node.stat.ephemeral_owner != 0 {
                // A live daemon's own registration (outside 17h F5): its owner writes
                // its record again at once; seen here, the owner is stopped or stuck.
                // Deleting it is safe: a live owner registers again at once, a dead
                // one's node would go with its session anyway.
                faults.push(
                    Fault::new(
                        FaultKind::Unparsable,
                        Severity::Error,
                        &node.path,
                        format!(
                            "{error}; the registration of the daemon of session {:#x}, which writes it again within a moment while it runs: if it stays, that daemon is stopped or stuck; deleting the node makes a live daemon register again at once",
                            node.stat.ephemeral_owner
                        ),
                    )
                    .plan("delete the node (a live daemon registers again)", delete(node)),
                );
                continue;
            }
            let error = if node.path == paths::META {
                // Every admin command refuses such a tree; fsck runs on it to say so.
                format!("{error}; every admin command but `fsck` refuses this tree: run `archivist init`, which rewrites it")
            } else {
                error
            };
            faults.push(Fault::new(
                FaultKind::Unparsable,
                Severity::Error,
                &node.path,
                error,
            ));
        }
        if is_old_archive(&node.path) {
            faults.push(Fault::new(
                FaultKind::OldTreeRecord,
                Severity::Warning,
                &node.path,
                "a catalog or research record of a tree from before the database (issue 22): no daemon reads it; run `archivist migrate` (it moves it into the database and verifies), then delete it (`archivist migrate --delete-zk`)",
            ));
        }
    }
}

/// A counter missing, or behind the ids in use: the tree's and, for jobs, the research
/// archive's (`counter::in_use`, the one rule).
pub(super) fn check_counters(
    ix: &Index<'_>,
    archived: &counter::Archived,
    faults: &mut Vec<Fault>,
) {
    for c in counter::ALL {
        let names = ix.nodes.iter().filter_map(|n| {
            let (dir, name) = n.path.rsplit_once('/')?;
            (dir == c.records_dir()).then_some(name)
        });
        let in_tree = counter::max_number(&c, names);
        let max = counter::in_use(&c, in_tree, archived);
        let from_archive = if max > in_tree {
            format!(
                " (the research archive holds {}{max:010}, which the reaper's retention deleted from the tree)",
                c.prefix
            )
        } else {
            String::new()
        };
        let Some(node) = ix.nodes.iter().find(|n| n.path == c.path) else {
            faults.push(
                Fault::new(
                    FaultKind::CounterMissing,
                    Severity::Error,
                    c.path,
                    format!(
                        "missing: no new id can be given (ids up to {max} are in use{from_archive}); `archivist init` or `fsck --repair` re-creates it"
                    ),
                )
                .plan(
                    format!("create it at version {max}"),
                    Plan::Recreate {
                        counter: c.path,
                        archived: *archived,
                    },
                ),
            );
            continue;
        };
        if let Some(behind) = counter::behind(node.stat.version, max) {
            faults.push(
                Fault::new(
                    FaultKind::CounterBehind,
                    Severity::Error,
                    c.path,
                    format!(
                        "at version {} (next id {}), but ids up to {} are in use{from_archive}: new ids would collide",
                        behind.version,
                        i64::from(behind.version) + 1,
                        behind.max_in_use
                    ),
                )
                .plan(
                    format!("move it to version {}", behind.max_in_use),
                    Plan::CatchUp {
                        counter: c.path,
                        archived: *archived,
                    },
                ),
            );
        }
    }
}

/// Checks the research archive in the database against the catalog, a page of
/// episodes at a time (bounded memory at any size): a record that does not parse is
/// [`FaultKind::Unparsable`], one that contradicts the catalog or itself
/// [`FaultKind::ResearchMismatch`]; both name the episode ([`research::place`]).
pub(super) async fn check_research(
    db: &Database,
    catalog: &CatalogIds,
    settings: &AdminSettings,
    faults: &mut Vec<Fault>,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = research::page_each(db, after.as_deref(), settings.batch_size.max(1)).await?;
        let Some((last, _)) = page.last() else {
            return Ok(());
        };
        after = Some(last.clone());
        for (episode, read) in page {
            let place = research::place(&episode);
            match read {
                Ok(record) => {
                    let problems = research_problems(&episode, &record, catalog);
                    if !problems.is_empty() {
                        faults.push(Fault::new(
                            FaultKind::ResearchMismatch,
                            Severity::Error,
                            place,
                            problems.join("; "),
                        ));
                    }
                }
                Err(e) => faults.push(Fault::new(
                    FaultKind::Unparsable,
                    Severity::Error,
                    place,
                    format!("{e}: the planner leaves the episode out until it is repaired"),
                )),
            }
        }
    }
}

/// What in `record` (the research of `episode`) contradicts itself or the catalog.
fn research_problems(episode: &str, record: &ResearchRecord, catalog: &CatalogIds) -> Vec<String> {
    let mut problems = Vec::new();
    if record.episode != episode {
        problems.push(format!("the record is for episode {}", record.episode));
    }
    if !catalog.episodes.contains(episode) {
        problems.push(format!("episode {episode} is not in the catalog"));
    }
    let mut unknown: Vec<String> = record
        .researched()
        .without(&catalog.clip_numbers)
        .iter()
        .map(paths::clip_id)
        .filter(|c| !catalog.clips.contains(c.as_str()))
        .collect();
    unknown.extend(
        record
            .found
            .keys()
            .filter(|c| !catalog.clips.contains(c.as_str()))
            .cloned(),
    );
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        let shown: Vec<&str> = unknown.iter().take(5).map(String::as_str).collect();
        problems.push(format!(
            "{} clip(s) not in the catalog: {}{}",
            unknown.len(),
            shown.join(", "),
            if unknown.len() > 5 { ", ..." } else { "" }
        ));
    }
    let not_researched: Vec<&String> = record
        .found
        .keys()
        .filter(|c| paths::clip_number(c).is_none_or(|n| !record.is_researched(n)))
        .collect();
    if !not_researched.is_empty() {
        problems.push(format!(
            "occurrences for clips no run researched: {}",
            not_researched
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    problems
}

/// The media URL of a catalog record node, if it is one and decodes.
fn media_url_of(node: &RawNode) -> Option<(&'static str, String)> {
    let fields = |f: CatalogFields| f.media_url;
    match parts(&node.path).as_slice() {
        ["catalog", "episodes", _] => records::decode::<EpisodeRecord>(&node.path, &node.data)
            .ok()
            .map(|r| ("episode", fields(r.fields))),
        ["catalog", "clips", _] => records::decode::<ClipRecord>(&node.path, &node.data)
            .ok()
            .map(|r| ("clip", fields(r.fields))),
        _ => None,
    }
}

/// One media URL, one record: no two records of a kind share a media URL, and each
/// media-URL alias (`url-...`) points at a record whose media URL is the alias's key.
/// Reported for an operator (which record is right is a human's call).
pub(super) fn check_catalog(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    let mut by_url: BTreeMap<(&str, String), Vec<&str>> = BTreeMap::new();
    let mut url_of: BTreeMap<&str, String> = BTreeMap::new();
    for node in nodes {
        if let Some((kind, url)) = media_url_of(node) {
            url_of.insert(&node.path, url.clone());
            by_url.entry((kind, url)).or_default().push(&node.path);
        }
    }
    for ((kind, url), holders) in &by_url {
        if holders.len() > 1 {
            faults.push(Fault::new(
                FaultKind::SharedMediaUrl,
                Severity::Error,
                holders[0],
                format!(
                    "{} {kind}s share the media URL {url}: {}",
                    holders.len(),
                    holders.join(", ")
                ),
            ));
        }
    }
    for node in nodes {
        let segments = parts(&node.path);
        let ["catalog", "aliases", name] = segments.as_slice() else {
            continue;
        };
        if !name.starts_with("url-") {
            continue;
        }
        let Ok(alias) = records::decode::<AliasRecord>(&node.path, &node.data) else {
            continue;
        };
        let target = match alias.target {
            records::AliasTarget::Episode => paths::episode(&alias.id),
            records::AliasTarget::Clip => paths::clip(&alias.id),
        };
        let Some(url) = url_of.get(target.as_str()) else {
            continue;
        };
        if *url != alias.key {
            faults.push(Fault::new(
                FaultKind::AliasMismatch,
                Severity::Error,
                &node.path,
                format!(
                    "alias of {} points at {target}, whose media URL is {url}",
                    alias.key
                ),
            ));
        }
    }
}

/// Registrations, consumer-group members and election candidates that are persistent
/// nodes (made by hand): no session owns them, so they never go. They are not counted as
/// live members ([`archivist_engine::member::list`]) nor as candidates
/// ([`archivist_engine::leader::candidates`]: one sorting first kept every real planner
/// or reaper from leading for ever, outside 17i G1). A warning; `--repair` deletes the
/// node.
pub(super) fn check_members(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    for node in nodes {
        if node.stat.ephemeral_owner != 0 {
            continue;
        }
        let what = if is_member(node) {
            "a persistent registration (made by hand): no daemon owns it, it never goes, and it is not counted as live"
        } else if is_child_of(&node.path, paths::ELECTION) {
            "a persistent election candidate (made by hand): no daemon owns it, it never goes; the election skips it (before, sorting first, it kept every real candidate from leading)"
        } else if is_child_of(&node.path, paths::CONSUMERS) {
            "a persistent consumer-group member (made by hand): no daemon owns it, it never goes, and it is not counted as a consumer"
        } else {
            continue;
        };
        faults.push(
            Fault::new(
                FaultKind::MemberNotEphemeral,
                Severity::Warning,
                &node.path,
                what,
            )
            .plan("delete the node", delete(node)),
        );
    }
}

/// Is `path` a grandchild of `root` (`/election/{role}/{node}`, `/consumers/{state}/{node}`)?
fn is_child_of(path: &str, root: &str) -> bool {
    path.strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(dir, name)| !dir.is_empty() && !name.is_empty() && !name.contains('/'))
}

/// Nodes under `/control/pause` that pause nothing: `status` would not show them as
/// pauses, but an operator who made one by hand believes the state is paused. A warning;
/// `--repair` deletes the node.
pub(super) fn check_pauses(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    for node in nodes {
        let Some(name) = node.path.strip_prefix(&format!("{}/", paths::PAUSES)) else {
            continue;
        };
        if name.contains('/') || crate::control::pausable(name).is_some() {
            continue;
        }
        faults.push(
            Fault::new(
                FaultKind::PauseIgnored,
                Severity::Warning,
                &node.path,
                format!(
                    "{name:?} pauses nothing: only {} can be paused (`archivist pause`)",
                    archivist_engine::consumer::PAUSABLE_STATES
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            )
            .plan("delete the node", delete(node)),
        );
    }
}

/// Every directory `archivist init` creates exists (counters are checked on their own,
/// `counter_missing`). One deleted by hand makes writes under it fail with a bare
/// "no node"; `archivist init` re-creates it and changes nothing else.
pub(super) fn check_directories(nodes: &[RawNode], faults: &mut Vec<Fault>) {
    let present: std::collections::BTreeSet<&str> = nodes.iter().map(|n| n.path.as_str()).collect();
    for dir in paths::directories() {
        if present.contains(dir.as_str()) || counter::ALL.iter().any(|c| c.path == dir) {
            continue;
        }
        faults.push(Fault::new(
            FaultKind::DirectoryMissing,
            Severity::Error,
            &dir,
            "missing (deleted by hand?): writes under it fail; run `archivist init`, which re-creates the tree's missing nodes and changes nothing else",
        ));
    }
}

/// The repair that deletes a hand-made node at the version read.
/// Is `node` a daemon's registration (`/researchers/NAME` or `/daemons/NAME`)?
fn is_member(node: &RawNode) -> bool {
    [paths::RESEARCHERS, paths::DAEMONS].into_iter().any(|dir| {
        node.path
            .strip_prefix(&format!("{dir}/"))
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    })
}

fn delete(node: &RawNode) -> Plan {
    Plan::Delete {
        path: node.path.clone(),
        version: Some(node.stat.version),
        unless: None,
    }
}
