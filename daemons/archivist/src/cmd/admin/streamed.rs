//! Printing answers whose rows were spooled to disk ([`archivist_admin::spool`]), one row
//! at a time: `results --clip` and `status --episodes` keep flat memory at any archive
//! size (outside 22 finding 9). JSON and YAML are the same documents as before; a table
//! of more than [`BOXED_ROWS`] rows is printed as plain aligned columns (a boxed table
//! holds every cell in memory to lay itself out).

use std::cell::RefCell;
use std::io::Write;

use anyhow::Result;
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::render::printable;
use crate::output;

/// Most rows drawn as a boxed table.
pub const BOXED_ROWS: u64 = 10_000;

/// Rows read back from a spool as a JSON or YAML sequence, one at a time (serialized
/// once: the rows are consumed).
pub struct SpooledRows<I>(pub RefCell<Option<I>>);

impl<I> SpooledRows<I> {
    /// The rows of `iter`.
    pub fn new(iter: I) -> SpooledRows<I> {
        SpooledRows(RefCell::new(Some(iter)))
    }
}

impl<I, T> Serialize for SpooledRows<I>
where
    I: Iterator<Item = archivist_admin::Result<T>>,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let rows = self.0.borrow_mut().take();
        let mut seq = serializer.serialize_seq(None)?;
        for row in rows.into_iter().flatten() {
            seq.serialize_element(&row.map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

/// A document (already a YAML value, in its fields' order) with a streamed sequence
/// added as the last field of the mapping under `parent`: `status --episodes`'s
/// `research.per_episode`.
pub struct WithRows<'a, R> {
    /// The document without the rows.
    pub document: &'a serde_yaml::Mapping,
    /// The key of the mapping the rows go in.
    pub parent: &'static str,
    /// The rows' key.
    pub key: &'static str,
    /// The rows.
    pub rows: &'a R,
}

impl<R: Serialize> Serialize for WithRows<'_, R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.document.len()))?;
        for (k, v) in self.document {
            match (k.as_str(), v.as_mapping()) {
                (Some(name), Some(inner)) if name == self.parent => map.serialize_entry(
                    k,
                    &Appended {
                        inner,
                        key: self.key,
                        rows: self.rows,
                    },
                )?,
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

struct Appended<'a, R> {
    inner: &'a serde_yaml::Mapping,
    key: &'static str,
    rows: &'a R,
}

impl<R: Serialize> Serialize for Appended<'_, R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.inner.len() + 1))?;
        for (k, v) in self.inner {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry(self.key, self.rows)?;
        map.end()
    }
}

/// Column widths of a plain table, grown as rows are spooled.
#[derive(Debug, Clone)]
pub struct Widths(Vec<usize>);

impl Widths {
    /// The header's widths.
    pub fn of(header: &[&str]) -> Widths {
        Widths(header.iter().map(|h| h.chars().count()).collect())
    }

    /// Makes room for a row (cells already [`printable`]).
    pub fn fit(&mut self, cells: &[String]) {
        for (w, cell) in self.0.iter_mut().zip(cells) {
            *w = (*w).max(cell.chars().count());
        }
    }

    /// One line: cells padded to their column, two spaces apart.
    pub fn line(&self, cells: &[String]) -> String {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&self.0).enumerate() {
            text.push_str(cell);
            if i + 1 < cells.len() {
                text.push_str(&" ".repeat(w.saturating_sub(cell.chars().count()) + 2));
            }
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    }
}

/// Cells shown safely.
pub fn cells<const N: usize>(raw: [String; N]) -> Vec<String> {
    raw.iter().map(|c| printable(c)).collect()
}

/// Writes `what` to standard output through a buffer; a reader going away (`| head`) is
/// a quiet success, as for every command.
pub fn write_out(what: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let mut out = std::io::BufWriter::new(output::Stdout);
    let written = what(&mut out).and_then(|()| out.flush().map_err(Into::into));
    match written {
        Err(_) if output::reader_gone() => Ok(()),
        other => other,
    }
}
