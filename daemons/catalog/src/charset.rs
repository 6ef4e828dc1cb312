//! Turning a feed's bytes into text: which character encoding, decided once, here.
//!
//! The precedence is the usual one for XML fetched over HTTP (RFC 7303, XML 1.0
//! appendix F): a byte order mark, then the `charset` of the HTTP `Content-Type`, then
//! the XML declaration's `encoding`, then sniffing (the byte pattern of `<?xml` for
//! UTF-16/32 without a BOM; valid UTF-8; else windows-1252, which every byte decodes in).
//! Labels and decoders are `encoding_rs` (the WHATWG Encoding Standard, as browsers use);
//! UTF-32, which the standard leaves out, is decoded here. The XML parser then only ever
//! sees UTF-8, so a document declaring `utf-16` cannot reach its decoder
//! (`docs/catalog.md`, "Encodings").

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1252};

/// A character encoding a feed can be in: one `encoding_rs` knows, or UTF-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charset {
    Whatwg(&'static Encoding),
    Utf32 { big_endian: bool },
}

impl Charset {
    fn name(self) -> &'static str {
        match self {
            Charset::Whatwg(e) => e.name(),
            Charset::Utf32 { big_endian: true } => "UTF-32BE",
            Charset::Utf32 { big_endian: false } => "UTF-32LE",
        }
    }

    /// Does ASCII text read as ASCII in this encoding (so an XML declaration found by
    /// reading bytes as ASCII is really there)?
    fn ascii_compatible(self) -> bool {
        match self {
            Charset::Whatwg(e) => e.is_ascii_compatible(),
            Charset::Utf32 { .. } => false,
        }
    }

    /// The encoding of a label (`utf-8`, `ISO-8859-1`, `ucs-2`, `utf-32`...).
    fn for_label(label: &str) -> Option<Charset> {
        let l = label.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
        match l.as_str() {
            "utf-32" | "utf-32be" | "ucs-4" | "ucs4" | "iso-10646-ucs-4" => {
                Some(Charset::Utf32 { big_endian: true })
            }
            "utf-32le" => Some(Charset::Utf32 { big_endian: false }),
            // Not WHATWG labels, but what feeds write for UTF-16.
            "ucs-2" | "ucs2" | "iso-10646-ucs-2" | "utf16" => Some(Charset::Whatwg(UTF_16BE)),
            _ => Encoding::for_label(l.as_bytes()).map(Charset::Whatwg),
        }
    }
}

/// Where the encoding was learnt, for messages and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A byte order mark.
    Bom,
    /// The `charset` parameter of the HTTP `Content-Type`.
    Http,
    /// The XML declaration's `encoding`.
    Declaration,
    /// Sniffed from the bytes (or the default).
    Sniffed,
}

/// A feed as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text, without a byte order mark.
    pub text: String,
    /// The encoding used (`UTF-8`, `UTF-16BE`, `windows-1252`, `UTF-32LE`...).
    pub encoding: &'static str,
    /// How it was chosen.
    pub source: Source,
    /// Were there bytes the encoding could not read (replaced by U+FFFD)?
    pub had_errors: bool,
}

/// The `charset` parameter of a `Content-Type` header value, if any.
pub fn charset_of_content_type(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']).to_string())
            .filter(|v| !v.is_empty())
    })
}

fn bom(body: &[u8]) -> Option<(Charset, usize)> {
    Some(match body {
        [0xFF, 0xFE, 0, 0, ..] => (Charset::Utf32 { big_endian: false }, 4),
        [0, 0, 0xFE, 0xFF, ..] => (Charset::Utf32 { big_endian: true }, 4),
        [0xEF, 0xBB, 0xBF, ..] => (Charset::Whatwg(UTF_8), 3),
        [0xFE, 0xFF, ..] => (Charset::Whatwg(UTF_16BE), 2),
        [0xFF, 0xFE, ..] => (Charset::Whatwg(UTF_16LE), 2),
        _ => return None,
    })
}

/// The encoding family the first bytes show when they are `<?` (or `<` and a name) in a
/// wide encoding without a BOM (XML 1.0 appendix F.1).
fn wide_pattern(body: &[u8]) -> Option<Charset> {
    Some(match body {
        [0, 0, 0, b'<', ..] => Charset::Utf32 { big_endian: true },
        [b'<', 0, 0, 0, ..] => Charset::Utf32 { big_endian: false },
        [0, b'<', 0, _, ..] => Charset::Whatwg(UTF_16BE),
        [b'<', 0, _, 0, ..] => Charset::Whatwg(UTF_16LE),
        _ => return None,
    })
}

/// The `encoding` of an XML declaration at the start of `head` (read as ASCII).
fn declared(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(1024)];
    let text: String = head
        .iter()
        .take_while(|&&b| b != b'>')
        .map(|&b| if b.is_ascii() { b as char } else { '?' })
        .collect();
    let decl = text.trim_start_matches(char::is_whitespace);
    let decl = decl.strip_prefix("<?xml")?;
    let at = decl.find("encoding")?;
    let rest = decl[at + "encoding".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &rest[1..];
    let end = value.find(quote)?;
    Some(value[..end].to_string())
}

fn decode_utf32(body: &[u8], big_endian: bool) -> (String, bool) {
    let mut errors = body.len() % 4 != 0;
    let text = body
        .chunks_exact(4)
        .map(|c| {
            let b = [c[0], c[1], c[2], c[3]];
            let n = if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            };
            char::from_u32(n).unwrap_or_else(|| {
                errors = true;
                char::REPLACEMENT_CHARACTER
            })
        })
        .collect();
    (text, errors)
}

fn decode_with(body: &[u8], charset: Charset) -> (String, bool) {
    match charset {
        Charset::Whatwg(e) => {
            let (text, errors) = e.decode_without_bom_handling(body);
            (text.into_owned(), errors)
        }
        Charset::Utf32 { big_endian } => decode_utf32(body, big_endian),
    }
}

/// Decodes a feed body. `http_charset` is the `charset` of its `Content-Type`, if any.
/// Never fails: bytes an encoding cannot read become U+FFFD (and `had_errors` says so);
/// an unknown label is passed over for the next source in the precedence.
pub fn decode(body: &[u8], http_charset: Option<&str>) -> Decoded {
    let (charset, source, skip) = choose(body, http_charset);
    let (mut text, mut had_errors) = decode_with(&body[skip..], charset);
    let mut encoding = charset.name();
    // A document said (or was assumed) to be UTF-8 that is not: the common real-world
    // case is windows-1252 text under a UTF-8 label. Only a BOM is trusted over the bytes.
    if had_errors && charset == Charset::Whatwg(UTF_8) && source != Source::Bom {
        let (cp1252, _) = decode_with(&body[skip..], Charset::Whatwg(WINDOWS_1252));
        text = cp1252;
        had_errors = false;
        encoding = WINDOWS_1252.name();
    }
    Decoded {
        text,
        encoding,
        source,
        had_errors,
    }
}

fn choose(body: &[u8], http_charset: Option<&str>) -> (Charset, Source, usize) {
    if let Some((charset, len)) = bom(body) {
        return (charset, Source::Bom, len);
    }
    // A wide document shows its byte order in its first `<`; a declaration read from it
    // could only repeat that, and an ASCII-compatible HTTP charset for it is false (read
    // so, it would be NUL-interleaved noise).
    let wide = wide_pattern(body);
    if let Some(charset) = http_charset.and_then(Charset::for_label) {
        match wide {
            Some(w) if charset.ascii_compatible() => return (w, Source::Sniffed, 0),
            _ => return (charset, Source::Http, 0),
        }
    }
    if let Some(wide) = wide {
        return (wide, Source::Sniffed, 0);
    }
    // A declaration of a wide encoding read from ASCII bytes is false (the declaration
    // itself would not be ASCII): the bytes decide then.
    if let Some(label) = declared(body)
        .as_deref()
        .and_then(Charset::for_label)
        .filter(|c| c.ascii_compatible())
    {
        return (label, Source::Declaration, 0);
    }
    let charset = if std::str::from_utf8(body).is_ok() {
        Charset::Whatwg(UTF_8)
    } else {
        Charset::Whatwg(WINDOWS_1252)
    };
    (charset, Source::Sniffed, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16be(text: &str, bom: bool) -> Vec<u8> {
        let mut out = if bom { vec![0xFE, 0xFF] } else { Vec::new() };
        for unit in text.encode_utf16() {
            out.extend_from_slice(&unit.to_be_bytes());
        }
        out
    }

    fn utf32(text: &str, big_endian: bool, bom: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut push = |n: u32| {
            if big_endian {
                out.extend_from_slice(&n.to_be_bytes())
            } else {
                out.extend_from_slice(&n.to_le_bytes())
            }
        };
        if bom {
            push(0xFEFF);
        }
        for c in text.chars() {
            push(c as u32);
        }
        out
    }

    const DOC: &str = "<?xml version=\"1.0\" encoding=\"utf-16\"?><rss>Café ☕</rss>";

    #[test]
    fn bom_wins_over_everything() {
        let d = decode(&utf16be(DOC, true), Some("iso-8859-1"));
        assert_eq!((d.encoding, d.source), ("UTF-16BE", Source::Bom));
        assert_eq!(d.text, DOC);
    }

    #[test]
    fn utf16_and_utf32_without_bom_are_sniffed() {
        let d = decode(&utf16be(DOC, false), None);
        assert_eq!(d.text, DOC);
        assert_eq!(d.encoding, "UTF-16BE");
        for big in [true, false] {
            let d = decode(&utf32(DOC, big, false), None);
            assert_eq!(d.text, DOC, "big endian: {big}");
            let d = decode(&utf32(DOC, big, true), None);
            assert_eq!(d.text, DOC);
            assert_eq!(d.source, Source::Bom);
        }
    }

    #[test]
    fn http_charset_beats_the_declaration() {
        let (bytes, _, _) = WINDOWS_1252.encode("<?xml version=\"1.0\"?><rss>Café</rss>");
        let d = decode(&bytes, Some("ISO-8859-1"));
        assert_eq!(d.source, Source::Http);
        assert!(d.text.contains("Café"));
        let (koi, _, _) = encoding_rs::KOI8_R
            .encode("<?xml version=\"1.0\" encoding=\"utf-8\"?><rss>Привет</rss>");
        assert!(decode(&koi, Some("koi8-r")).text.contains("Привет"));
    }

    #[test]
    fn declaration_then_sniffing() {
        let (bytes, _, _) =
            WINDOWS_1252.encode("<?xml version=\"1.0\" encoding=\"windows-1252\"?><rss>Café</rss>");
        let d = decode(&bytes, None);
        assert_eq!(d.source, Source::Declaration);
        assert!(d.text.contains("Café"));
        // A UTF-8 document falsely declaring UTF-16 is read as what its bytes are.
        let d = decode(DOC.as_bytes(), None);
        assert_eq!((d.encoding, d.text.as_str()), ("UTF-8", DOC));
        // Latin-1 bytes under no declaration: not UTF-8, so windows-1252.
        let d = decode(b"<rss>Caf\xe9</rss>", None);
        assert_eq!(d.text, "<rss>Café</rss>");
        // ...and under a false UTF-8 label too.
        let d = decode(
            b"<?xml version='1.0' encoding='UTF-8'?><rss>Caf\xe9</rss>",
            None,
        );
        assert!(d.text.ends_with("<rss>Café</rss>"));
    }

    #[test]
    fn content_type_charset_is_found() {
        assert_eq!(
            charset_of_content_type("application/rss+xml; charset=\"ISO-8859-1\"").as_deref(),
            Some("ISO-8859-1")
        );
        assert_eq!(charset_of_content_type("text/xml"), None);
    }
}
