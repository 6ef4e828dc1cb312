//! The full pipeline, smaller than the quickstart: generated episodes with known clips,
//! served over HTTP on loopback, curated, researched by every daemon in one process, and
//! checked: every expected occurrence found at the right offset, nothing else recorded.

mod support;

use std::time::Duration;

use support::{fast_config, scratch, serve_files, Env};

#[test]
fn every_expected_occurrence_is_recorded_at_the_right_offset_and_nothing_else() {
    let env = Env::fresh("pipeline");
    let dir = scratch("pipeline");
    let media = dir.join("media");
    std::fs::create_dir_all(&media).unwrap();
    let (_files, base) = serve_files(&env, &media, &[]);
    env.ok(&[
        "sample",
        "generate",
        media.to_str().unwrap(),
        "--base-url",
        &base,
        "--episodes",
        "2",
        "--minutes",
        "1.5",
    ]);
    env.ok(&["init"]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    let config = fast_config(&dir);
    let daemons = env.spawn(
        &["--config", config.to_str().unwrap(), "run", "--all"],
        &dir.join("daemons.log"),
    );
    let out = env.run(&[
        "sample",
        "check",
        media.to_str().unwrap(),
        "--wait-s",
        "300",
        "--output",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop on SIGTERM"
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "sample check printed no JSON ({e}); stderr: {stderr}; daemon log: {}",
            dir.join("daemons.log").display()
        )
    });
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
