//! The clip cache fetches a clip once per version of it, not once per URL forever.

use std::sync::Arc;

use archivist_researcher::clips::ClipCache;
use archivist_researcher::download::Downloader;
use archivist_researcher::settings::DownloadSettings;
use tokio_util::sync::CancellationToken;

use crate::http::{Route, Server};
use crate::support::{audio, work_dir};

/// Outside try of issue 18: a clip file replaced at the same URL and re-curated was
/// still matched in its old form (the cache was keyed by URL alone and never asked the
/// server again), so the pair was stored "not found" where the new clip occurs. A new
/// version of the clip (its stamp: the latest curation) is fetched again, once.
#[tokio::test]
async fn a_recurated_clip_is_fetched_again_and_an_unchanged_one_is_not() {
    let server = Server::start().await;
    let fixture = audio();
    let (old, new) = (fixture.clips[0].1.clone(), fixture.clips[2].1.clone());
    let url = server.route("/clip.wav", Route::audio(&old));
    let downloader = Downloader::new(DownloadSettings::default()).expect("downloader");
    let cache = ClipCache::new(&work_dir("clip-cache"), downloader, 64 << 20);
    let never = CancellationToken::new();
    let first = cache.get(&url, "1000/-", None, &never).await.unwrap();
    // The file at the URL changes; the clip is re-curated (a new stamp).
    server.route("/clip.wav", Route::audio(&new));
    let same_version = cache.get(&url, "1000/-", None, &never).await.unwrap();
    assert!(Arc::ptr_eq(&first, &same_version) || first.hash == same_version.hash);
    assert_eq!(server.hits("/clip.wav"), 1, "one fetch per version");
    let recurated = cache.get(&url, "2000/-", None, &never).await.unwrap();
    assert_ne!(
        recurated.hash, first.hash,
        "the re-curated clip is the old file"
    );
    assert_eq!(server.hits("/clip.wav"), 2);
}
