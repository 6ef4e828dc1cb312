//! Opening the database at start (outside 22 findings 12, 13 and 15): an unreachable
//! server or a file that is no database is named at once (not "pool timed out" after
//! 10 s), `run --all` keeps its roles up and opens the database when it can, and a
//! password in a configuration file others may read is warned about.

mod support;

use std::time::{Duration, Instant};

use support::Env;

#[test]
fn an_unreachable_server_or_a_junk_file_is_named_at_once() {
    let env = Env::fresh("db-start-named");
    env.ok(&["init"]);
    let dir = support::scratch("db-start-named");
    let junk = dir.join("junk.db");
    std::fs::write(&junk, [0x5a_u8; 100]).unwrap();
    for (url, cause) in [
        (
            "postgres://archivist@127.0.0.1:1/archivist".to_string(),
            "Connection refused",
        ),
        (
            format!("sqlite://{}", junk.display()),
            "file is not a database",
        ),
    ] {
        let mut e = env.clone();
        e.database = url.clone();
        for args in [&["init"][..], &["status"][..]] {
            let started = Instant::now();
            let out = e.run(args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{url} {args:?}");
            assert!(
                err.contains(cause) && !err.contains("pool timed out"),
                "{url} {args:?}: {err}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{url} {args:?}: {:?}",
                started.elapsed()
            );
        }
    }
}

#[test]
fn a_database_password_in_a_readable_configuration_file_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::fresh("db-start-config");
    let dir = support::scratch("db-start-config");
    let config = dir.join("archivist.yml");
    std::fs::write(
        &config,
        "database:\n  url: postgres://archivist:hunter2@127.0.0.1:1/archivist\n",
    )
    .unwrap();
    let mut e = env.clone();
    e.extra.push(("ARCHIVIST_DATABASE_URL".into(), None));
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = e.run(&["--config", config.to_str().unwrap(), "init"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.contains("chmod 600"), warned, "mode {mode:o}: {err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}

/// `run --all` with a database that cannot be opened at start (a junk file, as a full
/// disk or a server down would be) keeps its roles up, restarting them with a backoff,
/// and works once the database can be opened. Before, the whole process exited.
#[test]
fn run_all_waits_for_a_database_it_cannot_open_at_start() {
    let mut env = Env::fresh("db-start-run");
    let dir = support::scratch("db-start-run");
    let db = dir.join("archivist.db");
    std::fs::write(&db, [0x5a_u8; 100]).unwrap();
    env.database = format!("sqlite://{}", db.display());
    let log = dir.join("run.log");
    let mut daemon = env.spawn(&["run", "--all"], &log);
    std::thread::sleep(Duration::from_secs(4));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(daemon.is_running(), "run --all exited: {text}");
    assert!(
        text.contains("file is not a database") && text.contains("restarting"),
        "{text}"
    );
    // The operator fixes it: the roles open the database on their next start.
    std::fs::remove_file(&db).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let opened = env.run(&["status"]);
        if opened.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never opened: {}\n{}",
            String::from_utf8_lossy(&opened.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(daemon.is_running());
}

/// `archivist run` opens the database before it initialises the tree, so the job counter
/// is moved past the research archive's job ids as `archivist init` moves it (a counter
/// behind them would hand out ids the archive holds). Before, `run` initialised the tree
/// first, knowing no archive, and left the counter behind.
#[test]
fn run_moves_the_job_counter_past_the_archive_before_anything_starts() {
    use archivist_engine::schema::records::{ResearchRecord, ResearchRun};
    let env = Env::fresh("db-start-counter");
    env.ok(&["init"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let db = archivist_db::Database::connect(&env.database)
            .await
            .unwrap();
        let mut record = ResearchRecord::new("e0000001");
        record.runs.push(ResearchRun {
            job: "j0000000042".into(),
            researcher: "r1".into(),
            at: time::OffsetDateTime::UNIX_EPOCH,
            clips: [1].into_iter().collect(),
        });
        archivist_db::research::update(&db, "e0000001", |r| *r = record.clone())
            .await
            .unwrap();
        db.close().await;
    });
    assert!(env.ok(&["tree", "/counters/jobs"]).contains("[value 0]"));
    let dir = support::scratch("db-start-counter");
    let log = dir.join("run.log");
    // The reaper alone: it takes no job id, so only `run`'s own init can move the counter.
    let mut daemon = env.spawn(&["run", "--reaper"], &log);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tree = env.ok(&["tree", "/counters/jobs"]);
        if tree.contains("[value 42]") {
            break;
        }
        assert!(
            daemon.is_running() && Instant::now() < deadline,
            "{tree}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
