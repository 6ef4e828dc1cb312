//! Podcast feeds (RSS, Atom, JSON Feed via `feed-rs`) fetched over HTTP.
//!
//! Every item with an audio enclosure becomes an episode whose identity is its media URL
//! and its (feed URL, GUID). Items without an enclosure or with a non-audio one are
//! reported by title and GUID and left out; a malformed feed or an unreachable URL is an
//! error and nothing is written. The daemon sends the validators of the last answer
//! (`If-None-Match`, `If-Modified-Since`) so an unchanged feed costs a 304.

use std::collections::HashSet;

use archivist_db::Database;
use archivist_engine::Session;

use crate::charset;
use crate::error::{CatalogError, ItemProblem};
use crate::identity;
use crate::item::{CatalogItem, FeedGuid, Kind};
use crate::json_feed;
use crate::local::describe_reqwest;
use crate::report::CurationReport;
use crate::settings::{CurateSettings, FetchSettings};
use crate::xml_prep;

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
        /// The document as served (after `Content-Encoding` is undone).
        body: FeedBody,
        /// Validators to send next time.
        validators: Validators,
    },
}

/// A feed document and what its HTTP answer said about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedBody {
    /// Body bytes (decompressed).
    pub bytes: Vec<u8>,
    /// The URL the document came from after redirects: the base of relative URLs.
    pub final_url: Option<String>,
    /// The `charset` of the `Content-Type` header, if any.
    pub http_charset: Option<String>,
}

impl FeedBody {
    /// A document with nothing known about where it came from.
    pub fn bytes(bytes: impl Into<Vec<u8>>) -> FeedBody {
        FeedBody {
            bytes: bytes.into(),
            ..FeedBody::default()
        }
    }
}

/// GETs a feed, conditionally when `validators` are given. Compressed answers (gzip,
/// deflate, br) are decompressed by the HTTP client; the size limit applies to the
/// decompressed bytes, so a small compressed bomb is refused too.
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
        url: identity::redact_credentials(url),
        reason: identity::redact_credentials(&reason),
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
    let sent_validators = validators.is_some_and(|v| v.etag.is_some() || v.last_modified.is_some());
    if status == reqwest::StatusCode::NOT_MODIFIED {
        // A 304 answers a conditional request; to a plain one it says nothing about
        // the feed, and "nothing changed" would be a wrong answer.
        if !sent_validators {
            return Err(fail(
                "HTTP 304 Not Modified to a request that was not conditional: the server sent no feed".to_string(),
            ));
        }
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
    let http_charset =
        header(reqwest::header::CONTENT_TYPE).and_then(|t| charset::charset_of_content_type(&t));
    let final_url = Some(response.url().to_string());
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
    Ok(Fetched::Document {
        body: FeedBody {
            bytes: body,
            final_url,
            http_charset,
        },
        validators,
    })
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

/// Longest GUID shown in an item's label (the stored GUID is never cut).
const LABEL_GUID_CHARS: usize = 80;

fn label(feed_url: &str, n: usize, title: &str, guid: &str) -> String {
    let title = if title.is_empty() {
        "(untitled)"
    } else {
        title
    };
    let guid: String = match guid.char_indices().nth(LABEL_GUID_CHARS) {
        Some((cut, _)) => format!("{}... ({} bytes)", &guid[..cut], guid.len()),
        None => guid.to_string(),
    };
    if guid.is_empty() {
        format!("{feed_url} item {n} {title:?}")
    } else {
        format!("{feed_url} item {n} {title:?} (guid {guid})")
    }
}

/// Parses a feed document. `feed_url` is the normalized URL it was fetched from (part of
/// each item's GUID identity, and the base of relative URLs); `priority` is given to
/// every item (`None`: keep stored).
///
/// # Errors
/// [`CatalogError::MalformedFeed`] when the document is not a feed.
pub fn parse_feed(
    feed_url: &str,
    body: &[u8],
    priority: Option<i64>,
) -> Result<ParsedFeed, CatalogError> {
    let body = FeedBody {
        bytes: body.to_vec(),
        final_url: Some(feed_url.to_string()),
        http_charset: None,
    };
    parse_document(feed_url, &body, priority)
}

/// Parses a fetched feed document (see [`parse_feed`]): decodes its charset
/// ([`crate::charset`]), rewrites what `feed-rs` does not read ([`crate::xml_prep`]),
/// parses it, and turns its entries into items. Any panic inside the parsers is caught
/// and becomes this feed's error: no document can take the process down.
///
/// # Errors
/// [`CatalogError::MalformedFeed`] when the document is not a feed or the parser failed.
pub fn parse_document(
    feed_url: &str,
    body: &FeedBody,
    priority: Option<i64>,
) -> Result<ParsedFeed, CatalogError> {
    guarded(feed_url, || parse_unguarded(feed_url, body, priority))
}

/// Runs `parse`, turning a panic inside it into this feed's
/// [`CatalogError::MalformedFeed`]: a parser bug costs one feed, never the process.
fn guarded<T>(
    feed_url: &str,
    parse: impl FnOnce() -> Result<T, CatalogError>,
) -> Result<T, CatalogError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse)) {
        Ok(parsed) => parsed,
        Err(panic) => {
            let shown_url = identity::redact_credentials(feed_url);
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            tracing::error!(feed = %shown_url, panic = %message, "the feed parser panicked on this document; the feed is refused");
            Err(CatalogError::MalformedFeed {
                url: shown_url,
                reason: format!("the feed parser failed on this document ({message})"),
            })
        }
    }
}

/// Parses with `feed-rs`, relative URLs resolved against `base`.
fn feed_rs_parse(text: &str, base: Option<&str>) -> Result<feed_rs::model::Feed, String> {
    // A missing GUID stays empty (feed-rs would make one from the title): identity then
    // rests on the media URL alone, never on a title.
    let parser = feed_rs::parser::Builder::new()
        .id_generator(|_, _, _| String::new())
        .base_uri(base)
        .sanitize_content(false)
        .build();
    parser.parse(text.as_bytes()).map_err(|e| e.to_string())
}

/// The base given to relative URLs when a feed has none (no http(s) URL it came from,
/// no channel link): `.invalid` is reserved (RFC 6761), so no real URL starts with it,
/// and an enclosure that does is named as relative instead of silently dropped.
const NO_BASE: &str = "http://no-base.invalid/";

fn is_http(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The feed's own link (RSS `<channel><link>`, Atom `rel="alternate"`), if absolute.
fn channel_link(feed: &feed_rs::model::Feed) -> Option<String> {
    feed.links
        .iter()
        .filter(|l| l.rel.as_deref().is_none_or(|r| r == "alternate"))
        .map(|l| l.href.trim().to_string())
        .find(|h| is_http(h) && !h.starts_with(NO_BASE))
}

fn parse_unguarded(
    feed_url: &str,
    body: &FeedBody,
    priority: Option<i64>,
) -> Result<ParsedFeed, CatalogError> {
    let shown_url = identity::redact_credentials(feed_url);
    let malformed = |reason: String| CatalogError::MalformedFeed {
        url: shown_url.clone(),
        reason,
    };
    let decoded = charset::decode(&body.bytes, body.http_charset.as_deref());
    let text = xml_prep::prepare(&decoded.text);
    // JSON Feed: items read one by one, a sloppy one left out rather than the feed.
    let json_lenient = if text.starts_with('{') {
        json_feed::lenient(&text)
    } else {
        None
    };
    let text = match &json_lenient {
        Some(l) => l.text.clone(),
        None => text,
    };
    // Relative URLs: xml:base (feed-rs applies it), else the URL the document came from,
    // else the feed's own link.
    // With none of them, the sentinel base keeps relative URLs visible, to be named.
    let base = body.final_url.as_deref().filter(|u| is_http(u));
    let mut feed = feed_rs_parse(&text, Some(base.unwrap_or(NO_BASE))).map_err(|reason| {
        match xml_prep::root_name(&text) {
            // The show's web page given instead of its feed is the common mistake.
            Some(root) if !["rss", "RDF", "feed", "entry"].contains(&root.as_str()) => {
                malformed(format!(
                    "the document is <{root}>, not a feed (rss, RDF or Atom feed): is this the \
                     show's web page rather than its feed? ({reason})"
                ))
            }
            _ => malformed(reason),
        }
    })?;
    let base = match base {
        Some(b) => Some(b.to_string()),
        None => match channel_link(&feed) {
            Some(link) => {
                feed = feed_rs_parse(&text, Some(&link)).map_err(&malformed)?;
                Some(link)
            }
            None => None,
        },
    };
    let json = feed.feed_type == feed_rs::model::FeedType::JSON;
    let base_url = url::Url::parse(base.as_deref().unwrap_or(NO_BASE)).ok();
    let item_facts =
        Some(xml_prep::items(&text)).filter(|items| !json && items.len() == feed.entries.len());
    let facts = DocumentFacts {
        json,
        base: base_url,
        items: item_facts,
    };
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = HashSet::new();
    if let Some(l) = &json_lenient {
        for left in &l.left_out {
            skipped.push(ItemProblem::new(
                label(&shown_url, left.position, &left.title, &left.id),
                left.reason.clone(),
            ));
        }
    }
    for (i, entry) in feed.entries.iter().enumerate() {
        // The item's position in the document (a JSON Feed may have had some left out).
        let n = json_lenient
            .as_ref()
            .and_then(|l| l.positions.get(i).copied())
            .unwrap_or(i + 1);
        match entry_item(feed_url, n, entry, &facts, priority) {
            Err(problem) => skipped.push(problem),
            Ok(item) => {
                let keys = item.alias_keys();
                if keys.iter().any(|k| seen.contains(k)) {
                    skipped.push(ItemProblem::new(
                        item.label,
                        "duplicate of an earlier item of this feed (same GUID or media URL)",
                    ));
                    continue;
                }
                seen.extend(keys);
                items.push(item);
            }
        }
    }
    if feed.entries.is_empty() && feed.title.is_none() && feed.links.is_empty() {
        return Err(malformed(
            "no channel, entries, title or link: not a feed this parser knows".to_string(),
        ));
    }
    Ok(ParsedFeed {
        title: feed.title.map(|t| t.content),
        items,
        skipped,
    })
}

/// The text of a feed text construct: Atom `type="html"` (and `xhtml`) text is markup,
/// so its tags are dropped and its character references decoded; plain text is as given.
fn plain_text(text: &feed_rs::model::Text) -> String {
    let essence = text.content_type.essence().to_string();
    if essence != "text/html" && essence != "application/xhtml+xml" {
        return text.content.clone();
    }
    let mut stripped = String::with_capacity(text.content.len());
    let mut in_tag = false;
    for c in text.content.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => stripped.push(c),
            _ => {}
        }
    }
    quick_xml::escape::unescape_with(&stripped, quick_xml::escape::resolve_html5_entity)
        .map(|t| t.into_owned())
        .unwrap_or(stripped)
}

/// One enclosure as the feed gives it.
struct Enclosure {
    url: String,
    media_type: Option<String>,
}

/// Every media reference of an entry: RSS `<enclosure>` and Media RSS (feed-rs puts both
/// in `media`, dropping the enclosure when a `media:content` is there; `rss_enclosures`,
/// read by [`xml_prep::items`], come first), Atom `<link rel="enclosure">`, JSON Feed `attachments` (links with a
/// MIME type). Relative URLs feed-rs could not resolve are resolved against `base`.
fn enclosures(
    entry: &feed_rs::model::Entry,
    json: bool,
    base: Option<&url::Url>,
    rss_enclosures: Option<&[(String, Option<String>)]>,
) -> Vec<Enclosure> {
    let resolve = |href: &str| -> String {
        let href = href.trim();
        match (url::Url::parse(href), base) {
            (Ok(u), _) => u.to_string(),
            (Err(url::ParseError::RelativeUrlWithoutBase), Some(b)) => b
                .join(href)
                .map(|u| u.to_string())
                .unwrap_or(href.to_string()),
            _ => href.to_string(),
        }
    };
    // `<enclosure>` first, Media RSS after: podcast apps play the enclosure, and a
    // `media:content` is often a preview or a video.
    let media: Vec<Enclosure> = entry
        .media
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|c| {
            Some(Enclosure {
                url: c.url.as_ref()?.to_string(),
                media_type: c.content_type.as_ref().map(|t| t.to_string()),
            })
        })
        .collect();
    // A relative `<enclosure>` URL: feed-rs's reading of it applied `xml:base`.
    let mut out: Vec<Enclosure> = rss_enclosures
        .unwrap_or_default()
        .iter()
        .map(|(url, media_type)| {
            let relative = url.trim_start_matches("./");
            let url = match url::Url::parse(url) {
                Ok(u) => u.to_string(),
                Err(_) => media
                    .iter()
                    .find(|m| !relative.is_empty() && m.url.ends_with(relative))
                    .map(|m| m.url.clone())
                    .unwrap_or_else(|| resolve(url)),
            };
            Enclosure {
                url,
                media_type: media_type.clone().filter(|t| !t.is_empty()),
            }
        })
        .collect();
    for m in media {
        if !out.iter().any(|e| e.url == m.url) {
            out.push(m);
        }
    }
    for link in &entry.links {
        let is_enclosure = if json {
            link.media_type.is_some()
        } else {
            link.rel.as_deref().map(str::trim) == Some("enclosure")
        };
        if is_enclosure && !link.href.trim().is_empty() {
            out.push(Enclosure {
                url: resolve(&link.href),
                media_type: link.media_type.clone(),
            });
        }
    }
    out
}

/// Is this declared media type one that tells nothing about the content?
fn says_nothing(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or("").trim();
    essence.is_empty()
        || [
            "application/octet-stream",
            "binary/octet-stream",
            "application/x-unknown",
        ]
        .iter()
        .any(|t| essence.eq_ignore_ascii_case(t))
}

/// What the feed document says besides `feed-rs`'s entries.
struct DocumentFacts {
    /// Is it a JSON Feed?
    json: bool,
    /// The base of relative URLs.
    base: Option<url::Url>,
    /// What each entry says that feed-rs loses, when the items read match the entries.
    items: Option<Vec<xml_prep::ItemFacts>>,
}

fn entry_item(
    feed_url: &str,
    n: usize,
    entry: &feed_rs::model::Entry,
    facts: &DocumentFacts,
    priority: Option<i64>,
) -> Result<CatalogItem, ItemProblem> {
    let json = facts.json;
    let base = facts.base.as_ref();
    // `<title>`, else `<itunes:title>` / `<media:title>`; blanks and newlines inside
    // made one space (a title is one line in every table).
    // (No-break spaces are the author's choice and stay.)
    let one_line = |t: String| {
        t.split(|c: char| {
            c.is_ascii_whitespace() || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}')
        })
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
    };
    let title = entry
        .title
        .as_ref()
        .map(plain_text)
        .map(one_line)
        .filter(|t| !t.is_empty())
        .or_else(|| {
            entry
                .media
                .iter()
                .filter_map(|m| m.title.as_ref())
                .map(plain_text)
                .map(one_line)
                .find(|t| !t.is_empty())
        })
        .unwrap_or_default();
    let guid = entry.id.trim().to_string();
    let label = label(&identity::redact_credentials(feed_url), n, &title, &guid);
    let problem = |reason: String| ItemProblem::new(label.clone(), reason);
    let item_facts = facts.items.as_ref().and_then(|all| all.get(n - 1));
    let rss = item_facts.map(|f| f.enclosures.as_slice());
    let all = enclosures(entry, json, base, rss);
    if all.is_empty() {
        return Err(problem(
            if entry.media.iter().any(|m| !m.content.is_empty()) {
                // feed-rs keeps an enclosure whose URL does not parse, without the URL.
                "enclosure URL is not a valid URL".to_string()
            } else {
                "no media enclosure".to_string()
            },
        ));
    }
    let typed: Vec<(String, Option<String>)> = all
        .into_iter()
        .map(|e| {
            // Many hosts declare every file `application/octet-stream`: a type that says
            // nothing gives way to the extension's.
            let media_type = e
                .media_type
                .filter(|t| !says_nothing(t))
                .or_else(|| identity::guess_media_type(&e.url).map(str::to_string));
            (e.url, media_type)
        })
        .collect();
    let audio: Vec<&(String, Option<String>)> = typed
        .iter()
        .filter(|(_, t)| t.as_deref().map(identity::is_audio_type).unwrap_or(false))
        .collect();
    if audio.is_empty() {
        let types: Vec<String> = typed
            .iter()
            .map(|(u, t)| {
                format!(
                    "{} ({})",
                    identity::redact_credentials(u),
                    t.as_deref().unwrap_or("unknown type")
                )
            })
            .collect();
        return Err(problem(format!(
            "enclosure is not audio: {}",
            types.join(", ")
        )));
    }
    // The first audio enclosure that is usable; when none is, the first one's reason.
    let mut first_refusal = None;
    let mut chosen = None;
    for (url, media_type) in audio {
        match usable_enclosure(url) {
            Ok(()) => {
                chosen = Some((url.clone(), media_type.clone()));
                break;
            }
            Err(reason) => {
                first_refusal.get_or_insert(reason);
            }
        }
    }
    let Some((url, media_type)) = chosen else {
        return Err(problem(first_refusal.unwrap_or_default()));
    };
    let title = if title.is_empty() {
        crate::local::resolve_media(&url, None)
            .map(|m| m.stem)
            .unwrap_or_else(|_| identity::redact_credentials(&url))
    } else {
        title
    };
    let description = entry.summary.as_ref().map(plain_text);
    // A date feed-rs could not read: read here (zone abbreviations, no zone...), else
    // the item says so.
    let mut date_warning = None;
    let air_date = match entry.published.or(entry.updated) {
        Some(d) => Some(d.to_rfc3339()),
        None => item_facts.and_then(|f| f.date.as_deref()).and_then(|raw| {
            let parsed = crate::dates::parse_lenient(raw);
            if parsed.is_none() {
                date_warning = Some(format!(
                    "date {raw:?} could not be read; the episode has no air date"
                ));
            }
            parsed
        }),
    };
    let mut item = CatalogItem::new(Kind::Episode, &url, &title, label.clone())
        .map_err(|e| problem(e.to_string()))?;
    if let Some(warning) = date_warning {
        item = item.with_warning(warning);
    }
    Ok(item
        .with_description(description.as_deref())
        .with_media_type(media_type)
        .with_air_date(
            air_date
                // A feed dated in year 1 or 9999 has a broken date, not an old show.
                .filter(|d| crate::item::check_air_date(d).is_ok()),
        )
        .with_priority(priority)
        .with_guid((!guid.is_empty()).then(|| FeedGuid {
            feed_url: feed_url.to_string(),
            guid: guid.clone(),
        })))
}

/// Why an audio enclosure's URL cannot be an episode's media URL, if it cannot.
fn usable_enclosure(url: &str) -> Result<(), String> {
    if let Some(relative) = url.strip_prefix(NO_BASE) {
        return Err(format!(
            "enclosure URL {relative:?} is relative and the feed gives no base to resolve it against"
        ));
    }
    // A feed is someone else's document: it may only point at the web, never at this
    // machine's files or other schemes.
    if !is_http(url) {
        let shown = identity::redact_credentials(url);
        return Err(match url::Url::parse(url) {
            Ok(u) => format!(
                "enclosure {shown} has scheme {:?}; a feed's enclosures must be http or https",
                u.scheme()
            ),
            Err(_) => format!(
                "enclosure URL {shown:?} is relative or not a URL, and there is no base to resolve it against"
            ),
        });
    }
    // `&cdn;ep1.mp3`: an entity of the document's DTD, which is never expanded (no
    // DTD is read: that is how entity bombs and XXE are avoided). The URL left is not
    // the one meant.
    if let Some(entity) = unexpanded_entity(url) {
        return Err(format!(
            "enclosure URL {:?} holds the entity reference {entity}, which is not expanded (DTD entities are not read)",
            identity::redact_credentials(url)
        ));
    }
    Ok(())
}

/// The first `&name;` left in a URL (XML and HTML entities were already decoded, so
/// any left is a DTD's), if any.
fn unexpanded_entity(url: &str) -> Option<String> {
    let mut rest = url;
    while let Some(at) = rest.find('&') {
        let after = &rest[at + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
            .unwrap_or(after.len());
        let starts_well = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if starts_well && name_len > 0 && after[name_len..].starts_with(';') {
            return Some(format!("&{};", &after[..name_len]));
        }
        rest = after;
    }
    None
}

/// The two URLs of a configured feed: the one to fetch (which may carry credentials
/// from the configuration) and its identity (normalized, without credentials: stored in
/// GUID aliases and shown in messages).
///
/// # Errors
/// [`CatalogError::BadInput`] for a URL that is not http(s).
pub fn feed_urls(url: &str) -> Result<(String, String), CatalogError> {
    // Checked before normalizing, whose message offers files and paths: a feed is
    // fetched over HTTP only.
    if !is_http(url) {
        return Err(CatalogError::bad_input(
            identity::redact_credentials(url),
            "a feed URL must be http or https",
        ));
    }
    let fetch_url = identity::normalize_url(url)?;
    if !is_http(&fetch_url) {
        return Err(CatalogError::bad_input(
            identity::redact_credentials(url),
            "a feed URL must be http or https",
        ));
    }
    let feed_url = identity::without_credentials(&fetch_url);
    Ok((fetch_url, feed_url))
}

/// `archivist curate feed URL`: fetches the feed once and registers its episodes.
/// Left-out items are in the report's `skipped`.
///
/// # Errors
/// [`CatalogError::Fetch`] or [`CatalogError::MalformedFeed`] before anything is
/// written; [`CatalogError::Db`] from the database, [`CatalogError::Engine`] from
/// ZooKeeper.
pub async fn curate_feed(
    session: &Session,
    db: &Database,
    url: &str,
    priority: Option<i64>,
    settings: &CurateSettings,
    fetch_settings: &FetchSettings,
) -> Result<CurationReport, CatalogError> {
    let (fetch_url, feed_url) = feed_urls(url)?;
    let client = http_client(fetch_settings)?;
    let Fetched::Document { body, .. } = fetch(&client, &fetch_url, None, fetch_settings).await?
    else {
        return Ok(CurationReport::default());
    };
    curate_document(session, db, &feed_url, body, priority, settings).await
}

/// Parses a fetched feed (on a blocking thread: a large feed is CPU work) and curates its
/// items.
pub(crate) async fn curate_document(
    session: &Session,
    db: &Database,
    feed_url: &str,
    body: FeedBody,
    priority: Option<i64>,
    settings: &CurateSettings,
) -> Result<CurationReport, CatalogError> {
    let url = feed_url.to_string();
    let parsed = tokio::task::spawn_blocking(move || parse_document(&url, &body, priority))
        .await
        .map_err(|e| CatalogError::MalformedFeed {
            url: identity::redact_credentials(feed_url),
            reason: format!("the feed parser failed on this document ({e})"),
        })??;
    for problem in &parsed.skipped {
        tracing::warn!(feed = %identity::redact_credentials(feed_url), item = %problem.item, reason = %problem.reason, "feed item left out");
    }
    let mut report = crate::upsert::curate(session, db, parsed.items, settings).await?;
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
    fn an_unreadable_date_is_a_warning_and_a_readable_one_is_kept() {
        let doc = br#"<rss version="2.0"><channel><title>t</title>
<item><title>A</title><guid>a</guid><pubDate>last tuesday</pubDate><enclosure url="http://h/a.mp3" type="audio/mpeg"/></item>
<item><title>B</title><guid>b</guid><pubDate>Tue, 02 Jan 2024 11:00:00 CET</pubDate><enclosure url="http://h/b.mp3" type="audio/mpeg"/></item>
</channel></rss>"#;
        let parsed = parse_feed("http://h/feed.xml", doc, None).unwrap();
        assert_eq!(parsed.items.len(), 2);
        assert!(parsed.items[0].warnings[0].contains("\"last tuesday\" could not be read"));
        assert_eq!(
            parsed.items[1].air_date.as_deref(),
            Some("2024-01-02T10:00:00+00:00")
        );
        assert!(parsed.items[1].warnings.is_empty());
    }

    #[test]
    fn titles_are_one_line_with_itunes_and_file_name_fallbacks() {
        let doc = br#"<rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"><channel><title>t</title>
<item><title>
   Two   words
   and a line </title><guid>a</guid><enclosure url="http://h/a.mp3" type="audio/mpeg"/></item>
<item><itunes:title>From iTunes</itunes:title><guid>b</guid><enclosure url="http://h/b.mp3" type="audio/mpeg"/></item>
<item><guid>c</guid><enclosure url="http://h/My%20Show%20%231.mp3" type="audio/mpeg"/></item>
</channel></rss>"#;
        let parsed = parse_feed("http://h/feed.xml", doc, None).unwrap();
        let titles: Vec<&str> = parsed.items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(
            titles,
            ["Two words and a line", "From iTunes", "My Show #1"]
        );
    }

    #[test]
    fn a_feed_url_of_another_scheme_is_refused_without_offering_paths() {
        for url in ["ftp://h/feed.xml", "file:///tmp/feed.xml", "/tmp/feed.xml"] {
            let err = feed_urls(url).unwrap_err().to_string();
            assert!(err.contains("must be http or https"), "{err}");
            assert!(!err.contains("path"), "{err}");
        }
    }

    #[test]
    fn a_panic_in_the_parser_is_this_feed_s_error() {
        let err = guarded::<ParsedFeed>("http://u:s3cret@h/feed.xml", || {
            panic!("set_encoding() called after prefix buffer was drained")
        })
        .unwrap_err();
        assert!(matches!(err, CatalogError::MalformedFeed { .. }));
        let text = err.to_string();
        assert!(
            text.contains("parser failed") && text.contains("set_encoding"),
            "{text}"
        );
        assert!(text.contains("http://***@h/feed.xml"), "{text}");
    }

    #[test]
    fn relative_enclosures_fall_back_to_the_channel_link() {
        let feed = r#"<rss><channel><title>S</title><link>http://show.example/pod/</link>
<item><title>One</title><guid>1</guid><enclosure url="media/1.mp3" type="audio/mpeg"/></item>
<item><title>Two</title><guid>2</guid><enclosure url="//cdn.example/2.mp3" type="audio/mpeg"/></item>
</channel></rss>"#;
        let parsed = parse_document("http://h/feed.xml", &FeedBody::bytes(feed), None).unwrap();
        let urls: Vec<&str> = parsed.items.iter().map(|i| i.media_url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://show.example/pod/media/1.mp3",
                "http://cdn.example/2.mp3"
            ]
        );
        // No base at all: left out with the reason.
        let bare = feed.replace("<link>http://show.example/pod/</link>", "");
        let parsed = parse_document("http://h/feed.xml", &FeedBody::bytes(bare), None).unwrap();
        assert_eq!(
            parsed.items.len(),
            1,
            "the scheme-relative URL still resolves"
        );
        assert!(
            parsed.skipped[0]
                .reason
                .contains("\"media/1.mp3\" is relative"),
            "{:?}",
            parsed.skipped
        );
    }

    #[test]
    fn an_octet_stream_type_gives_way_to_the_extension() {
        let feed = r#"<rss version="2.0"><channel><title>S</title>
<item><title>One</title><guid>1</guid><enclosure url="http://h/1.mp3" type="application/octet-stream"/></item>
<item><title>Two</title><guid>2</guid><enclosure url="http://h/2.bin" type="application/octet-stream"/></item>
</channel></rss>"#;
        let parsed = parse_feed("http://h/feed.xml", feed.as_bytes(), None).unwrap();
        assert_eq!(parsed.items.len(), 1);
        assert_eq!(parsed.items[0].media_type.as_deref(), Some("audio/mpeg"));
        assert!(
            parsed.skipped[0].reason.contains("not audio"),
            "{:?}",
            parsed.skipped
        );
    }

    #[test]
    fn a_web_page_is_named_as_not_a_feed() {
        let page = b"<!DOCTYPE html><html><head><title>My show</title></head><body></body></html>";
        let err = parse_feed("http://h/show", page, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("<html>, not a feed"), "{err}");
    }

    #[test]
    fn malformed_feed_is_an_error_naming_the_url() {
        let err = parse_feed("http://h/bad.xml", b"<rss><channel><item>", None).unwrap_err();
        assert!(matches!(err, CatalogError::MalformedFeed { .. }));
        assert!(err.to_string().contains("http://h/bad.xml"));
    }
}
