//! The feed corpus (`tests/feeds/corpus.yml`): every feed served by a real loopback HTTP
//! server with its headers, curated into the real ZooKeeper, registers exactly its
//! expected episodes and leaves out exactly its expected items.

use std::io::Write;
use std::path::PathBuf;

use archivist_catalog::feed::curate_feed;
use archivist_catalog::merge::StoredRecord;
use archivist_catalog::{CurateSettings, FetchSettings, Kind};
use serde::Deserialize;

use crate::support::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    file: String,
    served_at: Option<String>,
    redirect_from: Option<String>,
    content_type: Option<String>,
    content_encoding: Option<String>,
    episodes: Vec<Expected>,
    #[serde(default)]
    skipped: Vec<Skipped>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    title: String,
    media_url: String,
    guid: String,
    air_date: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Skipped {
    item: String,
    reason: String,
}

pub fn feeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/feeds")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(feeds_dir().join("corpus.yml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn compress(encoding: &str, body: &[u8]) -> Vec<u8> {
    match encoding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        // HTTP's "deflate" is the zlib format (RFC 9110 8.4.1.2).
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
            w.write_all(body).unwrap();
            drop(w);
            out
        }
        other => panic!("unknown content_encoding {other}"),
    }
}

/// Serves one case; returns the URL to curate.
fn serve_case(server: &Server, case: &Case) -> String {
    let body = std::fs::read(feeds_dir().join(&case.file)).unwrap();
    let path = case
        .served_at
        .clone()
        .unwrap_or_else(|| format!("/{}", case.file));
    let content_type = case.content_type.as_deref().unwrap_or("application/xml");
    let route = match &case.content_encoding {
        Some(enc) => Route::ok(content_type, compress(enc, &body)).header("content-encoding", enc),
        None => Route::ok(content_type, body),
    };
    server.serve(&path, route);
    match &case.redirect_from {
        Some(from) => {
            server.redirect(from, &path);
            server.url(from)
        }
        None => server.url(&path),
    }
}

#[tokio::test]
async fn every_feed_of_the_corpus_registers_its_expected_episodes() {
    let cases = cases();
    assert!(cases.len() >= 25, "the corpus is read whole");
    let mut failures = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        for (_config, session, db) in stores(&format!("catalog-corpus-{n}")).await {
            let server = Server::start().await;
            let url = serve_case(&server, case);
            let base = server.url("");
            let what = format!("{} (served at {url})", case.file);
            let report = match curate_feed(
                &session,
                &db,
                &url,
                None,
                &CurateSettings::default().with_curator("corpus"),
                &FetchSettings::default().with_timeout(std::time::Duration::from_secs(5)),
            )
            .await
            {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{what}: refused: {e}"));
                    continue;
                }
            };
            if report.created() != case.episodes.len() {
                failures.push(format!(
                    "{what}: {} created, expected {}: {report:#?}",
                    report.created(),
                    case.episodes.len()
                ));
            }
            for want in &case.episodes {
                let media_url = want.media_url.replace("{base}", &base);
                let Some(id) = id_by_url(&db, &media_url).await else {
                    failures.push(format!("{what}: no episode at {media_url}: {report:#?}"));
                    continue;
                };
                let rec = record(&db, Kind::Episode, &id).await;
                let air_date = match &rec {
                    StoredRecord::Episode(e) => e.air_date.clone().unwrap_or_default(),
                    StoredRecord::Clip(_) => "(a clip)".to_string(),
                };
                let f = rec.fields();
                let got = (
                    f.title.as_str(),
                    f.media_url.as_str(),
                    f.guid.as_deref().unwrap_or(""),
                    air_date.as_str(),
                );
                let expected = (
                    want.title.as_str(),
                    media_url.as_str(),
                    want.guid.as_str(),
                    want.air_date.as_str(),
                );
                if got != expected {
                    failures.push(format!("{what}: got {got:?}, expected {expected:?}"));
                }
            }
            let skipped_ok = report.skipped.len() == case.skipped.len()
                && case.skipped.iter().all(|s| {
                    report
                        .skipped
                        .iter()
                        .any(|p| p.item.contains(&s.item) && p.reason.contains(&s.reason))
                });
            if !skipped_ok {
                failures.push(format!(
                    "{what}: left out {:#?}, expected {:#?}",
                    report.skipped, case.skipped
                ));
            }
            // Credentials never reach the tree, whatever the feed said.
            for id in episodes(&db).await {
                let rec = record(&db, Kind::Episode, &id).await;
                if rec.fields().media_url.contains('@') {
                    failures.push(format!(
                        "{what}: credentials stored: {}",
                        rec.fields().media_url
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
