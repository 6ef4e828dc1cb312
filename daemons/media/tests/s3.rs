//! The S3-compatible backend against a real S3 server (SeaweedFS, `scripts/s3.sh`):
//! content addressing, verification on read, least-recently-used eviction by size across
//! two researchers sharing the bucket, and credentials that are checked and never shown.
//!
//! `ARCHIVIST_TEST_S3` names the endpoint (`eval "$(scripts/s3.sh env)"`; `scripts/test.sh`
//! starts the server and sets it). Without it the tests say so and pass, except under CI
//! (`CI` set), where a missing server fails them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use archivist_media::{hash_file, Key, Lookup, MediaStore, S3Bucket, S3Options};
use object_store::PutPayload;

fn options() -> Option<S3Options> {
    let endpoint = std::env::var("ARCHIVIST_TEST_S3")
        .ok()
        .filter(|e| !e.is_empty());
    let Some(endpoint) = endpoint else {
        assert!(
            std::env::var_os("CI").is_none(),
            "ARCHIVIST_TEST_S3 is not set under CI: scripts/test.sh starts scripts/s3.sh"
        );
        eprintln!("ARCHIVIST_TEST_S3 is not set (eval \"$(scripts/s3.sh env)\"): skipped");
        return None;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    Some(S3Options {
        endpoint: Some(endpoint),
        bucket: var("ARCHIVIST_TEST_S3_BUCKET"),
        region: "us-east-1".into(),
        // A prefix of its own per test: tests run at once in one bucket.
        prefix: format!("test/{:016x}", rand::random::<u64>()),
        access_key_id: var("ARCHIVIST_TEST_S3_ACCESS_KEY"),
        secret_access_key: var("ARCHIVIST_TEST_S3_SECRET_KEY"),
    })
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> (std::path::PathBuf, Key) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let (key, _) = hash_file(&path).unwrap();
    (path, key)
}

#[tokio::test]
async fn put_then_get_is_a_verified_hit_and_unknown_keys_miss() {
    let Some(opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::s3(&opts, 1 << 20).unwrap();
    let (src, key) = write(tmp.path(), "a.wav", b"episode one bytes");
    let written = store.put(&key, &src).await.unwrap();
    assert!(written.stored && written.bytes == 17 && written.evicted.is_empty());
    // Stored again: nothing uploaded.
    assert_eq!(store.put(&key, &src).await.unwrap().bytes, 0);
    let dest = tmp.path().join("e.media");
    assert_eq!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit { bytes: 17 }
    );
    assert_eq!(std::fs::read(&dest).unwrap(), b"episode one bytes");
    let other = Key::parse(&"0".repeat(64)).unwrap();
    assert_eq!(store.get(&other, &dest).await.unwrap(), Lookup::Miss);
    assert_eq!(store.stored_bytes().await.unwrap(), Some(17));
    let s = store.stats();
    assert_eq!(
        (s.hits, s.misses, s.bytes_read, s.bytes_written),
        (1, 1, 17, 17)
    );
}

#[tokio::test]
async fn a_large_object_goes_up_in_parts_and_comes_back_whole() {
    let Some(opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::s3(&opts, 64 << 20).unwrap();
    // 12 MiB: past the 10 MB at which the upload becomes multipart.
    let bytes: Vec<u8> = (0..12u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let (src, key) = write(tmp.path(), "big.wav", &bytes);
    store.put(&key, &src).await.unwrap();
    let dest = tmp.path().join("big.media");
    assert_eq!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit {
            bytes: bytes.len() as u64
        }
    );
    assert!(std::fs::read(&dest).unwrap() == bytes);
}

#[tokio::test]
async fn a_damaged_object_is_a_miss_that_deletes_it_and_says_so() {
    let Some(opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bucket = S3Bucket::connect(&opts, 1 << 20).unwrap();
    let client = bucket.client();
    let store = MediaStore::new(Arc::new(bucket.clone()));
    let (src, key) = write(tmp.path(), "a.wav", b"the true bytes");
    store.put(&key, &src).await.unwrap();
    // Someone overwrites the object behind the store's back.
    client
        .put(
            &bucket.object_path(&key),
            PutPayload::from_static(b"the wrong bytes"),
        )
        .await
        .unwrap();
    let dest = tmp.path().join("e.media");
    match store.get(&key, &dest).await.unwrap() {
        Lookup::Corrupt { bytes, .. } => assert_eq!(bytes, 15),
        other => panic!("a damaged object was {other:?}"),
    }
    assert!(!dest.exists(), "the damaged bytes are not handed out");
    assert!(!store.contains(&key).await.unwrap(), "it is deleted");
    assert_eq!(store.get(&key, &dest).await.unwrap(), Lookup::Miss);
    assert_eq!(store.stats().verify_failures, 1);
}

/// Two researchers share one bucket: the bound is the bucket's, and eviction takes the
/// object least recently used by either (a read by one keeps an object for both).
#[tokio::test]
async fn the_least_recently_used_objects_of_a_shared_bucket_are_evicted_to_stay_within_the_bound() {
    let Some(opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let one = MediaStore::s3(&opts, 250).unwrap();
    let two = MediaStore::s3(&opts, 250).unwrap();
    let (a_src, a) = write(tmp.path(), "a", &[b'a'; 100]);
    let (b_src, b) = write(tmp.path(), "b", &[b'b'; 100]);
    let (c_src, c) = write(tmp.path(), "c", &[b'c'; 100]);
    one.put(&a, &a_src).await.unwrap();
    // S3 keeps times to the second: uses a second apart are in order.
    let tick = Duration::from_millis(1100);
    tokio::time::sleep(tick).await;
    two.put(&b, &b_src).await.unwrap();
    tokio::time::sleep(tick).await;
    // The second researcher reads `a`: now `b` is the least recently used.
    let dest = tmp.path().join("e.media");
    assert_eq!(
        two.get(&a, &dest).await.unwrap(),
        Lookup::Hit { bytes: 100 }
    );
    tokio::time::sleep(tick).await;
    let written = one.put(&c, &c_src).await.unwrap();
    assert_eq!(written.evicted, vec![(b.clone(), 100)]);
    for (key, kept) in [(&a, true), (&b, false), (&c, true)] {
        assert_eq!(two.contains(key).await.unwrap(), kept, "{key}");
    }
    assert_eq!(one.stored_bytes().await.unwrap(), Some(200));
    assert_eq!(one.stats().evictions, 1);
}

#[tokio::test]
async fn wrong_credentials_are_refused_and_never_shown() {
    let Some(mut opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    opts.secret_access_key = "not-the-secret-4f1d2a".into();
    assert!(!format!("{opts:?}").contains("not-the-secret"));
    let store = MediaStore::s3(&opts, 1 << 20).unwrap();
    let (src, key) = write(tmp.path(), "a.wav", b"bytes");
    let err = store.put(&key, &src).await.unwrap_err().to_string();
    assert!(!err.contains("not-the-secret"), "{err}");
    assert!(err.contains("s3://"), "{err}");
}

/// Measurement, on demand (`cargo test -p archivist-media --test s3 -- --ignored`): an
/// hour of 128 kbit/s MP3 (57.6 MB) stored and read back through the store.
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn measure_an_hour_of_mp3_round_trip() {
    let Some(opts) = options() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::s3(&opts, 1 << 30).unwrap();
    let bytes: Vec<u8> = (0..57_600_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let (src, key) = write(tmp.path(), "hour.mp3", &bytes);
    drop(bytes);
    let started = std::time::Instant::now();
    store.put(&key, &src).await.unwrap();
    let put = started.elapsed();
    let started = std::time::Instant::now();
    let dest = tmp.path().join("hour.media");
    assert!(matches!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit { .. }
    ));
    let get = started.elapsed();
    eprintln!("57.6 MB: put (hash + upload) {put:?}, get (download + hash) {get:?}");
    store.delete(&key).await.unwrap();
}
