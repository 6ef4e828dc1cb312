//! The deployment topology as plain processes on loopback (`scripts/topology.sh`): a
//! 3-node ensemble, planner, recorder with reaper, two researchers and a curator. Every
//! daemon must become ready, and its `/metrics` must parse as Prometheus text.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

const METRICS_BASE: u16 = 19560;

fn topology(args: &[&str], local: &std::path::Path) -> std::process::Output {
    Command::new("bash")
        .arg(archivist_testkit::repo_root().join("scripts/topology.sh"))
        .args(args)
        .env("ARCHIVIST_BIN", support::bin())
        .env("ARCHIVIST_LOCAL", local)
        .env("TOPOLOGY_METRICS_BASE", METRICS_BASE.to_string())
        .env("ZK_ENSEMBLE_BASE", "25180")
        .env(
            "ARCHIVIST_CHROOT",
            archivist_testkit::unique_chroot("topology"),
        )
        .output()
        .expect("run scripts/topology.sh")
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// Parses Prometheus text exposition: every sample line is `name{labels} value`.
fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = series.split('{').next().unwrap_or_default().to_string();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        samples.push((name, value));
    }
    samples
}

#[test]
fn every_daemon_of_the_loopback_topology_becomes_ready_and_serves_metrics() {
    let local = support::scratch("topology");
    let started = topology(&["start"], &local);
    assert!(
        started.status.success(),
        "topology start failed: {}{}",
        String::from_utf8_lossy(&started.stdout),
        String::from_utf8_lossy(&started.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = topology(&["status"], &local);
    while !status.status.success() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        status = topology(&["status"], &local);
    }
    let report = String::from_utf8_lossy(&status.stdout).into_owned();
    let mut scraped = Vec::new();
    // Ports: feed-server is slot 0; the five daemons are slots 1..=5.
    for slot in 1..=5u16 {
        let port = METRICS_BASE + slot;
        let health = get(port, "/healthz");
        let metrics = get(port, "/metrics");
        scraped.push((port, health, metrics));
    }
    let stopped = topology(&["stop"], &local);
    assert!(
        status.status.success(),
        "not every daemon became ready:\n{report}"
    );
    assert!(stopped.status.success(), "topology stop failed");
    for (port, health, metrics) in scraped {
        assert_eq!(health.map(|h| h.0), Some(200), "healthz on {port}");
        let (code, body) = metrics.unwrap_or_else(|| panic!("no /metrics on {port}"));
        assert_eq!(code, 200);
        let samples = parse_metrics(&body);
        assert!(
            samples
                .iter()
                .any(|(n, v)| n == "archivist_zk_session_connected" && *v == 1.0),
            "port {port}: no connected-session gauge in {} samples:\n{body}",
            samples.len()
        );
    }
}
