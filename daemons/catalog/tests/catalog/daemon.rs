use std::time::Duration;

use archivist_catalog::{CurateSettings, CuratorSettings, FetchSettings};
use archivist_engine::member::Identity;
use archivist_engine::schema::paths;
use archivist_engine::store;
use archivist_testkit::eventually;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_registers_polls_and_stops_on_shutdown() {
    for (config, session, db) in stores("catalog-daemon").await {
        let server = Server::start().await;
        let url = server.url("/m/1.mp3");
        server.route(
            "/feed.xml",
            "application/rss+xml",
            &rss(&[("g-1", "First", &url, "audio/mpeg")]),
            Some("\"v1\""),
        );
        let settings = CuratorSettings::default()
            .with_feeds(vec![server.url("/feed.xml")])
            .with_interval(Duration::from_millis(150))
            .with_curate(CurateSettings::default().with_curator("curator-it"))
            .with_fetch(FetchSettings::default().with_timeout(Duration::from_secs(3)));
        let shutdown = CancellationToken::new();
        let identity = Identity::named("curator", "curator-it");
        let daemon = tokio::spawn({
            let config = config.clone();
            let shutdown = shutdown.clone();
            let db = db.clone();
            async move { archivist_catalog::run(&config, &db, settings, identity, shutdown).await }
        });
        assert!(
            eventually(Duration::from_secs(10), || async {
                id_by_url(&db, &url).await.is_some()
            })
            .await,
            "the feed's episode appears"
        );
        assert!(store::exists(&session, &paths::daemon("curator-it"))
            .await
            .unwrap()
            .is_some());
        assert!(
            eventually(Duration::from_secs(5), || async {
                server.seen("/feed.xml").len() >= 3
            })
            .await,
            "it keeps polling"
        );
        assert!(server.seen("/feed.xml")[1..]
            .iter()
            .all(|s| s.if_none_match.as_deref() == Some("\"v1\"")));
        shutdown.cancel();
        let done = tokio::time::timeout(Duration::from_secs(5), daemon).await;
        assert!(matches!(done, Ok(Ok(Ok(())))), "{done:?}");
        assert_eq!(episodes(&db).await.len(), 1);
    }
}
