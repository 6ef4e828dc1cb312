//! Deciding, for each item, whether it is a new record or which stored record it is.
//!
//! All aliases of all items are read in one pipelined pass, then all the records they
//! point at in a second; nothing is written here. An alias whose record is gone (deleted
//! by an operator) is stale: it is rewritten to point at the record the item ends up as.

use std::collections::HashMap;

use archivist_engine::ops::{Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{decode, AliasRecord, AliasTarget};
use archivist_engine::schema::SCHEMA_VERSION;
use archivist_engine::{store, EngineError, Session};
use time::OffsetDateTime;

use crate::error::ItemProblem;
use crate::identity;
use crate::item::{CatalogItem, Kind};
use crate::merge::{self, StoredRecord};
use crate::pipeline;

/// An existing record to rewrite.
pub(crate) struct Update {
    pub item: CatalogItem,
    pub path: String,
    pub version: i32,
    pub record: StoredRecord,
    pub changed: Vec<&'static str>,
    /// Alias creates/rewrites pointing at this record.
    pub alias_ops: Vec<Op>,
    /// When the update moves the record to another media URL: the alias of the URL it
    /// had, deleted in the same multi (if it points at this record) so that one media
    /// URL names one record.
    pub old_url_alias: Option<String>,
}

/// A record to create.
pub(crate) struct Create {
    pub item: CatalogItem,
    /// Aliases of the item that exist but point at a missing record: (name, version).
    pub stale: Vec<(String, i32)>,
}

/// What to do with one item.
pub(crate) enum Plan {
    Skip(ItemProblem),
    Update(Box<Update>),
    Create(Box<Create>),
}

fn target_kind(target: AliasTarget) -> Kind {
    match target {
        AliasTarget::Episode => Kind::Episode,
        AliasTarget::Clip => Kind::Clip,
    }
}

fn alias_target(kind: Kind) -> AliasTarget {
    match kind {
        Kind::Episode => AliasTarget::Episode,
        Kind::Clip => AliasTarget::Clip,
    }
}

/// The operation that makes alias `name` point at record `id`: a create, or a rewrite at
/// `stale_version` when a stale alias is there.
pub(crate) fn alias_op(
    item: &CatalogItem,
    name: &str,
    id: &str,
    stale_version: Option<i32>,
) -> Result<Op, EngineError> {
    let path = paths::alias(name);
    let record = AliasRecord {
        schema: SCHEMA_VERSION,
        target: alias_target(item.kind),
        id: id.to_string(),
        key: item.alias_key_text(name),
    };
    let data = store::encode(&path, &record)?;
    Ok(match stale_version {
        Some(version) => Op::SetData {
            path,
            data,
            version: Some(version),
        },
        None => Op::Create {
            path,
            data,
            mode: Mode::Persistent,
        },
    })
}

/// One alias of one item, as read.
struct Found {
    name: String,
    alias: Option<(AliasRecord, i32)>,
}

/// Reads every alias and pointed-at record and plans each item.
pub(crate) async fn resolve(
    session: &Session,
    items: Vec<CatalogItem>,
    window: usize,
    now: OffsetDateTime,
) -> Result<Vec<Plan>, EngineError> {
    let keys: Vec<Vec<String>> = items.iter().map(CatalogItem::alias_keys).collect();
    let alias_paths: Vec<String> = keys.iter().flatten().map(|k| paths::alias(k)).collect();
    let mut alias_reads = pipeline::read_many(session, &alias_paths, window)
        .await?
        .into_iter();

    // Pass 1: aliases.
    let mut found_per_item: Vec<Result<Vec<Found>, ItemProblem>> = Vec::with_capacity(items.len());
    for (item, names) in items.iter().zip(&keys) {
        let mut found = Vec::with_capacity(names.len());
        let mut problem = None;
        for name in names {
            let read = alias_reads.next().flatten();
            let alias = match read {
                None => None,
                Some((bytes, stat)) => match decode::<AliasRecord>(&paths::alias(name), &bytes) {
                    Ok(a) => Some((a, stat.version)),
                    Err(e) => {
                        problem = Some(ItemProblem::new(&item.label, e.to_string()));
                        None
                    }
                },
            };
            if let Some((a, _)) = &alias {
                if target_kind(a.target) != item.kind {
                    problem = Some(ItemProblem::new(
                        &item.label,
                        format!(
                            "{} is already registered as {} {}; one media URL cannot be both an episode and a clip",
                            item.media_url,
                            target_kind(a.target).as_str(),
                            a.id
                        ),
                    ));
                }
            }
            found.push(Found {
                name: name.clone(),
                alias,
            });
        }
        found_per_item.push(match problem {
            Some(p) => Err(p),
            None => Ok(found),
        });
    }

    // Pass 2: the records the aliases point at.
    let mut record_paths: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (item, found) in items.iter().zip(&found_per_item) {
        let Ok(found) = found else { continue };
        for f in found {
            if let Some((a, _)) = &f.alias {
                let path = StoredRecord::path_of(item.kind, &a.id);
                if !index.contains_key(&path) {
                    index.insert(path.clone(), record_paths.len());
                    record_paths.push(path);
                }
            }
        }
    }
    let record_reads = pipeline::read_many(session, &record_paths, window).await?;

    let mut plans = Vec::with_capacity(items.len());
    for (item, found) in items.into_iter().zip(found_per_item) {
        let found = match found {
            Ok(found) => found,
            Err(problem) => {
                plans.push(Plan::Skip(problem));
                continue;
            }
        };
        plans.push(plan_item(item, found, &index, &record_reads, now)?);
    }
    delete_old_url_aliases(session, &mut plans, window).await?;
    Ok(plans)
}

/// Pass 3: for each update moving a record to another media URL, reads the alias of the
/// URL it had and, when it still points at the record, deletes it (at the version read)
/// in the record's multi. A race makes the multi fail and the item is retried.
async fn delete_old_url_aliases(
    session: &Session,
    plans: &mut [Plan],
    window: usize,
) -> Result<(), EngineError> {
    let moved: Vec<(usize, String)> = plans
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Plan::Update(u) => u.old_url_alias.as_ref().map(|a| (i, paths::alias(a))),
            _ => None,
        })
        .collect();
    if moved.is_empty() {
        return Ok(());
    }
    let alias_paths: Vec<String> = moved.iter().map(|(_, p)| p.clone()).collect();
    let reads = pipeline::read_many(session, &alias_paths, window).await?;
    for ((i, path), read) in moved.into_iter().zip(reads) {
        let Some((bytes, stat)) = read else { continue };
        let Plan::Update(u) = &mut plans[i] else {
            continue;
        };
        match decode::<AliasRecord>(&path, &bytes) {
            Ok(a) if a.id == u.record.id() && target_kind(a.target) == u.item.kind => {
                u.alias_ops.push(Op::Delete {
                    path,
                    version: Some(stat.version),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

fn plan_item(
    item: CatalogItem,
    found: Vec<Found>,
    index: &HashMap<String, usize>,
    reads: &[pipeline::Read],
    now: OffsetDateTime,
) -> Result<Plan, EngineError> {
    let kind = item.kind;
    let read_of = |id: &str| {
        index
            .get(&StoredRecord::path_of(kind, id))
            .and_then(|&i| reads.get(i))
            .and_then(|r| r.as_ref())
    };
    // The first alias (GUID before URL) whose record exists decides the identity.
    let chosen = found
        .iter()
        .filter_map(|f| f.alias.as_ref())
        .find(|(a, _)| read_of(&a.id).is_some())
        .map(|(a, _)| a.id.clone());
    let mut stale = Vec::new();
    let mut missing = Vec::new();
    for f in &found {
        match &f.alias {
            None => missing.push(f.name.clone()),
            Some((a, version)) if read_of(&a.id).is_none() => {
                stale.push((f.name.clone(), *version))
            }
            Some((a, _)) if Some(&a.id) != chosen.as_ref() => {
                // The GUID names one record and the media URL another (e.g. two items
                // swapped enclosures): writing either would leave one media URL naming
                // two records. Left out, both records as they are.
                let what = if f.name.starts_with("guid-") {
                    "its feed GUID"
                } else {
                    "its media URL"
                };
                return Ok(Plan::Skip(ItemProblem::new(
                    &item.label,
                    format!(
                        "conflict: {what} is registered as {} {}, but the item is {} {}; left out so that one media URL stays one record",
                        kind.as_str(),
                        a.id,
                        kind.as_str(),
                        chosen.as_deref().unwrap_or("?"),
                    ),
                )));
            }
            Some(_) => {}
        }
    }
    let Some(id) = chosen else {
        return Ok(Plan::Create(Box::new(Create { item, stale })));
    };
    let path = StoredRecord::path_of(item.kind, &id);
    let Some((bytes, stat)) = read_of(&id) else {
        return Ok(Plan::Create(Box::new(Create { item, stale })));
    };
    let mut record = match StoredRecord::decode(item.kind, &path, bytes) {
        Ok(r) => r,
        Err(e) => return Ok(Plan::Skip(ItemProblem::new(&item.label, e.to_string()))),
    };
    let old_url = record.fields().media_url.clone();
    let changed = merge::merge(&mut record, &item, now);
    let old_url_alias = (old_url != item.media_url).then(|| identity::url_alias(&old_url));
    let mut alias_ops = Vec::new();
    for name in &missing {
        alias_ops.push(alias_op(&item, name, &id, None)?);
    }
    for (name, version) in &stale {
        alias_ops.push(alias_op(&item, name, &id, Some(*version))?);
    }
    Ok(Plan::Update(Box::new(Update {
        item,
        path,
        version: stat.version,
        record,
        changed,
        alias_ops,
        old_url_alias,
    })))
}
