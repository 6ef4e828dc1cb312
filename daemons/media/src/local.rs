//! The local-directory backend: one file per object, named by its key, in one
//! directory.
//!
//! - **Crash-safe writes**: the bytes go to a hidden temporary file in the same directory
//!   (`.<key>.<random>.tmp`), which is fsynced, renamed onto the key's name and the
//!   directory fsynced. A crash leaves either no object or the whole one, plus perhaps a
//!   temporary file, which the next [`LocalDir::open`] removes.
//! - **Least recently used, tracked by mtime**: every read and write sets the object's
//!   modification time to now, and eviction removes the objects with the oldest. The
//!   file system keeps the order, so it survives restarts and is shared by every
//!   process using the directory, with no index file to keep consistent (access times
//!   would do the same but are off or coarse under `noatime`/`relatime` mounts).
//! - **Bounded**: after each write, the directory is listed and the oldest objects are
//!   removed until the total is within `max_bytes` (the object just written is never
//!   the one removed). Listing a directory of a few thousand episodes is a few
//!   milliseconds next to a download; an in-memory index would go stale when another
//!   process writes.
//! - **Reads hand out a hard link** (a copy across file systems), so an object evicted
//!   while a job decodes it stays readable through the job's own name until the job
//!   removes it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;

use crate::backend::{Backend, Written};
use crate::{Key, MediaError};

/// Temporary files older than this are left-overs of a crash (a write in flight is
/// minutes old at most; a 2 GB copy takes seconds).
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// A directory of objects bounded by size; see the module doc.
#[derive(Debug)]
pub struct LocalDir {
    dir: Dir,
    /// Serialises this process's write-then-evict passes (two would evict twice).
    evicting: tokio::sync::Mutex<()>,
}

/// The directory and its bound: what the blocking file work needs (cloned into it).
#[derive(Debug, Clone)]
struct Dir {
    dir: PathBuf,
    max_bytes: u64,
}

impl LocalDir {
    /// Opens (creating) the directory, removing temporary files left by a crash.
    ///
    /// # Errors
    /// The directory cannot be created or listed.
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> Result<LocalDir, MediaError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| MediaError::io(&dir, "creating", e))?;
        let entries = std::fs::read_dir(&dir).map_err(|e| MediaError::io(&dir, "listing", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let stale = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP);
            if name.starts_with('.') && name.ends_with(".tmp") && stale {
                tracing::info!(file = %entry.path().display(), "media store: removing a temporary file left by a crash");
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(LocalDir {
            dir: Dir { dir, max_bytes },
            evicting: tokio::sync::Mutex::new(()),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir.dir
    }

    /// The size bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.dir.max_bytes
    }

    /// Where the object of `key` lives (whether or not it exists).
    pub fn path_of(&self, key: &Key) -> PathBuf {
        self.dir.path_of(key)
    }
}

impl Dir {
    fn path_of(&self, key: &Key) -> PathBuf {
        self.dir.join(key.as_str())
    }

    /// Every object with its size and last use, oldest use first.
    fn objects(&self) -> Result<Vec<(Key, u64, SystemTime)>, MediaError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| MediaError::io(&self.dir, "listing", e))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let Ok(key) = Key::parse(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            // Gone meanwhile (another process evicted it): not there.
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            out.push((key, meta.len(), used));
        }
        out.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Removes least recently used objects, never `keep`, until the total fits.
    fn evict(&self, keep: &Key) -> Result<Vec<(Key, u64)>, MediaError> {
        let objects = self.objects()?;
        let mut total: u64 = objects.iter().map(|o| o.1).sum();
        let mut evicted = Vec::new();
        for (key, size, _) in objects {
            if total <= self.max_bytes {
                break;
            }
            if &key == keep {
                continue;
            }
            let path = self.path_of(&key);
            match std::fs::remove_file(&path) {
                Ok(()) => evicted.push((key, size)),
                // Another process evicted it first: its bytes are gone all the same.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(MediaError::io(&path, "evicting", e)),
            }
            total = total.saturating_sub(size);
        }
        Ok(evicted)
    }

    fn read_blocking(&self, key: &Key, dest: &Path) -> Result<Option<u64>, MediaError> {
        let path = self.path_of(key);
        match std::fs::remove_file(dest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MediaError::io(dest, "replacing", e)),
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| MediaError::io(parent, "creating", e))?;
        }
        if let Err(e) = std::fs::hard_link(&path, dest) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            // Another file system (or links not allowed): copy.
            match std::fs::copy(&path, dest) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(MediaError::io(&path, "copying out", e)),
            }
        }
        let size = std::fs::metadata(dest)
            .map_err(|e| MediaError::io(dest, "reading", e))?
            .len();
        touch(&path);
        Ok(Some(size))
    }

    fn write_blocking(&self, key: &Key, src: &Path) -> Result<Written, MediaError> {
        let size = std::fs::metadata(src)
            .map_err(|e| MediaError::io(src, "reading", e))?
            .len();
        if size > self.max_bytes {
            return Ok(Written::default());
        }
        let path = self.path_of(key);
        if path.exists() {
            // Same key, same bytes (a corrupt one is deleted by the reader that finds it).
            touch(&path);
        } else {
            let tmp = self
                .dir
                .join(format!(".{key}.{:016x}.tmp", rand::random::<u64>()));
            let written = (|| {
                std::fs::copy(src, &tmp).map_err(|e| MediaError::io(&tmp, "writing", e))?;
                let file =
                    std::fs::File::open(&tmp).map_err(|e| MediaError::io(&tmp, "opening", e))?;
                file.sync_all()
                    .map_err(|e| MediaError::io(&tmp, "syncing", e))?;
                std::fs::rename(&tmp, &path).map_err(|e| MediaError::io(&path, "renaming", e))?;
                let dir = std::fs::File::open(&self.dir)
                    .map_err(|e| MediaError::io(&self.dir, "opening", e))?;
                dir.sync_all()
                    .map_err(|e| MediaError::io(&self.dir, "syncing", e))
            })();
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            touch(&path);
        }
        Ok(Written {
            stored: true,
            evicted: self.evict(key)?,
        })
    }
}

/// Marks an object used now (its mtime); a failure only costs LRU precision.
fn touch(path: &Path) {
    let done = std::fs::File::open(path).and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = done {
        tracing::debug!(file = %path.display(), error = %e, "media store: cannot mark an object used");
    }
}

fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MediaError> + Send + 'static,
) -> BoxFuture<'static, Result<T, MediaError>> {
    async move {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| MediaError::Task(e.to_string()))?
    }
    .boxed()
}

impl Backend for LocalDir {
    fn read_to<'a>(
        &'a self,
        key: &'a Key,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Option<u64>, MediaError>> {
        let (me, key, dest) = (self.dir.clone(), key.clone(), dest.to_path_buf());
        blocking(move || me.read_blocking(&key, &dest))
    }

    fn write_from<'a>(
        &'a self,
        key: &'a Key,
        src: &'a Path,
    ) -> BoxFuture<'a, Result<Written, MediaError>> {
        async move {
            let _one = self.evicting.lock().await;
            let (me, key, src) = (self.dir.clone(), key.clone(), src.to_path_buf());
            blocking(move || me.write_blocking(&key, &src)).await
        }
        .boxed()
    }

    fn delete<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>> {
        let path = self.path_of(key);
        blocking(move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(MediaError::io(&path, "deleting", e)),
        })
    }

    fn contains<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>> {
        let path = self.path_of(key);
        blocking(move || Ok(path.is_file()))
    }

    fn stored_bytes(&self) -> BoxFuture<'_, Result<Option<u64>, MediaError>> {
        let me = self.dir.clone();
        blocking(move || Ok(Some(me.objects()?.iter().map(|o| o.1).sum())))
    }
}
