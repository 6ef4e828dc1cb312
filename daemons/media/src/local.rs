//! The local-directory backend: one file per object, named by its key, in one
//! directory.
//!
//! - **Crash-safe writes**: the bytes go to a hidden temporary file in the same directory
//!   (`.<key>.<random>.tmp`), which is fsynced, renamed onto the key's name and the
//!   directory fsynced. A crash leaves either no object or the whole one, plus perhaps a
//!   temporary file. The writer holds an exclusive `flock` on its temporary file until
//!   the rename, and the kernel drops it when the process dies, so a temporary file
//!   anyone can lock is a crash's left-over whatever its age: [`LocalDir::open`] and
//!   every write remove those (where locks are not supported, those older than an
//!   hour).
//! - **Least recently used, tracked by mtime**: every read and write sets the object's
//!   modification time to now, and eviction removes the objects with the oldest (a
//!   time in the future, from before a clock step back, counts as older than any
//!   use since). The
//!   file system keeps the order, so it survives restarts and is shared by every
//!   process using the directory, with no index file to keep consistent (access times
//!   would do the same but are off or coarse under `noatime`/`relatime` mounts).
//! - **Bounded**: after each write, the directory is listed and the oldest objects are
//!   removed until the total is within `max_bytes` (the object just written is never
//!   the one removed). Another process's temporary files in flight count against the
//!   bound too; crashes' left-overs are removed. Listing a directory of a few thousand episodes
//!   is a few milliseconds next to a download; an in-memory index would go stale when
//!   another process writes.
//! - **A full file system** (`ENOSPC`, `EDQUOT`) while writing: the least recently used
//!   objects are evicted until the new object's size is freed, and the write is tried
//!   once more; if it still fails, the error is the caller's to count and report.
//! - **Reads copy the object into the caller's private file, hashing it in the same
//!   pass** (never a hard link: a hard link is the same inode, so a write into the
//!   object in place, by `cp`, `dd` or `rsync --inplace` onto it, would change the
//!   job's bytes after they were hashed, and a result measured on other audio would be
//!   recorded against the pinned rendition). The copy is the job's own, so an object
//!   evicted or overwritten while the job decodes does not touch it. The cost is one
//!   write of the episode (57.6 MB for an hour of 128 kbit/s MP3) into the job's work
//!   directory.
//! - **Only regular files are objects**: a name that holds a directory, a symbolic link
//!   (followed by nothing: a relative link would resolve elsewhere from the reader's
//!   directory) or a device is reported as [`Read::NotAnObject`], removed by
//!   [`Backend::delete`], and replaced by the next write of that key.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;

use crate::backend::{Backend, Read, Written};
use crate::key::copy_hashing;
use crate::{Key, MediaError};

/// Where locks are not supported, temporary files older than this are taken for
/// left-overs of a crash (a write in flight is minutes old at most; a 2 GB copy takes
/// seconds). Elsewhere a writer's lock says it (see [`remove_if_orphaned`]).
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
            if !is_tmp(&name.to_string_lossy()) {
                continue;
            }
            let changed = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::now());
            if remove_if_orphaned(&entry.path(), changed) {
                tracing::info!(file = %entry.path().display(), "media store: removed a temporary file no writer owns (left by a crash)");
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

    /// Every object with its size and last use, oldest use first, and the temporary
    /// files (path, size, last change).
    #[allow(clippy::type_complexity)]
    fn listing(
        &self,
    ) -> Result<(Vec<(Key, u64, SystemTime)>, Vec<(PathBuf, u64, SystemTime)>), MediaError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| MediaError::io(&self.dir, "listing", e))?;
        let mut out = Vec::new();
        let mut tmps = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // Gone meanwhile (another process evicted it): not there.
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if is_tmp(&name) {
                tmps.push((entry.path(), meta.len(), used));
                continue;
            }
            let Ok(key) = Key::parse(&name) else {
                continue;
            };
            out.push((key, meta.len(), used));
        }
        // A last use in the future was stamped before the clock stepped back (or came
        // with a restored backup): every use since the step is later in truth, so
        // those objects come first, in their own order. Sorted by time alone, such an
        // object stayed newest until that date while the objects in use evicted each
        // other in turn (outside 23b M4). A read stamps it with the true time.
        let now = SystemTime::now();
        out.sort_by(|a, b| {
            (a.2 <= now, a.2)
                .cmp(&(b.2 <= now, b.2))
                .then_with(|| a.0.cmp(&b.0))
        });
        Ok((out, tmps))
    }

    /// Every object with its size and last use, oldest use first.
    fn objects(&self) -> Result<Vec<(Key, u64, SystemTime)>, MediaError> {
        Ok(self.listing()?.0)
    }

    /// Removes least recently used objects, never `keep`, until the objects and the
    /// temporary files fit in the bound, plus `room` bytes (space a write needs on a
    /// full file system); temporary files no writer owns are removed first.
    fn evict(&self, keep: &Key, room: u64) -> Result<Vec<(Key, u64)>, MediaError> {
        let (objects, tmps) = self.listing()?;
        let mut total: u64 = objects.iter().map(|o| o.1).sum();
        for (path, size, changed) in tmps {
            if remove_if_orphaned(&path, changed) {
                tracing::info!(file = %path.display(), "media store: removed a temporary file no writer owns (left by a crash)");
                continue;
            }
            // Another writer's file in flight: its bytes are on the disk all the same.
            total += size;
        }
        let limit = self.max_bytes.saturating_sub(room);
        let mut evicted = Vec::new();
        for (key, size, _) in objects {
            if total <= limit {
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

    /// On a full file system: evicts least recently used objects (never `keep`) until
    /// `need` bytes are freed or none is left.
    fn make_room(&self, keep: &Key, need: u64) -> Result<Vec<(Key, u64)>, MediaError> {
        let mut freed = 0u64;
        let mut evicted = Vec::new();
        for (key, size, _) in self.objects()? {
            if freed >= need {
                break;
            }
            if &key == keep {
                continue;
            }
            let path = self.path_of(&key);
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    freed += size;
                    evicted.push((key, size));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(MediaError::io(&path, "evicting", e)),
            }
        }
        Ok(evicted)
    }

    fn read_blocking(&self, key: &Key, dest: &Path) -> Result<Read, MediaError> {
        let path = self.path_of(key);
        match std::fs::remove_file(dest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MediaError::io(dest, "replacing", e)),
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| MediaError::io(parent, "creating", e))?;
        }
        // Never through a symbolic link; never waiting on a FIFO.
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Read::Missing),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Ok(Read::NotAnObject {
                    what: "a symbolic link".into(),
                })
            }
            Err(e) => return Err(MediaError::io(&path, "opening", e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| MediaError::io(&path, "reading", e))?;
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file (a device, FIFO or socket)"
            };
            return Ok(Read::NotAnObject { what: what.into() });
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dest)
            .map_err(|e| MediaError::io(dest, "creating", e))?;
        let (sha256, bytes) = match copy_hashing(&mut file, &path, Some((&mut out, dest))) {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(dest);
                return Err(e);
            }
        };
        touch(&path);
        Ok(Read::Copied { bytes, sha256 })
    }

    /// Creates a temporary file for `key` and takes its writer's lock, making sure the
    /// name still leads to it (another process may have found it unlocked between the
    /// create and the lock, and removed it as a crash's left-over: then a new name).
    fn create_tmp(&self, key: &Key) -> std::io::Result<(PathBuf, std::fs::File)> {
        use std::os::unix::fs::MetadataExt;
        loop {
            let tmp = self
                .dir
                .join(format!(".{key}.{:016x}.tmp", rand::random::<u64>()));
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            if !try_lock(&file)? {
                continue;
            }
            let ours = file.metadata()?.ino();
            if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.ino() == ours) {
                return Ok((tmp, file));
            }
        }
    }

    /// Copies `src` into a locked temporary file and renames it onto `path`, fsyncing
    /// both; the lock is held until the rename is done, so no one takes the file for a
    /// crash's left-over meanwhile. The `bool` of an error: the file system is full.
    fn write_new(&self, key: &Key, src: &Path, path: &Path) -> Result<(), (MediaError, bool)> {
        let io = |p: &Path, action, e: std::io::Error| {
            let full = e.kind() == std::io::ErrorKind::StorageFull
                || e.kind() == std::io::ErrorKind::QuotaExceeded;
            (MediaError::io(p, action, e), full)
        };
        let (tmp, mut out) = self
            .create_tmp(key)
            .map_err(|e| io(&self.dir, "creating a temporary file in", e))?;
        let written = (|| {
            let mut from = std::fs::File::open(src).map_err(|e| io(src, "opening", e))?;
            std::io::copy(&mut from, &mut out).map_err(|e| io(&tmp, "writing", e))?;
            out.sync_all().map_err(|e| io(&tmp, "syncing", e))?;
            std::fs::rename(&tmp, path).map_err(|e| io(path, "renaming", e))?;
            let dir = std::fs::File::open(&self.dir).map_err(|e| io(&self.dir, "opening", e))?;
            dir.sync_all().map_err(|e| io(&self.dir, "syncing", e))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    fn write_blocking(&self, key: &Key, src: &Path) -> Result<Written, MediaError> {
        let size = std::fs::metadata(src)
            .map_err(|e| MediaError::io(src, "reading", e))?
            .len();
        if size > self.max_bytes {
            return Ok(Written::default());
        }
        let path = self.path_of(key);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => {
                // Same key, same bytes (a corrupt one is deleted by the reader that
                // finds it): nothing to write.
                touch(&path);
                return Ok(Written {
                    stored: true,
                    bytes: 0,
                    evicted: self.evict(key, 0)?,
                });
            }
            Ok(_) => {
                // A directory or a link where the object belongs: replaced.
                tracing::warn!(file = %path.display(), "media store: the object's name holds something that is not an object; replacing it");
                remove_entry(&path)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MediaError::io(&path, "reading", e)),
        }
        let mut evicted = Vec::new();
        if let Err((e, full)) = self.write_new(key, src, &path) {
            if !full {
                return Err(e);
            }
            // The file system is full before the bound is reached: make room by the
            // same least-recently-used order, and try once more.
            evicted = self.make_room(key, size)?;
            if evicted.is_empty() {
                return Err(e);
            }
            tracing::warn!(error = %e, freed = evicted.iter().map(|o| o.1).sum::<u64>(), "media store: the file system is full; evicted the least recently used objects to make room");
            if let Err((e, _)) = self.write_new(key, src, &path) {
                return Err(MediaError::FullAfterEvicting {
                    source: Box::new(e),
                    evicted,
                });
            }
        }
        touch(&path);
        evicted.extend(self.evict(key, 0)?);
        Ok(Written {
            stored: true,
            bytes: size,
            evicted,
        })
    }
}

/// Takes an exclusive `flock` on `file` without waiting: false if another holds one.
/// (`std::fs::File::try_lock` does this from Rust 1.89; the workspace builds on 1.85.)
fn try_lock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this `File` owns and keeps open.
    let done = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if done == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Removes a temporary file no writer owns (true; also when it is gone already). A
/// writer holds an exclusive `flock` on its temporary file from its creation to its
/// rename, and the kernel drops the lock when the writer's process dies, so a file that
/// can be locked is a crash's left-over, whatever its age. Where locks are not
/// supported (some network file systems), one older than [`STALE_TMP`] is.
fn remove_if_orphaned(path: &Path, changed: SystemTime) -> bool {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return e.kind() == std::io::ErrorKind::NotFound,
    };
    let orphaned = match try_lock(&file) {
        Ok(free) => free,
        Err(_) => changed.elapsed().is_ok_and(|age| age > STALE_TMP),
    };
    // Removed while holding its lock: no writer can take it up meanwhile.
    orphaned && std::fs::remove_file(path).is_ok()
}

/// A crash's or a writer's temporary file (`.<key>.<random>.tmp`).
fn is_tmp(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Removes whatever holds a name: a directory with its contents, else the entry itself
/// (a link is removed, never what it points to). False if there was nothing.
fn remove_entry(path: &Path) -> Result<bool, MediaError> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MediaError::io(path, "deleting", e)),
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
    ) -> BoxFuture<'a, Result<Read, MediaError>> {
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
        blocking(move || remove_entry(&path))
    }

    fn contains<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>> {
        let path = self.path_of(key);
        blocking(move || Ok(std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())))
    }

    fn stored_bytes(&self) -> BoxFuture<'_, Result<Option<u64>, MediaError>> {
        let me = self.dir.clone();
        blocking(move || Ok(Some(me.objects()?.iter().map(|o| o.1).sum())))
    }
}
