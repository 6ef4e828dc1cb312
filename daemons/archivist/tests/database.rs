//! The database settings as the binary reads them: `init` creates the schema in the
//! database the environment names, a password given as `--database-url` is refused
//! without being shown, and `config check` names an unusable URL (password redacted).

mod support;

use support::Env;

#[test]
fn init_creates_the_schema_and_database_passwords_stay_off_the_command_line() {
    let env = Env::fresh("database");
    let out = env.ok(&["init"]);
    let shown = archivist_db::redact(&env.database);
    let version = archivist_db::Database::known_schema_version();
    assert!(
        out.contains(&format!("database {shown} at schema version {version}")),
        "{out}"
    );
    // Again: idempotent, same version.
    assert!(env
        .ok(&["init"])
        .contains(&format!("at schema version {version}")));

    let refused = env.run(&[
        "--database-url",
        "postgres://archivist:hunter2@127.0.0.1:1/archivist",
        "init",
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("refused") && stderr.contains("archivist:***@127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let mut bad = env.clone();
    bad.database = "mysql://archivist:hunter2@127.0.0.1/archivist".into();
    let checked = bad.run(&["config", "check"]);
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    assert!(stderr.contains("mysql://archivist:***@"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// Issue 22e: the admin readers read the catalog from the database. A catalog curated by
/// the real curator (which writes only to the database since issue 22b) with research
/// stored as the recorder stores it: `results --episode`, `results --clip`, `export` and
/// `jobs list --episode` used to read `/catalog` in ZooKeeper and answered "no such
/// episode" (or rows without titles) on a real pipeline.
#[test]
fn admin_readers_read_a_catalog_curated_only_into_the_database() {
    use archivist_engine::schema::clipset::ClipSet;
    use archivist_engine::schema::records::{Occurrence, ResearchRecord, ResearchRun};

    let env = Env::fresh("admin-db-catalog");
    env.ok(&["init"]);
    let dir = support::scratch("admin-db-catalog");
    let manifest = dir.join("manifest.yml");
    std::fs::write(
        &manifest,
        "episodes:\n  - url: http://127.0.0.1:1/one.mp3\n    title: Episode one\n  - url: http://127.0.0.1:1/two.mp3\n    title: Episode two\nclips:\n  - url: http://127.0.0.1:1/jingle.wav\n    title: Jingle\n",
    )
    .unwrap();
    env.ok(&["curate", "manifest", manifest.to_str().unwrap()]);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (episodes, clip) = runtime.block_on(async {
        let db = archivist_db::Database::connect(&env.database)
            .await
            .unwrap();
        let episodes = archivist_db::catalog::ids(
            &db,
            archivist_engine::schema::records::AliasTarget::Episode,
        )
        .await
        .unwrap();
        let clips =
            archivist_db::catalog::ids(&db, archivist_engine::schema::records::AliasTarget::Clip)
                .await
                .unwrap();
        assert_eq!((episodes.len(), clips.len()), (2, 1));
        let number = archivist_engine::schema::paths::clip_number(&clips[0]).unwrap();
        // Research as the recorder stores it: the clip found in the first episode and
        // researched (not found) in the second.
        for (i, episode) in episodes.iter().enumerate() {
            let mut record = ResearchRecord::new(episode);
            record.episode_duration_s = Some(600.0);
            record.runs.push(ResearchRun {
                job: format!("j000000000{i}"),
                researcher: "r1".into(),
                at: time::OffsetDateTime::UNIX_EPOCH,
                clips: [number].into_iter().collect::<ClipSet>(),
            });
            if i == 0 {
                record.found.insert(
                    clips[0].clone(),
                    vec![Occurrence {
                        at: 42.5,
                        conf: 0.9,
                        speed: None,
                        part: None,
                    }],
                );
            }
            archivist_db::research::update(&db, episode, |r| *r = record.clone())
                .await
                .unwrap();
        }
        db.close().await;
        (episodes, clips[0].clone())
    });

    let by_episode: serde_json::Value =
        serde_json::from_str(&env.ok(&["-o", "json", "results", "--episode", &episodes[0]]))
            .unwrap();
    assert_eq!(by_episode["title"], "Episode one", "{by_episode}");
    assert_eq!(by_episode["researched"], 1, "{by_episode}");
    assert_eq!(by_episode["found"], 1, "{by_episode}");
    assert_eq!(
        by_episode["rows"][0]["clip_title"], "Jingle",
        "{by_episode}"
    );

    let by_clip: serde_json::Value =
        serde_json::from_str(&env.ok(&["-o", "json", "results", "--clip", &clip])).unwrap();
    assert_eq!(by_clip["title"], "Jingle", "{by_clip}");
    assert_eq!(by_clip["episodes_researched"], 2, "{by_clip}");
    assert_eq!(by_clip["episodes_found"], 1, "{by_clip}");
    assert_eq!(
        by_clip["rows"][0]["episode_title"], "Episode one",
        "{by_clip}"
    );

    let csv = env.ok(&["export", "--format", "csv"]);
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.contains(&format!(
            "{},Episode one,{clip},Jingle,true,42.5,0.9",
            episodes[0]
        )),
        "{csv}"
    );
    assert!(
        csv.contains(&format!("{},Episode two,{clip},Jingle,false", episodes[1])),
        "{csv}"
    );

    let jobs: serde_json::Value =
        serde_json::from_str(&env.ok(&["-o", "json", "jobs", "list", "--episode", &episodes[1]]))
            .unwrap();
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(0), "{jobs}");
    let missing = env.run(&["jobs", "list", "--episode", "e9999999"]);
    assert!(!missing.status.success());
}
