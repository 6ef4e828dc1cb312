//! How long the recorder waits after the database refused a store before it tries the
//! next job: a database that is down, full or read-only fails every job the same way,
//! and handing each back at once made the `reported` consumer retry hundreds of times a
//! second (outside try of #22: 554 hand-backs in 24 s, 80 log lines a second).

use std::sync::Mutex;
use std::time::Duration;

/// The first wait after a failure.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest wait: a database that comes back is used within this.
pub const LONGEST: Duration = Duration::from_secs(30);

/// Doubling waits while the database keeps failing, from [`FIRST`] up to [`LONGEST`],
/// back to none after a success. Shared by the consumer's slots.
#[derive(Debug, Default)]
pub struct DatabaseBackoff {
    last: Mutex<Option<Duration>>,
}

impl DatabaseBackoff {
    /// Records a failure; returns how long to wait before the next try.
    pub fn failed(&self) -> Duration {
        let Ok(mut last) = self.last.lock() else {
            return LONGEST;
        };
        let next = match *last {
            None => FIRST,
            Some(d) => (d * 2).min(LONGEST),
        };
        *last = Some(next);
        next
    }

    /// Records a success: the next failure waits [`FIRST`] again.
    pub fn succeeded(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_longest_and_reset_after_a_success() {
        let backoff = DatabaseBackoff::default();
        let waits: Vec<u64> = (0..8).map(|_| backoff.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), FIRST);
    }
}
