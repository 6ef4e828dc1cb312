//! A database is bound to its tree (outside 22 finding 8), and the read-only commands
//! open it read-only (finding 10). Against the backend `ARCHIVIST_TEST_DB_BACKEND` names.

mod support;

use support::Env;

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `sql` on the database at `url` (what an operator's mistake or an old backup
/// leaves behind).
fn execute(url: &str, sql: &'static [&'static str]) {
    let url = url.to_string();
    archivist_testkit::block_on_thread(async move {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&url).await.expect("connect");
        for statement in sql {
            sqlx::query(statement)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
        conn.close().await.expect("close");
    });
}

/// The deployment id `init` printed.
fn deployment_of(init_out: &str) -> String {
    init_out
        .lines()
        .find_map(|l| l.strip_prefix("deployment "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no deployment line in {init_out}"))
        .to_string()
}

/// A new, empty database under a tree that has one (a SQLite file deleted and created
/// again, or a second recorder pointed at another file) is refused by `init`, the writers
/// and the readers, naming the tree and the database; a second tree on a bound database
/// (two chroots on one PostgreSQL database) is refused naming both deployments. Before,
/// `init` said "already initialised", `curate` handed out the tree's episode ids again,
/// and `status` mixed both deployments. `init --adopt-database` binds knowingly.
#[test]
fn a_database_is_bound_to_its_tree_and_another_deployments_is_refused() {
    let env = Env::fresh("deploy-bind");
    let id = deployment_of(&env.ok(&["init"]));
    assert_eq!(id.len(), 32, "{id}");
    // Again: the same id, nothing refused.
    assert_eq!(deployment_of(&env.ok(&["init"])), id);
    let dir = support::scratch("deploy-bind");
    let manifest = dir.join("manifest.yml");
    std::fs::write(
        &manifest,
        "episodes:\n  - url: http://127.0.0.1:1/one.mp3\n    title: One\nclips:\n  - url: http://127.0.0.1:1/jingle.wav\n    title: Jingle\n",
    )
    .unwrap();
    env.ok(&["curate", "manifest", manifest.to_str().unwrap()]);

    // The same tree, another (empty) database.
    let mut other_db = env.clone();
    other_db.database = archivist_testkit::db::fresh_binary_database_url("deploy-bind-2");
    let shown = archivist_db::redact(&other_db.database);
    for args in [
        &["init"][..],
        &["curate", "manifest", manifest.to_str().unwrap()][..],
        &["status"][..],
    ] {
        let out = other_db.run(args);
        let err = stderr_of(&out);
        assert!(!out.status.success(), "{args:?} was not refused: {err}");
        assert!(
            err.contains(&format!(
                "the tree {} belongs to deployment {id}",
                env.chroot
            )) && err.contains(&shown)
                && err.contains("holds no deployment id")
                && err.contains("--adopt-database"),
            "{args:?}: {err}"
        );
    }

    // Another tree, the bound database.
    let mut other_tree = env.clone();
    other_tree.chroot = archivist_testkit::unique_chroot("deploy-bind-other");
    let out = other_tree.run(&["init"]);
    let err = stderr_of(&out);
    assert!(
        !out.status.success(),
        "a second tree took the database: {err}"
    );
    assert!(
        err.contains(&format!("belongs to deployment {id}"))
            && err.contains(&other_tree.chroot)
            && err.contains("two deployments"),
        "{err}"
    );
    let out = other_tree.run(&["status"]);
    assert!(!out.status.success(), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("two deployments"));

    // The original pair still works; an adopted database works too.
    env.ok(&["status"]);
    assert_eq!(
        deployment_of(&other_db.ok(&["init", "--adopt-database"])),
        id
    );
    other_db.ok(&["status"]);
}

/// `status`, `results`, `export`, `jobs list` and `fsck` write nothing to the database:
/// a SQLite file in rollback-journal mode stays so (they put it in WAL mode before, which
/// fails on a read-only file or mount), and a schema a migration behind is refused
/// naming both versions instead of migrated. A writer (`init`) brings it up to date.
#[test]
fn read_only_commands_write_nothing_to_the_database() {
    let env = Env::fresh("deploy-ro");
    env.ok(&["init"]);
    let sqlite = env.database.starts_with("sqlite:");
    if sqlite {
        execute(&env.database, &["PRAGMA journal_mode = DELETE"]);
    }
    let path = env
        .database
        .strip_prefix("sqlite://")
        .map(|p| p.split('?').next().unwrap_or(p).to_string());
    for args in [
        &["status"][..],
        &["status", "--episodes"][..],
        &["results", "--clip", "c000001"][..],
        &["export", "--format", "csv"][..],
        &["jobs", "list"][..],
        &["fsck"][..],
    ] {
        let out = env.run(args);
        // results --clip of an unknown clip exits 1; everything else succeeds.
        assert!(
            out.status.success() || args[0] == "results",
            "{args:?}: {}",
            stderr_of(&out)
        );
        if let (true, Some(path)) = (sqlite, &path) {
            // The file header's read/write versions (bytes 18 and 19): 1 for a rollback
            // journal, 2 for WAL.
            let header = std::fs::read(path).expect("the database file");
            assert_eq!(
                (header[18], header[19]),
                (1, 1),
                "{args:?} put the database in WAL mode"
            );
        }
    }

    // A schema from before deployment ids (a backup from an older archivist): the
    // deployment migration (5) and every later one (6, renditions) undone.
    let known = archivist_db::Database::known_schema_version();
    execute(
        &env.database,
        &[
            "DROP TABLE run_renditions",
            "DROP TABLE rendition_pins",
            "DROP TABLE renditions",
            "DROP TABLE deployment",
            "DELETE FROM _sqlx_migrations WHERE version >= 5",
        ],
    );
    let out = env.run(&["status"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "an old schema was read: {err}");
    assert!(
        err.contains(&format!("older than this archivist's ({known})")),
        "{err}"
    );
    // Not migrated by the refusal: still refused.
    assert!(!env.run(&["results", "--clip", "c000001"]).status.success());
    // A writer migrates it; the tree is bound, so the restored database is adopted
    // knowingly (docs/operations.md, "Backup and restore").
    let out = env.run(&["init"]);
    assert!(
        stderr_of(&out).contains("holds no deployment id"),
        "{}",
        stderr_of(&out)
    );
    env.ok(&["init", "--adopt-database"]);
    env.ok(&["status"]);
}

/// Writes `data` into the tree's `/meta` (what a slip in zkCli leaves behind).
fn overwrite_meta(env: &Env, data: &'static [u8]) {
    let config = archivist_engine::ZkConfig::new(env.zk.clone()).with_chroot(env.chroot.clone());
    archivist_testkit::block_on_thread(async move {
        let session = archivist_engine::Session::connect(&config)
            .await
            .expect("connect");
        session
            .client()
            .set_data("/meta", data, None)
            .await
            .expect("overwrite /meta");
        session.close(std::time::Duration::from_secs(2)).await;
    });
}

/// Outside 17k N1: `init` "repaired" an undecodable `/meta` with a new deployment id, so
/// the tree and its own database were refused everywhere as two deployments (a restarted
/// daemon exited; the hint pointed at `--adopt-database`, which the docs forbid for two
/// deployments), and fsck stopped at the decode error. Now fsck names the damage and
/// goes on, and `init` rewrites `/meta` with the database's deployment id.
#[test]
fn a_damaged_meta_is_repaired_with_the_databases_deployment_id() {
    let env = Env::fresh("deploy-meta");
    let id = deployment_of(&env.ok(&["init"]));
    overwrite_meta(&env, b"garbage: [unclosed");

    let out = env.run(&["fsck"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("/meta") && report.contains("archivist init"),
        "fsck did not name /meta: {report}\n{}",
        stderr_of(&out)
    );

    let init = env.ok(&["init"]);
    assert!(
        init.contains(&format!("rewritten with the database's deployment id {id}")),
        "{init}"
    );
    assert_eq!(deployment_of(&init), id);
    for args in [&["status"][..], &["fsck"][..], &["init"][..]] {
        let out = env.run(args);
        assert!(
            out.status.success(),
            "{args:?} after the repair: {}",
            stderr_of(&out)
        );
    }
}
