//! Search by title (`GET /search?q=&kind=&after=`): episodes or clips whose title
//! contains the text, a page at a time in id order, from the catalog in the database
//! ([`archivist_db::catalog::search_titles`]).

use archivist_db::catalog;
use archivist_engine::schema::records::AliasTarget;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use crate::error::PageError;
use crate::layout::{self, clip_link, episode_link};
use crate::overview::urlencode;
use crate::Console;

/// Longest search text accepted (a title is rarely longer; a longer text is a mistake).
pub const MAX_QUERY_CHARS: usize = 200;

/// The query string.
#[derive(Debug, Default, Deserialize)]
pub struct SearchParams {
    /// Text the title contains.
    pub q: Option<String>,
    /// `episodes` (the default) or `clips`.
    pub kind: Option<String>,
    /// Start after this id (the next page).
    pub after: Option<String>,
}

/// `GET /search`.
pub async fn page(
    State(console): State<Console>,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Markup, PageError> {
    let Query(params) = params.map_err(|e| PageError::Invalid(e.body_text()))?;
    let q = params.q.as_deref().map(str::trim).unwrap_or("").to_string();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(PageError::Invalid(format!(
            "the search text is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    let (target, kind) = match params.kind.as_deref().unwrap_or("episodes") {
        "episodes" | "" => (AliasTarget::Episode, "episodes"),
        "clips" => (AliasTarget::Clip, "clips"),
        other => {
            return Err(PageError::Invalid(format!(
                "{other:?} is not a kind: episodes or clips"
            )))
        }
    };
    let after = params.after.unwrap_or_default();
    if !after.is_empty() {
        PageError::check_id("episode or clip", &after)?;
    }
    let size = console.settings().page_size;
    let hits = if q.is_empty() {
        Vec::new()
    } else {
        // One more than a page: is there a next page?
        catalog::search_titles(console.db(), target, &q, &after, size as i64 + 1).await?
    };
    let more = hits.len() > size;
    let hits = &hits[..hits.len().min(size)];
    Ok(layout::page(
        "Search",
        0,
        html! {
            h1 { "Search by title" }
            form #search method="get" action="/search" {
                input type="search" name="q" value=(q) placeholder="words in the title" maxlength=(MAX_QUERY_CHARS);
                select name="kind" {
                    option value="episodes" selected[kind == "episodes"] { "Episodes" }
                    option value="clips" selected[kind == "clips"] { "Clips" }
                }
                button type="submit" { "Search" }
            }
            @if !q.is_empty() {
                @if hits.is_empty() {
                    p.muted #no-hits { "No " (kind) " whose title contains “" (q) "”" @if !after.is_empty() { " after " (after) } "." }
                } @else {
                    table #hits {
                        tr { th { "Id" } th { "Title" } th { "Export" } }
                        @for (id, title) in hits {
                            tr.hit {
                                td { @if target == AliasTarget::Episode { (episode_link(id)) } @else { (clip_link(id)) } }
                                td { (title) }
                                td { (crate::export::links(kind, id)) }
                            }
                        }
                    }
                    @if more {
                        @if let Some((last, _)) = hits.last() {
                            a #next href={ "/search?q=" (urlencode(&q)) "&kind=" (kind) "&after=" (urlencode(last)) } { "Next page" }
                        }
                    }
                }
            }
        },
    ))
}
