//! Single files and URLs: `archivist curate episode|clip PATH|URL`, and the media
//! references of manifests.
//!
//! A local file is given as a path (relative to a base directory) or a `file://` URL; it
//! must exist, and is stored as an absolute `file://` URL. An `http(s)` URL is kept as
//! given (normalized). The title defaults to the file stem.

use std::path::{Path, PathBuf};

use url::Url;

use crate::error::CatalogError;
use crate::identity;
use crate::item::{CatalogItem, Kind};
use crate::settings::FetchSettings;

/// A media reference made usable: its normalized URL and what can be told from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// Normalized `http`, `https` or absolute `file` URL.
    pub url: String,
    /// File stem of the last path segment (the default title).
    pub stem: String,
    /// Media type guessed from the extension.
    pub media_type: Option<String>,
    /// A local file (checked to exist).
    pub local: bool,
}

fn stem_of(path: &str) -> String {
    let last = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path);
    let last = last.split(['?', '#']).next().unwrap_or(last);
    let stem = match last.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => last,
    };
    stem.to_string()
}

fn local_file(input: &str, path: PathBuf) -> Result<Media, CatalogError> {
    let file = |reason: String| CatalogError::File {
        path: input.to_string(),
        reason,
    };
    let meta = std::fs::metadata(&path).map_err(|e| file(format!("cannot use it: {e}")))?;
    if !meta.is_file() {
        return Err(file("not a regular file".to_string()));
    }
    let absolute = path
        .canonicalize()
        .map_err(|e| file(format!("cannot resolve it: {e}")))?;
    let url = Url::from_file_path(&absolute)
        .map_err(|_| file("cannot express it as a file:// URL".to_string()))?;
    let url = identity::normalize_url(url.as_str())?;
    Ok(Media {
        stem: stem_of(&absolute.to_string_lossy()),
        media_type: identity::guess_media_type(&url).map(str::to_string),
        url,
        local: true,
    })
}

/// Resolves a path, `file://` URL or `http(s)` URL. Relative paths are taken from
/// `base` (the manifest's directory) or the current directory.
///
/// # Errors
/// [`CatalogError::File`] for a local file that does not exist or is not a file,
/// [`CatalogError::BadInput`] for an unsupported URL.
pub fn resolve_media(input: &str, base: Option<&Path>) -> Result<Media, CatalogError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(CatalogError::bad_input(input, "empty media reference"));
    }
    let lower = text.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        let url = identity::normalize_url(text)?;
        let path = Url::parse(&url)
            .map(|u| u.path().to_string())
            .unwrap_or_default();
        return Ok(Media {
            // The file name as people read it: `My%20Show` is `My Show`.
            stem: percent_encoding::percent_decode_str(&stem_of(&path))
                .decode_utf8_lossy()
                .into_owned(),
            media_type: identity::guess_media_type(&url).map(str::to_string),
            url,
            local: false,
        });
    }
    if lower.starts_with("file:") {
        let url = Url::parse(text)
            .map_err(|e| CatalogError::bad_input(input, format!("not a URL: {e}")))?;
        let path = url
            .to_file_path()
            .map_err(|_| CatalogError::bad_input(input, "not a local file URL"))?;
        return local_file(input, path);
    }
    if text.contains("://") {
        return Err(CatalogError::bad_input(
            input,
            "unsupported scheme (use http, https, file or a path)",
        ));
    }
    let path = Path::new(text);
    let path = match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    local_file(input, path)
}

/// Checks that an `http(s)` URL answers (a HEAD request) and returns the media type it
/// announces. A server that refuses HEAD (405/501) counts as reachable.
///
/// # Errors
/// [`CatalogError::Fetch`] when unreachable or answering with an error status;
/// [`CatalogError::BadInput`] when it announces a type that is not audio.
pub async fn probe_url(url: &str, fetch: &FetchSettings) -> Result<Option<String>, CatalogError> {
    let fail = |reason: String| CatalogError::Fetch {
        url: url.to_string(),
        reason,
    };
    let client = crate::feed::http_client(fetch)?;
    let response = client
        .head(url)
        .send()
        .await
        .map_err(|e| fail(describe_reqwest(&e)))?;
    let status = response.status();
    if status.as_u16() == 405 || status.as_u16() == 501 {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(fail(format!("HTTP {status}")));
    }
    let media_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase());
    match media_type {
        Some(t) if identity::is_audio_type(&t) => Ok(Some(t)),
        Some(t) if t == "application/octet-stream" || t == "binary/octet-stream" => Ok(None),
        Some(t) => Err(CatalogError::bad_input(
            url,
            format!("the server says it is {t}, not audio"),
        )),
        None => Ok(None),
    }
}

/// A reqwest error with its cause chain (connection refused, timeout, DNS).
pub(crate) fn describe_reqwest(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Options of `curate episode|clip`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SingleOptions {
    /// Title (default: the file stem).
    pub title: Option<String>,
    /// Priority (default: keep; 0 when new).
    pub priority: Option<i64>,
    /// Description.
    pub description: Option<String>,
    /// Air date (episodes).
    pub air_date: Option<String>,
    /// Skip the HEAD request for `http(s)` URLs.
    pub no_probe: bool,
}

/// The item for `curate episode|clip PATH|URL`: a local file must exist; an `http(s)`
/// URL must answer unless `no_probe`.
pub async fn single_item(
    kind: Kind,
    input: &str,
    options: &SingleOptions,
    fetch: &FetchSettings,
) -> Result<CatalogItem, CatalogError> {
    let media = resolve_media(input, None)?;
    let mut media_type = media.media_type.clone();
    if !media.local && !options.no_probe {
        if let Some(t) = probe_url(&media.url, fetch).await? {
            media_type = Some(t);
        }
    }
    let title = options.title.clone().unwrap_or_else(|| media.stem.clone());
    CatalogItem::new(kind, &media.url, &title, input)?
        .with_media_type(media_type)
        .with_priority(options.priority)
        .with_description(options.description.as_deref())
        .with_checked_air_date(options.air_date.clone())
        .map_err(|reason| CatalogError::BadInput {
            input: input.to_string(),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_become_absolute_file_urls() {
        let dir = std::env::temp_dir().join(format!("catalog-local-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("My Clip.wav"), b"RIFF").unwrap();
        let m = resolve_media("My Clip.wav", Some(&dir)).unwrap();
        assert!(m.url.starts_with("file:///"), "{}", m.url);
        assert!(m.url.ends_with("/My%20Clip.wav"), "{}", m.url);
        assert_eq!(m.stem, "My Clip");
        assert_eq!(m.media_type.as_deref(), Some("audio/wav"));
        let again = resolve_media(&m.url, None).unwrap();
        assert_eq!(again.url, m.url);
        let err = resolve_media("missing.wav", Some(&dir)).unwrap_err();
        assert!(err.to_string().contains("missing.wav"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn urls_keep_their_address_and_give_a_stem() {
        let m = resolve_media("https://Cdn.example/show/ep-12.mp3?x=1", None).unwrap();
        assert_eq!(m.url, "https://cdn.example/show/ep-12.mp3?x=1");
        assert_eq!(m.stem, "ep-12");
        assert!(!m.local);
        assert!(resolve_media("gopher://x/y", None).is_err());
    }
}
