//! Whole databases on a PostgreSQL server, created and dropped: each test and benchmark
//! run gets a database of its own (`test_<unix seconds>_<random>`), and databases left by
//! runs that died are dropped once they are old.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

use crate::error::DbError;
use crate::url::redact;

/// The prefix of databases made by [`create_test_database`].
pub const TEST_PREFIX: &str = "test_";

/// `url` with its database (the path) replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{database}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Creates an empty database on the server `admin_url` names (a role with CREATEDB) and
/// returns its URL. First drops the test databases older than `stale` (runs that died
/// before dropping theirs).
pub async fn create_test_database(admin_url: &str, stale: Duration) -> Result<String, DbError> {
    let (shown, mut conn) = admin_connect(admin_url).await?;
    let now = unix_seconds();
    let names: Vec<(String,)> =
        sqlx::query_as("SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%'")
            .fetch_all(&mut conn)
            .await
            .map_err(|e| DbError::query(format!("listing databases on {shown}"), e))?;
    for (name,) in names {
        let created = name
            .strip_prefix(TEST_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|c| now.saturating_sub(c) > stale.as_secs()) {
            // Another process may be dropping it too.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&mut conn)
                .await;
        }
    }
    let name = format!("{TEST_PREFIX}{now}_{:016x}", rand_u64());
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await
        .map_err(|e| DbError::query(format!("creating database {name} on {shown}"), e))?;
    let _ = conn.close().await;
    Ok(with_database(admin_url, &name))
}

/// Drops a database made by [`create_test_database`] (its connections are ended).
pub async fn drop_test_database(admin_url: &str, database_url: &str) -> Result<(), DbError> {
    let name = database_url
        .split('?')
        .next()
        .and_then(|base| base.rsplit('/').next())
        .unwrap_or_default();
    if !name.starts_with(TEST_PREFIX)
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(DbError::BadUrl {
            url: redact(database_url),
            reason: "not a test database".into(),
        });
    }
    let (shown, mut conn) = admin_connect(admin_url).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .map_err(|e| DbError::query(format!("dropping database {name} on {shown}"), e))?;
    let _ = conn.close().await;
    Ok(())
}

/// One connection to the server (no pool: a few statements), and its URL for messages.
async fn admin_connect(admin_url: &str) -> Result<(String, PgConnection), DbError> {
    let shown = redact(admin_url);
    match PgConnection::connect(admin_url).await {
        Ok(conn) => Ok((shown, conn)),
        Err(source) => Err(DbError::Connect { url: shown, source }),
    }
}

/// A random number from the clock and the process id (no generator needed for a name).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_part_is_replaced() {
        assert_eq!(
            with_database("postgres://a:b@h:5432/postgres", "test_1_x"),
            "postgres://a:b@h:5432/test_1_x"
        );
        assert_eq!(
            with_database("postgres://a@h/postgres?sslmode=disable", "t"),
            "postgres://a@h/t?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "t"), "postgres://h:1/t");
    }
}
