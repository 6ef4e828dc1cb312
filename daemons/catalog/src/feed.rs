//! Podcast feeds (RSS, Atom, JSON Feed via `feed-rs`) fetched over HTTP.
//!
//! Every item with an audio enclosure becomes an episode whose identity is its media URL
//! and its (feed URL, GUID). Items without an enclosure or with a non-audio one are
//! reported by title and GUID and left out; a malformed feed or an unreachable URL is an
//! error and nothing is written. The daemon sends the validators of the last answer
//! (`If-None-Match`, `If-Modified-Since`) so an unchanged feed costs a 304.

use std::collections::HashSet;

use archivist_engine::Session;

use crate::error::{CatalogError, ItemProblem};
use crate::identity;
use crate::item::{CatalogItem, FeedGuid, Kind};
use crate::local::describe_reqwest;
use crate::report::CurationReport;
use crate::settings::{CurateSettings, FetchSettings};

/// An HTTP client for feeds and probes.
///
/// # Errors
/// [`CatalogError::BadInput`] if the TLS backend cannot start.
pub fn http_client(fetch: &FetchSettings) -> Result<reqwest::Client, CatalogError> {
    reqwest::Client::builder()
        .timeout(fetch.timeout)
        .user_agent(fetch.user_agent.clone())
        .build()
        .map_err(|e| CatalogError::bad_input("http client", describe_reqwest(&e)))
}

/// The validators of a feed answer, sent back on the next poll.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag` of the last answer.
    pub etag: Option<String>,
    /// `Last-Modified` of the last answer.
    pub last_modified: Option<String>,
}

/// What a fetch got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// 304: the feed did not change since the validators sent.
    NotModified,
    /// The document and its validators.
    Document {
        /// Body bytes.
        body: Vec<u8>,
        /// Validators to send next time.
        validators: Validators,
    },
}

/// GETs a feed, conditionally when `validators` are given.
///
/// # Errors
/// [`CatalogError::Fetch`] when unreachable, on an error status, or when the body is
/// larger than `max_feed_bytes`.
pub async fn fetch(
    client: &reqwest::Client,
    url: &str,
    validators: Option<&Validators>,
    settings: &FetchSettings,
) -> Result<Fetched, CatalogError> {
    let fail = |reason: String| CatalogError::Fetch {
        url: url.to_string(),
        reason,
    };
    let mut request = client.get(url);
    if let Some(v) = validators {
        if let Some(etag) = &v.etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        if let Some(lm) = &v.last_modified {
            request = request.header(reqwest::header::IF_MODIFIED_SINCE, lm);
        }
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| fail(describe_reqwest(&e)))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(Fetched::NotModified);
    }
    if !status.is_success() {
        return Err(fail(format!("HTTP {status}")));
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(describe_reqwest(&e)))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > settings.max_feed_bytes {
            return Err(fail(format!(
                "feed is larger than {} bytes",
                settings.max_feed_bytes
            )));
        }
    }
    Ok(Fetched::Document { body, validators })
}

/// A feed turned into items.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedFeed {
    /// The feed's title.
    pub title: Option<String>,
    /// Items with an audio enclosure.
    pub items: Vec<CatalogItem>,
    /// Items left out, by title and GUID, with the reason.
    pub skipped: Vec<ItemProblem>,
}

fn label(feed_url: &str, n: usize, title: &str, guid: &str) -> String {
    let title = if title.is_empty() {
        "(untitled)"
    } else {
        title
    };
    if guid.is_empty() {
        format!("{feed_url} item {n} {title:?}")
    } else {
        format!("{feed_url} item {n} {title:?} (guid {guid})")
    }
}

/// Parses a feed document. `feed_url` is the normalized URL it was fetched from (part of
/// each item's GUID identity); `priority` is given to every item (`None`: keep stored).
///
/// # Errors
/// [`CatalogError::MalformedFeed`] when the document is not a feed.
pub fn parse_feed(
    feed_url: &str,
    body: &[u8],
    priority: Option<i64>,
) -> Result<ParsedFeed, CatalogError> {
    // A missing GUID stays empty (feed-rs would make one from the title): identity then
    // rests on the media URL alone, never on a title.
    let parser = feed_rs::parser::Builder::new()
        .id_generator(|_, _, _| String::new())
        .build();
    let feed = parser
        .parse(body)
        .map_err(|e| CatalogError::MalformedFeed {
            url: feed_url.to_string(),
            reason: e.to_string(),
        })?;
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = HashSet::new();
    for (i, entry) in feed.entries.iter().enumerate() {
        let n = i + 1;
        let title = entry
            .title
            .as_ref()
            .map(|t| t.content.trim().to_string())
            .unwrap_or_default();
        let guid = entry.id.trim().to_string();
        let label = label(feed_url, n, &title, &guid);
        let enclosures: Vec<(String, Option<String>)> = entry
            .media
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|c| {
                let url = c.url.as_ref()?.to_string();
                let declared = c.content_type.as_ref().map(|t| t.to_string());
                let media_type =
                    declared.or_else(|| identity::guess_media_type(&url).map(str::to_string));
                Some((url, media_type))
            })
            .collect();
        if enclosures.is_empty() {
            skipped.push(ItemProblem::new(label, "no media enclosure"));
            continue;
        }
        let Some((url, media_type)) = enclosures
            .iter()
            .find(|(_, t)| t.as_deref().map(identity::is_audio_type).unwrap_or(false))
            .cloned()
        else {
            let types: Vec<String> = enclosures
                .iter()
                .map(|(u, t)| format!("{u} ({})", t.as_deref().unwrap_or("unknown type")))
                .collect();
            skipped.push(ItemProblem::new(
                label,
                format!("enclosure is not audio: {}", types.join(", ")),
            ));
            continue;
        };
        let title = if title.is_empty() {
            crate::local::resolve_media(&url, None)
                .map(|m| m.stem)
                .unwrap_or_else(|_| url.clone())
        } else {
            title
        };
        let description = entry.summary.as_ref().map(|t| t.content.as_str());
        let item = match CatalogItem::new(Kind::Episode, &url, &title, label.clone()) {
            Ok(item) => item,
            Err(e) => {
                skipped.push(ItemProblem::new(label, e.to_string()));
                continue;
            }
        };
        let item = item
            .with_description(description)
            .with_media_type(media_type)
            .with_air_date(
                entry
                    .published
                    .or(entry.updated)
                    .map(|d| d.to_rfc3339())
                    // A feed dated in year 1 or 9999 has a broken date, not an old show.
                    .filter(|d| crate::item::check_air_date(d).is_ok()),
            )
            .with_priority(priority)
            .with_guid((!guid.is_empty()).then(|| FeedGuid {
                feed_url: feed_url.to_string(),
                guid: guid.clone(),
            }));
        let keys = item.alias_keys();
        if keys.iter().any(|k| seen.contains(k)) {
            skipped.push(ItemProblem::new(
                label,
                "duplicate of an earlier item of this feed (same GUID or media URL)",
            ));
            continue;
        }
        seen.extend(keys);
        items.push(item);
    }
    Ok(ParsedFeed {
        title: feed.title.map(|t| t.content),
        items,
        skipped,
    })
}

/// `archivist curate feed URL`: fetches the feed once and registers its episodes.
/// Left-out items are in the report's `skipped`.
///
/// # Errors
/// [`CatalogError::Fetch`] or [`CatalogError::MalformedFeed`] before anything is
/// written; [`CatalogError::Engine`] from ZooKeeper.
pub async fn curate_feed(
    session: &Session,
    url: &str,
    priority: Option<i64>,
    settings: &CurateSettings,
    fetch_settings: &FetchSettings,
) -> Result<CurationReport, CatalogError> {
    let feed_url = identity::normalize_url(url)?;
    let client = http_client(fetch_settings)?;
    let Fetched::Document { body, .. } = fetch(&client, &feed_url, None, fetch_settings).await?
    else {
        return Ok(CurationReport::default());
    };
    curate_document(session, &feed_url, &body, priority, settings).await
}

/// Parses a fetched feed and curates its items.
pub(crate) async fn curate_document(
    session: &Session,
    feed_url: &str,
    body: &[u8],
    priority: Option<i64>,
    settings: &CurateSettings,
) -> Result<CurationReport, CatalogError> {
    let parsed = parse_feed(feed_url, body, priority)?;
    for problem in &parsed.skipped {
        tracing::warn!(feed = %feed_url, item = %problem.item, reason = %problem.reason, "feed item left out");
    }
    let mut report = crate::upsert::curate(session, parsed.items, settings).await?;
    report.skipped.extend(parsed.skipped);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEED: &str = r#"<?xml version="1.0"?>
<rss version="2.0"><channel><title>Show</title>
<item><title>One</title><guid>g-1</guid><pubDate>Tue, 02 Jan 2024 10:00:00 GMT</pubDate>
  <enclosure url="http://h/one.mp3" type="audio/mpeg" length="1"/></item>
<item><title>Slides</title><guid>g-2</guid><enclosure url="http://h/s.pdf" type="application/pdf" length="1"/></item>
<item><title>No guid</title><enclosure url="http://h/three.m4a" type="audio/mp4" length="1"/></item>
<item><title>Text only</title><guid>g-4</guid></item>
</channel></rss>"#;

    #[test]
    fn audio_items_are_kept_and_others_named() {
        let parsed = parse_feed("http://h/feed.xml", FEED.as_bytes(), Some(2)).unwrap();
        assert_eq!(parsed.title.as_deref(), Some("Show"));
        let urls: Vec<&str> = parsed.items.iter().map(|i| i.media_url.as_str()).collect();
        assert_eq!(urls, ["http://h/one.mp3", "http://h/three.m4a"]);
        assert_eq!(
            parsed.items[0].guid.as_ref().map(|g| g.guid.as_str()),
            Some("g-1")
        );
        assert!(parsed.items[1].guid.is_none(), "no made-up GUIDs");
        assert_eq!(parsed.items[0].priority, Some(2));
        assert!(parsed.items[0]
            .air_date
            .as_deref()
            .unwrap_or("")
            .starts_with("2024-01-02"));
        assert_eq!(parsed.skipped.len(), 2);
        assert!(
            parsed.skipped[0].item.contains("Slides") && parsed.skipped[0].item.contains("g-2")
        );
        assert!(parsed.skipped[0].reason.contains("not audio"));
    }

    #[test]
    fn malformed_feed_is_an_error_naming_the_url() {
        let err = parse_feed("http://h/bad.xml", b"<rss><channel><item>", None).unwrap_err();
        assert!(matches!(err, CatalogError::MalformedFeed { .. }));
        assert!(err.to_string().contains("http://h/bad.xml"));
    }
}
