//! A compact set of clip numbers, written as ranges (`"1-50,52,60-61"`).
//!
//! Research records store which clips were researched for an episode this way, so that
//! 2,000 researched clips usually cost a few bytes instead of 2,000 ids.

use std::fmt;
use std::str::FromStr;

use rangemap::RangeInclusiveSet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of clip numbers, kept as ranges: an episode's runs cover "1-2000" in a few
/// ranges, so reading, merging and counting the research archive costs per range, not
/// per clip (a set of single numbers made `status`, `results --clip` and the planner's
/// load spend milliseconds an episode inserting 2,000 numbers: issue 22). `rangemap` keeps
/// the ranges coalesced, so two sets with the same numbers are equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClipSet(RangeInclusiveSet<u32>);

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
        if self.0.contains(&number) {
            return false;
        }
        self.0.insert(number..=number);
        true
    }

    /// Adds every number of `other` (a union, range by range).
    pub fn extend_from(&mut self, other: &ClipSet) {
        for range in other.0.iter() {
            self.0.insert(range.clone());
        }
    }

    /// Is the clip number in the set?
    pub fn contains(&self, number: u32) -> bool {
        self.0.contains(&number)
    }

    /// Number of clips in the set.
    pub fn len(&self) -> usize {
        self.0
            .iter()
            .map(|r| (*r.end() - *r.start()) as usize + 1)
            .sum()
    }

    /// How many numbers of this set are also in `other` (the size of the intersection,
    /// range by range): researched clips that are still in the catalog.
    pub fn count_in(&self, other: &ClipSet) -> usize {
        let mut count = 0usize;
        for range in self.0.iter() {
            for overlap in other.0.overlapping(range) {
                let lo = (*range.start()).max(*overlap.start());
                let hi = (*range.end()).min(*overlap.end());
                count += (hi - lo) as usize + 1;
            }
        }
        count
    }

    /// The numbers of this set that are not in `other`: researched clips the catalog
    /// does not have.
    pub fn without(&self, other: &ClipSet) -> ClipSet {
        let mut rest = self.clone();
        for range in other.0.iter() {
            rest.0.remove(range.clone());
        }
        rest
    }

    /// Is the set empty?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The numbers in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|r| r.clone())
    }

    /// The ranges in ascending order, each `(first, last)`.
    pub fn ranges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.0.iter().map(|r| (*r.start(), *r.end()))
    }
}

impl FromIterator<u32> for ClipSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = ClipSet::new();
        for number in iter {
            set.insert(number);
        }
        set
    }
}

impl fmt::Display for ClipSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (start, end)) in self.ranges().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Ranges wider than this are refused, so a hand-edited node cannot make a reader that
/// walks the numbers (`iter`) run without bound.
const MAX_RANGE: u32 = 10_000_000;

impl FromStr for ClipSet {
    type Err = BadClipSet;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadClipSet {
            text: text.to_string(),
        };
        let mut set = RangeInclusiveSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => {
                    let a: u32 = a.trim().parse().map_err(|_| bad())?;
                    let b: u32 = b.trim().parse().map_err(|_| bad())?;
                    if b < a || b - a > MAX_RANGE {
                        return Err(bad());
                    }
                    set.insert(a..=b);
                }
                None => {
                    let n: u32 = part.parse().map_err(|_| bad())?;
                    set.insert(n..=n);
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
    fn sets_are_kept_as_coalesced_ranges() {
        let a: ClipSet = "1-10,20-30".parse().unwrap();
        let b: ClipSet = "5-25,40".parse().unwrap();
        let mut union = a.clone();
        union.extend_from(&b);
        assert_eq!(union.to_string(), "1-30,40");
        assert_eq!(union.len(), 31);
        assert_eq!(a.count_in(&b), 6 + 6);
        assert_eq!(b.count_in(&a), 12);
        assert_eq!(a.count_in(&ClipSet::new()), 0);
        assert_eq!(a.without(&b).to_string(), "1-4,26-30");
        assert_eq!(a.without(&a), ClipSet::new());
        // The same numbers are equal however they were added.
        let c: ClipSet = (1..=30).chain([40]).collect();
        assert_eq!(union, c);
        assert_eq!("3,1-2".parse::<ClipSet>().unwrap(), "1-3".parse().unwrap());
        let mut d = ClipSet::new();
        assert!(d.insert(7));
        assert!(!d.insert(7));
        assert!(d.insert(8));
        assert_eq!(d.to_string(), "7-8");
        assert_eq!(d.iter().collect::<Vec<_>>(), vec![7, 8]);
        assert!(d.contains(8) && !d.contains(9));
    }

    #[test]
    fn a_wide_range_costs_one_range() {
        let set: ClipSet = "1-10000000".parse().unwrap();
        assert_eq!(set.len(), 10_000_000);
        assert_eq!(set.ranges().count(), 1);
    }

    #[test]
    fn garbage_and_huge_ranges_are_refused() {
        for bad in ["x", "3-1", "1-99999999999", "1-", "-"] {
            assert!(bad.parse::<ClipSet>().is_err(), "{bad} parsed");
        }
    }
}
