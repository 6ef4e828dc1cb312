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

/// SQLite only: makes every later change of a sequence counter (each research store and
/// catalog write takes one) fail the way a full disk fails, with the whole transaction
/// rolled back by SQLite itself (`RAISE(ROLLBACK)` ends it as `SQLITE_FULL` does), until
/// [`disarm_rollback_trap`]. The trigger is in the schema, so it fires on every
/// connection of every process.
pub async fn arm_rollback_trap(db: &Database) -> Result<(), DbError> {
    sqlx::raw_sql(
        "CREATE TRIGGER test_rollback_trap BEFORE UPDATE ON counters \
         BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full (test trap)'); END",
    )
    .execute(db.pool())
    .await
    .context(|| "arming the rollback trap".to_string())?;
    Ok(())
}

/// Removes what [`arm_rollback_trap`] made: writes succeed again (the disk has room).
pub async fn disarm_rollback_trap(db: &Database) -> Result<(), DbError> {
    sqlx::raw_sql("DROP TRIGGER test_rollback_trap")
        .execute(db.pool())
        .await
        .context(|| "disarming the rollback trap".to_string())?;
    Ok(())
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
