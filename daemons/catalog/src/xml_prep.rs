//! A thin layer in front of `feed-rs`: rewrites the few things real feeds do that it
//! does not read, so its parsers see a document they know. Each rewrite is narrow and
//! keeps the document's meaning:
//!
//! - XML declarations and NUL characters are dropped: the text is already UTF-8
//!   ([`crate::charset`]), and a declaration saying `utf-16`, or NULs making UTF-8 look
//!   like UTF-16, would make the XML reader decode it again, wrongly (or panic);
//! - the root `<rss>` gets `version="2.0"` whatever it said (or when it said nothing):
//!   RSS 2.0 is a superset of 0.90-0.94 and 2.0x, and `feed-rs` refuses other versions
//!   and ignores 0.92's enclosures under its 0.9x parser;
//! - RSS 0.90 (RDF with Netscape's namespace) gets the RSS 1.0 namespace, whose
//!   elements are the same;
//! - Atom 0.3 gets the Atom 1.0 namespace, and its `issued` / `modified` dates become
//!   `published` / `updated`;
//! - HTML named entities (`&eacute;`, `&nbsp;`), which old feeds copied from HTML and
//!   which XML does not define, become numeric character references (outside CDATA and
//!   comments, where they are literal text);
//! - play times `feed-rs` reads with `unwrap` (`<itunes:duration>`, the `time` of
//!   `media:thumbnail`, the `start` / `end` of `media:text`) are emptied when they are
//!   not plain ASCII times with numbers of at most 9 digits: a 20-digit duration, or
//!   digits of another script, made it panic and lost the whole feed; now that item
//!   just has no duration;
//! - an enclosure URL that names nothing (empty, blanks, or only a `#fragment` or a
//!   `?query`: the `url` of `<enclosure>` and `<media:content>`) is
//!   dropped: resolved against the feed's URL it became the feed itself, so the item
//!   now has no media enclosure, as it says.

use std::fmt::Write;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

const RSS090_NS: &str = "http://my.netscape.com/rdf/simple/0.9/";
const RSS10_NS: &str = "http://purl.org/rss/1.0/";
const ATOM03_NS: &str = "http://purl.org/atom/ns#";
const ATOM10_NS: &str = "http://www.w3.org/2005/Atom";

/// Rewrites an XML feed (see the module docs). JSON is returned as it is (apart from a
/// leading BOM), for the JSON Feed parser.
pub fn prepare(text: &str) -> String {
    let text = text.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n']);
    // JSON Feed; anything else may be XML to feed-rs (it looks for the first `<`), so it
    // gets the whole treatment, declarations dropped included.
    if text.starts_with('{') {
        return text.to_string();
    }
    let text = xml_text_only(text);
    let text = match root_span(&text) {
        Some((start, end, local, tag)) => rewrite_root(&text, start, end, &local, &tag),
        None => text,
    };
    let text = html_entities_to_numeric(&text);
    let text = neutralize_play_times(&text);
    drop_empty_media_urls(&text)
}

/// What an item (`<item>`, `<entry>`) says that `feed-rs` loses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemFacts {
    /// Its RSS `<enclosure>`s: URL as written (entities decoded) and type.
    pub enclosures: Vec<(String, Option<String>)>,
    /// Its first date (`pubDate`, `dc:date`, `published`, `updated`...) as written.
    pub date: Option<String>,
}

const DATE_ELEMENTS: [&str; 6] = [
    "pubDate",
    "date",
    "published",
    "updated",
    "issued",
    "modified",
];

/// The [`ItemFacts`] of each `<item>` / `<entry>` of a prepared document, in document
/// order. `feed-rs` merges `<enclosure>` into the Media RSS object and drops it when a
/// `<media:content>` is there (podcast apps play the `<enclosure>`), and drops dates it
/// cannot read without a word: both are read here.
pub fn items(text: &str) -> Vec<ItemFacts> {
    let mut items: Vec<ItemFacts> = Vec::new();
    let mut in_item = false;
    let mut date_start: Option<usize> = None;
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = false;
    while let Ok(before) = usize::try_from(reader.buffer_position()) {
        let event = match reader.read_event() {
            Ok(Event::Eof) | Err(_) => break,
            Ok(e) => e,
        };
        let Ok(after) = usize::try_from(reader.buffer_position()) else {
            break;
        };
        match event {
            Event::Start(e) if matches!(e.local_name().as_ref(), "item" | "entry") => {
                items.push(ItemFacts::default());
                in_item = true;
            }
            Event::Empty(e) if matches!(e.local_name().as_ref(), "item" | "entry") => {
                items.push(ItemFacts::default())
            }
            Event::End(e) if matches!(e.local_name().as_ref(), "item" | "entry") => in_item = false,
            Event::Start(e) if in_item && DATE_ELEMENTS.contains(&e.local_name().as_ref()) => {
                date_start = Some(after);
            }
            Event::End(e) if in_item && DATE_ELEMENTS.contains(&e.local_name().as_ref()) => {
                let raw = date_start.take().and_then(|start| text.get(start..before));
                if let (Some(raw), Some(last)) = (raw, items.last_mut()) {
                    let raw = raw
                        .trim()
                        .trim_start_matches("<![CDATA[")
                        .trim_end_matches("]]>");
                    let value = quick_xml::escape::unescape(raw)
                        .map(|v| v.trim().to_string())
                        .unwrap_or_else(|_| raw.trim().to_string());
                    if last.date.is_none() && !value.is_empty() {
                        last.date = Some(value);
                    }
                }
            }
            Event::Start(e) | Event::Empty(e) if in_item && e.name().as_ref() == "enclosure" => {
                let mut url = None;
                let mut media_type = None;
                for attr in e.attributes().with_checks(false).flatten() {
                    let raw = attr.value.to_string();
                    let value = quick_xml::escape::unescape(&raw)
                        .map(|v| v.into_owned())
                        .unwrap_or(raw);
                    match attr.key.as_ref() {
                        "url" => url = Some(value.trim().to_string()),
                        "type" => media_type = Some(value.trim().to_string()),
                        _ => {}
                    }
                }
                if let (Some(url), Some(last)) = (url, items.last_mut()) {
                    last.enclosures.push((url, media_type));
                }
            }
            _ => {}
        }
    }
    items
}

/// Longest digit run a play time may have: hours of 9 digits times 3,600 still fit u64.
const MAX_TIME_DIGITS: usize = 9;

/// Could this (raw, unescaped) play time make `feed-rs` panic: a run of ASCII digits
/// over [`MAX_TIME_DIGITS`], a character reference (it may stand for a digit of
/// another script), or any non-ASCII character (digits of other scripts match its
/// pattern but not `u64`'s parser)?
fn dangerous_play_time(raw: &str) -> bool {
    raw.contains('&')
        || !raw.is_ascii()
        || raw
            .split(|c: char| !c.is_ascii_digit())
            .any(|run| run.len() > MAX_TIME_DIGITS)
}

/// Empties dangerous play times (see [`dangerous_play_time`]) by their text, not by an
/// XML reading: `feed-rs` reads malformed markup its own way, so any
/// `<...duration ...>` content and any ` time=`, ` start=` or ` end=` value anywhere is
/// checked. A safe value is never touched.
fn neutralize_play_times(text: &str) -> String {
    let mut edits: Vec<(usize, usize)> = Vec::new();
    // Attributes.
    for key in ["time", "start", "end"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(key).map(|i| from + i) {
            from = i + key.len();
            // An attribute name starts after whitespace, a prefix's `:`, or (as XML
            // parsers read `a="1"end="2"`) the closing quote of the attribute before it.
            let before = text[..i].chars().next_back();
            if !before.is_some_and(|c| c.is_whitespace() || matches!(c, ':' | '"' | '\'')) {
                continue;
            }
            let rest = &text[from..];
            let trimmed = rest.trim_start();
            let Some(after_eq) = trimmed.strip_prefix('=') else {
                continue;
            };
            let value_part = after_eq.trim_start();
            let Some(quote) = value_part
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'')
            else {
                continue;
            };
            let value_start = text.len() - value_part.len() + 1;
            let value_end = text[value_start..]
                .find(quote)
                .map(|j| value_start + j)
                .unwrap_or(text.len());
            if dangerous_play_time(&text[value_start..value_end]) {
                edits.push((value_start, value_end));
            }
            from = value_end.max(from);
        }
    }
    // `<itunes:duration>` (any prefix) content, up to the next `</`.
    let mut from = 0;
    while let Some(i) = text[from..].find("duration").map(|i| from + i) {
        from = i + "duration".len();
        let head = &text[..i];
        let name_start = head.trim_end_matches(|c: char| {
            c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.')
        });
        if !name_start.ends_with('<') {
            continue;
        }
        let Some(gt) = text[from..].find('>').map(|j| from + j) else {
            break;
        };
        if text[..gt].ends_with('/') {
            continue;
        }
        let content_start = gt + 1;
        let content_end = text[content_start..]
            .find("</")
            .map(|j| content_start + j)
            .unwrap_or(text.len());
        let content = &text[content_start..content_end];
        if content.contains('<') || dangerous_play_time(content) {
            edits.push((content_start, content_end));
        }
        from = content_end.max(from);
    }
    if edits.is_empty() {
        return text.to_string();
    }
    edits.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in edits {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Drops media URLs that name nothing (see the module docs) from the `<enclosure>` and
/// `<media:content>` tags an XML reading finds.
fn drop_empty_media_urls(text: &str) -> String {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = false;
    while let Ok(before) = usize::try_from(reader.buffer_position()) {
        let event = match reader.read_event() {
            Ok(Event::Eof) | Err(_) => break,
            Ok(e) => e,
        };
        let Ok(after) = usize::try_from(reader.buffer_position()) else {
            break;
        };
        if let Event::Start(e) | Event::Empty(e) = event {
            if matches!(e.local_name().as_ref(), "enclosure" | "content") {
                if let Some(new_tag) = text.get(before..after).and_then(tag_without_empty_url) {
                    edits.push((before, after, new_tag));
                }
            }
        }
    }
    if edits.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, replacement) in edits {
        out.push_str(&text[at..start]);
        out.push_str(&replacement);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Does this (raw) media URL name nothing but the document it is in?
fn names_nothing(raw: &str) -> bool {
    let t = raw.trim();
    t.is_empty() || t.starts_with('#') || t.starts_with('?')
}

/// The tag without its `url` attribute when that names nothing, or `None` when it is
/// not there or names something. Works on the tag's text, so an attribute malformed
/// further on does not hide it.
fn tag_without_empty_url(tag: &str) -> Option<String> {
    let mut search = tag.find(|c: char| c.is_whitespace())?;
    while let Some(eq) = tag[search..].find('=').map(|i| search + i) {
        let key_end = tag[..eq].trim_end().len();
        let key_start = tag[..key_end]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(key_end);
        let after_eq = eq + 1 + (tag[eq + 1..].len() - tag[eq + 1..].trim_start().len());
        let Some(quote) = tag[after_eq..]
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
        else {
            search = eq + 1;
            continue;
        };
        let value_start = after_eq + 1;
        let value_end = tag[value_start..]
            .find(quote)
            .map(|i| value_start + i)
            .unwrap_or(tag.len());
        let attr_end = (value_end + 1).min(tag.len());
        if &tag[key_start..key_end] == "url" {
            return names_nothing(&tag[value_start..value_end])
                .then(|| format!("{}{}", &tag[..key_start], &tag[attr_end..]));
        }
        search = attr_end;
        if search >= tag.len() {
            break;
        }
    }
    None
}

/// The text without what would make the XML reader pick another decoder: NUL
/// characters (never allowed in XML; with them, UTF-8 text can look like UTF-16 to the
/// reader's byte sniffing) and every XML declaration (the one at the start is answered
/// by [`crate::charset`]; one further on is malformed, and naming a wide encoding it
/// would switch the reader's decoder mid-document, which panicked).
fn xml_text_only(text: &str) -> String {
    let text = text.replace('\0', "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("<?xml") {
        let after = &rest[at + 5..];
        out.push_str(&rest[..at]);
        if after.is_empty() || after.starts_with([' ', '\t', '\r', '\n', '?']) {
            let end = after.find("?>").map(|i| i + 2).unwrap_or(after.len());
            rest = &after[end..];
        } else {
            out.push_str("<?xml");
            rest = after;
        }
    }
    out.push_str(rest);
    out.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
        .to_string()
}

/// The local name of the root element of prepared XML text (`rss`, `feed`, `html`...).
pub fn root_name(text: &str) -> Option<String> {
    root_span(text).map(|(_, _, local, _)| local)
}

/// The byte span of the root element's start tag, its local name, and its text.
fn root_span(text: &str) -> Option<(usize, usize, String, String)> {
    let mut reader = Reader::from_str(text);
    loop {
        let before = usize::try_from(reader.buffer_position()).ok()?;
        match reader.read_event().ok()? {
            Event::Start(e) | Event::Empty(e) => {
                let after = usize::try_from(reader.buffer_position()).ok()?;
                let local = e.local_name().as_ref().to_string();
                let tag = text.get(before..after)?.to_string();
                return Some((before, after, local, tag));
            }
            Event::Eof => return None,
            _ => {}
        }
    }
}

fn rewrite_root(text: &str, start: usize, end: usize, local: &str, tag: &str) -> String {
    match local {
        "rss" => {
            let new_tag = rss_tag(tag).unwrap_or_else(|| tag.to_string());
            format!("{}{new_tag}{}", &text[..start], &text[end..])
        }
        "RDF" if text.contains(RSS090_NS) => text.replace(RSS090_NS, RSS10_NS),
        "feed" if tag.contains(ATOM03_NS) => text
            .replace(ATOM03_NS, ATOM10_NS)
            .replace("<issued>", "<published>")
            .replace("</issued>", "</published>")
            .replace("<modified>", "<updated>")
            .replace("</modified>", "</updated>"),
        _ => text.to_string(),
    }
}

/// The root `<rss ...>` tag with `version="2.0"` and its other attributes as they were.
fn rss_tag(tag: &str) -> Option<String> {
    let empty = tag.ends_with("/>");
    let inner = tag
        .strip_prefix('<')?
        .trim_end_matches('>')
        .trim_end_matches('/');
    let start = BytesStart::from_content(
        inner,
        inner.find(char::is_whitespace).unwrap_or(inner.len()),
    );
    let mut out = format!("<{}", start.name().as_ref());
    for attr in start.attributes().with_checks(false) {
        let attr = attr.ok()?;
        let key = attr.key.as_ref().to_string();
        if key == "version" {
            continue;
        }
        let value = attr.value.to_string();
        let quote = if value.contains('"') { '\'' } else { '"' };
        let _ = write!(out, " {key}={quote}{value}{quote}");
    }
    out.push_str(" version=\"2.0\"");
    out.push_str(if empty { "/>" } else { ">" });
    Some(out)
}

const XML_ENTITIES: [&str; 5] = ["amp", "lt", "gt", "quot", "apos"];

/// Copies `text`, turning HTML named entity references outside CDATA sections,
/// comments and processing instructions into numeric references.
fn html_entities_to_numeric(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let literal = [("<![CDATA[", "]]>"), ("<!--", "-->"), ("<?", "?>")]
            .into_iter()
            .find(|(open, _)| rest.starts_with(open));
        if let Some((open, close)) = literal {
            let end = rest[open.len()..]
                .find(close)
                .map(|i| open.len() + i + close.len())
                .unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        if rest.starts_with('&') {
            if let Some((len, chars)) = html_entity(rest) {
                for c in chars.chars() {
                    let _ = write!(out, "&#x{:X};", c as u32);
                }
                rest = &rest[len..];
                continue;
            }
        }
        // `<` of a tag or an `&` left as it is: copy one character.
        out.push_str(&rest[..1]);
        rest = &rest[1..];
    }
    out.push_str(rest);
    out
}

/// `&name;` at the start of `text`, when `name` is an HTML entity XML does not define:
/// its length and replacement characters.
fn html_entity(text: &str) -> Option<(usize, &'static str)> {
    let body = &text[1..];
    let end = body.find(';').filter(|&e| e > 0 && e <= 32)?;
    let name = &body[..end];
    if !name.chars().all(|c| c.is_ascii_alphanumeric()) || XML_ENTITIES.contains(&name) {
        return None;
    }
    let chars = quick_xml::escape::resolve_html5_entity(name)?;
    Some((end + 2, chars))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_versions_become_2_0_and_other_attributes_stay() {
        for root in [
            "<rss>",
            "<rss version=\"0.90\">",
            "<rss version='0.94' xmlns:itunes=\"http://www.itunes.com/dtds/podcast-1.0.dtd\">",
            "<rss version=\"2.01\" >",
        ] {
            let out = prepare(&format!(
                "<?xml version=\"1.0\" encoding=\"utf-16\"?>\n{root}<channel/></rss>"
            ));
            assert!(out.starts_with("<rss"), "{out}");
            assert!(out.contains("version=\"2.0\""), "{out}");
            assert_eq!(out.matches("version=").count(), 1, "{out}");
            if root.contains("itunes") {
                assert!(out.contains("xmlns:itunes=\"http://www.itunes.com/dtds/podcast-1.0.dtd\""));
            }
        }
    }

    #[test]
    fn html_entities_become_numeric_outside_cdata() {
        let out = prepare("<rss><title>Caf&eacute; &amp; &nbsp;&hellip; &bogus;</title><d><![CDATA[&eacute;]]></d><!-- &eacute; --></rss>");
        assert!(
            out.contains("Caf&#xE9; &amp; &#xA0;&#x2026; &bogus;"),
            "{out}"
        );
        assert!(out.contains("<![CDATA[&eacute;]]>"));
        assert!(out.contains("<!-- &eacute; -->"));
    }

    #[test]
    fn atom_03_and_rss_090_get_current_namespaces() {
        let out = prepare(&format!("<feed version=\"0.3\" xmlns=\"{ATOM03_NS}\"><entry><issued>2004-01-01T00:00:00Z</issued></entry></feed>"));
        assert!(
            out.contains(ATOM10_NS) && out.contains("<published>2004"),
            "{out}"
        );
        let out = prepare(&format!("<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" xmlns=\"{RSS090_NS}\"></rdf:RDF>"));
        assert!(out.contains(RSS10_NS), "{out}");
    }

    #[test]
    fn declarations_and_nuls_never_reach_the_xml_reader() {
        let out = prepare("\u{feff}\0<\0?xml version='1.0'?><rss><a b=\"<![CDATA[\"/><?xml version=\"1.0\" encoding=\"utf-16\"?>]]><?xml-stylesheet href=\"s\"?></rss>");
        assert!(!out.contains('\0') && !out.contains("<?xml "), "{out}");
        assert!(out.starts_with("<rss version=\"2.0\">"), "{out}");
        assert!(out.contains("<?xml-stylesheet"), "{out}");
    }

    #[test]
    fn play_times_feed_rs_would_panic_on_are_emptied() {
        let out = prepare("<rss><item><itunes:duration>99999999999999999999</itunes:duration><media:thumbnail url=\"u\" time=\"123456789012:00:00\"/><media:text start='\u{663}\u{660}' end=\"00:01:00\">t</media:text></item><item><itunes:duration>1:02:03</itunes:duration></item></rss>");
        assert!(!out.contains("9999999999"), "{out}");
        assert!(out.contains("<itunes:duration></itunes:duration>"), "{out}");
        assert!(out.contains("time=\"\""), "{out}");
        assert!(
            out.contains("start=''") && out.contains("end=\"00:01:00\""),
            "{out}"
        );
        assert!(
            out.contains("<itunes:duration>1:02:03</itunes:duration>"),
            "{out}"
        );
        // Malformed further on: still found.
        // No space before the next attribute (a fuzzed cut): still found.
        let out = prepare("<rss><item><media:text start=\"1.5\"end=\"&#x663;&#x660;\">w</media:text></item></rss>");
        assert!(out.contains("end=\"\""), "{out}");
        let out = prepare("<rss><item><media:text start=\"123456789012345678901.5\"/2.mp3\" type=\"audio/mpeg\"/></item></rss>");
        assert!(out.contains("start=\"\"/2.mp3"), "{out}");
    }

    #[test]
    fn media_urls_naming_nothing_are_dropped() {
        let out = prepare("<rss><item><enclosure url=\"\" type=\"audio/mpeg\"/><enclosure url='  #x' type=\"audio/mpeg\"/><media:content url=\"?dl\"/><enclosure url=\"http://h/a.mp3\" length=\"1\"/></item></rss>");
        assert_eq!(out.matches("url=").count(), 1, "{out}");
        assert!(out.contains("<enclosure  type=\"audio/mpeg\"/>"), "{out}");
        assert!(out.contains("url=\"http://h/a.mp3\""), "{out}");
        let items = items("<rss><item><pubDate>Tue, 02 Jan 2024 10:00:00 BST</pubDate><enclosure url=\"http://h/a.mp3?a=1&amp;b=2\" type=\"audio/mpeg\"/><media:content url=\"http://h/p.mp3\"/></item><item/></rss>");
        assert_eq!(
            items[0].enclosures,
            [(
                "http://h/a.mp3?a=1&b=2".to_string(),
                Some("audio/mpeg".to_string())
            )]
        );
        assert_eq!(
            items[0].date.as_deref(),
            Some("Tue, 02 Jan 2024 10:00:00 BST")
        );
        assert_eq!(items[1], ItemFacts::default());
    }

    #[test]
    fn the_root_is_named() {
        assert_eq!(
            root_name(&prepare("<!doctype html><html><body/></html>")).as_deref(),
            Some("html")
        );
        assert_eq!(
            root_name(&prepare("<?xml version='1.0'?><rss/>")).as_deref(),
            Some("rss")
        );
    }

    #[test]
    fn json_is_left_alone() {
        assert_eq!(
            prepare("\u{feff}{\"a\": \"&eacute;\"}"),
            "{\"a\": \"&eacute;\"}"
        );
    }
}
