//! A compact set of clip numbers, written as ranges (`"1-50,52,60-61"`).
//!
//! Research records store which clips were researched for an episode this way, so that
//! 2,000 researched clips usually cost a few bytes instead of 2,000 ids.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of clip numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClipSet(BTreeSet<u32>);

/// A range list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("clip set {text:?} is not a list of numbers and ranges like \"1-50,52\"")]
pub struct BadClipSet {
    /// The offending text.
    pub text: String,
}

impl ClipSet {
    /// An empty set.
    pub fn new() -> ClipSet {
        ClipSet::default()
    }

    /// Adds a clip number; returns false if it was there already.
    pub fn insert(&mut self, number: u32) -> bool {
        self.0.insert(number)
    }

    /// Is the clip number in the set?
    pub fn contains(&self, number: u32) -> bool {
        self.0.contains(&number)
    }

    /// Number of clips in the set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Is the set empty?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The numbers in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<u32> for ClipSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        ClipSet(iter.into_iter().collect())
    }
}

impl fmt::Display for ClipSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Ranges wider than this are refused, so a hand-edited node cannot make a reader
/// allocate without bound.
const MAX_RANGE: u32 = 10_000_000;

impl FromStr for ClipSet {
    type Err = BadClipSet;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadClipSet {
            text: text.to_string(),
        };
        let mut set = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => {
                    let a: u32 = a.trim().parse().map_err(|_| bad())?;
                    let b: u32 = b.trim().parse().map_err(|_| bad())?;
                    if b < a || b - a > MAX_RANGE {
                        return Err(bad());
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(part.parse().map_err(|_| bad())?);
                }
            }
        }
        Ok(ClipSet(set))
    }
}

impl Serialize for ClipSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ClipSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_compact_and_round_trip() {
        let set: ClipSet = [1, 2, 3, 5, 7, 8].into_iter().collect();
        assert_eq!(set.to_string(), "1-3,5,7-8");
        assert_eq!("1-3,5,7-8".parse::<ClipSet>(), Ok(set));
    }

    #[test]
    fn two_thousand_clips_fit_in_a_few_bytes() {
        let set: ClipSet = (1..=2000).collect();
        assert_eq!(set.to_string(), "1-2000");
    }

    #[test]
    fn garbage_and_huge_ranges_are_refused() {
        for bad in ["x", "3-1", "1-99999999999", "1-", "-"] {
            assert!(bad.parse::<ClipSet>().is_err(), "{bad} parsed");
        }
    }
}
