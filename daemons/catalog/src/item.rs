//! What a curator wants in the catalog: one episode or clip, before it has an id.
//!
//! Every source (feed, manifest, local file) turns its input into [`CatalogItem`]s and
//! hands them to [`crate::upsert::curate`], so identity, merging and the ZooKeeper writes
//! are the same whatever the source.

use crate::error::CatalogError;
use crate::identity;

/// Longest title stored, in characters (keeps record nodes a few KB).
pub const MAX_TITLE_CHARS: usize = 300;
/// Longest description stored, in characters (keeps record nodes a few KB).
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Longest media URL accepted, in bytes. Longer is refused, not cut: a cut URL would
/// point somewhere else.
pub const MAX_URL_BYTES: usize = 2_048;
/// Longest feed GUID accepted, in bytes. Longer is refused, not cut: a cut GUID could
/// name another item.
pub const MAX_GUID_BYTES: usize = 1_024;
/// Longest media type accepted, in bytes (RFC 6838 names are at most 127 + 1 + 127).
pub const MAX_MEDIA_TYPE_BYTES: usize = 255;

/// Episode or clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A long recording to search in.
    Episode,
    /// A short recording to search for.
    Clip,
}

impl Kind {
    /// `episode` or `clip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Episode => "episode",
            Kind::Clip => "clip",
        }
    }
}

/// A feed item's identity: the feed it came from and its GUID there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedGuid {
    /// Normalized feed URL.
    pub feed_url: String,
    /// The item's GUID (RSS `guid`, Atom `id`).
    pub guid: String,
}

/// One episode or clip to register or refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogItem {
    /// Episode or clip.
    pub kind: Kind,
    /// Where it came from, for messages: `episodes[2] (line 14)`, a feed item, a path.
    pub label: String,
    /// Normalized media URL (`http`, `https` or absolute `file`).
    pub media_url: String,
    /// Title (at most [`MAX_TITLE_CHARS`]).
    pub title: String,
    /// Description (at most [`MAX_DESCRIPTION_CHARS`]); `None` keeps what is stored.
    pub description: Option<String>,
    /// MIME type; `None` keeps what is stored.
    pub media_type: Option<String>,
    /// Air date (episodes); `None` keeps what is stored.
    pub air_date: Option<String>,
    /// Priority; `None` keeps what is stored (0 for a new record).
    pub priority: Option<i64>,
    /// Feed identity, for feed items.
    pub guid: Option<FeedGuid>,
    /// Things about the item an operator should look at that do not stop it (a URL
    /// that looks cut short); reported in [`crate::CurationReport::warnings`].
    pub warnings: Vec<String>,
}

fn clip_chars(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text.to_string(),
    }
}

impl CatalogItem {
    /// An item for a media URL (normalized here) with a title.
    ///
    /// # Errors
    /// [`CatalogError::BadInput`] for a URL that is not http, https or file, or an empty
    /// title.
    pub fn new(
        kind: Kind,
        media_url: &str,
        title: &str,
        label: impl Into<String>,
    ) -> Result<CatalogItem, CatalogError> {
        // A label may be the URL as given (`curate episode URL`): never show its secrets.
        let label = identity::redact_credentials(&label.into());
        if identity::has_credentials(media_url) {
            return Err(CatalogError::bad_input(
                label,
                format!(
                    "media URL {} carries credentials (user:password@); they are not stored, \
                     since every role can read the catalog: give a URL without them",
                    identity::redact_credentials(media_url.trim())
                ),
            ));
        }
        let secrets = identity::secret_query_keys(media_url);
        if !secrets.is_empty() {
            return Err(CatalogError::bad_input(
                label,
                format!(
                    "media URL {} carries a credential in its query ({}); it is not stored, \
                     since every role can read the catalog: give a URL without it (a public \
                     or local copy of the file)",
                    identity::redact_credentials(media_url.trim()),
                    secrets.join(", ")
                ),
            ));
        }
        let media_url = identity::normalize_url(media_url)?;
        let title = clip_chars(title, MAX_TITLE_CHARS);
        if title.is_empty() {
            return Err(CatalogError::bad_input(label, "title is empty"));
        }
        Ok(CatalogItem {
            kind,
            label,
            media_url,
            title,
            description: None,
            media_type: None,
            air_date: None,
            priority: None,
            guid: None,
            warnings: Vec::new(),
        })
    }

    /// Sets the description (trimmed, cut to [`MAX_DESCRIPTION_CHARS`]; empty = none).
    pub fn with_description(mut self, description: Option<&str>) -> Self {
        self.description = description
            .map(|d| clip_chars(d, MAX_DESCRIPTION_CHARS))
            .filter(|d| !d.is_empty());
        self
    }

    /// Sets the MIME type. Defaults to none (keep what is stored).
    pub fn with_media_type(mut self, media_type: Option<String>) -> Self {
        self.media_type = media_type.filter(|t| !t.trim().is_empty());
        self
    }

    /// Sets an air date given by a person (manifest, command line) after checking it:
    /// a calendar date `YYYY-MM-DD` or an RFC 3339 timestamp, in the years
    /// [`AIR_YEARS`]. A typo such as `2024-02-30` or `20244-01-01` is refused with the
    /// reason instead of being stored as text no one can sort by.
    ///
    /// # Errors
    /// The reason the date is not usable.
    pub fn with_checked_air_date(self, air_date: Option<String>) -> Result<Self, String> {
        if let Some(date) = air_date.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
            check_air_date(date)?;
        }
        Ok(self.with_air_date(air_date))
    }

    /// Sets the air date. Defaults to none (keep what is stored).
    pub fn with_air_date(mut self, air_date: Option<String>) -> Self {
        self.air_date = air_date.filter(|d| !d.trim().is_empty());
        self
    }

    /// Sets the priority. Defaults to none (keep what is stored; 0 when new).
    pub fn with_priority(mut self, priority: Option<i64>) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the feed identity. Defaults to none (identity by URL only).
    pub fn with_guid(mut self, guid: Option<FeedGuid>) -> Self {
        self.guid = guid.filter(|g| !g.guid.trim().is_empty());
        self
    }

    /// Checks every field against the documented limits ([`MAX_URL_BYTES`],
    /// [`MAX_GUID_BYTES`], [`MAX_MEDIA_TYPE_BYTES`]; titles and descriptions are cut when
    /// set). An item over a limit is left out with this reason while the rest of its
    /// batch is written: an oversized field must not make ZooKeeper refuse a whole multi.
    ///
    /// # Errors
    /// Which field is too long, by how much.
    pub fn check_limits(&self) -> Result<(), String> {
        let over = |what: &str, len: usize, max: usize| {
            format!("{what} is {len} bytes, over the limit of {max} bytes")
        };
        if self.media_url.len() > MAX_URL_BYTES {
            return Err(over("media URL", self.media_url.len(), MAX_URL_BYTES));
        }
        if let Some(g) = &self.guid {
            if g.guid.len() > MAX_GUID_BYTES {
                return Err(over("GUID", g.guid.len(), MAX_GUID_BYTES));
            }
            if g.feed_url.len() > MAX_URL_BYTES {
                return Err(over("feed URL", g.feed_url.len(), MAX_URL_BYTES));
            }
        }
        if let Some(t) = &self.media_type {
            if t.len() > MAX_MEDIA_TYPE_BYTES {
                return Err(over("media type", t.len(), MAX_MEDIA_TYPE_BYTES));
            }
        }
        Ok(())
    }

    /// Adds a warning (see [`CatalogItem::warnings`]).
    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Alias names that identify this item, strongest first (GUID, then URL).
    pub fn alias_keys(&self) -> Vec<String> {
        let mut keys = Vec::with_capacity(2);
        if let Some(g) = &self.guid {
            keys.push(identity::guid_alias(&g.feed_url, &g.guid));
        }
        keys.push(identity::url_alias(&self.media_url));
        keys
    }

    /// What each alias stands for (stored in the alias record's `key`).
    pub fn alias_key_text(&self, alias: &str) -> String {
        match &self.guid {
            Some(g) if alias.starts_with("guid-") => format!("{} {}", g.feed_url, g.guid),
            _ => self.media_url.clone(),
        }
    }
}

/// Years an air date may fall in. Earlier or later is a typo, not a broadcast.
pub const AIR_YEARS: std::ops::RangeInclusive<i32> = 1900..=2100;

/// Checks an air date: `YYYY-MM-DD` or RFC 3339, a real calendar day, within
/// [`AIR_YEARS`].
///
/// # Errors
/// Why the text is not a usable air date.
pub fn check_air_date(text: &str) -> Result<(), String> {
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    let date = time::Date::parse(text, format_description!("[year]-[month]-[day]"))
        .or_else(|_| time::OffsetDateTime::parse(text, &Rfc3339).map(|t| t.date()))
        .map_err(|_| {
            format!("air_date {text:?} is not a date (YYYY-MM-DD or RFC 3339) or not a real day")
        })?;
    if !AIR_YEARS.contains(&date.year()) {
        return Err(format!(
            "air_date {text:?} is outside the years {}-{}",
            AIR_YEARS.start(),
            AIR_YEARS.end()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_and_urls_normalized() {
        let long = "x".repeat(MAX_TITLE_CHARS + 50);
        let item = CatalogItem::new(Kind::Episode, "HTTP://A.example/e.mp3", &long, "t")
            .unwrap()
            .with_description(Some(&"d".repeat(10_000)));
        assert_eq!(item.title.chars().count(), MAX_TITLE_CHARS);
        assert_eq!(
            item.description.as_deref().map(|d| d.chars().count()),
            Some(MAX_DESCRIPTION_CHARS)
        );
        assert_eq!(item.media_url, "http://a.example/e.mp3");
    }

    #[test]
    fn guid_alias_comes_first() {
        let item = CatalogItem::new(Kind::Episode, "http://a/e.mp3", "E", "t")
            .unwrap()
            .with_guid(Some(FeedGuid {
                feed_url: "http://a/feed".into(),
                guid: "g1".into(),
            }));
        let keys = item.alias_keys();
        assert_eq!(keys.len(), 2);
        assert!(keys[0].starts_with("guid-") && keys[1].starts_with("url-"));
        assert!(CatalogItem::new(Kind::Clip, "http://a/c.mp3", "  ", "t").is_err());
    }

    #[test]
    fn credentials_are_refused_without_being_shown() {
        let err = CatalogItem::new(
            Kind::Episode,
            "http://user:s3cret@h/e.mp3",
            "E",
            "feed item 1",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("credentials") && err.contains("feed item 1"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn token_query_parameters_are_refused_without_being_shown() {
        let err = CatalogItem::new(
            Kind::Episode,
            "https://cdn.example/e.mp3?X-Amz-Signature=s3cret&id=2",
            "E",
            "feed item 2",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("credential in its query (X-Amz-Signature)")
                && err.contains("feed item 2"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
        // Ordinary query strings are kept.
        assert!(CatalogItem::new(Kind::Episode, "https://h/e.mp3?id=2&src=rss", "E", "t").is_ok());
    }

    #[test]
    fn oversized_fields_are_named() {
        let item = CatalogItem::new(Kind::Episode, "http://a/e.mp3", "E", "t").unwrap();
        assert!(item.check_limits().is_ok());
        let big = item.clone().with_guid(Some(FeedGuid {
            feed_url: "http://a/feed".into(),
            guid: "g".repeat(600_000),
        }));
        let reason = big.check_limits().unwrap_err();
        assert!(reason.contains("GUID is 600000 bytes"), "{reason}");
        let long = format!("http://a/{}.mp3", "x".repeat(MAX_URL_BYTES));
        let item = CatalogItem::new(Kind::Episode, &long, "E", "t").unwrap();
        assert!(item.check_limits().unwrap_err().contains("media URL"));
    }
}
