//! The SQLite file a process opened, remembered by its device and inode, so a file deleted
//! or replaced under the running daemons is noticed (outside 17m H1: with the file
//! removed, the recorder went on storing into the deleted inode, moved 9 jobs to
//! `recorded` and deleted their reports from ZooKeeper, so their results lived only in a
//! file no one could open; the planner went on reading the deleted catalog).
//! SQLite itself keeps writing to an unlinked file without an error, so the check is
//! ours: before each write transaction, after each commit, and from a watchdog.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the file was and which file it was when the database was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now.
    pub(crate) fn of(path: &Path) -> std::io::Result<FileIdentity> {
        let meta = std::fs::metadata(path)?;
        Ok(FileIdentity {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// `None` while the same file is at the same path; else what happened, in words.
    pub(crate) fn changed(&self) -> Option<String> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.dev() == self.dev && meta.ino() == self.ino => None,
            Ok(_) => Some(format!(
                "{} is another file than the one this process opened (replaced or restored under it)",
                self.path.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!(
                "{} was deleted while this process had it open",
                self.path.display()
            )),
            Err(e) => Some(format!("{} cannot be checked: {e}", self.path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_or_replaced_file_is_noticed() {
        let dir = std::env::temp_dir().join(format!("archivist-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.db");
        std::fs::write(&path, b"x").unwrap();
        let identity = FileIdentity::of(&path).unwrap();
        assert_eq!(identity.changed(), None);
        std::fs::remove_file(&path).unwrap();
        assert!(identity.changed().unwrap().contains("was deleted"));
        std::fs::write(&path, b"y").unwrap();
        let now = identity.changed();
        // A new file may reuse the inode on some file systems; then it is the same name
        // and inode, which no check by identity can tell apart.
        if FileIdentity::of(&path).unwrap() != identity {
            assert!(now.unwrap().contains("another file"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
