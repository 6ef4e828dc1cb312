//! Benchmark: curate 10,000 episodes (and 2,000 clips) into a fresh database (and a
//! fresh chroot of a real ZooKeeper, for the wake-up signal) and print the times, then
//! re-curate the same items (all refreshes).
//!
//! ```text
//! CARGO_TARGET_DIR=.local/target-catalog cargo run --release -p archivist-catalog --example curate_bench
//! ARCHIVIST_TEST_ZK=host:port  ... (default 127.0.0.1:2181)
//! BENCH_DATABASE=postgres://...  (default: a new SQLite file in the temporary directory)
//! BENCH_EPISODES=10000 BENCH_CLIPS=2000 BENCH_CHUNK=1000
//! ```
//!
//! The chroot and the SQLite file are deleted at the end.

use std::time::{Duration, Instant};

use archivist_catalog::{curate, CatalogItem, CurateSettings, Kind};
use archivist_db::{catalog, Database};
use archivist_engine::{store, Session, ZkConfig};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn delete_tree(session: &Session, path: &str) {
    let children = store::children(session, path).await.unwrap_or_default();
    for group in children.chunks(2000) {
        let sent: Vec<_> = group
            .iter()
            .map(|c| session.client().delete(&format!("{path}/{c}"), None))
            .collect();
        let results = archivist_engine::ops::await_all(sent).await;
        for (child, result) in group.iter().zip(results) {
            if result.is_err() {
                Box::pin(delete_tree(session, &format!("{path}/{child}"))).await;
                let _ = session
                    .client()
                    .delete(&format!("{path}/{child}"), None)
                    .await;
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let episodes = env_usize("BENCH_EPISODES", 10_000);
    let clips = env_usize("BENCH_CLIPS", 2_000);
    let settings = CurateSettings::default()
        .with_curator("bench")
        .with_chunk_records(env_usize("BENCH_CHUNK", 1_000))
        .with_progress(true);
    let file = std::env::temp_dir().join(format!("curate-bench-{}.db", std::process::id()));
    let url =
        std::env::var("BENCH_DATABASE").unwrap_or_else(|_| format!("sqlite://{}", file.display()));
    let db = Database::connect(&url).await?;
    let connect = std::env::var("ARCHIVIST_TEST_ZK").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let chroot = format!("/bench/curate-{}", std::process::id());
    let config = ZkConfig::new(connect)
        .with_chroot(&chroot)
        .with_session_timeout(Duration::from_secs(10));
    let session = Session::connect(&config).await?;
    archivist_engine::tree::init(&session, "curate_bench").await?;

    let mut items: Vec<CatalogItem> = Vec::with_capacity(episodes + clips);
    for i in 0..episodes {
        items.push(
            CatalogItem::new(
                Kind::Episode,
                &format!("https://cdn.example/show/{i:05}.mp3"),
                &format!("Episode {i}: a title of a typical length for a podcast"),
                format!("episode {i}"),
            )?
            .with_description(Some(&"Show notes. ".repeat(30)))
            .with_media_type(Some("audio/mpeg".into()))
            .with_air_date(Some("2024-01-02".into()))
            .with_priority(Some((i % 5) as i64)),
        );
    }
    for i in 0..clips {
        items.push(CatalogItem::new(
            Kind::Clip,
            &format!("https://clips.example/{i:04}.wav"),
            &format!("Clip {i}"),
            format!("clip {i}"),
        )?);
    }

    let started = Instant::now();
    let report = curate(&session, &db, items.clone(), &settings).await?;
    let create = started.elapsed();
    assert_eq!(report.created(), episodes + clips, "every record created");
    let started = Instant::now();
    let again = curate(&session, &db, items, &settings).await?;
    let refresh = started.elapsed();
    assert_eq!(again.refreshed(), episodes + clips, "re-run only refreshes");
    let counts = catalog::counts(&db).await?;

    println!(
        "curate_bench ({}): {episodes} episodes + {clips} clips created in {:.2} s ({:.0} records/s, {} round(s)); re-curated (no-op) in {:.2} s ({:.0} records/s); {} episodes, {} clips, {} aliases stored",
        db.backend().name(),
        create.as_secs_f64(),
        (episodes + clips) as f64 / create.as_secs_f64(),
        report.attempts,
        refresh.as_secs_f64(),
        (episodes + clips) as f64 / refresh.as_secs_f64(),
        counts.episodes,
        counts.clips,
        counts.aliases,
    );
    db.close().await;
    if std::env::var("BENCH_DATABASE").is_err() {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }

    drop(session);
    let root = Session::connect(&config.clone().with_chroot("/")).await?;
    delete_tree(&root, &chroot).await;
    let _ = root.client().delete(&chroot, None).await;
    Ok(())
}
