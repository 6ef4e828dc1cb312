//! Prepares a small demo tree for the runbook (`docs/operations.md`): a catalog, jobs
//! in several states, leases, a researcher, a report and research records.
//!
//! `cargo run -p archivist-admin --example demo_tree -- 127.0.0.1:2191 /archivist`

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use archivist_engine::member::{self, Identity};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{Occurrence, ReportRecord};
use archivist_engine::schema::{JobState, SCHEMA_VERSION};
use archivist_engine::{store, Session, ZkConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let connect = args.next().unwrap_or_else(|| "127.0.0.1:2191".into());
    let chroot = args.next().unwrap_or_else(|| "/archivist".into());
    let hold_s: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let config = ZkConfig::new(connect).with_chroot(chroot);
    let s = Session::connect(&config).await?;
    archivist_engine::tree::init(&s, "demo").await?;
    for (n, title) in [
        (1, "Morning Show 2026-11-02"),
        (2, "Morning Show 2026-11-03"),
        (3, "Late Edition 2026-11-03"),
    ] {
        fixtures::episode(&s, n, title).await;
    }
    for (n, title) in [
        (1, "Station jingle"),
        (2, "Sponsor read: Acme"),
        (3, "Theme sting"),
    ] {
        fixtures::clip(&s, n, title).await;
    }
    let clips = ["c000001", "c000002", "c000003"];
    let recorded = fixtures::recorded_job(&s, "e0000001", &clips).await;
    store::delete_if_present(&s, &paths::lease(&recorded.id)).await?;
    fixtures::research(
        &s,
        "e0000001",
        &recorded.id,
        &[1, 2, 3],
        &[(1, 12.48, 0.97), (1, 1834.2, 0.93), (3, 0.0, 0.99)],
    )
    .await;

    let working = fixtures::job(&s, "e0000002", &clips).await;
    fixtures::drive(
        &s,
        &working.id,
        &[JobState::Leased, JobState::Researching],
        "",
    )
    .await;
    let researcher = Session::connect(&config).await?;
    let _membership = member::register(
        &researcher,
        &Identity::named("researcher", "r1"),
        2,
        None,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await?;
    let lock = archivist_engine::lock::JobLock::try_acquire(&researcher, &working.id, "r1").await?;
    let report = ReportRecord {
        schema: SCHEMA_VERSION,
        job: working.id.clone(),
        episode: "e0000002".into(),
        clip: "c000001".into(),
        researcher: "r1".into(),
        occurrences: vec![Occurrence {
            at: 7.25,
            conf: 0.95,
            speed: None,
            part: None,
        }],
        error: None,
        clip_stamp: None,
        episode_duration_s: 3540.0,
        clip_duration_s: 4.0,
        researched_at: time::OffsetDateTime::now_utc(),
        is_final: false,
    };
    store::create_if_absent(
        &s,
        &paths::report(&paths::report_name(&working.id, "c000001")),
        &report,
    )
    .await?;

    let failed = fixtures::job(&s, "e0000003", &clips).await;
    fixtures::drive(
        &s,
        &failed.id,
        &[JobState::Leased, JobState::Failed],
        "download failed: HTTP 404 Not Found",
    )
    .await;
    let _pending = fixtures::job(&s, "e0000003", &["c000003"]).await;
    println!(
        "demo tree ready: recorded {}, researching {} (locked by r1), failed {}",
        recorded.id, working.id, failed.id
    );
    if hold_s > 0 {
        // Keep the researcher's session (its registration and lock) alive a while.
        tokio::time::sleep(std::time::Duration::from_secs(hold_s)).await;
    }
    drop(lock);
    Ok(())
}
