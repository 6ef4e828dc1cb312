//! Text taken from people and text shown to them: the one rule for an id (the CLI's
//! arguments and the web console's addresses), and the one rule for which characters
//! are shown as visible escapes rather than written raw (the CLI's tables and the web
//! console's pages).

use crate::error::{AdminError, Result};

/// Checks an id (job, episode, clip): one name, not empty, without `/`, not `.` or
/// `..`, no control characters. An id names one znode (`/jobs/{id}`,
/// `/control/hold/{id}`), so anything else would reach another node (`j1/lock` is a
/// job's lock) or ZooKeeper's own errors (outside try of #17, finding F4; of #24,
/// finding F4). Checked before anything is read.
///
/// # Errors
/// [`AdminError::Invalid`] saying what an id is.
pub fn node_name(s: &str) -> Result<&str> {
    if s.is_empty() {
        return Err(AdminError::Invalid("an id cannot be empty".into()));
    }
    if s == "." || s == ".." || s.contains('/') || s.chars().any(char::is_control) {
        return Err(AdminError::Invalid(format!(
            "{s:?} is not an id: an id is one name without '/' or control characters \
             (for example j0000000001, e0000001, c000001)"
        )));
    }
    Ok(s)
}

/// The visible escape of a character that must not be shown raw, if `c` is one:
/// control characters other than tab, newline and carriage return (C0, DEL, C1:
/// escape sequences, bells) as `\x1b`; the bidirectional overrides, isolates and marks
/// that reorder what is shown (including the Arabic letter mark U+061C), the line and
/// paragraph separators U+2028/U+2029, and the invisible U+200B / U+FEFF as
/// `\u{202e}`. Tab, newline and carriage return are left to the caller: a terminal
/// table escapes them, a web page shows them as white space.
pub fn escape(c: char) -> Option<String> {
    match c {
        '\n' | '\r' | '\t' => None,
        c if c.is_control() => Some(format!("\\x{:02x}", c as u32)),
        '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{061c}'
        | '\u{200b}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{feff}' => Some(format!("\\u{{{:x}}}", c as u32)),
        _ => None,
    }
}

/// `text` with every character [`escape`] names replaced by its visible escape.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match escape(c) {
            Some(e) => out.push_str(&e),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_segment_names_pass_and_paths_do_not() {
        for ok in ["j0000000001", "e0000001", "c000001", "foo"] {
            assert_eq!(node_name(ok).ok(), Some(ok));
        }
        for bad in ["", ".", "..", "../x", "j0000000001/lock2", "a\nb", "j1\0"] {
            assert!(node_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn controls_and_bidi_become_visible_and_white_space_stays() {
        assert_eq!(
            visible("a\x07\x1b[31m\u{9b}\u{202e}b\nc\td\u{2028}"),
            "a\\x07\\x1b[31m\\x9b\\u{202e}b\nc\td\\u{2028}"
        );
        assert_eq!(visible("Épisode ✓ 🎧"), "Épisode ✓ 🎧");
    }
}
