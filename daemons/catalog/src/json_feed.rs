//! JSON Feed items read one by one, leniently.
//!
//! `feed-rs` deserializes a JSON Feed into strict types: one sloppy item (a numeric
//! `id`, an attachment without `mime_type` or `url`, a `size_in_bytes` of `1e30`, a
//! numeric title) made the whole feed unreadable. Here the document is read as
//! `serde_json::Value`s and each item is brought into the shape `feed-rs` reads:
//! what the JSON Feed 1.1 spec says readers should coerce is coerced (a number `id`
//! becomes a string), what the catalog does not use and does not parse is dropped
//! (authors, tags, sizes that are not byte counts), and an item that still cannot be
//! read is left out with a reason, the others kept.

use serde_json::{Map, Value};

/// An item left out: its position (1-based), title and id as far as they could be
/// read, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeftOut {
    pub position: usize,
    pub title: String,
    pub id: String,
    pub reason: String,
}

/// A JSON Feed made readable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lenient {
    /// The document with only readable items, each in the shape `feed-rs` reads.
    pub text: String,
    /// The 1-based position in the original of each item kept, in order.
    pub positions: Vec<usize>,
    /// The items left out.
    pub left_out: Vec<LeftOut>,
}

/// Optional text fields of an item that `feed-rs` reads.
const TEXT_FIELDS: [&str; 8] = [
    "url",
    "external_url",
    "title",
    "content_html",
    "content_text",
    "summary",
    "date_published",
    "date_modified",
];

/// A scalar as text (numbers and booleans written as JSON writes them), `None` for
/// `null`, `Err` for arrays and objects.
fn as_text(value: &Value) -> Result<Option<String>, ()> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Array(_) | Value::Object(_) => Err(()),
    }
}

/// One attachment in `feed-rs`'s shape, or `None` when it has no URL (it names nothing).
fn attachment(value: &Value) -> Option<Value> {
    let obj = value.as_object()?;
    let url = obj.get("url").and_then(|u| as_text(u).ok().flatten())?;
    if url.trim().is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("url".into(), Value::String(url));
    // No type: one that says nothing, so the URL's extension decides.
    let mime = obj
        .get("mime_type")
        .and_then(|m| as_text(m).ok().flatten())
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| "application/octet-stream".to_string());
    out.insert("mime_type".into(), Value::String(mime));
    if let Some(title) = obj.get("title").and_then(|t| as_text(t).ok().flatten()) {
        out.insert("title".into(), Value::String(title));
    }
    if let Some(size) = obj.get("size_in_bytes").and_then(Value::as_u64) {
        out.insert("size_in_bytes".into(), Value::from(size));
    }
    Some(Value::Object(out))
}

/// One item in `feed-rs`'s shape, or why it cannot be.
fn item(value: &Value) -> Result<Value, String> {
    let obj = value
        .as_object()
        .ok_or_else(|| "the item is not a JSON object".to_string())?;
    let mut out = Map::new();
    // JSON Feed 1.1: "if an id is presented as a number, the reader must coerce it to a
    // string".
    match obj.get("id").map(as_text) {
        None | Some(Ok(None)) => {}
        Some(Ok(Some(id))) => {
            out.insert("id".into(), Value::String(id));
        }
        Some(Err(())) => return Err("its id is a list or an object, not text".to_string()),
    }
    for field in TEXT_FIELDS {
        match obj.get(field).map(as_text) {
            None | Some(Ok(None)) => {}
            Some(Ok(Some(text))) => {
                out.insert(field.into(), Value::String(text));
            }
            Some(Err(())) => return Err(format!("its {field} is a list or an object, not text")),
        }
    }
    match obj.get("attachments") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            let kept: Vec<Value> = list.iter().filter_map(attachment).collect();
            out.insert("attachments".into(), Value::Array(kept));
        }
        Some(_) => return Err("its attachments are not a list".to_string()),
    }
    Ok(Value::Object(out))
}

/// Reads a JSON Feed leniently (see the module docs). `None` when the text is not a
/// JSON object with an `items` list: `feed-rs` then says what is wrong with it.
pub(crate) fn lenient(text: &str) -> Option<Lenient> {
    let mut doc: Value = serde_json::from_str(text).ok()?;
    let root = doc.as_object_mut()?;
    let items = match root.remove("items")? {
        Value::Array(items) => items,
        other => {
            root.insert("items".into(), other);
            return None;
        }
    };
    // Feed-level fields the catalog does not use but `feed-rs` parses strictly.
    let title = root.get("title").and_then(|t| as_text(t).ok().flatten());
    root.insert("title".into(), Value::String(title.unwrap_or_default()));
    for field in ["author", "authors"] {
        root.remove(field);
    }
    for field in [
        "home_page_url",
        "feed_url",
        "language",
        "description",
        "icon",
        "favicon",
    ] {
        if root.get(field).is_some_and(|v| !v.is_string()) {
            root.remove(field);
        }
    }
    let mut kept = Vec::with_capacity(items.len());
    let mut positions = Vec::with_capacity(items.len());
    let mut left_out = Vec::new();
    for (i, raw) in items.iter().enumerate() {
        match item(raw) {
            Ok(v) => {
                kept.push(v);
                positions.push(i + 1);
            }
            Err(reason) => {
                let field = |name: &str| {
                    raw.get(name)
                        .and_then(|v| as_text(v).ok().flatten())
                        .unwrap_or_default()
                };
                left_out.push(LeftOut {
                    position: i + 1,
                    title: field("title"),
                    id: field("id"),
                    reason,
                });
            }
        }
    }
    root.insert("items".into(), Value::Array(kept));
    Some(Lenient {
        text: doc.to_string(),
        positions,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sloppy_items_are_coerced_or_left_out_one_by_one() {
        let text = r#"{"version": "https://jsonfeed.org/version/1.1", "title": 7, "items": [
            {"id": 1, "title": "numeric id", "attachments": [{"url": "http://h/1.mp3", "mime_type": "audio/mpeg", "size_in_bytes": 1e30}]},
            {"id": "b", "title": 42, "attachments": [{"mime_type": "audio/mpeg"}, {"url": "http://h/2.mp3"}]},
            {"id": "c", "title": ["a list"]},
            "not an object",
            {"id": "e", "title": "fine", "tags": [1, 2], "author": "x", "attachments": [{"url": "http://h/5.mp3", "mime_type": "audio/mpeg"}]}
        ]}"#;
        let out = lenient(text).unwrap();
        assert_eq!(out.positions, [1, 2, 5]);
        assert_eq!(out.left_out.len(), 2);
        assert_eq!(out.left_out[0].position, 3);
        assert!(
            out.left_out[0].reason.contains("title"),
            "{:?}",
            out.left_out
        );
        let doc: Value = serde_json::from_str(&out.text).unwrap();
        assert_eq!(doc["title"], "7");
        assert_eq!(doc["items"][0]["id"], "1");
        assert!(doc["items"][0]["attachments"][0]
            .get("size_in_bytes")
            .is_none());
        assert_eq!(doc["items"][1]["title"], "42");
        assert_eq!(doc["items"][1]["attachments"].as_array().unwrap().len(), 1);
        assert_eq!(
            doc["items"][1]["attachments"][0]["mime_type"],
            "application/octet-stream"
        );
        assert!(doc["items"][2].get("tags").is_none());
        assert!(lenient("[1, 2]").is_none());
        assert!(lenient("{\"items\": 3}").is_none());
    }
}
