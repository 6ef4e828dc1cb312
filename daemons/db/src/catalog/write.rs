//! Writing the catalog: one curated batch per transaction, and imports.
//!
//! Statements are in the subset SQLite and PostgreSQL share (`$n` parameters, multi-row
//! `INSERT ... ON CONFLICT DO NOTHING`, `UPDATE ... RETURNING`). A row count that is not
//! what the caller expected (an alias another writer created, a record written since it
//! was read) is a [`DbError::Conflict`]: the transaction is dropped, so nothing of the
//! batch stays.

use sqlx::Any;
use sqlx::AnyConnection;
use znode_schema::records::AliasTarget;

use super::rows::{self, ALIAS_COLUMNS, CLIP_COLUMNS, EPISODE_COLUMNS};
use super::{Alias, AliasWrite, CatalogBatch, CatalogRecord, Written, INSERT_ROWS};
use crate::error::Context;
use crate::{next_seq, Counter, Database, DbError};

type Query<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>;

fn conflict(what: String) -> DbError {
    DbError::Conflict { what }
}

/// `($1, $2, ...), ($k, ...)`: `rows` tuples of `columns` numbered placeholders.
fn values(rows: usize, columns: usize) -> String {
    let mut out = String::with_capacity(rows * columns * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..columns {
            if c > 0 {
                out.push_str(", ");
            }
            out.push('$');
            out.push_str(&(r * columns + c + 1).to_string());
        }
        out.push(')');
    }
    out
}

pub(super) fn table(target: AliasTarget) -> &'static str {
    match target {
        AliasTarget::Episode => "episodes",
        AliasTarget::Clip => "clips",
    }
}

/// Adds `by` to an id counter and returns its new value (the row stays locked until
/// the transaction ends).
async fn bump(conn: &mut AnyConnection, name: &str, by: i64) -> Result<i64, DbError> {
    let (value,): (i64,) =
        sqlx::query_as("UPDATE counters SET value = value + $1 WHERE name = $2 RETURNING value")
            .bind(by)
            .bind(name)
            .fetch_one(&mut *conn)
            .await
            .context(|| format!("taking {by} {name} number(s)"))?;
    Ok(value)
}

fn bind_record<'q>(query: Query<'q>, record: &'q CatalogRecord, seq: i64) -> Query<'q> {
    let f = record.fields();
    let mut query = crate::binds_nullable_float(query)
        .bind(record.id())
        .bind(&f.title)
        .bind(&f.description)
        .bind(&f.media_url)
        .bind(&f.media_type)
        .bind(&f.curator)
        .bind(f.priority)
        .bind(rows::millis(f.initial_curated))
        .bind(rows::millis(f.last_curated))
        .bind(&f.content_hash)
        .bind(f.duration_s)
        .bind(&f.guid);
    if let CatalogRecord::Episode(e) = record {
        query = query.bind(&e.air_date);
    }
    query.bind(1_i64).bind(seq)
}

/// Inserts numbered records, a multi-row statement per `INSERT_ROWS`; returns how many
/// were new.
async fn insert_records(
    conn: &mut AnyConnection,
    records: &[&CatalogRecord],
    seq: i64,
) -> Result<u64, DbError> {
    let mut inserted = 0;
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        let of_kind: Vec<&CatalogRecord> = records
            .iter()
            .copied()
            .filter(|r| r.target() == target)
            .collect();
        let (columns, width) = match target {
            AliasTarget::Episode => (EPISODE_COLUMNS, 15),
            AliasTarget::Clip => (CLIP_COLUMNS, 14),
        };
        for chunk in of_kind.chunks(INSERT_ROWS) {
            let statement = format!(
                "INSERT INTO {} ({columns}) VALUES {} ON CONFLICT (id) DO NOTHING",
                table(target),
                values(chunk.len(), width)
            );
            let mut query = sqlx::query(&statement);
            for record in chunk {
                query = bind_record(query, record, seq);
            }
            inserted += query
                .execute(&mut *conn)
                .await
                .context(|| format!("storing {} new {}", chunk.len(), table(target)))?
                .rows_affected();
        }
    }
    Ok(inserted)
}

/// Creates aliases; returns how many were new (an alias that exists is left as it is).
async fn insert_aliases(
    conn: &mut AnyConnection,
    aliases: &[Alias],
    seq: i64,
) -> Result<u64, DbError> {
    let mut inserted = 0;
    for chunk in aliases.chunks(INSERT_ROWS) {
        let statement = format!(
            "INSERT INTO aliases ({ALIAS_COLUMNS}, seq) VALUES {} ON CONFLICT (key) DO NOTHING",
            values(chunk.len(), 5)
        );
        let mut query = sqlx::query(&statement);
        for a in chunk {
            query = query
                .bind(&a.name)
                .bind(rows::target_name(a.target))
                .bind(&a.id)
                .bind(&a.key)
                .bind(seq);
        }
        inserted += query
            .execute(&mut *conn)
            .await
            .context(|| format!("storing {} aliases", chunk.len()))?
            .rows_affected();
    }
    Ok(inserted)
}

/// Points aliases at `record`: new ones are collected into `fresh` (inserted together
/// later), stale ones are rewritten if they still name the record that is gone.
async fn point_aliases(
    conn: &mut AnyConnection,
    record: &CatalogRecord,
    aliases: &[AliasWrite],
    seq: i64,
    fresh: &mut Vec<Alias>,
) -> Result<(), DbError> {
    for a in aliases {
        let alias = Alias {
            name: a.name.clone(),
            target: record.target(),
            id: record.id().to_string(),
            key: a.key.clone(),
        };
        let Some(old) = &a.replaces else {
            fresh.push(alias);
            continue;
        };
        let done = sqlx::query(
            "UPDATE aliases SET target = $1, id = $2, key_text = $3, seq = $4 WHERE key = $5 AND id = $6",
        )
        .bind(rows::target_name(alias.target))
        .bind(&alias.id)
        .bind(&alias.key)
        .bind(seq)
        .bind(&alias.name)
        .bind(old)
        .execute(&mut *conn)
        .await
        .context(|| format!("pointing the stale alias {} at {}", alias.name, alias.id))?
        .rows_affected();
        if done != 1 {
            return Err(conflict(format!(
                "alias {} no longer names {old}",
                alias.name
            )));
        }
    }
    Ok(())
}

/// Rewrites a record if it is still at `version`.
async fn update_record(
    conn: &mut AnyConnection,
    record: &CatalogRecord,
    version: i64,
    seq: i64,
) -> Result<(), DbError> {
    let f = record.fields();
    let air = match record {
        CatalogRecord::Episode(_) => ", air_date = $15",
        CatalogRecord::Clip(_) => "",
    };
    let statement = format!(
        "UPDATE {} SET title = $3, description = $4, media_url = $5, media_type = $6, curator = $7, priority = $8, initial_curated = $9, last_curated = $10, content_hash = $11, duration_s = $12, guid = $13, seq = $14, version = version + 1{air} WHERE id = $1 AND version = $2",
        table(record.target())
    );
    let mut query = crate::binds_nullable_float(sqlx::query(&statement))
        .bind(record.id())
        .bind(version)
        .bind(&f.title)
        .bind(&f.description)
        .bind(&f.media_url)
        .bind(&f.media_type)
        .bind(&f.curator)
        .bind(f.priority)
        .bind(rows::millis(f.initial_curated))
        .bind(rows::millis(f.last_curated))
        .bind(&f.content_hash)
        .bind(f.duration_s)
        .bind(&f.guid)
        .bind(seq);
    if let CatalogRecord::Episode(e) = record {
        query = query.bind(&e.air_date);
    }
    let done = query
        .execute(&mut *conn)
        .await
        .context(|| format!("updating {}", record.id()))?
        .rows_affected();
    if done != 1 {
        return Err(conflict(format!(
            "{} was written since it was read (at version {version})",
            record.id()
        )));
    }
    Ok(())
}

/// Writes the batch; sets `ids_taken` when new records' numbers were in use (a counter
/// behind the records, e.g. lowered by hand).
async fn write_in(
    conn: &mut AnyConnection,
    batch: &CatalogBatch,
    ids_taken: &mut bool,
) -> Result<Written, DbError> {
    let seq = next_seq(conn, Counter::Catalog).await?;
    let mut fresh = Vec::new();
    for u in &batch.updates {
        update_record(conn, &u.record, u.version, seq).await?;
        if let Some(name) = &u.drop_alias {
            sqlx::query("DELETE FROM aliases WHERE key = $1 AND id = $2 AND target = $3")
                .bind(name)
                .bind(u.record.id())
                .bind(rows::target_name(u.record.target()))
                .execute(&mut *conn)
                .await
                .context(|| format!("deleting the alias {name} of {}'s old URL", u.record.id()))?;
        }
        point_aliases(conn, &u.record, &u.aliases, seq, &mut fresh).await?;
    }
    let mut numbered: Vec<(usize, CatalogRecord)> = Vec::with_capacity(batch.creates.len());
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        let n = batch
            .creates
            .iter()
            .filter(|c| c.record.target() == target)
            .count();
        if n == 0 {
            continue;
        }
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let mut next = bump(conn, rows::counter_name(target), n).await? - n + 1;
        for (i, c) in batch.creates.iter().enumerate() {
            if c.record.target() != target {
                continue;
            }
            let id = rows::new_id(target, next).ok_or_else(|| DbError::Exhausted {
                what: format!("{} ids (number {next})", rows::counter_name(target)),
            })?;
            next += 1;
            let mut record = c.record.clone();
            record.set_id(id);
            numbered.push((i, record));
        }
    }
    numbered.sort_by_key(|(i, _)| *i);
    let mut created = Vec::with_capacity(numbered.len());
    for (i, record) in &numbered {
        point_aliases(conn, record, &batch.creates[*i].aliases, seq, &mut fresh).await?;
        created.push(record.id().to_string());
    }
    let records: Vec<&CatalogRecord> = numbered.iter().map(|(_, r)| r).collect();
    let inserted = insert_records(conn, &records, seq).await?;
    if inserted != records.len() as u64 {
        *ids_taken = true;
        return Err(conflict(format!(
            "{} of {} new record ids are taken (an id counter behind the ids in use?)",
            records.len() as u64 - inserted,
            records.len()
        )));
    }
    let new_aliases = insert_aliases(conn, &fresh, seq).await?;
    if new_aliases != fresh.len() as u64 {
        return Err(conflict(format!(
            "{} of {} aliases were created by another writer meanwhile",
            fresh.len() as u64 - new_aliases,
            fresh.len()
        )));
    }
    Ok(Written { created, seq })
}

/// Writes one curated batch in one transaction (see [`super::write`]).
pub(super) async fn write(db: &Database, batch: &CatalogBatch) -> Result<Written, DbError> {
    let what = || {
        format!(
            "storing {} new and {} changed catalog records",
            batch.creates.len(),
            batch.updates.len()
        )
    };
    let mut tx = db.begin_write(what).await?;
    let mut ids_taken = false;
    match write_in(&mut tx, batch, &mut ids_taken).await {
        Ok(written) => {
            tx.commit().await.context(what)?;
            Ok(written)
        }
        Err(e) => {
            drop(tx);
            if ids_taken {
                // Else every retry would fail on the same numbers, forever.
                catch_up(db).await?;
            }
            Err(e)
        }
    }
}

/// Moves each id counter past the highest number in use (ids are fixed-width, so the
/// longest, then greatest, id is the highest).
async fn catch_up(db: &Database) -> Result<(), DbError> {
    let what = || "moving the id counters past the records in use".to_string();
    let mut tx = db.begin_write(what).await?;
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        let top: Option<(String,)> = sqlx::query_as(&format!(
            "SELECT id FROM {} ORDER BY LENGTH(id) DESC, id DESC LIMIT 1",
            table(target)
        ))
        .fetch_optional(&mut *tx)
        .await
        .context(what)?;
        if let Some(top) = top.and_then(|(id,)| rows::number_of(&id)) {
            let top = i64::try_from(top).unwrap_or(i64::MAX);
            tracing::warn!(
                counter = rows::counter_name(target),
                to = top,
                "an id counter was behind the records in use; moved past them"
            );
            raise_in(&mut tx, rows::counter_name(target), top).await?;
        }
    }
    tx.commit().await.context(what)?;
    Ok(())
}

/// Stores records and aliases with their ids, skipping those already there, and moves
/// the id counters past the numbers imported.
pub(super) async fn import(
    db: &Database,
    records: &[CatalogRecord],
    aliases: &[Alias],
) -> Result<(u64, u64), DbError> {
    let what = || format!("importing {} catalog records", records.len());
    let mut tx = db.begin_write(what).await?;
    let seq = next_seq(&mut tx, Counter::Catalog).await?;
    let refs: Vec<&CatalogRecord> = records.iter().collect();
    let new_records = insert_records(&mut tx, &refs, seq).await?;
    let new_aliases = insert_aliases(&mut tx, aliases, seq).await?;
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        let top = records
            .iter()
            .filter(|r| r.target() == target)
            .filter_map(|r| rows::number_of(r.id()))
            .max();
        if let Some(top) = top {
            raise_in(
                &mut tx,
                rows::counter_name(target),
                i64::try_from(top).unwrap_or(i64::MAX),
            )
            .await?;
        }
    }
    tx.commit().await.context(what)?;
    Ok((new_records, new_aliases))
}

async fn raise_in(conn: &mut AnyConnection, name: &str, value: i64) -> Result<(), DbError> {
    sqlx::query("UPDATE counters SET value = $1 WHERE name = $2 AND value < $1")
        .bind(value)
        .bind(name)
        .execute(&mut *conn)
        .await
        .context(|| format!("moving the {name} counter to {value}"))?;
    Ok(())
}

/// Stores records with their ids, replacing stored ones (every field, `version` bumped),
/// in one transaction with a new `seq`; moves the id counters past them.
pub(super) async fn put(db: &Database, records: &[CatalogRecord]) -> Result<i64, DbError> {
    let what = || format!("storing {} catalog records by id", records.len());
    let mut tx = db.begin_write(what).await?;
    let seq = next_seq(&mut tx, Counter::Catalog).await?;
    for target in [AliasTarget::Episode, AliasTarget::Clip] {
        let of_kind: Vec<&CatalogRecord> =
            records.iter().filter(|r| r.target() == target).collect();
        let (columns, width) = match target {
            AliasTarget::Episode => (EPISODE_COLUMNS, 15),
            AliasTarget::Clip => (CLIP_COLUMNS, 14),
        };
        let assignments: Vec<String> = columns
            .split(", ")
            .filter(|c| !matches!(*c, "id" | "version"))
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        for chunk in of_kind.chunks(INSERT_ROWS) {
            let statement = format!(
                "INSERT INTO {t} ({columns}) VALUES {} ON CONFLICT (id) DO UPDATE SET {}, version = {t}.version + 1",
                values(chunk.len(), width),
                assignments.join(", "),
                t = table(target),
            );
            let mut query = sqlx::query(&statement);
            for record in chunk {
                query = bind_record(query, record, seq);
            }
            query.execute(&mut *tx).await.context(what)?;
        }
        let top = of_kind.iter().filter_map(|r| rows::number_of(r.id())).max();
        if let Some(top) = top {
            raise_in(
                &mut tx,
                rows::counter_name(target),
                i64::try_from(top).unwrap_or(i64::MAX),
            )
            .await?;
        }
    }
    tx.commit().await.context(what)?;
    Ok(seq)
}

/// Sets an id counter to at least `value`.
pub(super) async fn raise_counter(db: &Database, name: &str, value: i64) -> Result<(), DbError> {
    let what = || format!("moving the {name} counter to {value}");
    let mut tx = db.begin_write(what).await?;
    raise_in(&mut tx, name, value).await?;
    tx.commit().await.context(what)?;
    Ok(())
}
