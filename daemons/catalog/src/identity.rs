//! Record identity: normalized media URLs and the alias names derived from them.
//!
//! Two curations describe the same episode or clip when their normalized media URL is
//! the same, or, for feed items, when their (feed URL, GUID) is the same. Titles never
//! identify anything. Aliases are fixed-length hashes so any URL or GUID maps to a short,
//! valid node name (`docs/protocol.md`, "Catalog").

use sha2::{Digest, Sha256};
use url::Url;

use crate::error::CatalogError;

/// Hex digits of sha256 kept in an alias name (128 bits: collisions are not a concern).
const ALIAS_HEX: usize = 32;

/// Normalizes an `http`, `https` or `file` URL so that spellings of the same address
/// compare equal: scheme and host lowercased, default port dropped, empty path made `/`,
/// fragment dropped, percent-encoding made canonical. The query is kept as written
/// (its order can matter to servers).
///
/// # Errors
/// [`CatalogError::BadInput`] when the text is not a URL of one of those schemes.
pub fn normalize_url(input: &str) -> Result<String, CatalogError> {
    let shown = redact_credentials(input);
    let mut url = Url::parse(input.trim())
        .map_err(|e| CatalogError::bad_input(&shown, format!("not a URL: {e}")))?;
    match url.scheme() {
        "http" | "https" => {
            if url.host_str().map(str::is_empty).unwrap_or(true) {
                return Err(CatalogError::bad_input(&shown, "URL has no host"));
            }
        }
        "file" => {}
        other => {
            return Err(CatalogError::bad_input(
                &shown,
                format!("unsupported scheme {other:?} (use http, https, file or a path)"),
            ))
        }
    }
    url.set_fragment(None);
    if url.query() == Some("") {
        url.set_query(None);
    }
    let path = canonical_escapes(url.path());
    if path != url.path() {
        url.set_path(&path);
    }
    if let Some(query) = url.query().map(canonical_escapes) {
        if Some(query.as_str()) != url.query() {
            url.set_query(Some(&query));
        }
    }
    Ok(url.to_string())
}

/// Percent-encoding made canonical (RFC 3986 §6.2.2.1 and §6.2.2.2): the hex digits of
/// an escape uppercased, and escapes of unreserved characters (letters, digits, `-`,
/// `.`, `_`, `~`) decoded. `a%7eb`, `a%7Eb` and `a~b` are one address; `%2f` and `%2F`
/// are one, and stay escaped (a `/` would change the path). Anything else is as given.
fn canonical_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                let byte = (h * 16 + l) as u8;
                if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                    out.push(byte as char);
                } else {
                    out.push('%');
                    out.push(bytes[i + 1].to_ascii_uppercase() as char);
                    out.push(bytes[i + 2].to_ascii_uppercase() as char);
                }
                i += 3;
                continue;
            }
        }
        // Copy one whole character (the text is a URL's, so ASCII, but be safe).
        let len = text[i..].chars().next().map(char::len_utf8).unwrap_or(1);
        out.push_str(&text[i..i + len]);
        i += len;
    }
    out
}

/// Does this URL carry a user name or a password (`http://user:pass@host/...`)?
/// Such a URL is never stored: the catalog is readable by every role and its URLs are
/// printed by `jobs show` (`docs/catalog.md`, "Credentials").
pub fn has_credentials(url: &str) -> bool {
    Url::parse(url.trim())
        .map(|u| !u.username().is_empty() || u.password().is_some())
        .unwrap_or(false)
}

/// The URL without its user name and password: the identity of a feed whose URL in the
/// configuration carries credentials (they are sent when fetching, never stored).
pub fn without_credentials(url: &str) -> String {
    match Url::parse(url.trim()) {
        Ok(mut u) if u.has_host() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Is a query parameter of this name a credential? Tokens, keys, signatures and
/// passwords by their usual names (`token`, `access_token`, `token-hash`, `key`,
/// `api_key`, `sig`, `X-Amz-Signature`, `X-Amz-Security-Token`, `auth`, `password`,
/// `jwt`, `sessionid`, CloudFront's `Policy` and `Key-Pair-Id`...),
/// case-insensitive. Names like `id`, `ep`, `src` or `utm_*` are not.
pub fn is_secret_query_key(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "signature",
        "credential",
        "session",
        "jwt",
    ]
    .iter()
    .any(|part| name.contains(part))
        || matches!(
            name.as_str(),
            "key"
                | "apikey"
                | "api_key"
                | "api-key"
                | "sig"
                | "auth"
                | "pwd"
                | "hmac"
                // CloudFront signed URLs: the policy and key pair identify the grant.
                | "policy"
                | "key-pair-id"
                | "sid"
        )
}

/// The names of a URL's query parameters that carry a credential
/// ([`is_secret_query_key`]), in order; empty for text that is no URL.
pub fn secret_query_keys(url: &str) -> Vec<String> {
    match Url::parse(url.trim()) {
        Ok(u) => u
            .query_pairs()
            .map(|(k, _)| k.into_owned())
            .filter(|k| is_secret_query_key(k))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Text for messages and logs: every `scheme://user:pass@` in it becomes
/// `scheme://***@`, and the value of every query parameter named like a credential
/// (`?token=...`, `&X-Amz-Signature=...`) becomes `***`, so a credential never reaches an
/// operator's screen or a log.
pub fn redact_credentials(text: &str) -> String {
    redact_query_secrets(&redact_userinfo(text))
}

/// `name=value` after `?` or `&` with a secret-looking name: the value becomes `***`.
fn redact_query_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['?', '&']) {
        let (head, tail) = rest.split_at(at + 1);
        out.push_str(head);
        let name_end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '%')))
            .unwrap_or(tail.len());
        let (name, after) = tail.split_at(name_end);
        match after.strip_prefix('=') {
            Some(value) if !name.is_empty() && is_secret_query_key(name) => {
                out.push_str(name);
                out.push_str("=***");
                let value_end = value
                    .find(['&', '#', ' ', '"', '\'', '\n', '<', '>'])
                    .unwrap_or(value.len());
                rest = &value[value_end..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// Every `scheme://user:pass@` becomes `scheme://***@`.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(['/', '?', '#', ' ', '"', '\'', '\n'])
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

fn hash_prefix(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(ALIAS_HEX);
    for byte in digest.iter() {
        if hex.len() >= ALIAS_HEX {
            break;
        }
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Alias name of a normalized media URL: `url-` + 32 hex digits of its sha256.
pub fn url_alias(normalized_url: &str) -> String {
    format!("url-{}", hash_prefix(normalized_url))
}

/// Alias name of a feed item: `guid-` + 32 hex digits of sha256(feed URL + GUID), the
/// feed URL normalized, the two concatenated as the protocol says.
pub fn guid_alias(normalized_feed_url: &str, guid: &str) -> String {
    format!(
        "guid-{}",
        hash_prefix(&format!("{normalized_feed_url}{guid}"))
    )
}

/// Media type guessed from a URL's or path's extension, for audio (and the video
/// containers podcasts use). `None` when the extension says nothing.
pub fn guess_media_type(url_or_path: &str) -> Option<&'static str> {
    let path = url_or_path.split(['?', '#']).next().unwrap_or(url_or_path);
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "mp3" => "audio/mpeg",
        "m4a" | "m4b" => "audio/mp4",
        "aac" => "audio/aac",
        "ogg" | "oga" => "audio/ogg",
        "opus" => "audio/opus",
        "wav" => "audio/wav",
        "flac" => "audio/flac",
        "mp4" | "m4v" => "video/mp4",
        _ => return None,
    })
}

/// Is this MIME type something the researchers can decode (audio, or a video container
/// carrying the audio track)?
pub fn is_audio_type(media_type: &str) -> bool {
    let t = media_type.trim().to_ascii_lowercase();
    t.starts_with("audio/") || t == "video/mp4" || t == "video/x-m4v"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_url_normalize_alike() {
        let a = normalize_url("HTTP://Example.COM:80/a/b.mp3#t=10").unwrap();
        let b = normalize_url("http://example.com/a/b.mp3").unwrap();
        assert_eq!(a, b);
        assert_eq!(url_alias(&a), url_alias(&b));
        assert_eq!(url_alias(&a).len(), 4 + ALIAS_HEX);
        assert_ne!(
            url_alias(&b),
            url_alias(&normalize_url("http://example.com/a/c.mp3").unwrap())
        );
    }

    #[test]
    fn percent_escapes_are_canonical() {
        let n = |u: &str| normalize_url(u).unwrap();
        assert_eq!(n("http://h/pn/a~b.mp3"), n("http://h/pn/a%7Eb.mp3"));
        assert_eq!(n("http://h/pn/a%7eb.mp3"), "http://h/pn/a~b.mp3");
        assert_eq!(n("http://h/pn/%41.mp3"), n("http://h/pn/A.mp3"));
        assert_eq!(n("http://h/pn/c%2fd.mp3"), "http://h/pn/c%2Fd.mp3");
        assert_eq!(n("http://h/q.mp3?a=%7e&b=%2f"), "http://h/q.mp3?a=~&b=%2F");
        assert_ne!(n("http://h/f%20g.mp3"), n("http://h/f+g.mp3"));
        assert_ne!(n("http://h/q?x=1&y=2"), n("http://h/q?y=2&x=1"));
        assert_eq!(n("http://h/e.mp3?"), n("http://h/e.mp3"));
        assert_eq!(n("http://h/100%"), "http://h/100%");
    }

    #[test]
    fn guid_alias_depends_on_feed_and_guid() {
        let g = guid_alias("http://f/feed.xml", "abc");
        assert!(g.starts_with("guid-"));
        assert_ne!(g, guid_alias("http://f/other.xml", "abc"));
        assert_ne!(g, guid_alias("http://f/feed.xml", "abd"));
    }

    #[test]
    fn unsupported_urls_are_refused_with_the_input() {
        let err = normalize_url("ftp://x/y.mp3").unwrap_err();
        assert!(err.to_string().contains("ftp://x/y.mp3"), "{err}");
        assert!(normalize_url("not a url").is_err());
    }

    #[test]
    fn credentials_are_found_removed_and_redacted() {
        assert!(has_credentials("http://user:secret@h/a.mp3"));
        assert!(has_credentials("https://user@h/a.mp3"));
        assert!(!has_credentials("https://h/a.mp3?token=x@y"));
        assert_eq!(without_credentials("http://u:p@h/feed"), "http://h/feed");
        let text = "GET http://u:s3cret@h/a.mp3 and https://x@y/z then ftp://h/a@b";
        let shown = redact_credentials(text);
        assert_eq!(
            shown,
            "GET http://***@h/a.mp3 and https://***@y/z then ftp://h/a@b"
        );
        let err = normalize_url("gopher://u:s3cret@h/a").unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn token_query_parameters_are_found_and_redacted() {
        let signed = "https://cdn.example/a.mp3?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc123&v=2";
        assert_eq!(
            secret_query_keys(signed),
            ["X-Amz-Credential", "X-Amz-Signature"]
        );
        assert_eq!(
            secret_query_keys("https://c10.example/a.mp3?token-time=1&token-hash=zz"),
            ["token-time", "token-hash"]
        );
        assert_eq!(
            secret_query_keys(
                "https://d1.cloudfront.net/a.mp3?Policy=eyJ&Signature=x&Key-Pair-Id=K2&id=7&jwt=a.b.c&sessionid=9"
            ),
            ["Policy", "Signature", "Key-Pair-Id", "jwt", "sessionid"]
        );
        assert!(secret_query_keys("https://h/a.mp3?id=7&utm_source=rss&ep=3").is_empty());
        assert!(secret_query_keys("not a url?token=x").is_empty());
        let text = format!("GET {signed} and https://h/b.mp3?token=s3cret#t, id=4");
        assert_eq!(
            redact_credentials(&text),
            "GET https://cdn.example/a.mp3?X-Amz-Credential=***&X-Amz-Signature=***&v=2 \
             and https://h/b.mp3?token=***#t, id=4"
        );
        assert_eq!(
            redact_credentials("http://u:p@h/a?key=k1&x=1"),
            "http://***@h/a?key=***&x=1"
        );
    }

    #[test]
    fn media_types_are_guessed_from_extensions() {
        assert_eq!(guess_media_type("http://x/a.MP3?x=1"), Some("audio/mpeg"));
        assert_eq!(guess_media_type("/tmp/clip.wav"), Some("audio/wav"));
        assert_eq!(guess_media_type("/tmp/notes.pdf"), None);
        assert!(is_audio_type("audio/mpeg"));
        assert!(!is_audio_type("application/pdf"));
    }
}
