//! `console:` in the configuration file.

use std::net::SocketAddr;

use serde::Deserialize;

/// How the console serves. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Address to listen on. Defaults to `127.0.0.1:7480`: loopback only, since the
    /// console has no login yet (docs/console.md, "Access").
    pub addr: SocketAddr,
    /// Jobs per page. Defaults to 50.
    pub page_size: usize,
    /// Job nodes read at most to fill one page of a filtered job list. Defaults to 2000.
    pub scan_limit: usize,
    /// Failed jobs read at most to group failures by reason. Defaults to 1000.
    pub failures_read: usize,
    /// How often open pages poll for fresh content, in seconds (0: never). Defaults to 5.
    pub refresh_s: u64,
    /// How long one overview (the `status` report) is reused, in seconds: the report
    /// walks the research archive, so many open browsers cost one walk per interval,
    /// not one each. Defaults to 5.
    pub overview_cache_s: u64,
}

/// The default address: loopback.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7480";

impl Default for ConsoleSettings {
    fn default() -> Self {
        ConsoleSettings {
            addr: SocketAddr::from(([127, 0, 0, 1], 7480)),
            page_size: 50,
            scan_limit: 2000,
            failures_read: 1000,
            refresh_s: 5,
            overview_cache_s: 5,
        }
    }
}
