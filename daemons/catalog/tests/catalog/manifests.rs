use archivist_catalog::manifest::curate_manifest;
use archivist_catalog::{CatalogError, CurateSettings, Kind};

use crate::support::*;

#[tokio::test]
async fn a_manifest_with_errors_is_refused_whole_and_a_fixed_one_applies() {
    for (_config, session, db) in stores("catalog-manifest").await {
        let dir = std::env::temp_dir().join(format!("catalog-manifest-{}", rand::random::<u32>()));
        std::fs::create_dir_all(dir.join("clips")).unwrap();
        std::fs::write(dir.join("clips/jingle.wav"), b"RIFF").unwrap();
        let path = dir.join("catalog.yml");
        let broken = "\
episodes:
  - url: http://h/e1.mp3
    title: One
    priority: 3
  - url: http://h/e2.mp3
clips:
  - url: clips/jingle.wav
    title: Jingle
  - url: clips/missing.wav
    title: Missing
  - url: clips/jingle.wav
    title: Jingle again
";
        std::fs::write(&path, broken).unwrap();
        let err = curate_manifest(&session, &db, &path, &CurateSettings::default())
            .await
            .unwrap_err();
        let CatalogError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let text = err.to_string();
        assert_eq!(problems.len(), 3, "{text}");
        assert!(
            text.contains("episodes[1] (line 5)") && text.contains("missing field `title`"),
            "{text}"
        );
        assert!(
            text.contains("clips[1] (line 9)") && text.contains("missing.wav"),
            "{text}"
        );
        assert!(
            text.contains("clips[2] (line 11)") && text.contains("duplicate"),
            "{text}"
        );
        assert!(episodes(&db).await.is_empty(), "nothing half-written");
        assert!(clips(&db).await.is_empty());
        assert!(aliases(&db).await.is_empty());

        let fixed = "\
episodes:
  - url: http://h/e1.mp3
    title: One
    priority: 3
  - url: http://h/e2.mp3
    title: Two
    air_date: 2024-03-01
clips:
  - url: clips/jingle.wav
    title: Jingle
";
        std::fs::write(&path, fixed).unwrap();
        let report = curate_manifest(&session, &db, &path, &CurateSettings::default())
            .await
            .unwrap();
        assert_eq!(report.created(), 3);
        let again = curate_manifest(&session, &db, &path, &CurateSettings::default())
            .await
            .unwrap();
        assert_eq!((again.created(), again.refreshed()), (0, 3));
        let jingle = record(&db, Kind::Clip, "c000001").await;
        assert!(jingle.fields().media_url.starts_with("file:///"));
        assert!(jingle.fields().media_url.ends_with("/clips/jingle.wav"));
        assert_eq!(
            record(&db, Kind::Episode, "e0000001")
                .await
                .fields()
                .priority,
            3
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
