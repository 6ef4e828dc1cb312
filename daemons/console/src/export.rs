//! Export links: an episode's or a clip's results as CSV or JSON Lines, downloaded
//! (`GET /episodes/{id}/export?format=csv|jsonl`, `GET /clips/{id}/export?...`).
//!
//! The rows are the ones `archivist results` shows and the lines are `archivist
//! export`'s (its CSV header and [`archivist_admin::export::csv_line`], spreadsheet-safe;
//! JSON Lines of the same rows), so a download and the CLI agree by construction. The
//! body is streamed: a clip's rows are sent as the research archive is walked a page
//! at a time ([`archivist_admin::results::clip_results_each`]), so the first bytes go
//! out before the walk ends. Lines wait in memory only while the browser reads slower
//! than the archive is walked (the walk's sink cannot wait: not built, docs).

use archivist_admin::export::{csv_line, CSV_HEADER};
use archivist_admin::results::{self, ResultRow};
use archivist_admin::{AdminError, Silent};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::error::PageError;
use crate::Console;

/// A download's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// CSV with `archivist export`'s header.
    Csv,
    /// One JSON object a line.
    Jsonl,
}

impl Format {
    fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Jsonl => "application/x-ndjson",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        }
    }

    /// One row as a line of this format.
    fn line(self, row: &ResultRow) -> String {
        match self {
            Format::Csv => format!("{}\n", csv_line(row)),
            Format::Jsonl => match serde_json::to_string(row) {
                Ok(json) => format!("{json}\n"),
                // A row is plain data; serde_json cannot fail on it. Say so in the file.
                Err(e) => format!("{{\"error\":{:?}}}\n", e.to_string()),
            },
        }
    }
}

/// `?format=`.
#[derive(Debug, Deserialize)]
pub struct ExportParams {
    /// `csv` or `jsonl`.
    pub format: Format,
}

/// The download links of an episode's or clip's page (`kind` is `episodes` or `clips`).
pub fn links(kind: &str, id: &str) -> Markup {
    html! {
        span.export {
            a.export-csv href={ "/" (kind) "/" (id) "/export?format=csv" } download { "CSV" }
            " · "
            a.export-jsonl href={ "/" (kind) "/" (id) "/export?format=jsonl" } download { "JSON Lines" }
        }
    }
}

fn params(p: Result<Query<ExportParams>, QueryRejection>) -> Result<Format, PageError> {
    p.map(|Query(p)| p.format)
        .map_err(|_| PageError::Invalid("give format=csv or format=jsonl".into()))
}

/// A streamed download of `lines` named `name.ext`.
fn download(
    format: Format,
    name: &str,
    lines: mpsc::UnboundedReceiver<Result<String, String>>,
) -> Response {
    let stream = futures_util::stream::unfold(lines, |mut rx| async move {
        rx.recv().await.map(|line| {
            (
                line.map_err(|e| std::io::Error::other(format!("the export stopped: {e}"))),
                rx,
            )
        })
    });
    (
        [
            (header::CONTENT_TYPE, format.content_type().to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}.{}\"", format.extension()),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// `GET /episodes/{id}/export?format=`: the episode's rows (one research record: read
/// whole, then sent line by line).
pub async fn episode(
    State(console): State<Console>,
    Path(id): Path<String>,
    format: Result<Query<ExportParams>, QueryRejection>,
) -> Result<Response, PageError> {
    PageError::check_id("episode", &id)?;
    let format = params(format)?;
    let res = results::episode_results(console.db(), &id).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    if format == Format::Csv {
        let _ = tx.send(Ok(format!("{CSV_HEADER}\n")));
    }
    for row in &res.rows {
        let _ = tx.send(Ok(format.line(row)));
    }
    Ok(download(format, &id, rx))
}

/// `GET /clips/{id}/export?format=`: every episode's rows for the clip, sent as the
/// archive is walked. The clip is looked up first, so an unknown clip is a 404 page,
/// not an empty file; an error later in the walk ends the body with an error (the
/// download fails rather than look complete).
pub async fn clip(
    State(console): State<Console>,
    Path(id): Path<String>,
    format: Result<Query<ExportParams>, QueryRejection>,
) -> Result<Response, PageError> {
    PageError::check_id("clip", &id)?;
    let format = params(format)?;
    if archivist_db::catalog::clip(console.db(), &id)
        .await?
        .is_none()
    {
        return Err(PageError::Admin(AdminError::NotFound {
            what: "clip",
            id: id.clone(),
            path: "the catalog".into(),
        }));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    if format == Format::Csv {
        let _ = tx.send(Ok(format!("{CSV_HEADER}\n")));
    }
    let (db, settings, clip) = (console.db().clone(), console.admin().clone(), id.clone());
    tokio::spawn(async move {
        let sink_tx = tx.clone();
        let mut sink = move |row: ResultRow| {
            // A closed channel: the browser went away; stop walking.
            sink_tx
                .send(Ok(format.line(&row)))
                .map_err(|_| AdminError::Invalid("the download was closed".into()))
        };
        if let Err(e) = results::clip_results_each(&db, &settings, &clip, &Silent, &mut sink).await
        {
            let _ = tx.send(Err(e.to_string()));
        }
    });
    Ok(download(format, &id, rx))
}
