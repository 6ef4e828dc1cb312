//! Rows kept on disk instead of in memory, for the answers whose size grows with the
//! archive (`results --clip`, `status --episodes`; outside 22 finding 9): the rows are
//! written to an unlinked temporary file as JSON lines while the database is walked a
//! page at a time, then read back one at a time to print, so memory stays flat at any
//! size (the file takes a few hundred bytes per row). No crate: an unlinked file in the
//! temporary directory is all it needs.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{AdminError, Result};

/// Rows of type `T`, in the order pushed.
#[derive(Debug)]
pub struct Spool<T> {
    writer: BufWriter<File>,
    len: u64,
    _rows: PhantomData<T>,
}

fn io_error(what: &str, e: impl std::fmt::Display) -> AdminError {
    AdminError::Spool(format!("{what}: {e}"))
}

impl<T: Serialize + DeserializeOwned> Spool<T> {
    /// An empty spool: a new file in the temporary directory (`TMPDIR`), unlinked at
    /// once, so it is gone when the process ends however it ends.
    pub fn new() -> Result<Spool<T>> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir();
        for _ in 0..100 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = dir.join(format!(
                "archivist-spool-{}-{}-{nanos:08x}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    let _ = std::fs::remove_file(&path);
                    return Ok(Spool {
                        writer: BufWriter::new(file),
                        len: 0,
                        _rows: PhantomData,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(&path.display().to_string(), e)),
            }
        }
        Err(io_error(&dir.display().to_string(), "no free name"))
    }

    /// Adds a row.
    pub fn push(&mut self, row: &T) -> Result<()> {
        serde_json::to_writer(&mut self.writer, row).map_err(|e| io_error("writing", e))?;
        self.writer
            .write_all(b"\n")
            .map_err(|e| io_error("writing", e))?;
        self.len += 1;
        Ok(())
    }

    /// Rows pushed.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no row was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows, in the order pushed, read back one at a time.
    pub fn into_rows(mut self) -> Result<impl Iterator<Item = Result<T>>> {
        self.writer.flush().map_err(|e| io_error("writing", e))?;
        let mut file = self
            .writer
            .into_inner()
            .map_err(|e| io_error("writing", e.error()))?;
        file.rewind().map_err(|e| io_error("rewinding", e))?;
        Ok(BufReader::new(file).lines().map(|line| {
            let line = line.map_err(|e| io_error("reading back", e))?;
            serde_json::from_str(&line).map_err(|e| io_error("reading back", e))
        }))
    }

    /// Every row in memory (small answers, tests).
    pub fn collect(self) -> Result<Vec<T>> {
        self.into_rows()?.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_in_order_and_the_file_is_gone() {
        let mut spool = Spool::<(String, u32)>::new().unwrap();
        for i in 0..1000 {
            spool.push(&(format!("row \"{i}\"\n"), i)).unwrap();
        }
        assert_eq!(spool.len(), 1000);
        let rows = spool.collect().unwrap();
        assert_eq!(rows.len(), 1000);
        assert_eq!(rows[7], ("row \"7\"\n".to_string(), 7));
        let leftover = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("archivist-spool-{}-", std::process::id()))
            });
        assert!(!leftover);
    }
}
