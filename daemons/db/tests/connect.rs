//! Opening databases: the schema is applied on connect, reconnecting changes nothing,
//! several processes' worth of pools open one fresh SQLite file at once, a database newer
//! than this build is refused, and no message shows a password. On SQLite always and on
//! PostgreSQL when ARCHIVIST_TEST_PG is set (archivist_testkit::db).

use archivist_db::{Backend, Counter, Database, DbError};
use archivist_testkit::db::{backends, fresh_database_url};

#[tokio::test]
async fn connect_migrates_and_reconnect_is_a_no_op() {
    for backend in backends() {
        let url = fresh_database_url(backend, "connect").await;
        let db = Database::connect(&url).await.expect("connect");
        assert_eq!(db.backend(), backend);
        let known = Database::known_schema_version();
        assert!(known >= 1);
        assert_eq!(db.schema_version().await.unwrap(), known, "{backend:?}");
        assert_eq!(db.current_seq(Counter::Research).await.unwrap(), 0);
        assert_eq!(db.current_seq(Counter::Catalog).await.unwrap(), 0);
        db.close().await;
        let again = Database::connect(&url).await.expect("reconnect");
        assert_eq!(again.schema_version().await.unwrap(), known);
        again.close().await;
    }
}

#[tokio::test]
async fn pools_opening_one_fresh_database_at_once_all_succeed() {
    for backend in backends() {
        let url = fresh_database_url(backend, "race").await;
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { Database::connect(&url).await })
            })
            .collect();
        for open in opens {
            let db = open.await.unwrap().expect("every pool opens the database");
            assert_eq!(
                db.schema_version().await.unwrap(),
                Database::known_schema_version()
            );
            db.close().await;
        }
    }
}

#[tokio::test]
async fn a_database_from_a_newer_archivist_is_refused() {
    for backend in backends() {
        let url = fresh_database_url(backend, "too-new").await;
        let db = Database::connect(&url).await.expect("connect");
        db.close().await;
        mark_newer(&url, backend, Database::known_schema_version() + 1).await;
        let err = Database::connect(&url).await.expect_err("refused");
        assert!(matches!(err, DbError::TooNew { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("upgrade archivist"), "{text}");
    }
}

/// Records a migration this build does not have, as a newer archivist would have.
async fn mark_newer(url: &str, backend: Backend, version: i64) {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(url)
        .await
        .expect("raw connect");
    let checksum = match backend {
        Backend::Sqlite => "X'00'",
        Backend::Postgres => "decode('00', 'hex')",
    };
    sqlx::query(&format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({version}, 'from a newer archivist', TRUE, {checksum}, 0)"
    ))
    .execute(&mut conn)
    .await
    .expect("insert a newer migration");
    conn.close().await.expect("close");
}

#[tokio::test]
async fn errors_name_the_database_without_its_password() {
    // Nothing listens on port 1: the connection is refused, and the message names the
    // URL with the password redacted.
    let quick = std::time::Duration::from_secs(1);
    let err = Database::connect_within("postgres://archivist:hunter2@127.0.0.1:1/archivist", quick)
        .await
        .expect_err("no server");
    let text = err.to_string();
    assert!(text.contains("archivist:***@127.0.0.1:1"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let err = Database::connect("mysql://a:hunter2@h/db")
        .await
        .expect_err("no such backend");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    assert!(matches!(err, DbError::BadUrl { .. }));
    // A SQLite file that cannot be created names its path.
    let err = Database::connect("sqlite:///proc/archivist/nowhere.db")
        .await
        .expect_err("cannot create");
    assert!(err.to_string().contains("/proc/archivist"), "{err}");
}

/// Outside try of #22, finding 9: a server that refuses connections was reported as
/// "pool timed out while waiting for an open connection", the cause only in a log line.
#[tokio::test]
async fn an_unreachable_server_is_named_as_such_not_as_a_pool_timeout() {
    // A port nothing listens on: one the kernel gave us, closed again (a fixed port such
    // as 1 may be served by something else on a shared machine).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let err = Database::connect_within(
        &format!("postgres://archivist:secret@127.0.0.1:{port}/archivist"),
        std::time::Duration::from_secs(2),
    )
    .await
    .expect_err("nothing listens on that port");
    let message = err.to_string();
    assert!(message.to_lowercase().contains("refused"), "{message}");
    assert!(!message.contains("secret"), "{message}");
}
