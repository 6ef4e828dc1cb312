use archivist_catalog::local::{single_item, SingleOptions};
use archivist_catalog::{curate, CatalogError, CurateSettings, FetchSettings, Kind};

use crate::support::*;

#[tokio::test]
async fn local_files_and_urls_become_records() {
    for (_config, session, db) in stores("catalog-local").await {
        let dir = std::env::temp_dir().join(format!("catalog-local-it-{}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("opening theme.wav");
        std::fs::write(&file, b"RIFF....").unwrap();
        let fetch = FetchSettings::default();

        let item = single_item(
            Kind::Clip,
            file.to_str().unwrap(),
            &SingleOptions::default(),
            &fetch,
        )
        .await
        .unwrap();
        let as_url = single_item(
            Kind::Clip,
            &format!("file://{}", file.display()),
            &SingleOptions {
                priority: Some(3),
                ..SingleOptions::default()
            },
            &fetch,
        )
        .await
        .unwrap();
        assert_eq!(
            item.media_url, as_url.media_url,
            "a path and its file:// URL are one identity"
        );
        assert!(item.media_url.starts_with("file:///"));
        assert_eq!(item.title, "opening theme");
        let report = curate(&session, &db, vec![item], &CurateSettings::default())
            .await
            .unwrap();
        assert_eq!(report.created(), 1);
        let report = curate(&session, &db, vec![as_url], &CurateSettings::default())
            .await
            .unwrap();
        assert_eq!(report.items[0].id, "c000001");
        assert_eq!(
            record(&db, Kind::Clip, "c000001").await.fields().priority,
            3
        );

        let err = single_item(
            Kind::Clip,
            dir.join("nope.wav").to_str().unwrap(),
            &SingleOptions::default(),
            &fetch,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CatalogError::File { .. }), "{err}");
        assert!(err.to_string().contains("nope.wav"));
        std::fs::remove_dir_all(&dir).ok();

        // URLs: probed with HEAD; the type the server announces is kept.
        let server = Server::start().await;
        server.route("/ep.mp3", "audio/mpeg", "ID3", None);
        server.route("/page", "text/html", "<html></html>", None);
        let options = SingleOptions {
            title: Some("Live show".into()),
            ..SingleOptions::default()
        };
        let item = single_item(Kind::Episode, &server.url("/ep.mp3"), &options, &fetch)
            .await
            .unwrap();
        assert_eq!(item.title, "Live show");
        assert_eq!(item.media_type.as_deref(), Some("audio/mpeg"));
        assert_eq!(server.seen("/ep.mp3")[0].method, "HEAD");
        let err = single_item(Kind::Episode, &server.url("/page"), &options, &fetch)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("text/html"), "{err}");
        let err = single_item(Kind::Episode, &server.url("/gone.mp3"), &options, &fetch)
            .await
            .unwrap_err();
        assert!(
            matches!(err, CatalogError::Fetch { .. }) && err.to_string().contains("404"),
            "{err}"
        );
    }
}
