//! `archivist results` and `archivist export`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use archivist_admin::export::{self, RowWriter};
use archivist_admin::results::{self, ClipResults, ClipSummary, EpisodeResults, ResultRow};
use archivist_admin::spool::Spool;
use archivist_admin::AdminSettings;
use clap::{Args, ValueEnum};

use super::out_file::OutFile;
use super::progress::Bar;
use super::render::{emit, or_dash, printable, table, terminal_safe};
use super::streamed::{self, SpooledRows, Widths, BOXED_ROWS};
use crate::cli::{GlobalOpts, OutputFormat};
use crate::output;

/// Arguments of `results`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ResultsArgs {
    /// Every researched clip of this episode, found or not.
    #[arg(long)]
    pub episode: Option<String>,
    /// Where this clip occurs, across all episodes.
    #[arg(long)]
    pub clip: Option<String>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values with a header line.
    Csv,
    /// A JSON array of rows.
    Json,
    /// One JSON object per line (JSON Lines), for tools that read row by row.
    Jsonl,
    /// A YAML list of rows.
    Yaml,
}

impl From<ExportFormat> for export::Format {
    fn from(format: ExportFormat) -> Self {
        match format {
            ExportFormat::Csv => export::Format::Csv,
            ExportFormat::Json => export::Format::Json,
            ExportFormat::Jsonl => export::Format::JsonLines,
            ExportFormat::Yaml => export::Format::Yaml,
        }
    }
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Format of the export [default: the global `-o json|yaml` when given, else csv].
    #[arg(long, value_enum)]
    pub format: Option<ExportFormat>,
    /// Write to this file instead of stdout (a regular file is replaced when the export
    /// is complete, through a symlink's target; a device or FIFO is written through).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn occurrence(r: &ResultRow) -> String {
    match (r.found, r.at, r.conf) {
        (true, Some(at), Some(conf)) => {
            let mut s = format!("at {at:.3} s (conf {conf:.2})");
            if let Some(speed) = r.speed {
                let _ = write!(s, " x{speed:.2}");
            }
            if let (Some(a), Some(b)) = (r.part_start, r.part_end) {
                let _ = write!(s, " part {a:.1}-{b:.1} s");
            }
            s
        }
        _ => match &r.error {
            Some(e) => format!("error: {e}"),
            None => "not found".into(),
        },
    }
}

fn render_episode(r: &EpisodeResults) -> String {
    let mut out = format!(
        "{} — {} ({}): {} clips researched, {} found\n",
        r.episode,
        printable(&r.title),
        r.duration_s
            .map(|d| format!("{d:.0} s"))
            .unwrap_or_else(|| "duration unknown".into()),
        r.researched,
        r.found
    );
    if r.researched_not_in_catalog > 0 {
        let _ = writeln!(
            out,
            "({} researched clip numbers are not in the catalog and are left out; see `archivist fsck`)",
            r.researched_not_in_catalog
        );
    }
    for a in &r.renditions {
        let _ = writeln!(
            out,
            "audio {} ({} bytes, {}){}{}: {}",
            a.sha256.get(..12).unwrap_or(&a.sha256),
            a.bytes,
            printable(&a.url),
            if a.pinned {
                ", pinned"
            } else {
                ", not pinned: the server served other audio"
            },
            if a.served_last && r.renditions.len() > 1 {
                ", what the server served when last asked"
            } else {
                ""
            },
            if a.jobs.is_empty() {
                "no runs".to_string()
            } else {
                format!("runs of {}", a.jobs.join(", "))
            }
        );
    }
    out.push_str(&table(
        &["clip", "title", "result", "job"],
        r.rows.iter().map(|x| {
            vec![
                x.clip.clone(),
                x.clip_title.clone(),
                occurrence(x),
                or_dash(x.job.clone()),
            ]
        }),
    ));
    out
}

/// The first line of `results --clip`.
fn clip_heading(r: &ClipSummary) -> String {
    format!(
        "{} — {}: researched in {} episodes, found in {}{}\n",
        r.clip,
        printable(&r.title),
        r.episodes_researched,
        r.episodes_found,
        if r.episodes_errored > 0 {
            format!(
                ", errors in {} (fix the clip and re-curate it to research them again)",
                r.episodes_errored
            )
        } else {
            String::new()
        }
    )
}

/// The header of `results --clip`'s table.
const CLIP_HEADER: [&str; 4] = ["episode", "title", "occurrence", "job"];

/// A row's cells in `results --clip`'s table, shown safely.
fn clip_cells(x: &ResultRow) -> Vec<String> {
    streamed::cells([
        x.episode.clone(),
        x.episode_title.clone(),
        occurrence(x),
        or_dash(x.job.clone()),
    ])
}

fn render_clip(r: &ClipResults) -> String {
    let mut out = clip_heading(&ClipSummary {
        clip: r.clip.clone(),
        title: r.title.clone(),
        episodes_researched: r.episodes_researched,
        episodes_found: r.episodes_found,
        episodes_errored: r.episodes_errored,
    });
    out.push_str(&table(&CLIP_HEADER, r.rows.iter().map(clip_cells)));
    out
}

/// `results --clip` as JSON or YAML, streamed: the same document as the in-memory one
/// (fields in the same order), the rows read back from the spool as they are written.
#[derive(serde::Serialize)]
#[serde(bound = "")]
struct ClipDocument<'a, I>
where
    I: Iterator<Item = archivist_admin::Result<ResultRow>>,
{
    clip: &'a str,
    title: &'a str,
    episodes_researched: usize,
    episodes_found: usize,
    episodes_errored: usize,
    rows: SpooledRows<I>,
    unreadable: [(); 0],
}

/// `results --clip`: the rows are spooled to a temporary file while the archive is
/// walked, then printed one at a time (bounded memory at any archive size; outside 22
/// finding 9).
async fn clip_results(
    format: OutputFormat,
    db: &archivist_db::Database,
    settings: &AdminSettings,
    clip: &str,
) -> Result<()> {
    let mut spool = Spool::<ResultRow>::new()?;
    let mut widths = Widths::of(&CLIP_HEADER);
    let summary = results::clip_results_each(db, settings, clip, &Bar::stderr(), &mut |row| {
        if format == OutputFormat::Table {
            widths.fit(&clip_cells(&row));
        }
        spool.push(&row)
    })
    .await?;
    if format == OutputFormat::Table && spool.len() <= BOXED_ROWS {
        let r = ClipResults {
            clip: summary.clip,
            title: summary.title,
            episodes_researched: summary.episodes_researched,
            episodes_found: summary.episodes_found,
            episodes_errored: summary.episodes_errored,
            rows: spool.collect()?,
            unreadable: Vec::new(),
        };
        return emit(format, &r, render_clip);
    }
    let rows = spool.into_rows()?;
    streamed::write_out(|out| {
        match format {
            OutputFormat::Table => {
                out.write_all(terminal_safe(&clip_heading(&summary)).as_bytes())?;
                let header: Vec<String> = CLIP_HEADER.iter().map(|h| h.to_string()).collect();
                out.write_all(widths.line(&header).as_bytes())?;
                for row in rows {
                    out.write_all(widths.line(&clip_cells(&row?)).as_bytes())?;
                }
            }
            OutputFormat::Json | OutputFormat::Yaml => {
                let document = ClipDocument {
                    clip: &summary.clip,
                    title: &summary.title,
                    episodes_researched: summary.episodes_researched,
                    episodes_found: summary.episodes_found,
                    episodes_errored: summary.episodes_errored,
                    rows: SpooledRows::new(rows),
                    unreadable: [],
                };
                if format == OutputFormat::Json {
                    serde_json::to_writer_pretty(&mut *out, &document)?;
                    out.write_all(b"\n")?;
                } else {
                    serde_yaml::to_writer(&mut *out, &document)?;
                }
            }
        }
        Ok(())
    })
    .map_err(|e| e.context("writing the results"))
}

/// Runs `results`.
pub async fn run(global: &GlobalOpts, args: ResultsArgs) -> Result<ExitCode> {
    // The catalog and research are in the database; the tree is still checked, so a
    // mistyped chroot is refused as by every admin command, not answered from elsewhere.
    crate::context::connect_initialised(global).await?;
    let db = crate::context::database_read_only(global).await?;
    let settings = AdminSettings::default();
    if let Some(episode) = &args.episode {
        let r = results::episode_results(&db, episode).await?;
        emit(global.output, &r, render_episode)?;
    } else if let Some(clip) = &args.clip {
        // A research record that does not decode stops the walk with an error naming
        // it (the database refuses it), so no answer is silently incomplete.
        clip_results(global.output, &db, &settings, clip).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `export`: rows are written as they are read (bounded memory at any archive
/// size); to a file, through a temporary name renamed at the end, so a failed export
/// never leaves a file that looks complete (devices and FIFOs are written through:
/// [`OutFile`]).
pub async fn export(global: &GlobalOpts, args: ExportArgs) -> Result<ExitCode> {
    crate::context::connect_initialised(global).await?;
    let db = crate::context::database_read_only(global).await?;
    let format = format_of(args.format, global.output).into();
    let settings = AdminSettings::default();
    let summary = match &args.out {
        Some(path) => {
            let out = OutFile::of(path)?;
            let file = out.open()?;
            let mut writer = RowWriter::new(format, std::io::BufWriter::new(file));
            let summary = export::export_to(&db, &settings, &Bar::stderr(), &mut writer).await;
            let finished = summary.and_then(|s| writer.finish().map(|_| s));
            let summary = match finished {
                Ok(s) => s,
                Err(e) => {
                    out.abandon();
                    return Err(anyhow::Error::new(e)
                        .context(format!("writing the export to {}", path.display())));
                }
            };
            out.commit()?;
            eprintln!(
                "archivist: {} rows of {} episodes written to {}",
                summary.rows,
                summary.episodes,
                path.display()
            );
            summary
        }
        None => {
            let mut writer = RowWriter::new(format, std::io::BufWriter::new(output::Stdout));
            let streamed = export::export_to(&db, &settings, &Bar::stderr(), &mut writer)
                .await
                .and_then(|s| writer.finish().map(|_| s));
            match streamed {
                Ok(s) => s,
                // The reader went away (`export | head`): a quiet success, and no more
                // records are read for nobody.
                Err(_) if output::reader_gone() => return Ok(ExitCode::SUCCESS),
                Err(e) => return Err(e.into()),
            }
        }
    };
    if summary.unreadable.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "archivist: export is incomplete: {} research record(s) do not decode and have no rows (run `archivist fsck`):",
        summary.unreadable.len()
    );
    for u in &summary.unreadable {
        eprintln!("  {}: {}", u.path, u.error);
    }
    Ok(ExitCode::from(1))
}

/// The export format: `--format` when given, else the global `-o json|yaml`, else CSV
/// (the table format of an export is CSV).
fn format_of(format: Option<ExportFormat>, output: OutputFormat) -> ExportFormat {
    format.unwrap_or(match output {
        OutputFormat::Json => ExportFormat::Json,
        OutputFormat::Yaml => ExportFormat::Yaml,
        OutputFormat::Table => ExportFormat::Csv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_global_output_format_picks_the_export_format() {
        assert_eq!(format_of(None, OutputFormat::Json), ExportFormat::Json);
        assert_eq!(format_of(None, OutputFormat::Yaml), ExportFormat::Yaml);
        assert_eq!(format_of(None, OutputFormat::Table), ExportFormat::Csv);
        assert_eq!(
            format_of(Some(ExportFormat::Csv), OutputFormat::Json),
            ExportFormat::Csv
        );
    }
}
