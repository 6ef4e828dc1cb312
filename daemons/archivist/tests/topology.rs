//! The deployment topology as plain processes on loopback (`scripts/topology.sh`): a
//! 3-node ensemble, planner, recorder with reaper, two researchers and a curator. Every
//! daemon must become ready, and its `/metrics` must parse as Prometheus text.

mod support;

use support::{http_get as get, parse_metrics};

use std::process::Command;
use std::time::Duration;

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
    let (status, _) = archivist_testkit::poll_until(
        Duration::from_secs(60),
        Duration::from_millis(500),
        || topology(&["status"], &local),
        |status| status.status.success(),
    );
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
                .any(|(n, v)| n.starts_with("archivist_zk_session_connected{") && *v == 1.0),
            "port {port}: no connected-session gauge in {} samples:\n{body}",
            samples.len()
        );
    }
}
