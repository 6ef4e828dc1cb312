//! The admin commands of the `archivist` binary, run as a process against a tree
//! prepared in a fresh chroot of the real ZooKeeper; `--output json` is parsed back.

#[path = "../../admin/tests/fixtures/mod.rs"]
mod fixtures;

use std::process::{Output, Stdio};

use archivist_engine::lock::JobLock;
use archivist_engine::schema::queue_key::QueueEntry;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{store, ZkConfig};
use serde_json::Value;

use archivist_testkit::queues_holding;
use fixtures::{drive, read};

async fn archivist(config: &ZkConfig, args: &[&str]) -> Output {
    let (hosts, chroot) = config.hosts_and_chroot();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
        .args([
            "--zk",
            &hosts,
            "--chroot",
            &chroot,
            "--session-timeout-ms",
            "4000",
        ])
        .args(args)
        .env("RUST_LOG", "warn")
        .env("ARCHIVIST_ADMIN_ACTOR", "cli-test")
        .env(
            "ARCHIVIST_DATABASE_URL",
            archivist_testkit::db::tree_database_url(&chroot),
        )
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run archivist")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs with `--output json`, expects `code`, parses stdout.
async fn json(config: &ZkConfig, args: &[&str], code: i32) -> Value {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = archivist(config, &all).await;
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", text(&out)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_jobs_and_results_as_json() {
    let (config, s) = archivist_testkit::fresh_tree("cli-status").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let pending = fixtures::job(&s, &e1, &["c000001"]).await;
    let failed = fixtures::failed_job(&s, "e0000002", "download failed: HTTP 404").await;
    fixtures::research(&s, &e1, "j0000000009", &[1], &[(1, 42.0, 0.95)]).await;

    let status = json(&config, &["status", "--episodes"], 0).await;
    assert_eq!(status["jobs"]["pending"], 1);
    assert_eq!(status["jobs"]["failed"], 1);
    assert_eq!(status["catalog"]["episodes"], 2);
    assert_eq!(status["research"]["researched_pairs"], 1);
    assert_eq!(status["research"]["total_pairs"], 2);
    assert_eq!(
        status["research"]["per_episode"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(status["oldest_waiting"]["job"], pending.id.as_str());
    assert_eq!(status["leases"]["active"], 2);

    let list = json(&config, &["jobs", "list", "--state", "failed"], 0).await;
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["id"].as_str())
        .collect();
    assert_eq!(ids, vec![failed.id.as_str()]);
    let show = json(&config, &["jobs", "show", &failed.id], 0).await;
    assert_eq!(show["job"]["status"], "failed");
    assert_eq!(show["job"]["message"], "download failed: HTTP 404");
    assert_eq!(show["queued_in"], serde_json::json!(["failed"]));
    assert_eq!(show["lease"]["expired"], false);
    assert!(show["job"]["events"]
        .as_array()
        .is_some_and(|e| e.len() == 4));

    let by_episode = json(&config, &["results", "--episode", &e1], 0).await;
    assert_eq!(by_episode["rows"][0]["at"], 42.0);
    assert_eq!(by_episode["rows"][0]["clip_title"], "Jingle");
    let by_clip = json(&config, &["results", "--clip", "c000001"], 0).await;
    assert_eq!(by_clip["episodes_found"], 1);

    let table = archivist(&config, &["status"]).await;
    assert!(table.status.success(), "{}", text(&table));
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("Research: 1/2 pairs (50.0%)"),
        "{}",
        text(&table)
    );
    let missing = archivist(&config, &["jobs", "show", "j0000000404"]).await;
    assert_eq!(missing.status.code(), Some(1), "{}", text(&missing));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("job j0000000404 does not exist"),
        "{}",
        text(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_hold_release_cancel_delete_and_refusals() {
    let (config, s) = archivist_testkit::fresh_tree("cli-actions").await;
    fixtures::episode(&s, 1, "One").await;
    let failed = fixtures::failed_job(&s, "e0000001", "not audio").await;

    // A lease not longer than the work-item TTL (300 s by default) is refused, naming
    // it (outside 17d finding 11), and nothing is written.
    let short = archivist(&config, &["retry", &failed.id, "--lease-duration-s", "120"]).await;
    assert_eq!(short.status.code(), Some(2), "{}", text(&short));
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("work-item TTL (300 s)"),
        "{}",
        text(&short)
    );
    assert_eq!(read(&s, &failed.id).await.0.retry_count, 0);
    let retried = json(
        &config,
        &["retry", &failed.id, "--lease-duration-s", "420"],
        0,
    )
    .await;
    assert_eq!(
        (retried["outcome"].as_str(), retried["to"].as_str()),
        (Some("done"), Some("pending"))
    );
    assert_eq!(read(&s, &failed.id).await.0.retry_count, 1);
    assert_eq!(
        fixtures::lease_of(&s, &failed.id)
            .await
            .map(|l| l.duration_ms),
        Some(420_000)
    );
    // The job moved on: retrying it again is refused, with the reason, exit 3.
    let again = archivist(&config, &["retry", &failed.id]).await;
    assert_eq!(again.status.code(), Some(3), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is pending: only failed jobs are retried"),
        "{}",
        text(&again)
    );

    let held = json(
        &config,
        &["hold", "--job", &failed.id, "--reason", "bad feed"],
        0,
    )
    .await;
    assert_eq!(held["to"], "held");
    assert_eq!(queues_holding(&s, &failed.id).await, vec![JobState::Held]);
    let released = json(&config, &["release", "--job", &failed.id], 0).await;
    assert_eq!(released["to"], "pending");

    let ep = json(&config, &["hold", "--episode", "e0000001"], 0).await;
    assert_eq!(
        (ep["held"].as_bool(), ep["changed"].as_bool()),
        (Some(true), Some(true))
    );
    let ep = json(&config, &["release", "--episode", "e0000001"], 0).await;
    assert_eq!(ep["held"], false);
    let both = archivist(&config, &["hold", "--job", &failed.id, "--clip", "c000001"]).await;
    assert_eq!(
        both.status.code(),
        Some(2),
        "one target only: {}",
        text(&both)
    );

    let paused = json(&config, &["pause", "pending", "--reason", "upgrade"], 0).await;
    assert_eq!(paused["changed"], true);
    assert!(store::exists(&s, &paths::pause(JobState::Pending))
        .await
        .unwrap()
        .is_some());
    let status = json(&config, &["status"], 0).await;
    assert_eq!(status["paused"][0]["record"]["reason"], "upgrade");
    json(&config, &["resume", "pending"], 0).await;
    assert!(store::exists(&s, &paths::pause(JobState::Pending))
        .await
        .unwrap()
        .is_none());

    // A job a researcher holds gets a request instead.
    drive(&s, &failed.id, &[JobState::Leased], "").await;
    let researcher = archivist_testkit::another_session(&config).await;
    let _lock = JobLock::try_acquire(&researcher, &failed.id, "r1")
        .await
        .unwrap()
        .unwrap();
    let cancel = json(&config, &["cancel", &failed.id], 0).await;
    assert_eq!(cancel["outcome"], "requested");
    assert_eq!(read(&s, &failed.id).await.0.status, JobState::Leased);

    // delete: only failed or held jobs; asks unless --yes, and refuses without a TTY.
    let other = fixtures::failed_job(&s, "e0000001", "x").await;
    let no_tty = archivist(&config, &["delete", &other.id]).await;
    assert_eq!(no_tty.status.code(), Some(1), "{}", text(&no_tty));
    assert!(
        String::from_utf8_lossy(&no_tty.stderr).contains("pass --yes"),
        "{}",
        text(&no_tty)
    );
    assert!(store::exists(&s, &paths::job(&other.id))
        .await
        .unwrap()
        .is_some());
    let wrong_state = archivist(&config, &["delete", &failed.id, "--yes"]).await;
    assert_eq!(wrong_state.status.code(), Some(3), "{}", text(&wrong_state));
    let deleted = json(&config, &["delete", &other.id, "--yes"], 0).await;
    assert_eq!(deleted["action"], "delete");
    assert!(store::exists(&s, &paths::job(&other.id))
        .await
        .unwrap()
        .is_none());
}

/// Issue 17's leftover: a job node whose YAML does not decode could not be removed
/// without zkCli (every action reads the job first). `delete --force` removes it with its
/// queue entry and lease; plain `delete` names `--force`; a job that decodes is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_force_removes_a_job_whose_record_does_not_decode() {
    use archivist_engine::ops::{self, Op};
    let (config, s) = archivist_testkit::fresh_tree("cli-delete-force").await;
    let broken = fixtures::failed_job(&s, "e0000001", "x").await;
    let entry = paths::queue_entry(JobState::Failed, &broken.queue_entry().name());
    ops::commit(
        &s,
        &[Op::SetData {
            path: paths::job(&broken.id),
            data: b"status: [this is not a job".to_vec(),
            version: None,
        }],
    )
    .await
    .unwrap();
    assert!(store::exists(&s, &entry).await.unwrap().is_some());

    let plain = archivist(&config, &["delete", &broken.id, "--yes"]).await;
    assert_eq!(plain.status.code(), Some(1), "{}", text(&plain));
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("--force"),
        "{}",
        text(&plain)
    );

    let readable = fixtures::failed_job(&s, "e0000002", "y").await;
    let refused = archivist(&config, &["delete", &readable.id, "--yes", "--force"]).await;
    // Outside test 17d, finding 16b: a refusal, exit 3 (it exited 1, "invalid input").
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("decodes"),
        "{}",
        text(&refused)
    );
    assert!(store::exists(&s, &paths::job(&readable.id))
        .await
        .unwrap()
        .is_some());

    let forced = json(&config, &["delete", &broken.id, "--yes", "--force"], 0).await;
    assert_eq!(forced["job"], broken.id.as_str());
    let deleted: Vec<&str> = forced["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(deleted.contains(&entry.as_str()), "{forced}");
    for gone in [paths::job(&broken.id), entry, paths::lease(&broken.id)] {
        assert!(
            store::exists(&s, &gone).await.unwrap().is_none(),
            "{gone} is still there"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_all_failed_with_a_reason() {
    let (config, s) = archivist_testkit::fresh_tree("cli-retry-all").await;
    let a = fixtures::failed_job(&s, "e0000001", "download failed: HTTP 404").await;
    let b = fixtures::failed_job(&s, "e0000002", "not audio").await;
    let items = json(
        &config,
        &["retry", "--all-failed", "--reason", "http 404"],
        0,
    )
    .await;
    let jobs: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["job"].as_str())
        .collect();
    assert_eq!(jobs, vec![a.id.as_str()]);
    assert_eq!(read(&s, &b.id).await.0.status, JobState::Failed);
    let usage = archivist(&config, &["retry"]).await;
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_tree_and_help() {
    let (config, s) = archivist_testkit::fresh_tree("cli-export").await;
    let e1 = fixtures::episode(&s, 1, "One, with a comma").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::clip(&s, 2, "Sting").await;
    fixtures::research(
        &s,
        &e1,
        "j0000000001",
        &[1, 2],
        &[(1, 10.0, 0.9), (1, 20.0, 0.8)],
    )
    .await;
    let job = fixtures::job(&s, &e1, &["c000001"]).await;

    let rows = json(&config, &["export", "--format", "json"], 0).await;
    assert_eq!(rows.as_array().map(Vec::len), Some(3));
    let dir = std::env::temp_dir().join(format!("archivist-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("archive.csv");
    let out = archivist(
        &config,
        &["export", "--format", "csv", "--out", file.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let csv = std::fs::read_to_string(&file).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("e0000001,\"One, with a comma\",c000002,Sting,false,")),
        "{csv}"
    );
    std::fs::remove_dir_all(&dir).ok();

    let nodes = json(&config, &["tree", "/queues/pending"], 0).await;
    let entry = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["entry"].is_object())
        .expect("an entry");
    assert_eq!(entry["entry"]["job"], job.id.as_str());
    let jobs = json(&config, &["tree", "/jobs"], 0).await;
    assert_eq!(jobs[1]["data"]["status"], "pending");
    let table = archivist(&config, &["tree", "/queues/pending"]).await;
    assert!(
        String::from_utf8_lossy(&table.stdout).contains(&format!("job {} priority 0", job.id)),
        "{}",
        text(&table)
    );

    // Outside test 17d, finding 6: the help said cancelled jobs go after the retention
    // period; the reaper never deletes them.
    for cmd in ["reaper", "recorder"] {
        let help = archivist(&config, &[cmd, "--help"]).await;
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        assert!(
            help.contains("never deleted by the reaper")
                && !help.contains("`cancelled` jobs are kept"),
            "{cmd}: {help}"
        );
    }
    for cmd in [
        "status", "jobs", "retry", "hold", "release", "pause", "resume", "cancel", "delete",
        "results", "export", "tree", "fsck",
    ] {
        let out = archivist(&config, &[cmd, "--help"]).await;
        assert!(
            out.status.success() && out.stdout.starts_with(b""),
            "{cmd}: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage: archivist"),
            "{cmd}: {}",
            text(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_out_writes_through_symlinks_fifos_and_devices_and_never_replaces_them() {
    // Outside test 17d, finding 10: `--out` renamed its temporary file over whatever the
    // path named: `link.csv` became a regular file (its target kept the old content), a
    // FIFO was replaced (its reader got nothing), and `--out /dev/full` as root left a
    // regular file where the device was, with exit 0.
    use std::os::unix::fs::FileTypeExt;
    let (config, s) = archivist_testkit::fresh_tree("cli-export-out").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::research(&s, &e1, "j0000000001", &[1], &[(1, 10.0, 0.9)]).await;
    let dir = std::env::temp_dir().join(format!("archivist-export-out-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let export = |path: std::path::PathBuf| {
        let config = config.clone();
        async move {
            archivist(
                &config,
                &["export", "--format", "csv", "--out", path.to_str().unwrap()],
            )
            .await
        }
    };

    // A symlink: its target gets the rows, the link stays a link.
    let target = dir.join("target.csv");
    let link = dir.join("link.csv");
    std::fs::write(&target, "original").unwrap();
    std::os::unix::fs::symlink("target.csv", &link).unwrap();
    let out = export(link.clone()).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let csv = std::fs::read_to_string(&target).unwrap();
    assert!(csv.starts_with("episode,"), "{csv}");
    assert_eq!(csv.lines().count(), 2, "{csv}");

    // A FIFO: written through, its reader gets the rows.
    let fifo = dir.join("pipe.csv");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    let reader = std::process::Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run cat");
    let out = export(fifo.clone()).await;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO was replaced: {}",
        text(&out)
    );
    assert!(out.status.success(), "{}", text(&out));
    let read = reader.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout).lines().count(), 2);

    // A directory is refused and left as it is.
    let out = export(dir.clone()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("is a directory"), "{}", text(&out));

    // Devices (made here, never the host's /dev; needs root, skipped without it): the
    // null device takes the rows, the full device fails the export, both stay devices.
    let null = dir.join("null");
    let full = dir.join("full");
    let mknod = |path: &std::path::Path, minor: &str| {
        std::process::Command::new("mknod")
            .arg(path)
            .args(["c", "1", minor])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if mknod(&null, "3") && mknod(&full, "7") {
        let out = export(null.clone()).await;
        assert!(out.status.success(), "{}", text(&out));
        let out = export(full.clone()).await;
        assert_eq!(
            out.status.code(),
            Some(1),
            "a full device fails: {}",
            text(&out)
        );
        for device in [&null, &full] {
            let kind = std::fs::symlink_metadata(device).unwrap().file_type();
            assert!(kind.is_char_device(), "{} was replaced", device.display());
        }
    } else {
        eprintln!("mknod refused (not root): the device part of this test is skipped");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_finds_corruption_and_repairs_the_safe_faults() {
    let (config, s) = archivist_testkit::fresh_tree("cli-fsck").await;
    let clean = json(&config, &["fsck"], 0).await;
    assert_eq!(clean["errors"], 0);

    let orphan = paths::queue_entry(
        JobState::Failed,
        &QueueEntry::new(0, 0, "j0000000900").name(),
    );
    fixtures::raw(&s, &orphan, b"").await;
    // The clip the job names is in the catalog (else `job_clips` warns, unrepaired).
    fixtures::clip(&s, 1, "Jingle").await;
    let twice = fixtures::job(&s, "e0000001", &["c000001"]).await;
    fixtures::raw(
        &s,
        &paths::queue_entry(JobState::Held, &twice.queue_entry().name()),
        b"",
    )
    .await;
    let found = json(&config, &["fsck"], 1).await;
    let kinds: Vec<&str> = found["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"orphan_queue_entry") && kinds.contains(&"job_in_several_queues"),
        "{kinds:?}"
    );

    let repaired = json(&config, &["fsck", "--repair"], 0).await;
    assert_eq!(repaired["repaired"], 2);
    assert!(repaired["faults"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["repaired"] == true));
    assert_eq!(
        json(&config, &["fsck"], 0).await["faults"],
        serde_json::json!([])
    );
    assert!(store::exists(&s, &orphan).await.unwrap().is_none());
    assert_eq!(queues_holding(&s, &twice.id).await, vec![JobState::Pending]);

    // Unsafe faults stay, and keep the exit code at 1 even with --repair. (A lease of a
    // job that exists: an undecodable lease of no job is deleted by the
    // `lease_without_job` repair, and is then not left: outside test 17d, finding 9.)
    s.client()
        .set_data(&paths::lease(&twice.id), b"\xff\xfe not utf-8", None)
        .await
        .unwrap();
    let left = archivist(&config, &["fsck", "--repair"]).await;
    assert_eq!(left.status.code(), Some(1), "{}", text(&left));
    let table = String::from_utf8_lossy(&left.stdout);
    assert!(
        table.contains("unparsable") && table.contains("left to an operator"),
        "{}",
        text(&left)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_errors_when_zookeeper_is_unreachable_or_the_tree_is_missing() {
    let config = archivist_testkit::config("cli-uninit");
    let out = archivist(&config, &["status"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not initialised"),
        "{}",
        text(&out)
    );

    let nowhere = ZkConfig::new("127.0.0.1:1").with_chroot("/archivist");
    let started = std::time::Instant::now();
    let out = archivist(&nowhere, &["status"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach ZooKeeper at 127.0.0.1:1"),
        "{}",
        text(&out)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_on_a_missing_chroot_create_nothing() {
    // Outside test 17d, finding 1: `status --chroot /typo/a/b` said "not initialised" and
    // left /typo, /typo/a and /typo/a/b behind (fsck, jobs, tree, export and results
    // too), though these commands promise to write nothing.
    let top = archivist_testkit::unique_chroot("cli-nochroot");
    let config = archivist_testkit::config("unused").with_chroot(format!("{top}/a/b"));
    let root = archivist_engine::Session::connect(&config.clone().with_chroot("/"))
        .await
        .unwrap();
    for args in [
        &["status"][..],
        &["fsck"],
        &["jobs", "list"],
        &["tree", "/"],
        &["export"],
        &["results", "--episode", "e0000001"],
        &["hold", "--episode", "e0000001"],
    ] {
        let out = archivist(&config, args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not initialised"),
            "{args:?}: {}",
            text(&out)
        );
        assert_eq!(
            root.client().check_stat(&top).await.unwrap(),
            None,
            "{args:?} created {top}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_commands_submit_list_refuse_and_show_in_status() {
    let (config, _s) = archivist_testkit::fresh_tree("cli-batch").await;
    let dir = std::env::temp_dir().join(format!("archivist-cli-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yml");
    std::fs::write(
        &good,
        "name: cli campaign\nclips:\n  - url: http://127.0.0.1:1/jingle.wav\n    title: Jingle\n",
    )
    .unwrap();
    let bad = dir.join("bad.yml");
    std::fs::write(&bad, "clips:\n  - url: http://127.0.0.1:1/j.wav\n").unwrap();

    let refused = archivist(&config, &["batch", "submit", bad.to_str().unwrap()]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("clips[0] (line 2)"),
        "{}",
        text(&refused)
    );

    let submitted = json(&config, &["batch", "submit", good.to_str().unwrap()], 0).await;
    assert_eq!(submitted["id"], "b0000001");
    assert_eq!(submitted["status"], "pending");
    let list = json(&config, &["batch", "list"], 0).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["name"], "cli campaign");
    // Not held: release is refused with exit 3; no report yet is an error.
    let release = archivist(&config, &["batch", "release", "b0000001"]).await;
    assert_eq!(release.status.code(), Some(3), "{}", text(&release));
    let report = archivist(&config, &["batch", "report", "b0000001", "--version", "1"]).await;
    assert_eq!(report.status.code(), Some(1), "{}", text(&report));
    json(&config, &["batch", "hold-all", "--reason", "test"], 0).await;
    let status = json(&config, &["status"], 0).await;
    assert_eq!(status["batches"]["held"], true);
    assert_eq!(status["batches"]["batches"][0]["id"], "b0000001");
    assert_eq!(status["batches"]["batches"][0]["status"], "pending");
    let show = json(&config, &["batch", "show", "b0000001"], 0).await;
    assert_eq!(show["batch"]["submission"]["clips"][0]["title"], "Jingle");
    assert_eq!(show["batches_held"], true);
    std::fs::remove_dir_all(&dir).ok();
}

/// Titles come from feeds and manifests: an ANSI escape or a newline in one must not
/// drive the terminal or draw a fake row in `status --episodes` and `results`. Tables
/// show control characters as escapes; the stored text (and JSON) keeps them as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_titles_are_shown_escaped_in_tables_and_kept_as_stored() {
    let (config, s) = archivist_testkit::fresh_tree("cli-hostile-titles").await;
    let title = "Evil\x1b[2J\x1b[31m red\nfake | row";
    let e1 = fixtures::episode(&s, 1, title).await;
    fixtures::clip(&s, 1, "Jingle\x1b]0;pwned\x07").await;
    fixtures::research(&s, &e1, "j0000000009", &[1], &[(1, 42.0, 0.95)]).await;
    for args in [
        vec!["status", "--episodes"],
        vec!["results", "--episode", e1.as_str()],
        vec!["results", "--clip", "c000001"],
    ] {
        let out = archivist(&config, &args).await;
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains(['\x1b', '\x07', '\r']),
            "{args:?}: a control character reached the terminal: {stdout:?}"
        );
        assert!(
            stdout.contains("Evil\\x1b[2J\\x1b[31m red\\nfake | row")
                || stdout.contains("Jingle\\x1b]0;pwned\\x07"),
            "{args:?}: {stdout}"
        );
        assert!(
            !stdout
                .lines()
                .any(|l| l.contains("fake | row") && !l.contains("\\n")),
            "{args:?}: a fake row: {stdout}"
        );
    }
    let rows = json(&config, &["results", "--episode", &e1], 0).await;
    assert_eq!(rows["rows"][0]["clip_title"], "Jingle\x1b]0;pwned\x07");
}

/// Issue 17, defects 5 and 7: `-o json export` writes JSON (it wrote CSV), and an
/// unreadable research record fails the export naming its episode instead of leaving
/// the episode out in silence (in the database since issue 22e: the error ends the
/// export).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_follows_the_output_format_and_names_unreadable_research() {
    let (config, s) = archivist_testkit::fresh_tree("cli-export-json").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    let e2 = fixtures::episode(&s, 2, "Two").await;
    fixtures::clip(&s, 1, "Jingle").await;
    fixtures::research(&s, &e1, "j0000000001", &[1], &[(1, 2.5, 0.9)]).await;
    let rows = json(&config, &["export"], 0).await;
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    assert_eq!(rows[0]["episode"], e1.as_str());
    assert_eq!(rows[0]["episode_title"], "One");

    fixtures::research(&s, &e2, "j0000000002", &[1], &[]).await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    archivist_db::testing::damage_research_runs(&db, &e2)
        .await
        .unwrap();
    db.close().await;
    let out = archivist(&config, &["--output", "json", "export"]).await;
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unreadable") && stderr.contains(&e2),
        "{}",
        text(&out)
    );
}

/// Issue 17, defect 7: `archivist tree / | head` must not panic when the reader goes,
/// and (issue 17's leftover) ends as a quiet success: exit 0, nothing on stderr (it was
/// killed by SIGPIPE, status 141 in a shell, a failure under `set -o pipefail`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_an_admin_command_quietly() {
    let (config, s) = archivist_testkit::fresh_tree("cli-pipe").await;
    for n in 1..=20 {
        fixtures::episode(&s, n, "An episode with a long enough title").await;
    }
    let (hosts, chroot) = config.hosts_and_chroot();
    for args in [&["tree", "/"][..], &["-o", "json", "tree", "/"][..]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
            .args(["--zk", &hosts, "--chroot", &chroot])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run archivist");
        // The reader goes away before the command writes (it connects first).
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {:?} {stderr}",
            out.status
        );
        assert!(stderr.trim().is_empty(), "{args:?}: {stderr}");
    }
}

/// Issue 17, defect 7: human logs written to a file (not a terminal) carry no colour
/// codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_that_are_not_a_terminal_have_no_colour_codes() {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
        // Nothing listens on port 9 of loopback: the planner keeps trying to connect.
        .args(["--zk", "127.0.0.1:9", "planner"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run archivist");
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    // SIGTERM: the daemon logs that it is shutting down, then exits.
    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("SIGTERM stops the daemon")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        // WARN: since outside 22 finding 8 a daemon waits for ZooKeeper to check its
        // database's deployment id before it starts, and says so.
        stderr.contains("INFO") || stderr.contains("WARN") || stderr.contains("ERROR"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a log file: {stderr:?}"
    );
}

/// Outside tester (issue 17): `release --lease-duration-s 9300000000000000` was accepted
/// (shown as 1970) and `--lease-duration-s 0` was an error only later; `researcher
/// --poll-ms 0` and `planner --work-item-ttl-ms 1 --lease-duration-ms 2` ran and spun.
/// All are refused before anything is written.
#[tokio::test]
async fn absurd_lease_durations_and_spinning_settings_are_refused() {
    let (config, _s) = archivist_testkit::fresh_tree("cli-absurd").await;
    for value in ["0", "9300000000000000", "2592001"] {
        let out = archivist(
            &config,
            &[
                "release",
                "--job",
                "j0000000001",
                "--lease-duration-s",
                value,
            ],
        )
        .await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    }
    let out = archivist(
        &config,
        &[
            "researcher",
            "--name",
            "rsz",
            "--poll-ms",
            "0",
            "--work-dir",
            "/tmp/archivist-cli-absurd",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("poll"), "{}", text(&out));
    let out = archivist(
        &config,
        &[
            "planner",
            "--name",
            "pz",
            "--work-item-ttl-ms",
            "1",
            "--lease-duration-ms",
            "2",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("1000 ms"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_read_says_not_authorized_once_and_names_the_identity() {
    let config = archivist_testkit::config("cli-noauth").with_credentials(
        archivist_engine::config::Credentials::parse("archivist:the-password"),
    );
    let session = archivist_engine::Session::connect(&config).await.unwrap();
    archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    // No --zk-auth: anonymous, which the tree's digest ACLs refuse.
    let out = archivist(&config, &["status"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        stderr.matches("not authorized").count(),
        1,
        "{}",
        text(&out)
    );
    assert!(
        stderr.contains("connected as anyone") && stderr.contains("zookeeper.auth"),
        "{}",
        text(&out)
    );
}

/// Every write a read-only identity is refused names it and says what to do, as `init`
/// did: `pause`, `resume`, `fsck --repair` and the job actions said a bare "not
/// authorized" (their errors wrap the engine's transparently, which hid the refusal
/// from the check that adds the identity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_refused_to_the_reader_names_the_identity() {
    let config = archivist_testkit::config("cli-reader-writes")
        .with_credentials(archivist_engine::config::Credentials::parse(
            "archivist:the-password",
        ))
        .with_reader(archivist_engine::config::Credentials::parse("ops:look"));
    let s = archivist_engine::Session::connect(&config).await.unwrap();
    archivist_engine::tree::init(&s, "test").await.unwrap();
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let job = fixtures::job(&s, &e1, &["c000001"]).await;
    let (hosts, chroot) = config.hosts_and_chroot();
    let as_reader = |args: &[&str]| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
            .args(["--zk", &hosts, "--chroot", &chroot])
            .args(["--session-timeout-ms", "4000"])
            .args(args)
            .env("RUST_LOG", "warn")
            .env("ARCHIVIST_ADMIN_ACTOR", "cli-test")
            .env("ARCHIVIST_ZK_AUTH", "ops:look")
            .env(
                "ARCHIVIST_DATABASE_URL",
                archivist_testkit::db::tree_database_url(&chroot),
            )
            .stdin(Stdio::null())
            .output()
    };
    // The reader reads.
    let out = as_reader(&["jobs", "show", &job.id]).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for args in [
        vec!["init"],
        vec!["pause", "pending"],
        vec!["resume", "pending"],
        vec!["fsck", "--repair"],
        vec!["hold", "--job", &job.id],
        vec!["cancel", &job.id],
        vec!["hold", "--episode", &e1],
    ] {
        let out = as_reader(&args).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert_eq!(
            stderr.matches("not authorized").count(),
            1,
            "{args:?}: {}",
            text(&out)
        );
        assert!(
            stderr.contains(r#"connected as digest user "ops""#)
                && stderr.contains("ARCHIVIST_ZK_AUTH"),
            "{args:?}: {}",
            text(&out)
        );
    }
    assert_eq!(read(&s, &job.id).await.0.status, JobState::Pending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_timeout_below_the_minimum_warns_with_the_rule() {
    let (config, _s) = archivist_testkit::fresh_tree("cli-short-timeout").await;
    let (hosts, chroot) = config.hosts_and_chroot();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
        .args([
            "--zk",
            &hosts,
            "--chroot",
            &chroot,
            "--session-timeout-ms",
            "1000",
        ])
        .arg("status")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run archivist");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("below 4000 ms") && stderr.contains("operations.md"),
        "{}",
        text(&out)
    );
}

/// The peak resident memory of a running process so far (`VmHWM`), if still readable.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `export` streams: 1,000 research records of 300 clips each (330,000 rows) export in
/// every format in bounded memory, and a failed file export leaves no file behind. The
/// old export built every row in memory first (about 1.15 GB per 1,000 episodes of 2,000
/// clips; killed by the kernel at 100k episodes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_streams_a_large_archive_in_bounded_memory() {
    use archivist_engine::schema::records::{Occurrence, ResearchRecord, ResearchRun};
    let (config, s) = archivist_testkit::fresh_tree("cli-export-big").await;
    let db = archivist_testkit::db::tree_database(s.chroot()).await;
    let episodes = 1_000u64;
    let clips = 300u32;
    let found_per_episode = 15u32;
    for n in 1..=episodes {
        let episode = paths::episode_id(n);
        let found = (0..found_per_episode)
            .map(|k| {
                let clip = paths::clip_id(1 + (k * 17 + n as u32) % clips);
                let occurrences = vec![
                    Occurrence {
                        at: 12.5 + f64::from(k),
                        conf: 0.91,
                        speed: None,
                        part: None,
                    },
                    Occurrence {
                        at: 1800.25,
                        conf: 0.72,
                        speed: Some(1.02),
                        part: None,
                    },
                ];
                (clip, occurrences)
            })
            .collect();
        let record = ResearchRecord {
            schema: archivist_engine::schema::SCHEMA_VERSION,
            episode: episode.clone(),
            episode_duration_s: Some(3600.0),
            runs: vec![ResearchRun {
                job: format!("j{n:010}"),
                researcher: "researcher-1".into(),
                at: time::OffsetDateTime::now_utc(),
                clips: (1..=clips).collect(),
            }],
            found,
            errors: Default::default(),
            error_stamps: Default::default(),
        };
        // In the database, where the recorder stores research and export reads it.
        archivist_db::research::update(&db, &episode, |r| *r = record.clone())
            .await
            .unwrap();
    }
    db.close().await;
    let distinct_found = found_per_episode; // the 15 clips of an episode are distinct
    let rows = episodes * u64::from(clips - distinct_found + 2 * distinct_found);
    let (hosts, chroot) = config.hosts_and_chroot();
    for (format, lines) in [("csv", rows + 1), ("jsonl", rows), ("json", rows + 2)] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
            .args([
                "--zk", &hosts, "--chroot", &chroot, "export", "--format", format,
            ])
            .env("RUST_LOG", "warn")
            .env(
                "ARCHIVIST_DATABASE_URL",
                archivist_testkit::db::tree_database_url(&chroot),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run archivist export");
        let pid = child.id();
        let mut stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            let mut count = 0u64;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match std::io::Read::read(&mut stdout, &mut buf) {
                    Ok(0) | Err(_) => break count,
                    Ok(n) => count += buf[..n].iter().filter(|b| **b == b'\n').count() as u64,
                }
            }
        });
        let mut peak = 0;
        while child.try_wait().expect("wait").is_none() {
            peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let counted = reader.join().expect("reader");
        let out = child.wait_with_output().expect("export output");
        assert!(out.status.success(), "{format}: {}", text(&out));
        assert_eq!(counted, lines, "{format}: lines of {rows} rows");
        println!(
            "export --format {format}: {rows} rows, peak RSS {} MiB",
            peak / 1024
        );
        assert!(
            peak > 0 && peak < 80 * 1024,
            "{format}: export of {rows} rows peaked at {} MiB (bounded memory expected)",
            peak / 1024
        );
    }
    // To a file: written whole or not at all.
    let dir = std::env::temp_dir().join(chroot.trim_start_matches('/').replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("all.jsonl");
    let out = archivist(
        &config,
        &[
            "export",
            "--format",
            "jsonl",
            "--out",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.lines().count() as u64, rows);
    let first: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
    assert_eq!(first["episode"], "e0000001", "{first}");
    assert!(!dir.join("all.jsonl.partial").exists());
    // 69 MB: a test leaves no file behind (every run used to add one to the temp dir).
    std::fs::remove_dir_all(&dir).ok();
}

/// Outside try of #17, finding F4: ids were not checked, so `delete --yes --force
/// j0000000001/lock2` deleted a node under a job, and `../x` or `""` ended in raw
/// ZooKeeper errors. An id is one name: anything else is a usage error (exit 2) and
/// nothing is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_are_paths_are_usage_errors_and_touch_nothing() {
    let (config, s) = archivist_testkit::fresh_tree("cli-ids").await;
    let job = fixtures::failed_job(&s, "e0000001", "x").await.id;
    let lock_like = format!("{}/lock2", paths::job(&job));
    s.client()
        .create(
            &lock_like,
            b"",
            &s.create_options(archivist_engine::zk::CreateMode::Persistent),
        )
        .await
        .unwrap();
    let inside = format!("{job}/lock2");
    for args in [
        vec!["delete", "--yes", "--force", inside.as_str()],
        vec!["cancel", "../x"],
        vec!["retry", ""],
        vec!["jobs", "show", "."],
        vec!["hold", "--episode", "e0000001/x"],
        vec!["release", "--job", "a\nb"],
    ] {
        let out = archivist(&config, &args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("id"),
            "{args:?}: {}",
            text(&out)
        );
    }
    assert!(
        store::exists(&s, &lock_like).await.unwrap().is_some(),
        "the node under the job is still there"
    );
}

/// Outside 17h F3: `status` printed every stray entry's name on one line (1,283 names,
/// ~60 KB). It now shows five and how many more; `-o json` keeps them all. Outside 17h
/// F8: a lease whose job does not exist is named on a line of its own, not counted
/// active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_few_stray_names_and_a_count_and_names_a_lease_without_a_job() {
    let (config, s) = archivist_testkit::fresh_tree("cli-status-strays").await;
    let e1 = fixtures::episode(&s, 1, "One").await;
    fixtures::clip(&s, 1, "Jingle").await;
    let gone = fixtures::job(&s, &e1, &["c000001"]).await;
    s.client()
        .delete(&paths::job(&gone.id), None)
        .await
        .unwrap();
    let leased = paths::queue(JobState::Leased);
    for i in 0..40u64 {
        let name = QueueEntry::new(0, 1_700_000_000_000, paths::job_id(900_000 + i)).name();
        fixtures::raw(&s, &format!("{leased}/{name}"), b"").await;
    }
    archivist_engine::clock::zk_now_ms(&s).await.unwrap();
    let table = archivist(&config, &["status"]).await;
    assert!(table.status.success(), "{}", text(&table));
    let out = String::from_utf8_lossy(&table.stdout).to_string();
    let line = out
        .lines()
        .find(|l| l.contains("stray entries in /queues/leased"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.len() < 600, "{line}");
    assert!(
        line.contains("40 stray entries") && line.contains("and 35 more"),
        "{line}"
    );
    assert!(
        out.contains(&format!(
            "1 lease(s) whose job does not exist ({})",
            gone.id
        )),
        "{out}"
    );
    let report = json(&config, &["status"], 0).await;
    assert_eq!(
        report["queue_strays"]["leased"].as_array().map(Vec::len),
        Some(40)
    );
    assert_eq!(report["leases"]["without_job"][0], gone.id.as_str());
}
