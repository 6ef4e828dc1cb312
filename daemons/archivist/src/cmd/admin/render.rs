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
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).context("encoding JSON")?
        ),
        OutputFormat::Yaml => print!("{}", serde_yaml::to_string(value).context("encoding YAML")?),
        OutputFormat::Table => print!("{}", table(value)),
    }
    Ok(())
}

/// A table with a header row.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    for row in rows {
        t.add_row(row);
    }
    format!("{t}\n")
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
    fn spans_are_short() {
        assert_eq!(span(850), "850ms");
        assert_eq!(span(725_000), "12m05s");
        assert_eq!(span(-130_000), "-2m10s");
        assert_eq!(span(3 * 86_400_000 + 4 * 3_600_000), "3d4h");
    }
}
