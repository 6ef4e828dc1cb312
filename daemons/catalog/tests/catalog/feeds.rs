use archivist_catalog::feed::curate_feed;
use archivist_catalog::{
    CatalogError, CurateSettings, CuratorSettings, FeedPoller, FetchSettings, Kind, PollOutcome,
};
use archivist_testkit::fresh_tree;

use crate::support::*;

fn fetch() -> FetchSettings {
    FetchSettings::default().with_timeout(std::time::Duration::from_secs(5))
}

#[tokio::test]
async fn a_feed_registers_its_audio_episodes_and_names_the_rest() {
    let (_config, session) = fresh_tree("catalog-feed").await;
    let server = Server::start().await;
    let feed = rss(&[
        ("g-1", "First", &server.url("/media/1.mp3"), "audio/mpeg"),
        (
            "g-2",
            "Video notes",
            &server.url("/media/2.pdf"),
            "application/pdf",
        ),
        ("g-3", "Third", &server.url("/media/3.m4a"), "audio/x-m4a"),
    ]);
    server.route("/feed.xml", "application/rss+xml", &feed, None);
    let report = curate_feed(
        &session,
        &server.url("/feed.xml"),
        Some(4),
        &CurateSettings::default().with_curator("feed-test"),
        &fetch(),
    )
    .await
    .unwrap();
    assert_eq!(report.created(), 2, "{report:?}");
    assert_eq!(report.skipped.len(), 1);
    assert!(
        report.skipped[0].item.contains("Video notes") && report.skipped[0].item.contains("g-2")
    );
    assert!(report.skipped[0].reason.contains("not audio"));
    assert_eq!(episodes(&session).await.len(), 2);
    let id = id_by_url(&session, &server.url("/media/3.m4a"))
        .await
        .unwrap();
    let rec = record(&session, Kind::Episode, &id).await;
    assert_eq!(rec.fields().title, "Third");
    assert_eq!(rec.fields().guid.as_deref(), Some("g-3"));
    assert_eq!(rec.fields().priority, 4);
    assert_eq!(rec.fields().media_type.as_deref(), Some("audio/x-m4a"));
    assert_eq!(rec.fields().description.as_deref(), Some("About Third"));
}

#[tokio::test]
async fn malformed_and_unreachable_feeds_write_nothing() {
    let (_config, session) = fresh_tree("catalog-badfeed").await;
    let server = Server::start().await;
    server.route(
        "/bad.xml",
        "application/rss+xml",
        "this is { not a feed",
        None,
    );
    let settings = CurateSettings::default();
    let err = curate_feed(&session, &server.url("/bad.xml"), None, &settings, &fetch())
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::MalformedFeed { .. }), "{err}");
    assert!(err.to_string().contains("/bad.xml"), "{err}");

    let err = curate_feed(
        &session,
        &server.url("/missing.xml"),
        None,
        &settings,
        &fetch(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CatalogError::Fetch { .. }), "{err}");
    assert!(err.to_string().contains("404"), "{err}");

    // Nothing listens on a port we just freed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = curate_feed(
        &session,
        &format!("http://127.0.0.1:{port}/feed.xml"),
        None,
        &settings,
        &fetch(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CatalogError::Fetch { .. }), "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
    assert!(episodes(&session).await.is_empty());
}

#[tokio::test]
async fn polling_uses_conditional_get_and_picks_up_new_items() {
    let (_config, session) = fresh_tree("catalog-poll").await;
    let server = Server::start().await;
    let url1 = server.url("/m/1.mp3");
    let url2 = server.url("/m/2.mp3");
    let v1 = rss(&[("g-1", "First", &url1, "audio/mpeg")]);
    let v2 = rss(&[
        ("g-2", "Second", &url2, "audio/mpeg"),
        ("g-1", "First", &url1, "audio/mpeg"),
    ]);
    server.route("/feed.xml", "application/rss+xml", &v1, Some("\"v1\""));
    let feed_url = server.url("/feed.xml");
    let mut poller = FeedPoller::new(
        CuratorSettings::default()
            .with_feeds(vec![feed_url.clone()])
            .with_fetch(fetch()),
    )
    .unwrap();

    let PollOutcome::Curated(first) = poller.poll(&session, &feed_url).await.unwrap() else {
        panic!("first poll must read the feed")
    };
    assert_eq!(first.created(), 1);
    let id = id_by_url(&session, &url1).await.unwrap();
    let last = record(&session, Kind::Episode, &id)
        .await
        .fields()
        .last_curated;

    assert_eq!(
        poller.poll(&session, &feed_url).await.unwrap(),
        PollOutcome::NotModified
    );
    let seen = server.seen("/feed.xml");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].if_none_match, None);
    assert_eq!(seen[1].if_none_match.as_deref(), Some("\"v1\""));
    assert_eq!(
        record(&session, Kind::Episode, &id)
            .await
            .fields()
            .last_curated,
        last,
        "a 304 writes nothing"
    );

    server.route("/feed.xml", "application/rss+xml", &v2, Some("\"v2\""));
    let PollOutcome::Curated(third) = poller.poll(&session, &feed_url).await.unwrap() else {
        panic!("a changed feed must be read")
    };
    assert_eq!((third.created(), third.refreshed()), (1, 1));
    assert_eq!(episodes(&session).await.len(), 2);
}
