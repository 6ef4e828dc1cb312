//! A write transaction that never hands a connection in an unknown state back to the
//! pool.
//!
//! sqlx counts a connection's open transactions itself. When SQLite rolls a transaction
//! back on its own (a full disk, an I/O error: `SQLITE_FULL` and `SQLITE_IOERR` end the
//! transaction), sqlx's `ROLLBACK` on drop fails with "no transaction is active", its
//! count stays at one, the connection goes back to the pool, and every later `BEGIN` on
//! it fails with "attempted to call begin_with at non-zero transaction depth": one full
//! disk wedged the recorder and the curator until they were restarted. So `BEGIN`,
//! `COMMIT` and `ROLLBACK` here are plain statements sqlx does not count, and a
//! transaction that did not end cleanly closes its connection (closing rolls back, on
//! both backends) instead of returning it: the next transaction gets a fresh one.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Executor};

/// A transaction on a connection of its own; `&mut tx` is an `&mut AnyConnection`.
/// Dropped without [`WriteTx::commit`] or [`WriteTx::rollback`] succeeding (an error, a
/// cancelled future), it closes its connection, which rolls the transaction back.
pub struct WriteTx {
    conn: PoolConnection<Any>,
    ended: bool,
    /// The SQLite file the transaction writes, checked after the commit: a commit into a
    /// file deleted meanwhile is reported as failed, so the caller does not go on as if
    /// it were stored (the recorder would delete the reports from ZooKeeper).
    file: Option<std::sync::Arc<crate::file_identity::FileIdentity>>,
}

impl WriteTx {
    /// Takes a connection from `pool` and runs `begin` (`BEGIN` or SQLite's
    /// `BEGIN IMMEDIATE`) on it.
    pub(crate) async fn begin(
        pool: &AnyPool,
        begin: &str,
        file: Option<std::sync::Arc<crate::file_identity::FileIdentity>>,
    ) -> Result<WriteTx, sqlx::Error> {
        let conn = pool.acquire().await?;
        // Made before BEGIN runs, so a BEGIN that fails midway also closes the connection.
        let mut tx = WriteTx {
            conn,
            ended: false,
            file,
        };
        tx.conn.execute(sqlx::raw_sql(begin)).await?;
        Ok(tx)
    }

    /// Commits; on failure the transaction is gone and its connection is closed.
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let file = self.file.clone();
        self.end("COMMIT").await?;
        match file.and_then(|f| f.changed()) {
            None => Ok(()),
            Some(what) => Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("committed, but {what}: nothing written to it can be read again"),
            ))),
        }
    }

    /// Rolls back; on failure the connection is closed (which rolls back too).
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(mut self, statement: &str) -> Result<(), sqlx::Error> {
        self.conn.execute(sqlx::raw_sql(statement)).await?;
        self.ended = true;
        Ok(())
    }
}

impl Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.conn
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.conn
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        if !self.ended {
            self.conn.close_on_drop();
        }
    }
}
