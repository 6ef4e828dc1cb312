use archivist_catalog::feed::curate_feed;
use archivist_catalog::{
    CatalogError, CurateSettings, CuratorSettings, FeedPoller, FetchSettings, Kind, PollOutcome,
};

use crate::support::*;

fn fetch() -> FetchSettings {
    FetchSettings::default().with_timeout(std::time::Duration::from_secs(5))
}

#[tokio::test]
async fn a_feed_registers_its_audio_episodes_and_names_the_rest() {
    for (_config, session, db) in stores("catalog-feed").await {
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
            &db,
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
            report.skipped[0].item.contains("Video notes")
                && report.skipped[0].item.contains("g-2")
        );
        assert!(report.skipped[0].reason.contains("not audio"));
        assert_eq!(episodes(&db).await.len(), 2);
        let id = id_by_url(&db, &server.url("/media/3.m4a")).await.unwrap();
        let rec = record(&db, Kind::Episode, &id).await;
        assert_eq!(rec.fields().title, "Third");
        assert_eq!(rec.fields().guid.as_deref(), Some("g-3"));
        assert_eq!(rec.fields().priority, 4);
        assert_eq!(rec.fields().media_type.as_deref(), Some("audio/x-m4a"));
        assert_eq!(rec.fields().description.as_deref(), Some("About Third"));
    }
}

#[tokio::test]
async fn malformed_and_unreachable_feeds_write_nothing() {
    for (_config, session, db) in stores("catalog-badfeed").await {
        let server = Server::start().await;
        server.route(
            "/bad.xml",
            "application/rss+xml",
            "this is { not a feed",
            None,
        );
        let settings = CurateSettings::default();
        let err = curate_feed(
            &session,
            &db,
            &server.url("/bad.xml"),
            None,
            &settings,
            &fetch(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CatalogError::MalformedFeed { .. }), "{err}");
        assert!(err.to_string().contains("/bad.xml"), "{err}");

        let err = curate_feed(
            &session,
            &db,
            &server.url("/missing.xml"),
            None,
            &settings,
            &fetch(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CatalogError::Fetch { .. }), "{err}");
        assert!(err.to_string().contains("404"), "{err}");

        // A 304 to a request that was not conditional is no answer: not "unchanged".
        let mut not_modified = Route::ok("application/rss+xml", "");
        not_modified.status = "304 Not Modified".to_string();
        server.serve("/always-304.xml", not_modified);
        let err = curate_feed(
            &session,
            &db,
            &server.url("/always-304.xml"),
            None,
            &settings,
            &fetch(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CatalogError::Fetch { .. }), "{err}");
        assert!(err.to_string().contains("304"), "{err}");

        // Nothing listens on a port we just freed.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = curate_feed(
            &session,
            &db,
            &format!("http://127.0.0.1:{port}/feed.xml"),
            None,
            &settings,
            &fetch(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CatalogError::Fetch { .. }), "{err}");
        assert!(err.to_string().contains(&port.to_string()), "{err}");
        assert!(episodes(&db).await.is_empty());
    }
}

#[tokio::test]
async fn polling_uses_conditional_get_and_picks_up_new_items() {
    for (_config, session, db) in stores("catalog-poll").await {
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

        let PollOutcome::Curated(first) = poller.poll(&session, &db, &feed_url).await.unwrap()
        else {
            panic!("first poll must read the feed")
        };
        assert_eq!(first.created(), 1);
        let id = id_by_url(&db, &url1).await.unwrap();
        let last = record(&db, Kind::Episode, &id).await.fields().last_curated;

        assert_eq!(
            poller.poll(&session, &db, &feed_url).await.unwrap(),
            PollOutcome::NotModified
        );
        let seen = server.seen("/feed.xml");
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].if_none_match, None);
        assert_eq!(seen[1].if_none_match.as_deref(), Some("\"v1\""));
        assert_eq!(
            record(&db, Kind::Episode, &id).await.fields().last_curated,
            last,
            "a 304 writes nothing"
        );

        server.route("/feed.xml", "application/rss+xml", &v2, Some("\"v2\""));
        let PollOutcome::Curated(third) = poller.poll(&session, &db, &feed_url).await.unwrap()
        else {
            panic!("a changed feed must be read")
        };
        assert_eq!((third.created(), third.refreshed()), (1, 1));
        assert_eq!(episodes(&db).await.len(), 2);
    }
}

/// A 600 KB GUID made ZooKeeper refuse the whole write, which was reported as
/// "kept conflicting with other writers" and lost the ordinary item beside it. Now the
/// oversized item is left out with the field and the limit named, and the rest registers.
#[tokio::test]
async fn an_oversized_field_leaves_out_its_item_and_the_rest_of_the_feed_registers() {
    for (_config, session, db) in stores("catalog-feed-oversized").await {
        let server = Server::start().await;
        let huge_guid = "g".repeat(600_000);
        let long_url = format!("http://media.example/{}.mp3", "u".repeat(3_000));
        let feed = rss(&[
            (
                huge_guid.as_str(),
                "Huge GUID",
                "http://media.example/huge.mp3",
                "audio/mpeg",
            ),
            ("g-long", "Long URL", long_url.as_str(), "audio/mpeg"),
            (
                "g-ok",
                "Ordinary",
                "http://media.example/ok.mp3",
                "audio/mpeg",
            ),
        ]);
        server.route("/feed.xml", "application/rss+xml", &feed, None);
        let report = curate_feed(
            &session,
            &db,
            &server.url("/feed.xml"),
            None,
            &CurateSettings::default(),
            &fetch(),
        )
        .await
        .unwrap();
        assert_eq!(report.created(), 1, "{:?}", report.summary());
        assert!(id_by_url(&db, "http://media.example/ok.mp3")
            .await
            .is_some());
        assert_eq!(episodes(&db).await.len(), 1);
        assert_eq!(report.skipped.len(), 2, "{:?}", report.skipped);
        let reasons: Vec<&str> = report.skipped.iter().map(|p| p.reason.as_str()).collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("GUID is 600000 bytes, over the limit of 1024")),
            "{reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r.contains("media URL is")),
            "{reasons:?}"
        );
        let huge = report
            .skipped
            .iter()
            .find(|p| p.item.contains("Huge GUID"))
            .unwrap();
        assert!(
            huge.item.len() < 1_000,
            "the label shows a cut GUID: {} bytes",
            huge.item.len()
        );
    }
}

/// A feed whose URL in the configuration carries credentials is fetched with them, but
/// they are stored nowhere: the GUID identity and every message use the URL without them.
#[tokio::test]
async fn feed_credentials_are_used_to_fetch_and_never_stored() {
    for (_config, session, db) in stores("catalog-feed-credentials").await {
        let server = Server::start().await;
        let feed = rss(&[("g-1", "One", "http://media.example/c1.mp3", "audio/mpeg")]);
        server.route("/feed.xml", "application/rss+xml", &feed, None);
        let with_credentials = server
            .url("/feed.xml")
            .replace("http://", "http://user:s3cret@");
        let report = curate_feed(
            &session,
            &db,
            &with_credentials,
            None,
            &CurateSettings::default(),
            &fetch(),
        )
        .await
        .unwrap();
        assert_eq!(report.created(), 1);
        let alias = archivist_catalog::identity::guid_alias(&server.url("/feed.xml"), "g-1");
        assert!(
            id_by_alias(&db, &alias).await.is_some(),
            "identity without credentials"
        );
        for kind in [Kind::Episode, Kind::Clip] {
            let ids = if kind == Kind::Episode {
                episodes(&db).await
            } else {
                clips(&db).await
            };
            for id in ids {
                let stored = format!("{:?}", record(&db, kind, &id).await);
                assert!(!stored.contains("s3cret"), "{stored}");
            }
        }
        let mut stored_aliases = Vec::new();
        archivist_db::catalog::each_alias(&db, |page| stored_aliases.extend(page))
            .await
            .unwrap();
        assert!(!format!("{stored_aliases:?}").contains("s3cret"));
        let err = curate_feed(
            &session,
            &db,
            &server
                .url("/missing.xml")
                .replace("http://", "http://user:s3cret@"),
            None,
            &CurateSettings::default(),
            &fetch(),
        )
        .await
        .unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
