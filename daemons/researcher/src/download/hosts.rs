//! Per-host backoff: when a host says "429, Retry-After: 30" (or keeps failing), every
//! download from that host in this process waits, not only the request that was told.
//! Hammering a rate-limited host from the other slots would only extend the ban.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Host name -> the instant before which no request goes to it.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostBackoff {
    not_before: Arc<Mutex<HashMap<String, Instant>>>,
}

impl HostBackoff {
    /// Holds requests to `host` for `wait` from now (never shortens a longer hold).
    pub fn defer(&self, host: &str, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        let until = Instant::now() + wait;
        if let Ok(mut map) = self.not_before.lock() {
            let entry = map.entry(host.to_string()).or_insert(until);
            *entry = (*entry).max(until);
        }
    }

    /// How long a request to `host` must still wait (zero when it may go now).
    pub fn wait_for(&self, host: &str) -> Duration {
        let Ok(mut map) = self.not_before.lock() else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        match map.get(host) {
            Some(until) if *until > now => *until - now,
            Some(_) => {
                map.remove(host);
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_applies_to_its_host_only_and_is_never_shortened() {
        let hosts = HostBackoff::default();
        hosts.defer("a.example", Duration::from_secs(30));
        hosts.defer("a.example", Duration::from_secs(1));
        assert!(hosts.wait_for("a.example") > Duration::from_secs(29));
        assert_eq!(hosts.wait_for("b.example"), Duration::ZERO);
    }
}
