//! Damage only tests make: stored values that do not parse, so a test can prove a
//! daemon reading them fails a job with why (a bad-input row) instead of guessing. Not
//! for production code (hidden from the docs); SQL stays in this crate.

use crate::error::Context;
use crate::{Database, DbError};

/// Overwrites the clip sets of every run of `episode` with text that is no clip set:
/// the next read of the episode's research is [`DbError::Corrupt`].
pub async fn damage_research_runs(db: &Database, episode: &str) -> Result<u64, DbError> {
    let done = sqlx::query("UPDATE research_runs SET clips = $1 WHERE episode = $2")
        .bind("not a clip set")
        .bind(episode)
        .execute(db.pool())
        .await
        .context(|| format!("damaging the runs of episode {episode}"))?;
    Ok(done.rows_affected())
}

/// Deletes every row of `episode`'s research, as an operator repairing a damaged
/// record by hand would (its pairs are researched again).
pub async fn forget_research(db: &Database, episode: &str) -> Result<(), DbError> {
    for table in ["research_runs", "found", "clip_errors", "research"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE episode = $1"))
            .bind(episode)
            .execute(db.pool())
            .await
            .context(|| format!("deleting the {table} rows of episode {episode}"))?;
    }
    Ok(())
}
