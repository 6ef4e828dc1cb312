//! Politeness towards the hosts media comes from: at most `per_host_concurrency`
//! requests to one host at a time, and at most `per_host_rate` requests a second to it
//! (with `per_host_burst` at once after a quiet spell). Shared by every download of one
//! researcher process (one [`super::Downloader`], cloned into every job), so raising the
//! researcher's concurrency never multiplies the load on one podcast host.
//!
//! The rate is a `governor` keyed rate limiter (GCRA, one cell per host): a well-kept
//! crate instead of hand-written token buckets. The concurrency is a tokio semaphore per
//! host. A host is the URL's host name as asked (before redirects): a podcast's feed
//! names its host, and its CDN redirects are that host's business.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::settings::DownloadSettings;

/// The limits of one process, per host.
#[derive(Debug, Clone)]
pub(crate) struct Politeness {
    concurrency: usize,
    slots: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    rate: Option<Arc<DefaultKeyedRateLimiter<String>>>,
}

/// Held while one request to a host is in flight (its body included).
pub(crate) struct Turn {
    _slot: Option<OwnedSemaphorePermit>,
}

impl Politeness {
    /// The limits the settings name (a rate of zero or less: no rate limit).
    pub fn new(settings: &DownloadSettings) -> Politeness {
        let rate = quota(settings.per_host_rate, settings.per_host_burst)
            .map(|q| Arc::new(RateLimiter::keyed(q)));
        Politeness {
            concurrency: settings.per_host_concurrency.max(1) as usize,
            slots: Arc::default(),
            rate,
        }
    }

    /// Waits for a free slot for `host`, then for the host's rate to allow one more
    /// request; the turn is held until the request (and its body) is done. Cancel by
    /// dropping the future.
    pub async fn turn(&self, host: &str) -> Turn {
        let semaphore = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots
                .entry(host.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.concurrency)))
                .clone()
        };
        // The semaphore is never closed: acquiring fails only if it were.
        let slot = semaphore.acquire_owned().await.ok();
        if let Some(rate) = &self.rate {
            rate.until_key_ready(&host.to_string()).await;
        }
        Turn { _slot: slot }
    }
}

/// `rate` requests per second with bursts of `burst`; none for a non-positive rate.
fn quota(rate: f64, burst: u32) -> Option<Quota> {
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let period = Duration::from_secs_f64(1.0 / rate).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)?;
    Some(quota.allow_burst(NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_for_zero_negative_or_nan() {
        assert!(quota(0.0, 1).is_none());
        assert!(quota(-1.0, 1).is_none());
        assert!(quota(f64::NAN, 1).is_none());
        let q = quota(4.0, 2).expect("a quota");
        assert_eq!(q.replenish_interval(), Duration::from_millis(250));
        assert_eq!(q.burst_size().get(), 2);
    }
}
