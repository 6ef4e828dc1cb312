//! Reading the catalog: by key, by alias, changed since a watermark, and whole listings
//! a page at a time (keyset pagination, so a listing never holds more than one page).

use std::collections::HashMap;

use znode_schema::records::AliasTarget;

use super::rows::{
    self, AliasRow, CatalogRow, ClipRow, EpisodeRow, SummaryRow, ALIAS_COLUMNS, CLIP_COLUMNS,
    EPISODE_COLUMNS, SUMMARY_COLUMNS,
};
use super::write::table;
use super::{Alias, CatalogCounts, CatalogRecord, EpisodeSummary, Versioned, INSERT_ROWS, PAGE};
use crate::error::Context;
use crate::{Database, DbError};

/// `$first, $first+1, ...`: `n` numbered placeholders.
fn list(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn columns(target: AliasTarget) -> &'static str {
    match target {
        AliasTarget::Episode => EPISODE_COLUMNS,
        AliasTarget::Clip => CLIP_COLUMNS,
    }
}

/// Runs a statement returning records of `target` with `binds` bound in order.
async fn fetch_records(
    db: &Database,
    target: AliasTarget,
    statement: &str,
    binds: &[&str],
    tail: &[i64],
) -> Result<Vec<Versioned>, DbError> {
    match target {
        AliasTarget::Episode => fetch_rows::<EpisodeRow>(db, target, statement, binds, tail).await,
        AliasTarget::Clip => fetch_rows::<ClipRow>(db, target, statement, binds, tail).await,
    }
}

/// [`fetch_records`] for one table's row type.
async fn fetch_rows<R: CatalogRow>(
    db: &Database,
    target: AliasTarget,
    statement: &str,
    binds: &[&str],
    tail: &[i64],
) -> Result<Vec<Versioned>, DbError> {
    let mut query = sqlx::query_as::<_, R>(statement);
    for b in binds {
        query = query.bind(*b);
    }
    for t in tail {
        query = query.bind(*t);
    }
    query
        .fetch_all(db.pool())
        .await
        .context(|| format!("reading {}", table(target)))?
        .into_iter()
        .map(R::into_versioned)
        .collect()
}

pub(super) async fn aliases(
    db: &Database,
    names: &[String],
) -> Result<HashMap<String, Alias>, DbError> {
    let mut out = HashMap::with_capacity(names.len());
    for chunk in names.chunks(INSERT_ROWS) {
        let statement = format!(
            "SELECT {ALIAS_COLUMNS} FROM aliases WHERE key IN ({})",
            list(1, chunk.len())
        );
        let mut query = sqlx::query_as::<_, AliasRow>(&statement);
        for name in chunk {
            query = query.bind(name);
        }
        for row in query
            .fetch_all(db.pool())
            .await
            .context(|| format!("reading {} aliases", chunk.len()))?
        {
            let alias = rows::alias(row)?;
            out.insert(alias.name.clone(), alias);
        }
    }
    Ok(out)
}

pub(super) async fn records(
    db: &Database,
    target: AliasTarget,
    ids: &[String],
) -> Result<HashMap<String, Versioned>, DbError> {
    let mut out = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(INSERT_ROWS) {
        let statement = format!(
            "SELECT {} FROM {} WHERE id IN ({})",
            columns(target),
            table(target),
            list(1, chunk.len())
        );
        let binds: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for v in fetch_records(db, target, &statement, &binds, &[]).await? {
            out.insert(v.record.id().to_string(), v);
        }
    }
    Ok(out)
}

/// The first page of a listing in `(seq, id)` order: after `$1`, up to `$2`.
const SINCE_FIRST: &str = "WHERE seq > $1 AND seq <= $2 ORDER BY seq, id LIMIT $3";
/// The next pages: after the cursor (`$1` the last id, `$2` its seq), up to `$3`.
const SINCE_NEXT: &str =
    "WHERE (seq > $2 OR (seq = $2 AND id > $1)) AND seq <= $3 ORDER BY seq, id LIMIT $4";

pub(super) async fn episodes_since(
    db: &Database,
    after: i64,
    upto: i64,
    visit: &mut (dyn FnMut(Vec<EpisodeSummary>) + Send),
) -> Result<(), DbError> {
    let mut cursor: Option<(i64, String)> = None;
    loop {
        let what = || format!("reading episodes changed after {after} up to {upto}");
        let page: Vec<SummaryRow> = match &cursor {
            None => sqlx::query_as(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM episodes {SINCE_FIRST}"
            ))
            .bind(after)
            .bind(upto)
            .bind(PAGE)
            .fetch_all(db.pool())
            .await
            .context(what)?,
            Some((seq, id)) => sqlx::query_as(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM episodes {SINCE_NEXT}"
            ))
            .bind(id)
            .bind(*seq)
            .bind(upto)
            .bind(PAGE)
            .fetch_all(db.pool())
            .await
            .context(what)?,
        };
        let full = page.len() as i64 == PAGE;
        let Some(last) = page.last() else { break };
        cursor = Some((last.4, last.0.clone()));
        visit(page.into_iter().map(rows::summary).collect());
        if !full {
            break;
        }
    }
    Ok(())
}

pub(super) async fn clips_since(
    db: &Database,
    after: i64,
    upto: i64,
    visit: &mut (dyn FnMut(Vec<Versioned>) + Send),
) -> Result<(), DbError> {
    let mut cursor: Option<(i64, String)> = None;
    loop {
        let page = match &cursor {
            None => {
                let statement = format!("SELECT {CLIP_COLUMNS} FROM clips {SINCE_FIRST}");
                fetch_records(db, AliasTarget::Clip, &statement, &[], &[after, upto, PAGE]).await?
            }
            Some((seq, id)) => {
                let statement = format!("SELECT {CLIP_COLUMNS} FROM clips {SINCE_NEXT}");
                fetch_records(
                    db,
                    AliasTarget::Clip,
                    &statement,
                    &[id],
                    &[*seq, upto, PAGE],
                )
                .await?
            }
        };
        let full = page.len() as i64 == PAGE;
        let Some(last) = page.last() else { break };
        cursor = Some((last.seq, last.record.id().to_string()));
        visit(page);
        if !full {
            break;
        }
    }
    Ok(())
}

pub(super) async fn each_record(
    db: &Database,
    target: AliasTarget,
    visit: &mut (dyn FnMut(Vec<CatalogRecord>) + Send),
) -> Result<(), DbError> {
    let statement = format!(
        "SELECT {} FROM {} WHERE id > $1 ORDER BY id LIMIT $2",
        columns(target),
        table(target)
    );
    let mut after = String::new();
    loop {
        let page = fetch_records(db, target, &statement, &[&after], &[PAGE]).await?;
        let full = page.len() as i64 == PAGE;
        let Some(last) = page.last() else { break };
        after = last.record.id().to_string();
        visit(page.into_iter().map(|v| v.record).collect());
        if !full {
            break;
        }
    }
    Ok(())
}

pub(super) async fn each_id(
    db: &Database,
    target: AliasTarget,
    visit: &mut (dyn FnMut(Vec<String>) + Send),
) -> Result<(), DbError> {
    let statement = format!(
        "SELECT id FROM {} WHERE id > $1 ORDER BY id LIMIT $2",
        table(target)
    );
    let mut after = String::new();
    loop {
        let page: Vec<(String,)> = sqlx::query_as(&statement)
            .bind(&after)
            .bind(PAGE)
            .fetch_all(db.pool())
            .await
            .context(|| format!("listing {} after {after:?}", table(target)))?;
        let full = page.len() as i64 == PAGE;
        let Some(last) = page.last() else { break };
        after = last.0.clone();
        visit(page.into_iter().map(|(id,)| id).collect());
        if !full {
            break;
        }
    }
    Ok(())
}

pub(super) async fn each_alias(
    db: &Database,
    visit: &mut (dyn FnMut(Vec<Alias>) + Send),
) -> Result<(), DbError> {
    let statement =
        format!("SELECT {ALIAS_COLUMNS} FROM aliases WHERE key > $1 ORDER BY key LIMIT $2");
    let mut after = String::new();
    loop {
        let page: Vec<AliasRow> = sqlx::query_as(&statement)
            .bind(&after)
            .bind(PAGE)
            .fetch_all(db.pool())
            .await
            .context(|| format!("listing aliases after {after:?}"))?;
        let full = page.len() as i64 == PAGE;
        let Some(last) = page.last() else { break };
        after = last.0.clone();
        visit(
            page.into_iter()
                .map(rows::alias)
                .collect::<Result<_, _>>()?,
        );
        if !full {
            break;
        }
    }
    Ok(())
}

pub(super) async fn counts(db: &Database) -> Result<CatalogCounts, DbError> {
    let (episodes, clips, aliases): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM episodes), (SELECT COUNT(*) FROM clips), (SELECT COUNT(*) FROM aliases)",
    )
    .fetch_one(db.pool())
    .await
    .context(|| "counting the catalog".to_string())?;
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(CatalogCounts {
        episodes: n(episodes),
        clips: n(clips),
        aliases: n(aliases),
    })
}

pub(super) async fn last_seq(db: &Database) -> Result<i64, DbError> {
    db.current_seq(crate::Counter::Catalog).await
}

pub(super) async fn search_titles(
    db: &Database,
    target: AliasTarget,
    text: &str,
    after: &str,
    limit: i64,
) -> Result<Vec<(String, String)>, DbError> {
    // `\` escapes LIKE's wildcards in the text, so `50%` finds "50%" and nothing else.
    let mut pattern = String::from("%");
    // Both sides are lowered by the database's own lower() (ASCII in SQLite, Unicode
    // in PostgreSQL), so the text and the titles are always folded alike.
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    let statement = format!(
        "SELECT id, title FROM {} WHERE id > $1 AND lower(title) LIKE lower($2) ESCAPE '\\' \
         ORDER BY id LIMIT $3",
        table(target)
    );
    sqlx::query_as(&statement)
        .bind(after)
        .bind(&pattern)
        .bind(limit)
        .fetch_all(db.pool())
        .await
        .context(|| format!("searching {} titles for {text:?}", table(target)))
}
