//! The deployment a database belongs to (outside 22 finding 8): one row holding the id
//! `archivist init` made and keeps in the tree's `/meta`. The binary compares the two
//! whenever it opens the database; this module only reads and claims the row.

use crate::error::Context;
use crate::{Database, DbError};

/// The deployment id this database was bound to, if any.
///
/// # Errors
/// [`DbError::Query`].
pub async fn get(db: &Database) -> Result<Option<String>, DbError> {
    let row: Option<(String,)> = sqlx::query_as("SELECT id FROM deployment WHERE singleton = 1")
        .fetch_optional(db.pool())
        .await
        .context(|| {
            format!(
                "reading the deployment id of the database {}",
                db.shown_url()
            )
        })?;
    Ok(row.map(|(id,)| id))
}

/// Binds the database to deployment `id` unless it is bound already, and returns the id
/// it is bound to: `id`, or the one another process stored first (two daemons binding at
/// once agree on whichever committed first).
///
/// # Errors
/// [`DbError::Query`].
pub async fn claim(db: &Database, id: &str) -> Result<String, DbError> {
    sqlx::query("INSERT INTO deployment (singleton, id) VALUES (1, $1) ON CONFLICT DO NOTHING")
        .bind(id.to_string())
        .execute(db.pool())
        .await
        .context(|| {
            format!(
                "storing the deployment id in the database {}",
                db.shown_url()
            )
        })?;
    get(db).await?.ok_or_else(|| DbError::Corrupt {
        what: format!("the deployment row of the database {}", db.shown_url()),
        reason: "absent right after it was stored".into(),
    })
}
