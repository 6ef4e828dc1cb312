//! The planner's settings, with their defaults and the one rule between them.

use std::time::Duration;

use serde::Deserialize;

use crate::error::PlannerError;

/// How the planner plans. Read from a config file (YAML, durations in milliseconds) or
/// built with the `with_*` setters; every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlannerSettings {
    /// Most clips in one work item (the seed's "max-clip limit"). Defaults to 50.
    pub max_clips: usize,
    /// How long a new lease lasts from its last write, in ZooKeeper's clock. Defaults to
    /// 10 minutes.
    #[serde(
        rename = "lease_duration_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub lease_duration: Duration,
    /// How long a work item may wait in the pending queue before it is expired and its
    /// lease released; must be shorter than the lease. Defaults to 5 minutes.
    #[serde(
        rename = "work_item_ttl_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub work_item_ttl: Duration,
    /// Planning round interval when nothing wakes the planner earlier. Defaults to 5 s.
    #[serde(rename = "tick_ms", with = "archivist_engine::durations::millis")]
    pub tick: Duration,
    /// Affinity: how long a new work item of an episode whose pinned audio one
    /// registered researcher keeps in its own store is left to that researcher before
    /// any may claim it (docs/researcher.md, "Affinity"). 0 turns the hint off.
    /// Defaults to 10 s.
    #[serde(
        rename = "affinity_grace_ms",
        with = "archivist_engine::durations::millis"
    )]
    pub affinity_grace: Duration,
}

impl Default for PlannerSettings {
    fn default() -> Self {
        PlannerSettings {
            max_clips: 50,
            lease_duration: Duration::from_secs(600),
            work_item_ttl: Duration::from_secs(300),
            tick: Duration::from_secs(5),
            affinity_grace: Duration::from_secs(10),
        }
    }
}

impl PlannerSettings {
    /// Sets the most clips per work item. Defaults to 50.
    pub fn with_max_clips(mut self, max_clips: usize) -> Self {
        self.max_clips = max_clips;
        self
    }

    /// Sets the lease duration. Defaults to 10 minutes.
    pub fn with_lease_duration(mut self, lease_duration: Duration) -> Self {
        self.lease_duration = lease_duration;
        self
    }

    /// Sets the work-item TTL (must stay below the lease duration). Defaults to 5 minutes.
    pub fn with_work_item_ttl(mut self, work_item_ttl: Duration) -> Self {
        self.work_item_ttl = work_item_ttl;
        self
    }

    /// Sets the affinity grace (0: no hint). Defaults to 10 s.
    pub fn with_affinity_grace(mut self, grace: Duration) -> Self {
        self.affinity_grace = grace;
        self
    }

    /// Sets the tick interval. Defaults to 5 s.
    pub fn with_tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Parses settings from YAML (a config file); absent fields keep their defaults.
    pub fn from_yaml(source: &str, text: &str) -> Result<PlannerSettings, PlannerError> {
        let settings: PlannerSettings =
            serde_yaml::from_str(text).map_err(|e| PlannerError::Settings {
                source_name: source.to_string(),
                reason: e.to_string(),
            })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Refuses settings the design forbids: a work item must expire before its lease
    /// (the seed's rule), and a work item needs at least one clip and a positive tick.
    pub fn validate(&self) -> Result<(), PlannerError> {
        let refuse = |reason: String| {
            Err(PlannerError::Settings {
                source_name: "planner settings".into(),
                reason,
            })
        };
        if let Err(e) = archivist_engine::lease::validate_outlasts_ttl(
            "lease duration",
            i64::try_from(self.lease_duration.as_millis()).unwrap_or(i64::MAX),
            self.work_item_ttl_ms(),
        ) {
            return refuse(match e {
                archivist_engine::EngineError::Config(why) => why,
                other => other.to_string(),
            });
        }
        if self.work_item_ttl.is_zero() {
            return refuse("work-item TTL must be positive".into());
        }
        if self.max_clips == 0 {
            return refuse("max clips must be at least 1".into());
        }
        if self.tick.is_zero() {
            return refuse("tick must be positive".into());
        }
        if self.lease_duration.as_millis() > i64::MAX as u128 {
            return refuse("lease duration is too long".into());
        }
        Ok(())
    }

    /// The lease duration in milliseconds, as stored in a lease record.
    pub fn lease_duration_ms(&self) -> i64 {
        i64::try_from(self.lease_duration.as_millis()).unwrap_or(i64::MAX)
    }

    /// The work-item TTL in milliseconds.
    pub fn work_item_ttl_ms(&self) -> i64 {
        i64::try_from(self.work_item_ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones_and_valid() {
        let s = PlannerSettings::default();
        assert_eq!(s.max_clips, 50);
        assert_eq!(s.lease_duration, Duration::from_secs(600));
        assert_eq!(s.work_item_ttl, Duration::from_secs(300));
        assert_eq!(s.tick, Duration::from_secs(5));
        assert!(s.validate().is_ok());
    }

    #[test]
    fn a_ttl_not_below_the_lease_is_refused() {
        let s = PlannerSettings::default()
            .with_lease_duration(Duration::from_secs(60))
            .with_work_item_ttl(Duration::from_secs(60));
        let err = s.validate().unwrap_err().to_string();
        assert!(
            err.contains("must be longer than the work-item TTL"),
            "{err}"
        );
        assert!(s
            .with_work_item_ttl(Duration::from_secs(59))
            .validate()
            .is_ok());
    }

    #[test]
    fn yaml_overrides_only_what_it_names() {
        let s = PlannerSettings::from_yaml("test.yml", "max_clips: 7\ntick_ms: 250\n").unwrap();
        assert_eq!(s.max_clips, 7);
        assert_eq!(s.tick, Duration::from_millis(250));
        assert_eq!(s.lease_duration, Duration::from_secs(600));
        let err = PlannerSettings::from_yaml("bad.yml", "max_clip: 7\n").unwrap_err();
        assert!(err.to_string().contains("bad.yml"), "{err}");
        let err = PlannerSettings::from_yaml(
            "ttl.yml",
            "lease_duration_ms: 1000\nwork_item_ttl_ms: 2000\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("longer than the work-item TTL"),
            "{err}"
        );
    }
}
