//! `results --clip` and `status --episodes` answer in bounded memory (outside 22 finding
//! 9): their rows are spooled to a temporary file and printed one at a time. Measured
//! before at 50k episodes: `results --clip` 229 MB (table) / 119 MB (JSON), `status
//! --episodes` 157 MB / 81 MB, growing with the archive; here 30k episodes, on the
//! backend `ARCHIVIST_TEST_DB_BACKEND` names.

use std::process::Stdio;

use archivist_db::catalog::CatalogRecord;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{
    ClipRecord, EpisodeRecord, Occurrence, ResearchRecord, ResearchRun,
};

/// The peak resident memory of a running process so far (`VmHWM`), if still readable.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs the binary, counting its stdout's lines and keeping the JSON when asked;
/// returns (lines, peak RSS in MiB, stdout if kept).
fn run(hosts: &str, chroot: &str, url: &str, args: &[&str], keep: bool) -> (u64, u64, Vec<u8>) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
        .args(["--zk", hosts, "--chroot", chroot])
        .args(args)
        .env("RUST_LOG", "warn")
        .env("ARCHIVIST_DATABASE_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run archivist");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let (mut count, mut kept) = (0u64, Vec::new());
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match std::io::Read::read(&mut stdout, &mut buf) {
                Ok(0) | Err(_) => break (count, kept),
                Ok(n) => {
                    count += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                    if keep {
                        kept.extend_from_slice(&buf[..n]);
                    }
                }
            }
        }
    });
    let mut peak = 0;
    while child.try_wait().expect("wait").is_none() {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (lines, kept) = reader.join().expect("reader");
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (lines, peak / 1024, kept)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_by_clip_and_status_by_episode_answer_in_bounded_memory() {
    let (config, s) = archivist_testkit::fresh_tree("large-answers").await;
    // The backend `ARCHIVIST_TEST_DB_BACKEND` names (SQLite, or PostgreSQL).
    let url = archivist_testkit::db::fresh_binary_database_url("large-answers");
    let db = archivist_db::Database::connect(&url).await.unwrap();
    drop(s);
    let episodes = 30_000u64;
    let now = time::OffsetDateTime::now_utc();
    let clips: Vec<CatalogRecord> = (1..=2)
        .map(|n| {
            CatalogRecord::Clip(ClipRecord {
                schema: archivist_engine::schema::SCHEMA_VERSION,
                id: paths::clip_id(n),
                fields: archivist_testkit::catalog::fields(
                    &format!("Clip {n}"),
                    "http://127.0.0.1:1/c.wav",
                    now,
                ),
            })
        })
        .collect();
    archivist_db::catalog::put(&db, &clips).await.unwrap();
    let ids: Vec<u64> = (1..=episodes).collect();
    for chunk in ids.chunks(1_000) {
        let records: Vec<CatalogRecord> = chunk
            .iter()
            .map(|n| {
                CatalogRecord::Episode(EpisodeRecord {
                    schema: archivist_engine::schema::SCHEMA_VERSION,
                    id: paths::episode_id(*n),
                    air_date: None,
                    fields: archivist_testkit::catalog::fields(
                        &format!("Episode {n} of a podcast with a longish title"),
                        "http://127.0.0.1:1/e.mp3",
                        now,
                    ),
                })
            })
            .collect();
        archivist_db::catalog::put(&db, &records).await.unwrap();
        let research: Vec<ResearchRecord> = chunk
            .iter()
            .map(|n| {
                let mut record = ResearchRecord::new(&paths::episode_id(*n));
                record.episode_duration_s = Some(3600.0);
                record.runs.push(ResearchRun {
                    job: format!("j{n:010}"),
                    researcher: "r1".into(),
                    at: now,
                    clips: [1, 2].into_iter().collect(),
                });
                record.found.insert(
                    paths::clip_id(1),
                    vec![
                        Occurrence {
                            at: 12.5,
                            conf: 0.91,
                            speed: None,
                            part: None,
                        },
                        Occurrence {
                            at: 733.25,
                            conf: 0.88,
                            speed: None,
                            part: None,
                        },
                    ],
                );
                record
            })
            .collect();
        archivist_db::migrate::insert_research(&db, &research)
            .await
            .unwrap();
    }
    db.close().await;
    let (hosts, chroot) = config.hosts_and_chroot();

    let (_, peak, json) = run(
        &hosts,
        &chroot,
        &url,
        &["-o", "json", "results", "--clip", "c000001"],
        true,
    );
    let by_clip: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
    assert_eq!(by_clip["episodes_found"], episodes, "{}", by_clip["title"]);
    assert_eq!(
        by_clip["rows"].as_array().map(Vec::len),
        Some(2 * episodes as usize)
    );
    println!("results --clip -o json: {peak} MiB");
    assert!(peak < 50, "results --clip -o json peaked at {peak} MiB");
    drop(by_clip);
    let (lines, peak, _) = run(
        &hosts,
        &chroot,
        &url,
        &["results", "--clip", "c000001"],
        false,
    );
    // The heading, the header and a line per occurrence.
    assert_eq!(lines, 2 + 2 * episodes);
    println!("results --clip: {peak} MiB");
    assert!(peak < 50, "results --clip peaked at {peak} MiB");

    let (_, peak, json) = run(
        &hosts,
        &chroot,
        &url,
        &["-o", "json", "status", "--episodes"],
        true,
    );
    let status: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
    let per = status["research"]["per_episode"]
        .as_array()
        .expect("per_episode");
    assert_eq!(per.len(), episodes as usize);
    assert_eq!(per[0]["found"], 1, "{}", per[0]);
    assert_eq!(status["research"]["researched_pairs"], 2 * episodes);
    println!("status --episodes -o json: {peak} MiB");
    assert!(peak < 60, "status --episodes -o json peaked at {peak} MiB");
    let (lines, peak, _) = run(&hosts, &chroot, &url, &["status", "--episodes"], false);
    assert!(lines > episodes, "{lines} lines");
    println!("status --episodes: {peak} MiB");
    assert!(peak < 60, "status --episodes peaked at {peak} MiB");
}
