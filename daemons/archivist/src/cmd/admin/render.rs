//! Output: human tables (comfy-table) by default, JSON or YAML for scripts.

use anyhow::{Context, Result};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

use crate::cli::OutputFormat;

/// Prints `value` as JSON or YAML, or as the text `table` renders.
pub fn emit<T: Serialize>(
    format: OutputFormat,
    value: &T,
    table: impl FnOnce(&T) -> String,
) -> Result<()> {
    match format {
        OutputFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(value).context("encoding JSON")?
        ),
        OutputFormat::Yaml => out!("{}", serde_yaml::to_string(value).context("encoding YAML")?),
        OutputFormat::Table => out!("{}", terminal_safe(&table(value))),
    }
    Ok(())
}

/// The last guard of human output: every control character but the line breaks the
/// renderer put there becomes an escape, so no text from the tree (a title in a heading
/// line, a reason) can send an escape sequence to the terminal. Cells are already
/// [`printable`], which also escapes their newlines.
pub fn terminal_safe(text: &str) -> String {
    text.split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A table with a header row. Every cell goes through [`printable`]: titles, URLs and
/// messages come from feeds, manifests and servers, and must not drive the terminal.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().map(|h| printable(h)).collect::<Vec<_>>());
    for row in rows {
        t.add_row(row.iter().map(|c| printable(c)).collect::<Vec<_>>());
    }
    format!("{t}\n")
}

/// Text made safe to show in a terminal, for every table: control characters (C0, DEL,
/// C1: escape sequences, newlines that would draw a fake row, carriage returns, bells)
/// the bidirectional overrides and marks that reorder what is shown (including the
/// Arabic letter mark U+061C), the line and paragraph separators U+2028/U+2029 that
/// some terminals break lines on, and the invisible U+200B / U+FEFF become visible
/// escapes (`\n`, `\x1b`, `\u{202e}`, `\u{2028}`); credentials in URLs become `***`. The stored text is
/// not touched: this is only how it is shown.
pub fn printable(text: &str) -> String {
    let text = archivist_catalog::identity::redact_credentials(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // The rest is the library's rule, shared with the web console's pages.
            c => match archivist_admin::text::escape(c) {
                Some(e) => out.push_str(&e),
                None => out.push(c),
            },
        }
    }
    out
}

/// Unix ms (ZooKeeper's clock) as RFC 3339.
pub fn when(ms: i64) -> String {
    archivist_engine::clock::to_datetime(ms)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| ms.to_string())
}

/// A duration in ms, short and readable (`3d4h`, `12m05s`, `850ms`, `-2m10s`).
pub fn span(ms: i64) -> String {
    if ms < 0 {
        return format!("-{}", span(ms.saturating_neg()));
    }
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// An optional value, or `-`.
pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// A percentage with one decimal.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_show_control_characters_as_escapes() {
        let title = "Evil\x1b[2J\x1b[31mred\nfake | row\r\x07\u{9b}31m\u{202e}txt.exe";
        let out = table(&["title"], [vec![title.to_string()]]);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert_eq!(
            out.lines().count(),
            5,
            "one header, one row, three rules: {out}"
        );
        assert!(
            out.contains("Evil\\x1b[2J\\x1b[31mred\\nfake | row\\r\\x07\\x9b31m\\u{202e}txt.exe"),
            "{out}"
        );
        assert_eq!(printable("plain Café ☕"), "plain Café ☕");
        assert_eq!(
            printable("a\u{2028}b\u{2029}c\u{61c}d\u{200b}e\u{feff}f"),
            "a\\u{2028}b\\u{2029}c\\u{61c}d\\u{200b}e\\u{feff}f"
        );
        assert_eq!(printable("http://u:s3cret@h/a.mp3"), "http://***@h/a.mp3");
    }

    #[test]
    fn free_text_keeps_its_lines_and_loses_its_escapes() {
        assert_eq!(
            terminal_safe("Title: A\x1b[31m\u{7}\nnext line\n"),
            "Title: A\\x1b[31m\\x07\nnext line\n"
        );
    }

    #[test]
    fn spans_are_short() {
        assert_eq!(span(850), "850ms");
        assert_eq!(span(725_000), "12m05s");
        assert_eq!(span(-130_000), "-2m10s");
        assert_eq!(span(3 * 86_400_000 + 4 * 3_600_000), "3d4h");
    }
}
