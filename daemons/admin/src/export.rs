//! `export`: every researched (episode, clip) pair streamed to a writer a page of
//! research records at a time (from the database), so an archive of any size exports in bounded memory
//! (the old export built every row first: 1.15 GB per 1,000 researched episodes of 2,000
//! clips, killed by the kernel at 100k episodes).

use std::collections::BTreeMap;
use std::io::Write;

use archivist_db::{research, Database};
use serde::Serialize;

use crate::error::{AdminError, Result};
use crate::results::{rows_of, ResultRow};
use crate::settings::{AdminSettings, Progress};
use crate::status::Unreadable;

/// The formats an export streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// RFC 4180 CSV with a header line.
    Csv,
    /// One JSON array of row objects (written element by element).
    Json,
    /// One JSON object per line: the format to feed other tools row by row.
    JsonLines,
    /// A YAML sequence of row mappings.
    Yaml,
}

/// Receives export rows one at a time.
pub trait RowSink {
    /// One more row.
    fn row(&mut self, row: &ResultRow) -> Result<()>;
}

/// Collects rows in memory: for tests and small reads, never for a whole archive.
impl RowSink for Vec<ResultRow> {
    fn row(&mut self, row: &ResultRow) -> Result<()> {
        self.push(row.clone());
        Ok(())
    }
}

/// Writes rows in a [`Format`] as they come; [`RowWriter::finish`] closes the document.
pub struct RowWriter<W: Write> {
    format: Format,
    out: W,
    rows: u64,
}

impl<W: Write> RowWriter<W> {
    /// A writer that has written nothing yet (the CSV header goes with the first call).
    pub fn new(format: Format, out: W) -> Self {
        RowWriter {
            format,
            out,
            rows: 0,
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn start(&mut self) -> std::io::Result<()> {
        match self.format {
            Format::Csv => writeln!(self.out, "{}", CSV_HEADER),
            Format::Json => write!(self.out, "["),
            Format::JsonLines | Format::Yaml => Ok(()),
        }
    }

    fn write_row(&mut self, row: &ResultRow) -> std::io::Result<()> {
        if self.rows == 0 {
            self.start()?;
        }
        match self.format {
            Format::Csv => writeln!(self.out, "{}", csv_line(row)),
            Format::Json => {
                let sep = if self.rows == 0 { "\n  " } else { ",\n  " };
                write!(self.out, "{sep}")?;
                serde_json::to_writer(&mut self.out, row).map_err(std::io::Error::other)
            }
            Format::JsonLines => {
                serde_json::to_writer(&mut self.out, row).map_err(std::io::Error::other)?;
                writeln!(self.out)
            }
            Format::Yaml => {
                let text = serde_yaml::to_string(&[row]).map_err(std::io::Error::other)?;
                self.out.write_all(text.as_bytes())
            }
        }
    }

    /// Ends the document (a header-only CSV or `[]` when there were no rows) and
    /// flushes; returns the writer.
    pub fn finish(mut self) -> Result<W> {
        let end = (|| {
            if self.rows == 0 {
                self.start()?;
            }
            match (self.format, self.rows) {
                (Format::Json, 0) => writeln!(self.out, "]")?,
                (Format::Json, _) => writeln!(self.out, "\n]")?,
                (Format::Yaml, 0) => writeln!(self.out, "[]")?,
                _ => {}
            }
            self.out.flush()
        })();
        end.map_err(AdminError::Write)?;
        Ok(self.out)
    }
}

impl<W: Write> RowSink for RowWriter<W> {
    fn row(&mut self, row: &ResultRow) -> Result<()> {
        self.write_row(row).map_err(AdminError::Write)?;
        self.rows += 1;
        Ok(())
    }
}

/// The CSV header, in [`csv_line`]'s column order (docs/operations.md, "Export columns").
pub const CSV_HEADER: &str =
    "episode,episode_title,clip,clip_title,found,at,conf,speed,part_start,part_end,job,researcher,error,rendition";

/// A text cell of the CSV export made safe to open in a spreadsheet or `cat` on a
/// terminal (outside 22 finding 14): control characters but the line break (which CSV
/// quoting keeps) are removed (an escape sequence in a title would drive the terminal),
/// and a cell that would start with `=`, `+`, `-` or `@` (or a tab or carriage return
/// before the removal) gets a leading `'`, so a spreadsheet shows it as text instead of
/// running it as a formula: OWASP's rule for CSV injection. Titles, ids and messages only;
/// numbers are written as they are. JSON, JSON Lines and YAML keep the stored text.
pub fn spreadsheet_safe(text: &str) -> String {
    let risky_start = text.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let kept: String = text
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect();
    if risky_start || kept.starts_with(['=', '+', '-', '@']) {
        format!("'{kept}")
    } else {
        kept
    }
}

/// One row as a CSV line (RFC 4180 quoting, text cells [`spreadsheet_safe`]), without
/// the line break.
pub fn csv_line(r: &ResultRow) -> String {
    fn opt<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map(ToString::to_string).unwrap_or_default()
    }
    let values = [
        spreadsheet_safe(&r.episode),
        spreadsheet_safe(&r.episode_title),
        spreadsheet_safe(&r.clip),
        spreadsheet_safe(&r.clip_title),
        r.found.to_string(),
        opt(&r.at),
        opt(&r.conf),
        opt(&r.speed),
        opt(&r.part_start),
        opt(&r.part_end),
        spreadsheet_safe(&opt(&r.job)),
        spreadsheet_safe(&opt(&r.researcher)),
        spreadsheet_safe(&opt(&r.error)),
        spreadsheet_safe(&opt(&r.rendition)),
    ];
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if v.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&v.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(v);
        }
    }
    out
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportSummary {
    /// Rows written.
    pub rows: u64,
    /// Research records read (episodes with research).
    pub episodes: u64,
    /// Research records that do not decode, whose episodes have no rows (never left out
    /// silently: the CLI names them and exits non-zero). Empty since the archive is read
    /// from the database, which refuses such a record with an error that ends the export.
    pub unreadable: Vec<Unreadable>,
}

/// Streams every researched (episode, clip) pair into `sink`, one row per occurrence
/// plus not-found rows, ordered by episode, clip and offset. The research archive is
/// walked a page of `settings.batch_size` episodes at a time and the catalog's titles
/// read per page, both from the database (issue 22): memory is bounded by one page and
/// the clips' titles.
pub async fn export_to(
    db: &Database,
    settings: &AdminSettings,
    progress: &dyn Progress,
    sink: &mut dyn RowSink,
) -> Result<ExportSummary> {
    let clip_titles = crate::results::clip_titles(db).await?;
    let total = research::counts(db).await?.episodes;
    let mut summary = ExportSummary {
        rows: 0,
        episodes: 0,
        unreadable: Vec::new(),
    };
    progress.begin("research", u64::try_from(total).unwrap_or(0));
    let walked = walk(db, settings, &clip_titles, progress, sink, &mut summary).await;
    progress.end();
    walked.map(|()| summary)
}

/// The pages of [`export_to`].
async fn walk(
    db: &Database,
    settings: &AdminSettings,
    clip_titles: &BTreeMap<String, String>,
    progress: &dyn Progress,
    sink: &mut dyn RowSink,
    summary: &mut ExportSummary,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = research::page(db, after.as_deref(), settings.batch_size.max(1)).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.episode.clone());
        let ids: Vec<String> = page.iter().map(|r| r.episode.clone()).collect();
        let titles = crate::results::episode_titles(db, &ids).await?;
        let renditions = crate::results::page_renditions(db, &page).await?;
        let none = BTreeMap::new();
        for record in &page {
            summary.episodes += 1;
            let title = titles.get(&record.episode).map_or("", String::as_str);
            let runs = renditions.get(&record.episode).unwrap_or(&none);
            for row in rows_of(record, title, clip_titles, runs, &|_| true) {
                sink.row(&row)?;
                summary.rows += 1;
            }
        }
        progress.advance(page.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_are_text_and_control_characters_go() {
        use super::spreadsheet_safe as safe;
        assert_eq!(safe("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        for risky in ["+1", "-1+2", "@SUM(A1)", "\t=x", "\r=x", "\tplain"] {
            assert!(
                safe(risky).starts_with('\''),
                "{risky:?} -> {:?}",
                safe(risky)
            );
        }
        assert_eq!(safe("\x1b[31mred\x1b[0m title"), "[31mred[0m title");
        assert_eq!(safe("two\nlines"), "two\nlines");
        assert_eq!(safe("Episode 1 = good"), "Episode 1 = good");
        assert_eq!(safe("e0000001"), "e0000001");
        assert_eq!(safe(""), "");
    }
}
