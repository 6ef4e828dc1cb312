//! Deciding, for each item, whether it is a new record or which stored record it is.
//!
//! Every alias of every item is read from the database in one pass (a few `IN (...)`
//! queries), then every record they point at in a second; nothing is written here. An
//! alias whose record is gone (deleted by an operator) is stale: it is rewritten to point
//! at the record the item ends up as, only if it still names the record that is gone.

use std::collections::HashMap;

use archivist_db::catalog::{self, AliasWrite, Versioned};
use archivist_db::Database;
use archivist_engine::schema::records::AliasTarget;
use time::OffsetDateTime;

use crate::error::{CatalogError, ItemProblem};
use crate::identity;
use crate::item::{CatalogItem, Kind};
use crate::merge::{self, StoredRecord};

/// An existing record to rewrite.
pub(crate) struct Update {
    pub item: CatalogItem,
    /// The record as merged.
    pub record: StoredRecord,
    /// The version it was read at.
    pub version: i64,
    pub changed: Vec<&'static str>,
    /// Aliases to create or rewrite so they name this record.
    pub aliases: Vec<AliasWrite>,
    /// When the update moves the record to another media URL: the alias of the URL it
    /// had, deleted in the same transaction (if it names this record) so that one media
    /// URL names one record.
    pub drop_alias: Option<String>,
}

/// A record to create.
pub(crate) struct Create {
    pub item: CatalogItem,
    /// Aliases of the item that exist but name a missing record: (name, that id).
    pub stale: Vec<(String, String)>,
}

impl Create {
    /// The aliases to write for the new record.
    pub(crate) fn alias_writes(&self) -> Vec<AliasWrite> {
        self.item
            .alias_keys()
            .into_iter()
            .map(|name| AliasWrite {
                key: self.item.alias_key_text(&name),
                replaces: self
                    .stale
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, id)| id.clone()),
                name,
            })
            .collect()
    }
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

/// The alias target of a kind.
pub(crate) fn alias_target(kind: Kind) -> AliasTarget {
    match kind {
        Kind::Episode => AliasTarget::Episode,
        Kind::Clip => AliasTarget::Clip,
    }
}

/// One alias of one item, as read.
struct Found {
    name: String,
    alias: Option<catalog::Alias>,
}

/// Reads every alias and pointed-at record and plans each item.
pub(crate) async fn resolve(
    db: &Database,
    items: Vec<CatalogItem>,
    now: OffsetDateTime,
) -> Result<Vec<Plan>, CatalogError> {
    let keys: Vec<Vec<String>> = items.iter().map(CatalogItem::alias_keys).collect();
    let names: Vec<String> = keys.iter().flatten().cloned().collect();
    let stored = catalog::aliases(db, &names).await?;

    // Pass 1: aliases.
    let mut found_per_item: Vec<Result<Vec<Found>, ItemProblem>> = Vec::with_capacity(items.len());
    let mut wanted: HashMap<AliasTarget, Vec<String>> = HashMap::new();
    for (item, names) in items.iter().zip(&keys) {
        let mut found = Vec::with_capacity(names.len());
        let mut problem = None;
        for name in names {
            let alias = stored.get(name).cloned();
            if let Some(a) = &alias {
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
            None => {
                for a in found.iter().filter_map(|f| f.alias.as_ref()) {
                    wanted.entry(a.target).or_default().push(a.id.clone());
                }
                Ok(found)
            }
        });
    }

    // Pass 2: the records the aliases point at.
    let mut records: HashMap<(AliasTarget, String), Versioned> = HashMap::new();
    for (target, mut ids) in wanted {
        ids.sort();
        ids.dedup();
        for (id, v) in catalog::records(db, target, &ids).await? {
            records.insert((target, id), v);
        }
    }

    let mut plans = Vec::with_capacity(items.len());
    for (item, found) in items.into_iter().zip(found_per_item) {
        plans.push(match found {
            Ok(found) => plan_item(item, found, &records, now),
            Err(problem) => Plan::Skip(problem),
        });
    }
    Ok(plans)
}

fn plan_item(
    item: CatalogItem,
    found: Vec<Found>,
    records: &HashMap<(AliasTarget, String), Versioned>,
    now: OffsetDateTime,
) -> Plan {
    let target = alias_target(item.kind);
    let read_of = |id: &str| records.get(&(target, id.to_string()));
    // The first alias (GUID before URL) whose record exists decides the identity.
    let chosen = found
        .iter()
        .filter_map(|f| f.alias.as_ref())
        .find(|a| read_of(&a.id).is_some())
        .map(|a| a.id.clone());
    let mut stale = Vec::new();
    let mut missing = Vec::new();
    for f in &found {
        match &f.alias {
            None => missing.push(f.name.clone()),
            Some(a) if read_of(&a.id).is_none() => stale.push((f.name.clone(), a.id.clone())),
            Some(a) if Some(&a.id) != chosen.as_ref() => {
                // The GUID names one record and the media URL another (e.g. two items
                // swapped enclosures): writing either would leave one media URL naming
                // two records. Left out, both records as they are.
                let what = if f.name.starts_with("guid-") {
                    "its feed GUID"
                } else {
                    "its media URL"
                };
                let kind = item.kind.as_str();
                return Plan::Skip(ItemProblem::new(
                    &item.label,
                    format!(
                        "conflict: {what} is registered as {kind} {}, but the item is {kind} {}; left out so that one media URL stays one record",
                        a.id,
                        chosen.as_deref().unwrap_or("?"),
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let Some(stored) = chosen.as_deref().and_then(read_of) else {
        return Plan::Create(Box::new(Create { item, stale }));
    };
    let mut record = stored.record.clone();
    let old_url = record.fields().media_url.clone();
    let changed = merge::merge(&mut record, &item, now);
    let drop_alias = (old_url != item.media_url).then(|| identity::url_alias(&old_url));
    let mut aliases = Vec::new();
    for name in missing {
        aliases.push(AliasWrite {
            key: item.alias_key_text(&name),
            name,
            replaces: None,
        });
    }
    for (name, id) in stale {
        aliases.push(AliasWrite {
            key: item.alias_key_text(&name),
            name,
            replaces: Some(id),
        });
    }
    Plan::Update(Box::new(Update {
        item,
        record,
        version: stored.version,
        changed,
        aliases,
        drop_alias,
    }))
}
