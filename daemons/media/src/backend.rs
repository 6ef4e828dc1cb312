//! Where objects live: the trait a backend implements: a local directory
//! ([`crate::LocalDir`]) or an S3-compatible bucket ([`crate::S3Bucket`], the
//! `object_store` crate), so the researcher does not change with the backend.
//!
//! A backend moves bytes and nothing more: verifying content against its key, metrics
//! and what a corrupt object means are [`crate::MediaStore`]'s, one rule in one place.

use std::path::Path;

use futures_util::future::BoxFuture;

use crate::{Key, MediaError};

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// False when the object was not kept: it alone is larger than the store's bound.
    pub stored: bool,
    /// Bytes actually written: 0 when the store already held the object (or did not
    /// keep it), so `archivist_media_written_bytes_total` counts only real writes.
    pub bytes: u64,
    /// Objects removed to make room, least recently used first, with their sizes.
    pub evicted: Vec<(Key, u64)>,
}

/// What a read found under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// No such object.
    Missing,
    /// The object's bytes were copied to the destination, hashed in the same pass: the
    /// bytes the caller gets are exactly the bytes hashed, whatever happens to the
    /// stored object afterwards (an in-place write, an eviction).
    Copied {
        /// Their size.
        bytes: u64,
        /// What they hash to (the caller compares it with the key).
        sha256: Key,
    },
    /// The name holds something that is not an object (a directory, a symbolic link,
    /// a device): nothing was copied; the caller treats it as a damaged object.
    NotAnObject {
        /// What it is, for the log.
        what: String,
    },
}

/// A place that holds objects by key. Methods return boxed futures so the store can
/// hold any backend as `Arc<dyn Backend>` (async functions in traits are not yet usable
/// through `dyn`).
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Copies the object's bytes to `dest` (a private local file, replaced if present),
    /// hashing them as they are copied (one read), and counts the object as used.
    /// Never hands out the object itself (a hard link would let a write into the store
    /// change the caller's bytes after they were hashed).
    fn read_to<'a>(
        &'a self,
        key: &'a Key,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Read, MediaError>>;

    /// Stores the bytes of the local file `src` as `key`, atomically: a reader, or a
    /// restart after a crash, sees the whole object or none. Makes room by evicting
    /// least recently used objects when the store has a bound.
    fn write_from<'a>(
        &'a self,
        key: &'a Key,
        src: &'a Path,
    ) -> BoxFuture<'a, Result<Written, MediaError>>;

    /// Removes an object, or whatever else holds its name (a directory, a link); false
    /// if there was none.
    fn delete<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>>;

    /// Whether an object is there (not verified, not counted as used).
    fn contains<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>>;

    /// Bytes held, as far as the backend knows cheaply (`None`: it cannot say).
    fn stored_bytes(&self) -> BoxFuture<'_, Result<Option<u64>, MediaError>>;
}
