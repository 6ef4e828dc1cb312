//! `archivist migrate` (issue 22), run as a process against a ZooKeeper-only tree written
//! by the scale benchmark's generator (`examples/synth_archive/synth.rs`), for every
//! database backend the test machine has (`archivist_testkit`'s backends: SQLite always,
//! PostgreSQL with `ARCHIVIST_TEST_PG`).

#[allow(dead_code)]
#[path = "../examples/synth_archive/synth.rs"]
mod synth;

use std::process::{Output, Stdio};

use archivist_db::migrate::{self, Counts};
use archivist_db::Database;
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{ClipRecord, EpisodeRecord, ResearchRecord};
use archivist_engine::{store, Session, ZkConfig};

const SHAPE: synth::Shape = synth::Shape {
    episodes: 40,
    clips: 300,
    researched: 0.9,
    from_feeds: 0.5,
    seed: 7,
};

async fn archivist(config: &ZkConfig, url: &str, args: &[&str]) -> Output {
    let (hosts, chroot) = config.hosts_and_chroot();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_archivist"))
        .args(["--zk", &hosts, "--chroot", &chroot])
        .args(args)
        // The environment, not --database-url: a PostgreSQL URL carries a password.
        .env("ARCHIVIST_DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run archivist")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What the tree holds, counted from the tree itself.
async fn tree_counts(s: &Session) -> Counts {
    let mut counts = Counts {
        episodes: store::children(s, paths::EPISODES).await.unwrap().len() as u64,
        clips: store::children(s, paths::CLIPS).await.unwrap().len() as u64,
        aliases: store::children(s, paths::ALIASES).await.unwrap().len() as u64,
        ..Counts::default()
    };
    let research = store::children(s, paths::RESEARCH).await.unwrap();
    let research_paths: Vec<String> = research.iter().map(|e| paths::research(e)).collect();
    for (record, _) in store::read_many::<ResearchRecord>(s, &research_paths, 100)
        .await
        .unwrap()
        .into_iter()
        .flatten()
    {
        counts.add_record(&record);
    }
    counts
}

async fn legacy_tree(name: &str) -> (ZkConfig, Session, Counts) {
    let (config, s) = archivist_testkit::fresh_tree(name).await;
    synth::write_catalog_nodes(&s, &SHAPE, 64).await.unwrap();
    let written = synth::write_research(&s, &SHAPE, 64).await.unwrap();
    let counts = tree_counts(&s).await;
    assert!(written.research > 0 && written.found > 0 && counts.aliases > counts.episodes);
    (config, s, counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_moves_verifies_is_idempotent_and_deletes_only_after() {
    for backend in archivist_testkit::db::backends() {
        let (config, s, expected) = legacy_tree("migrate").await;
        let db_url = archivist_testkit::db::fresh_database_url(backend, "migrate").await;
        let db = Database::connect(&db_url).await.unwrap();

        // An interrupted earlier run: a third of the research is already there.
        let research = store::children(&s, paths::RESEARCH).await.unwrap();
        let some: Vec<String> = research
            .iter()
            .step_by(3)
            .map(|e| paths::research(e))
            .collect();
        let partial: Vec<ResearchRecord> = store::read_many::<ResearchRecord>(&s, &some, 100)
            .await
            .unwrap()
            .into_iter()
            .flatten()
            .map(|(r, _)| r)
            .collect();
        migrate::insert_research(&db, &partial).await.unwrap();
        // An episode and a clip held in the old tree (`held: true` in the record).
        let episode = paths::episode(&paths::episode_id(1));
        let (mut e, _) = store::read_required::<EpisodeRecord>(&s, &episode)
            .await
            .unwrap();
        e.fields.held = true;
        let data = store::encode(&episode, &e).unwrap();
        s.client().set_data(&episode, &data, None).await.unwrap();
        let clip = paths::clip(&paths::clip_id(1));
        let (mut c, _) = store::read_required::<ClipRecord>(&s, &clip).await.unwrap();
        c.fields.held = true;
        let data = store::encode(&clip, &c).unwrap();
        s.client().set_data(&clip, &data, None).await.unwrap();

        let out = archivist(&config, &db_url, &["migrate"]).await;
        assert!(out.status.success(), "{}", text(&out));
        // Their holds are ZooKeeper nodes now (issue 22: holds are coordination).
        for id in [paths::episode_id(1), paths::clip_id(1)] {
            assert!(
                store::exists(&s, &paths::hold(&id))
                    .await
                    .unwrap()
                    .is_some(),
                "{id} not held: {}",
                text(&out)
            );
        }
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("2 hold(s)"),
            "{}",
            text(&out)
        );
        assert_eq!(
            migrate::counts(&db).await.unwrap(),
            expected,
            "{}",
            text(&out)
        );

        // Run twice: the same result, nothing new written.
        let again = archivist(&config, &db_url, &["migrate"]).await;
        assert!(again.status.success(), "{}", text(&again));
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("0 records new")
                && String::from_utf8_lossy(&again.stdout).contains("0 hold(s)"),
            "{}",
            text(&again)
        );
        assert_eq!(migrate::counts(&db).await.unwrap(), expected);
        // The tree is untouched without --delete-zk.
        assert_eq!(tree_counts(&s).await, expected);

        let delete = archivist(&config, &db_url, &["migrate", "--delete-zk"]).await;
        assert!(delete.status.success(), "{}", text(&delete));
        for dir in [
            paths::EPISODES,
            paths::CLIPS,
            paths::ALIASES,
            paths::RESEARCH,
        ] {
            assert!(
                store::children(&s, dir).await.unwrap().is_empty(),
                "{dir}: {}",
                text(&delete)
            );
        }
        assert_eq!(migrate::counts(&db).await.unwrap(), expected);
        db.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_node_fails_the_migration_and_stays() {
    for backend in archivist_testkit::db::backends() {
        let (config, s, _) = legacy_tree("migrate-bad").await;
        let bad = paths::research("e0009999");
        s.client()
            .create(
                &bad,
                b"schema: 1\nepisode: e0009999\nruns: [{job: j1, researcher: r, at: x, clips: 'nope'}]\n",
                &s.create_options(archivist_engine::zk::CreateMode::Persistent),
            )
            .await
            .unwrap();
        let db_url = archivist_testkit::db::fresh_database_url(backend, "migrate").await;
        let out = archivist(&config, &db_url, &["migrate", "--delete-zk"]).await;
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("e0009999"),
            "{}",
            text(&out)
        );
        assert!(
            store::exists(&s, &bad).await.unwrap().is_some(),
            "the unreadable node stays"
        );
    }
}

/// Outside try of #22, findings 3 and 4b: `migrate` left the database's id counters at 0,
/// so curation handed out numbers the old tree had used and a new episode inherited a
/// deleted episode's research; and a node whose name and record disagree
/// (`/research/e0000002x` holding `episode: e0000002`) made PostgreSQL refuse the whole
/// batch and SQLite never verify, without naming the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_carries_the_old_numbers_over_and_names_a_misnamed_node() {
    use archivist_db::catalog::{self, CatalogBatch, CatalogRecord, NewRecord};
    use archivist_engine::schema::SCHEMA_VERSION;
    use time::OffsetDateTime;

    for backend in archivist_testkit::db::backends() {
        let (config, s, _) = legacy_tree("migrate-numbers").await;
        let create = |path: String, data: Vec<u8>| {
            let s = s.clone();
            async move {
                let options = s.create_options(archivist_engine::zk::CreateMode::Persistent);
                s.client().create(&path, &data, &options).await.unwrap();
            }
        };
        let (copied, _) = store::read::<ResearchRecord>(&s, &paths::research("e0000002"))
            .await
            .unwrap()
            .expect("the synthetic tree researched e0000002");
        // Research of an episode whose catalog node was deleted long ago, about a clip
        // numbered past every clip node: the highest numbers the tree ever used.
        let mut deleted = copied.clone();
        deleted.episode = "e0000900".into();
        deleted.runs[0].clips.insert(777);
        let data = serde_yaml::to_string(&deleted).unwrap().into_bytes();
        create(paths::research("e0000900"), data).await;
        // A hand-made copy of a research node under another name.
        let data = serde_yaml::to_string(&copied).unwrap().into_bytes();
        create(paths::research("e0000002x"), data).await;

        let db_url = archivist_testkit::db::fresh_database_url(backend, "migrate").await;
        let out = archivist(&config, &db_url, &["migrate"]).await;
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("e0000002x") && stderr.contains("named"),
            "{}",
            text(&out)
        );
        assert!(
            !stderr.contains("verification failed"),
            "everything readable moved: {}",
            text(&out)
        );

        let db = Database::connect(&db_url).await.unwrap();
        assert!(
            archivist_db::research::read(&db, "e0000900")
                .await
                .unwrap()
                .is_some(),
            "the deleted episode's research moved"
        );
        let fields = archivist_testkit::catalog::fields(
            "brand new",
            "http://127.0.0.1:1/new.mp3",
            OffsetDateTime::now_utc(),
        );
        let episode = CatalogRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id: String::new(),
            air_date: None,
            fields: fields.clone(),
        });
        let clip = CatalogRecord::Clip(ClipRecord {
            schema: SCHEMA_VERSION,
            id: String::new(),
            fields,
        });
        let written = catalog::write(
            &db,
            &CatalogBatch {
                creates: vec![
                    NewRecord {
                        record: episode,
                        aliases: Vec::new(),
                    },
                    NewRecord {
                        record: clip,
                        aliases: Vec::new(),
                    },
                ],
                updates: Vec::new(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            written.created,
            ["e0000901", "c000778"],
            "new numbers come after every number the old tree used ({backend:?})"
        );
        db.close().await;
    }
}
