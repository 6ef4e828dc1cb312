//! Bad input against the whole system: every daemon in one process (`run --all`) on a
//! tree poisoned by hand (garbage and newer-schema records, an oversized report, a record
//! that is not UTF-8) and a catalog with unusable media (404, an HTML page, a
//! corrupt MP3). The good episodes are still researched exactly as generated, each bad
//! episode's job fails with a reason an operator can read, the daemons never exit, the
//! poisoned nodes are left as they were for an operator, and `fsck` names them.
//!
//! The catalogue of bad-input kinds and the test of each is `docs/bad-input.md`.

mod support;

#[path = "../../admin/tests/fixtures/mod.rs"]
mod fixtures;

use std::time::Duration;

use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::store;
use support::{fast_config, generate_sample, sample_check, served_media, Env};

/// Hand-written nodes: (path, data). None of them may crash a daemon or be "repaired"
/// by one; fsck must report each.
fn poison() -> Vec<(String, Vec<u8>)> {
    let garbage_job = "j0000000900";
    let newer_job = "j0000000901";
    vec![
        (paths::job(garbage_job), b"{{{ this: is [not yaml".to_vec()),
        (
            paths::queue_entry(
                JobState::Pending,
                &QueueEntry::new(0, 0, garbage_job).name(),
            ),
            Vec::new(),
        ),
        (
            paths::job(newer_job),
            format!(
                "schema: 99\nid: {newer_job}\nstatus: pending\nepisode: e0000001\nwarp_drive: engaged\n"
            )
            .into_bytes(),
        ),
        (
            paths::queue_entry(JobState::Pending, &QueueEntry::new(0, 0, newer_job).name()),
            Vec::new(),
        ),
        (
            paths::report(&paths::report_name("j0000000902", "c000001")),
            // Over the records' 1,000,000-byte limit, under ZooKeeper's own 1 MiB.
            vec![b'x'; archivist_engine::schema::records::MAX_NODE_BYTES + 100],
        ),
        (
            paths::clip("c000099"),
            b"\xff\xfe not utf-8 at all".to_vec(),
        ),
    ]
}

fn failed_jobs(env: &Env) -> Vec<serde_json::Value> {
    let out = env.ok(&["-o", "json", "jobs", "list", "--state", "failed"]);
    let list: serde_json::Value = serde_json::from_str(&out).expect("jobs list JSON");
    list["jobs"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_poisoned_tree_and_bad_media_fail_alone_while_good_work_is_recorded() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (config, session) = runtime.block_on(archivist_testkit::fresh_tree("bad-input"));
    let (zk, chroot) = config.hosts_and_chroot();
    let env = Env {
        zk,
        chroot,
        database: archivist_testkit::db::fresh_binary_database_url("bad-input"),
        extra: Vec::new(),
    };
    let (dir, media, _files, base) = served_media(&env, "bad-input");
    generate_sample(&env, &media, &base, 2, "1", &[]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    // Unusable media, curated like any other episode.
    std::fs::write(
        media.join("moved.html"),
        "<!doctype html><html><body>This episode moved</body></html>",
    )
    .unwrap();
    std::fs::write(
        media.join("corrupt.mp3"),
        (0..50_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let bad_manifest = dir.join("bad.yml");
    std::fs::write(
        &bad_manifest,
        format!(
            "episodes:\n  - url: {base}/missing.mp3\n    title: Gone\n  - url: {base}/moved.html\n    title: A web page\n  - url: {base}/corrupt.mp3\n    title: Noise with an mp3 name\n"
        ),
    )
    .unwrap();
    env.ok(&["curate", "manifest", bad_manifest.to_str().unwrap()]);
    let poisoned = poison();
    runtime.block_on(async {
        for (path, data) in &poisoned {
            fixtures::raw(&session, path, data).await;
        }
    });

    let config_file = fast_config(&dir);
    let mut daemons = env.spawn(
        &["--config", config_file.to_str().unwrap(), "run", "--all"],
        &dir.join("daemons.log"),
    );
    let log = dir.join("daemons.log");
    let (rows, _) = sample_check(&env, &media, &log);
    let wrong: Vec<_> = rows.iter().filter(|r| r["verdict"] != "ok").collect();
    assert!(wrong.is_empty(), "good pairs not as expected: {wrong:#?}");
    assert_eq!(rows.len(), 2 * 4);

    // The three bad episodes fail, each with its reason.
    let (failed, _) = archivist_testkit::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || failed_jobs(&env),
        |failed| failed.len() >= 3,
    );
    let mut messages: Vec<String> = failed
        .iter()
        .map(|j| j["message"].as_str().unwrap_or_default().to_string())
        .collect();
    messages.sort();
    assert_eq!(messages.len(), 3, "failed jobs: {failed:#?}");
    let expect = [
        ("missing.mp3", "404"),
        ("moved.html", "not audio: text/html"),
        ("corrupt.mp3", "no supported audio container"),
    ];
    for (file, part) in expect {
        assert!(
            messages
                .iter()
                .any(|m| m.contains(file) && m.contains(part)),
            "no failure naming {file} with {part:?}: {messages:#?}"
        );
    }
    assert!(
        daemons.is_running(),
        "the daemons exited; log {}",
        log.display()
    );

    // Poisoned nodes are untouched, and fsck names each of them.
    runtime.block_on(async {
        for (path, data) in &poisoned {
            let (bytes, _) = store::read_raw(&session, path)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{path} was removed"));
            assert_eq!(&bytes, data, "{path} was rewritten");
        }
    });
    let fsck = env.run(&["-o", "json", "fsck"]);
    assert_eq!(fsck.status.code(), Some(1), "fsck finds faults");
    let report: serde_json::Value = serde_json::from_slice(&fsck.stdout).expect("fsck JSON");
    let faulty: Vec<&str> = report["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    for path in [
        paths::job("j0000000900"),
        paths::job("j0000000901"),
        paths::clip("c000099"),
    ] {
        assert!(
            faulty.iter().any(|f| f.ends_with(&path)),
            "fsck does not name {path}: {faulty:#?}"
        );
    }
    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop on SIGTERM"
    );
}

/// `docs/bad-input.md` lists at least 20 kinds of bad input, and every test it names
/// exists in the source, so the catalogue cannot point at a test that was renamed away.
#[test]
fn every_test_named_in_docs_bad_input_exists() {
    let root = archivist_testkit::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/bad-input.md")).expect("docs/bad-input.md");
    let rows: Vec<&str> = doc
        .lines()
        .filter(|l| {
            l.starts_with("| ")
                && l.split('|')
                    .nth(1)
                    .is_some_and(|n| n.trim().parse::<u32>().is_ok())
        })
        .collect();
    assert!(rows.len() >= 20, "only {} kinds of bad input", rows.len());
    let mut sources = String::new();
    let mut stack = vec![root.join("daemons"), root.join("znode-schema")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    let mut missing = Vec::new();
    for row in &rows {
        let test_cell = row.rsplit('|').nth(1).unwrap_or_default();
        let names: Vec<&str> = test_cell
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|n| {
                n.starts_with(|c: char| c.is_ascii_lowercase())
                    && n.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
            .collect();
        let table_case = test_cell.contains("failures table");
        assert!(!names.is_empty() || table_case, "row names no test: {row}");
        for name in names {
            if !sources.contains(&format!("fn {name}(")) {
                missing.push(name.to_string());
            }
        }
        if table_case {
            let case = test_cell.split('`').nth(1).unwrap_or_default();
            if !sources.contains(&format!("path: \"{case}\"")) {
                missing.push(format!("failures table case {case}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named in docs/bad-input.md but not found: {missing:?}"
    );
}

/// A UTF-16 feed declaring `encoding="utf-16"` made the XML parser panic, which took the
/// curator and, under `run --all`, every other daemon down about 2 s after start. Now
/// it is read like any feed; the daemons keep running, and a good feed polled after it
/// registers too.
#[test]
fn a_feed_that_crashed_the_parser_is_read_and_run_all_keeps_every_daemon() {
    let env = Env::fresh("bad-input-feed-crash");
    let dir = support::scratch("feed-crash");
    let feeds = dir.join("feeds");
    std::fs::create_dir_all(&feeds).expect("feeds dir");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog/tests/feeds");
    for name in ["utf-16be-declared-utf-16.xml", "rss-version-2.01.xml"] {
        std::fs::copy(corpus.join(name), feeds.join(name)).expect("copy feed");
    }
    let (_files, base) = support::serve_files(&env, &feeds, &[]);
    let config = fast_config(&dir);
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "curator:\n  interval: 1\n  feeds:\n    - {base}/utf-16be-declared-utf-16.xml\n    - {base}/rss-version-2.01.xml\n"
    ));
    std::fs::write(&config, text).expect("config");
    let log = dir.join("daemons.log");
    let mut daemons = env.spawn(
        &["--config", config.to_str().unwrap(), "run", "--all"],
        &log,
    );

    let ((episodes, _), _) = archivist_testkit::poll_until(
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let out = env.run(&["-o", "json", "status"]);
            let episodes = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .ok()
                .and_then(|status| status["catalog"]["episodes"].as_u64())
                .unwrap_or(0);
            (episodes, daemons.is_running())
        },
        |(episodes, running)| *episodes >= 3 || !running,
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        episodes,
        3,
        "episodes of both feeds registered; log:\n{}",
        log_text()
    );
    // Several more polls of both feeds: every daemon still up.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        daemons.is_running(),
        "run --all exited; log:\n{}",
        log_text()
    );
    let out = env.ok(&["-o", "json", "status"]);
    let status: serde_json::Value = serde_json::from_str(&out).expect("status JSON");
    let daemons_up = status.to_string();
    for role in ["planner", "researcher", "recorder", "curator"] {
        assert!(
            daemons_up.contains(role),
            "{role} not registered: {daemons_up}"
        );
    }
    assert!(daemons.stop(Duration::from_secs(30)), "stops on SIGTERM");
}

/// ZooKeeper credentials that cannot work are refused before anything connects, with
/// the setting named and no secret repeated (outside try of issue 21): an empty
/// `ARCHIVIST_ZK_SASL_PASSWORD` (the server only says "authentication failed"), a reader
/// name ZooKeeper would read as several ids, and `config check` passing an
/// `ARCHIVIST_ZK_AUTH` the commands then refuse.
#[test]
fn unusable_zookeeper_credentials_are_refused_before_connecting() {
    let mut env = Env::fresh("bad-credentials");
    // Nothing listens here: a refusal must come before any connection attempt.
    env.zk = "127.0.0.1:9".into();
    let var = |name: &str, value: &str| (name.to_string(), Some(value.to_string()));
    /// (environment, command, what stderr must say)
    type Case<'a> = (Vec<(String, Option<String>)>, &'a [&'a str], &'a str);
    let cases: [Case; 3] = [
        (
            vec![
                var("ARCHIVIST_ZK_SASL_USER", "archivist"),
                var("ARCHIVIST_ZK_SASL_PASSWORD", ""),
            ],
            &["status"],
            "ARCHIVIST_ZK_SASL_PASSWORD is empty",
        ),
        (
            vec![
                var("ARCHIVIST_ZK_SASL_USER", "archivist"),
                var("ARCHIVIST_ZK_SASL_PASSWORD", "s3cr3t-pw"),
                var("ARCHIVIST_ZK_SASL_READER", "ops,world"),
            ],
            &["status"],
            "is not one SASL user name",
        ),
        (
            vec![var("ARCHIVIST_ZK_AUTH", "nocolon-s3cr3t-pw")],
            &["config", "check"],
            "must be user:password",
        ),
    ];
    for (vars, args, expected) in cases {
        let mut case = env.clone();
        case.extra = vars;
        let out = case.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("s3cr3t-pw"),
            "{args:?} shows the secret: {stderr}"
        );
        assert!(
            !stderr.contains("127.0.0.1:9"),
            "{args:?} tried to connect: {stderr}"
        );
    }
}
