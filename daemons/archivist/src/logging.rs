//! Log setup: human lines by default, JSON with `--log-format json`; `RUST_LOG` filters.

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::{FormatFields, FormattedFields};
use tracing_subscriber::EnvFilter;

use crate::cli::{GlobalOpts, LogFormat};

/// Installs the global subscriber. Logs go to stderr so command output stays clean;
/// daemons log at `info` by default, one-shot commands at `warn` (`RUST_LOG` overrides).
pub fn init(global: &GlobalOpts, daemon: bool) {
    let default = if daemon {
        "info,zookeeper_client=warn"
    } else {
        "warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        ))
        .with_writer(std::io::stderr);
    let _ = match global.log_format {
        LogFormat::Human => builder.fmt_fields(LatestFields::default()).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Colour codes only on a terminal, and never when `NO_COLOR` is set
/// (<https://no-color.org>): a log file or a log collector gets plain text.
fn colour(stderr_is_terminal: bool, no_color: bool) -> bool {
    stderr_is_terminal && !no_color
}

/// Human field formatting where a span field recorded again replaces its old value.
///
/// A job's span records its `state` at every transition; the default formatter appends,
/// so a line would read `job{.. state=pending state=leased state=failed}`. This keeps
/// only the latest value, as the JSON formatter does.
#[derive(Debug, Default)]
struct LatestFields(DefaultFields);

/// The key of a formatted `key=value` token, ANSI styling removed.
fn token_key(token: &str) -> String {
    let mut plain = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip an escape sequence: ESC [ ... final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain.split('=').next().unwrap_or_default().to_string()
}

/// `old` with every token whose key `new` sets removed, then `new`.
fn merge_fields(old: &str, new: &str) -> String {
    let replaced: Vec<String> = new.split(' ').map(token_key).collect();
    let mut out: Vec<&str> = old
        .split(' ')
        .filter(|t| !t.is_empty() && !replaced.contains(&token_key(t)))
        .collect();
    out.extend(new.split(' ').filter(|t| !t.is_empty()));
    out.join(" ")
}

impl<'writer> FormatFields<'writer> for LatestFields {
    fn format_fields<R: RecordFields>(
        &self,
        writer: Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        self.0.format_fields(writer, fields)
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> std::fmt::Result {
        let old = std::mem::take(&mut current.fields);
        self.0.format_fields(current.as_writer(), fields)?;
        current.fields = merge_fields(&old, &current.fields);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, false));
        assert!(!colour(false, false));
        assert!(!colour(true, true));
    }

    #[test]
    fn a_recorded_field_replaces_its_old_value() {
        assert_eq!(
            merge_fields("job=j1 episode=e1 state=pending", "state=leased"),
            "job=j1 episode=e1 state=leased"
        );
        let styled = "\u{1b}[3mstate\u{1b}[0m\u{1b}[2m=\u{1b}[0mpending";
        assert_eq!(
            merge_fields(&format!("job=j1 {styled}"), "state=failed"),
            "job=j1 state=failed"
        );
        assert_eq!(merge_fields("", "state=leased"), "state=leased");
    }
}
