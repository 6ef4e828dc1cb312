//! Why the media store failed.

use std::path::{Path, PathBuf};

/// A media store failure. A missing or corrupt object is not one: those are
/// [`crate::Lookup`] answers, since the caller downloads the episode again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MediaError {
    /// A key that is not 64 lowercase hex digits (a sha256).
    #[error("not a media key (64 lowercase hex digits of a sha256): {0:?}")]
    BadKey(String),
    /// A file or directory of the store (or the caller's file) could not be used.
    #[error("media store: {path}: {action}: {reason}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The OS message.
        reason: String,
    },
    /// A file given to [`crate::MediaStore::put`] does not hash to the key it was
    /// stored under (the caller's bug or a file changed under it): content addressing
    /// must stay true, so it is not stored.
    #[error(
        "media store: {path} has sha256 {actual}, not the key {expected} it was to be stored under"
    )]
    WrongContent {
        /// The file.
        path: PathBuf,
        /// The key asked for.
        expected: String,
        /// What its bytes hash to.
        actual: String,
    },
    /// A write that failed on a full file system even after evicting objects to make
    /// room: those evictions happened (the store counts them); the object was not kept.
    #[error("{source} (even after evicting {} least recently used objects to make room)", evicted.len())]
    FullAfterEvicting {
        /// The last write's failure.
        source: Box<MediaError>,
        /// What was evicted, with sizes.
        evicted: Vec<(crate::Key, u64)>,
    },
    /// A remote store (S3-compatible) refused or failed a request. The reason is the
    /// client's message, which never holds the credentials.
    #[error("media store: {location}: {action}: {reason}")]
    Remote {
        /// The bucket and object.
        location: String,
        /// What was being done.
        action: &'static str,
        /// The client's message.
        reason: String,
    },
    /// The remote store's settings cannot make a client (no bucket, an unreadable
    /// credentials file).
    #[error("media store: S3 settings: {0}")]
    Config(String),
    /// A blocking task of the store failed (a panic).
    #[error("media store: a background task failed: {0}")]
    Task(String),
}

impl MediaError {
    /// An I/O error with the file and the action.
    pub(crate) fn io(path: &Path, action: &'static str, e: std::io::Error) -> MediaError {
        MediaError::Io {
            path: path.to_path_buf(),
            action,
            reason: e.to_string(),
        }
    }
}
