//! `console:` in the configuration file.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// How the console serves. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Whether `archivist run` serves the console as one of its roles (at `addr`), as
    /// `run --console ADDR` does. Defaults to false: `run --all` serves no web page
    /// unless asked. `archivist console` ignores it.
    pub enabled: bool,
    /// Address to listen on. Defaults to `127.0.0.1:7480`: loopback only, since
    /// reading needs no sign-in (docs/console.md, "Access").
    pub addr: SocketAddr,
    /// Host names the console answers to besides IP addresses and `localhost` (the
    /// `Host` check against DNS rebinding, docs/console.md "Access"): the names an
    /// operator reaches it by, when it listens beyond loopback. Defaults to none.
    pub hosts: Vec<String>,
    /// Jobs per page, 1 to [`MAX_PAGE_SIZE`]. Defaults to 50.
    pub page_size: usize,
    /// Job nodes read at most to fill one page of a filtered job list. Defaults to 2000.
    pub scan_limit: usize,
    /// Failed jobs read at most to group failures by reason. Defaults to 1000.
    pub failures_read: usize,
    /// How often open pages poll for fresh content, in seconds (0: never). Defaults to 5.
    pub refresh_s: u64,
    /// The token that enables actions (retry, hold, release, cancel, delete): an
    /// operator signs in with it. None (the default) and no `actions_token_file`: the
    /// console is read-only. Never shown (its `Debug` is `***`).
    pub actions_token: Option<Token>,
    /// A file whose first line is the token (kept out of the configuration file); wins
    /// over `actions_token`. Read once at start.
    pub actions_token_file: Option<PathBuf>,
    /// How long one overview (the `status` report) is reused, in seconds: the report
    /// walks the research archive, so many open browsers cost one walk per interval,
    /// not one each. Defaults to 5.
    pub overview_cache_s: u64,
    /// How often the console samples research progress for the overview's chart, in
    /// seconds (it builds an overview that often, watched or not; at least 1). Defaults
    /// to 60: a day of history in [`crate::chart::MAX_SAMPLES`] samples.
    pub chart_every_s: u64,
}

/// A secret: compared, never shown.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl Token {
    /// Is `given` the token? Compared in time that does not depend on where they
    /// differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        let mut diff = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

/// Shortest token accepted: a guessable token would make actions open to anyone who
/// reaches the console.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Most jobs a page may show (`console.page_size`).
pub const MAX_PAGE_SIZE: usize = 1000;

impl ConsoleSettings {
    /// Checks the values have a meaning: a page of at least one and at most
    /// [`MAX_PAGE_SIZE`] jobs, a scan limit of at least a page. (A page size of 0 used
    /// to be taken as 1: outside try of #24, F10.)
    ///
    /// # Errors
    /// What is wrong, naming the setting.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_PAGE_SIZE).contains(&self.page_size) {
            return Err(format!(
                "console.page_size is {}: it must be 1 to {MAX_PAGE_SIZE}",
                self.page_size
            ));
        }
        if self.scan_limit < self.page_size {
            return Err(format!(
                "console.scan_limit ({}) must be at least console.page_size ({})",
                self.scan_limit, self.page_size
            ));
        }
        if self.failures_read == 0 {
            return Err("console.failures_read must be at least 1".into());
        }
        if let Some(t) = &self.actions_token {
            // Spaces are no secret: a token of 16 blanks passed (outside try 24b N9).
            if t.0.chars().filter(|c| !c.is_whitespace()).count() < MIN_TOKEN_CHARS {
                return Err(format!(
                    "console.actions_token is shorter than {MIN_TOKEN_CHARS} characters (whitespace not counted)"
                ));
            }
        }
        if let Some(bad) = self.hosts.iter().find(|h| {
            h.is_empty() || h.contains(|c: char| c == ':' || c == '/' || c.is_whitespace())
        }) {
            return Err(format!(
                "console.hosts: {bad:?} is not a host name (no port, no scheme)"
            ));
        }
        Ok(())
    }
}

impl ConsoleSettings {
    /// Reads `actions_token_file` (its first line, trimmed) into `actions_token`.
    ///
    /// # Errors
    /// The file cannot be read, is empty, or the token is too short.
    pub fn read_token_file(&mut self) -> Result<(), String> {
        let Some(path) = &self.actions_token_file else {
            return Ok(());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("console.actions_token_file {}: {e}", path.display()))?;
        if readable_by_others(path) {
            tracing::warn!(
                path = %path.display(),
                "console.actions_token_file is readable by group or others: chmod 600 it"
            );
        }
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.is_empty() {
            return Err(format!(
                "console.actions_token_file {}: the first line is empty",
                path.display()
            ));
        }
        self.actions_token = Some(Token(token));
        self.check()
    }
}

/// Can group or others read the file at `path` (any of its mode's `0o077` bits)? A
/// token file should be the owner's only, as the SASL password file (outside try 24b,
/// N6); it is still used, with a warning.
pub fn readable_by_others(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
}

/// The default address: loopback.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7480";

impl Default for ConsoleSettings {
    fn default() -> Self {
        ConsoleSettings {
            enabled: false,
            addr: SocketAddr::from(([127, 0, 0, 1], 7480)),
            hosts: Vec::new(),
            actions_token: None,
            actions_token_file: None,
            page_size: 50,
            scan_limit: 2000,
            failures_read: 1000,
            refresh_s: 5,
            overview_cache_s: 5,
            chart_every_s: 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_size_out_of_bounds_is_refused() {
        assert_eq!(ConsoleSettings::default().check(), Ok(()));
        for page_size in [0, MAX_PAGE_SIZE + 1] {
            let s = ConsoleSettings {
                page_size,
                scan_limit: 100_000,
                ..ConsoleSettings::default()
            };
            assert!(s.check().is_err(), "{page_size}");
        }
        let hosts = ConsoleSettings {
            hosts: vec!["http://x:80".into()],
            ..ConsoleSettings::default()
        };
        assert!(hosts.check().is_err());
    }

    #[test]
    fn a_token_file_others_can_read_is_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("console-token-{}", std::process::id()));
        std::fs::write(&path, "a-token-of-at-least-16\n").expect("write");
        for (mode, loose) in [
            (0o600, false),
            (0o400, false),
            (0o640, true),
            (0o644, true),
            (0o606, true),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(super::readable_by_others(&path), loose, "{mode:o}");
        }
        let _ = std::fs::remove_file(&path);
    }
}
