//! The full pipeline, smaller than the quickstart: generated episodes with known clips,
//! served over HTTP on loopback, curated, researched by every daemon in one process, and
//! checked: every expected occurrence found at the right offset, nothing else recorded.
//! The same run checks what operators watch: catalog progress in `/metrics` reaches 1,
//! and every JSON log line about a job names its job, episode and state.

mod support;

use std::time::Duration;

use support::{
    fast_config, free_port, generate_sample, http_get, parse_metrics, sample_check, served_media,
    Env,
};

/// Samples of the daemons' `/metrics` (series with labels, value), if it answers.
fn scrape(port: u16) -> Vec<(String, f64)> {
    http_get(port, "/metrics")
        .map(|(_, body)| parse_metrics(&body))
        .unwrap_or_default()
}

fn value(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
}

/// Every JSON log line that names a job (in its own fields or an enclosing span) must
/// also name the episode and the state. Returns how many job lines there were.
fn check_job_log_lines(log: &str) -> usize {
    let mut job_lines = 0;
    let mut missing = Vec::new();
    for line in log.lines().filter(|l| l.starts_with('{')) {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        let mut scopes = vec![&event["fields"]];
        if let Some(spans) = event["spans"].as_array() {
            scopes.extend(spans.iter());
        }
        let has = |key: &str| scopes.iter().any(|s| !s[key].is_null());
        if has("job") {
            job_lines += 1;
            if !has("episode") || !has("state") {
                missing.push(line.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} job log lines lack episode or state, e.g.:\n{}",
        missing.len(),
        missing
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    job_lines
}

#[test]
fn every_expected_occurrence_is_recorded_at_the_right_offset_and_nothing_else() {
    let env = Env::fresh("pipeline");
    let (dir, media, _files, base) = served_media(&env, "pipeline");
    generate_sample(&env, &media, &base, 2, "1.5", &[]);
    env.ok(&["init"]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    let config = fast_config(&dir);
    let port = free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let daemons = env.spawn(
        &[
            "--config",
            config.to_str().unwrap(),
            "--log-format",
            "json",
            "--metrics-addr",
            &metrics_addr,
            "run",
            "--all",
        ],
        &dir.join("daemons.log"),
    );
    let (rows, out) = sample_check(&env, &media, &dir.join("daemons.log"));
    // Catalog progress as the leading planner reports it after its last round.
    let (samples, done) = archivist_testkit::poll_until(
        Duration::from_secs(30),
        Duration::from_millis(300),
        || scrape(port),
        |samples| value(samples, "archivist_catalog_progress") == Some(1.0),
    );
    let progress = done.then_some(samples);
    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop on SIGTERM"
    );
    let samples = progress.unwrap_or_else(|| {
        panic!(
            "catalog progress never reached 1 in /metrics: {:?}",
            scrape(port)
        )
    });
    assert_eq!(value(&samples, "archivist_catalog_pairs_total"), Some(8.0));
    assert_eq!(
        value(&samples, "archivist_catalog_pairs{state=\"researched\"}"),
        Some(8.0)
    );
    for series in [
        "archivist_researcher_job_progress{slot=",
        "archivist_researcher_realtime_factor",
        "archivist_researcher_download_bytes_total",
        "archivist_job_transitions_total{",
        "archivist_zk_session_connected{",
        "archivist_planner_pick_seconds",
    ] {
        assert!(
            samples.iter().any(|(s, _)| s.starts_with(series)),
            "no {series} in /metrics"
        );
    }
    let log = std::fs::read_to_string(dir.join("daemons.log")).expect("daemon log");
    let job_lines = check_job_log_lines(&log);
    assert!(job_lines >= 16, "only {job_lines} job log lines");
    assert_eq!(rows.len(), 2 * 4, "one row per (episode, clip)");
    let wrong: Vec<_> = rows.iter().filter(|r| r["verdict"] != "ok").collect();
    assert!(wrong.is_empty(), "pairs not as expected: {wrong:#?}");
    assert!(out.status.success());
    let expected: usize = rows
        .iter()
        .map(|r| r["expected"].as_array().map(|a| a.len()).unwrap_or(0))
        .sum();
    assert!(expected >= 6, "the sample places clips ({expected})");
}

/// The `/election/planner` candidate nodes whose member record names `name`.
async fn candidate_nodes_of(env: &Env, name: &str) -> Vec<String> {
    let config = archivist_engine::ZkConfig::new(env.zk.clone()).with_chroot(env.chroot.clone());
    let session = archivist_engine::Session::connect(&config).await.unwrap();
    let dir = archivist_engine::schema::paths::election("planner");
    let mut out = Vec::new();
    for child in session.client().list_children(&dir).await.unwrap() {
        let path = format!("{dir}/{child}");
        let (data, _) = session.client().get_data(&path).await.unwrap();
        if String::from_utf8_lossy(&data).contains(&format!("name: {name}")) {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_planner_that_loses_the_lead_stops_exporting_catalog_progress() {
    // Outside test 17c, defect 3: the old leader kept its last `archivist_catalog_*`
    // values, so two planners both claimed current catalog progress.
    let env = Env::fresh("leading-gauges");
    env.ok(&["init"]);
    let dir = support::scratch("leading-gauges");
    let config = fast_config(&dir);
    let (p1_port, p2_port) = (free_port(), free_port());
    let planner = |name: &str, port: u16| {
        env.spawn(
            &[
                "--config",
                config.to_str().unwrap(),
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
                "planner",
                "--name",
                name,
            ],
            &dir.join(format!("{name}.log")),
        )
    };
    let leading = |port: u16| {
        let samples = scrape(port);
        (
            value(&samples, "archivist_planner_leading"),
            value(&samples, "archivist_catalog_progress"),
        )
    };
    let until = |what: &str, check: &dyn Fn() -> bool| {
        let (_, done) = archivist_testkit::poll_until(
            Duration::from_secs(20),
            Duration::from_millis(200),
            check,
            |ok| *ok,
        );
        assert!(done, "timed out: {what}");
    };
    let p1 = planner("p1", p1_port);
    // An empty catalog is all researched: progress 1.
    until("p1 leads and reports progress", &|| {
        leading(p1_port) == (Some(1.0), Some(1.0))
    });
    let p2 = planner("p2", p2_port);
    until("p2 is a candidate", &|| {
        std::fs::read_to_string(dir.join("p2.log")).is_ok_and(|l| l.contains("session established"))
    });
    std::thread::sleep(Duration::from_millis(500));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config =
            archivist_engine::ZkConfig::new(env.zk.clone()).with_chroot(env.chroot.clone());
        let session = archivist_engine::Session::connect(&config).await.unwrap();
        let nodes = candidate_nodes_of(&env, "p1").await;
        assert_eq!(nodes.len(), 1, "p1's candidate node: {nodes:?}");
        session.client().delete(&nodes[0], None).await.unwrap();
    });
    until("p2 leads", &|| leading(p2_port) == (Some(1.0), Some(1.0)));
    until("p1 no longer exports progress", &|| {
        leading(p1_port) == (Some(0.0), Some(0.0))
    });
    assert!(p1.stop(Duration::from_secs(20)), "p1 did not stop");
    assert!(p2.stop(Duration::from_secs(20)), "p2 did not stop");
}

#[test]
fn sigterm_closes_the_session_so_a_daemons_ephemeral_nodes_go_at_once() {
    // Outside test 17d, finding 2: a daemon stopped by SIGTERM exited 0 without closing
    // its ZooKeeper session, so its registration stayed a whole session timeout: a
    // restart under the same --name waited, and the planner counted a stopped
    // researcher's slots. The session timeout here is 20 s; the nodes must go within 2.
    let mut env = Env::fresh("sigterm-session");
    env.extra.push((
        "ARCHIVIST_SESSION_TIMEOUT_MS".to_string(),
        Some("20000".to_string()),
    ));
    env.ok(&["init"]);
    let dir = support::scratch("sigterm-session");
    let config = fast_config(&dir);
    let spawn = |role: &str, name: &str| {
        env.spawn(
            &[
                "--config",
                config.to_str().unwrap(),
                "--metrics-addr",
                &format!("127.0.0.1:{}", free_port()),
                role,
                "--name",
                name,
            ],
            &dir.join(format!("{name}.log")),
        )
    };
    let daemons = [
        (spawn("researcher", "r-term"), "/researchers/r-term"),
        (spawn("planner", "p-term"), "/daemons/p-term"),
        (spawn("reaper", "rp-term"), "/daemons/rp-term"),
        (spawn("recorder", "rc-term"), "/daemons/rc-term"),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let zk = archivist_engine::ZkConfig::new(env.zk.clone()).with_chroot(env.chroot.clone());
    let session = runtime
        .block_on(archivist_engine::Session::connect(&zk))
        .unwrap();
    let exists = |path: &str| {
        runtime
            .block_on(session.client().check_stat(path))
            .unwrap()
            .is_some()
    };
    for (_, path) in &daemons {
        let (_, registered) = archivist_testkit::poll_until(
            Duration::from_secs(30),
            Duration::from_millis(200),
            || exists(path),
            |found| *found,
        );
        assert!(registered, "{path} never registered");
    }
    for (daemon, path) in daemons {
        assert!(
            daemon.stop(Duration::from_secs(20)),
            "{path}: no exit on SIGTERM"
        );
        let stopped = std::time::Instant::now();
        let (_, gone) = archivist_testkit::poll_until(
            Duration::from_secs(2),
            Duration::from_millis(100),
            || exists(path),
            |found| !*found,
        );
        assert!(
            gone,
            "{path} still there {:?} after a clean exit",
            stopped.elapsed()
        );
    }
}
