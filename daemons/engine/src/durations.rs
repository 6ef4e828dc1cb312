//! Durations in settings files, written as plain numbers (`poll_ms: 300`, `interval: 60`).
//!
//! Every daemon's settings name their unit in the key (`*_ms`) so a YAML file or an
//! `ARCHIVIST__SECTION__KEY` variable is an integer, not a humantime string. Use with
//! `#[serde(with = "archivist_engine::durations::millis")]`.

/// A [`std::time::Duration`] as whole milliseconds.
pub mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration as whole milliseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Reads whole milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// A [`std::time::Duration`] as whole seconds.
pub mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration as whole seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    /// Reads whole seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_secs(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct S {
        #[serde(with = "super::millis")]
        poll_ms: Duration,
        #[serde(with = "super::secs")]
        interval: Duration,
    }

    #[test]
    fn durations_round_trip_as_plain_numbers() {
        let s: S = serde_yaml::from_str("poll_ms: 300\ninterval: 60\n").unwrap();
        assert_eq!(
            s,
            S {
                poll_ms: Duration::from_millis(300),
                interval: Duration::from_secs(60)
            }
        );
        assert_eq!(
            serde_yaml::to_string(&s).unwrap(),
            "poll_ms: 300\ninterval: 60\n"
        );
        assert!(serde_yaml::from_str::<S>("poll_ms: -1\ninterval: 1\n").is_err());
    }
}
