//! Where `export --out PATH` writes: the one rule for an output path an operator names.
//!
//! A regular file (or a path that does not exist yet) is written as `<file>.partial`
//! beside the real file and renamed over it when complete, so a failed export never
//! leaves a file that looks whole. The rename replaces whatever is at the path it names,
//! so that path is the *real* one (symlinks resolved: `link.csv -> archive.csv` updates
//! `archive.csv` and keeps the link), and anything that is not a regular file is never
//! renamed over: a device, FIFO or socket (`--out /dev/stdout`, `/dev/null`, a named
//! pipe) is written through, as a shell's `>` would (renaming over `/dev/null` as root
//! replaced the host's device node with a regular file, and a FIFO's reader got
//! nothing); a directory is refused.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Symlinks followed when resolving a path that does not exist yet (the kernel's limit).
const MAX_LINKS: usize = 40;

/// How an export reaches its `--out` path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutFile {
    /// A regular file, or none yet: write `partial`, then rename it over `real`.
    Replace {
        /// The path with every symlink resolved (what the rename replaces).
        real: PathBuf,
        /// `<real>.partial`, beside it (same file system, so the rename is atomic).
        partial: PathBuf,
    },
    /// An existing device, FIFO or socket: opened and written as it is.
    Through(PathBuf),
}

impl OutFile {
    /// Decides how to write `path`: see the module doc.
    ///
    /// # Errors
    /// `path` is a directory, a symlink loop, or cannot be inspected.
    pub fn of(path: &Path) -> Result<OutFile> {
        // `metadata` follows every link the kernel does (also `/proc/self/fd/1`, whose
        // target is no path when stdout is a pipe).
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                let real = std::fs::canonicalize(path)
                    .with_context(|| format!("resolving {}", path.display()))?;
                Ok(replace(real))
            }
            Ok(meta) if meta.is_dir() => bail!(
                "{} is a directory: name the file to write (e.g. {}/archive.csv)",
                path.display(),
                path.display()
            ),
            Ok(_) => Ok(OutFile::Through(path.to_path_buf())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(replace(dangling(path)?)),
            Err(e) => Err(e).with_context(|| format!("inspecting {}", path.display())),
        }
    }

    /// Opens the file to write the rows to.
    ///
    /// # Errors
    /// The file cannot be created or opened.
    pub fn open(&self) -> Result<File> {
        match self {
            OutFile::Replace { partial, .. } => {
                File::create(partial).with_context(|| format!("creating {}", partial.display()))
            }
            OutFile::Through(path) => OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display())),
        }
    }

    /// Makes a complete export visible: renames the partial file over the real one.
    ///
    /// # Errors
    /// The rename fails.
    pub fn commit(&self) -> Result<()> {
        match self {
            OutFile::Replace { real, partial } => std::fs::rename(partial, real)
                .with_context(|| format!("renaming {} to {}", partial.display(), real.display())),
            OutFile::Through(_) => Ok(()),
        }
    }

    /// Cleans up after a failed export: removes the partial file (nothing was renamed).
    pub fn abandon(&self) {
        if let OutFile::Replace { partial, .. } = self {
            let _ = std::fs::remove_file(partial);
        }
    }
}

fn replace(real: PathBuf) -> OutFile {
    let mut partial = real.clone().into_os_string();
    partial.push(".partial");
    OutFile::Replace {
        real,
        partial: PathBuf::from(partial),
    }
}

/// A path that does not exist: itself, or, if it is a symlink to nothing, the path the
/// chain of links ends at (where a shell's `>` would create the file).
fn dangling(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)
                    .with_context(|| format!("reading the link {}", current.display()))?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    bail!("{}: too many levels of symbolic links", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dangling_symlink_resolves_to_its_target() {
        let dir = std::env::temp_dir().join(format!("archivist-out-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("link.csv");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("target.csv", &link).unwrap();
        assert_eq!(
            OutFile::of(&link).unwrap(),
            OutFile::Replace {
                real: dir.join("target.csv"),
                partial: dir.join("target.csv.partial"),
            }
        );
        assert!(OutFile::of(&dir).is_err(), "a directory is refused");
        std::fs::remove_dir_all(&dir).ok();
    }
}
