//! Compact YAML for the occurrences of found clips in a research record.
//!
//! The research archive of 10k episodes x 2k clips must stay under 50 MB of znode data,
//! about 5 KB per episode, and serde_yaml has no flow style. So `found` is written as a
//! text table, one line per found clip: its clip number (as in the runs' clip sets), then
//! its occurrences, space separated, each `<at>@<conf>[x<speed>][[<start>-<end>]]` with
//! times in seconds rounded to the millisecond and confidence and speed to 3 decimals (a
//! confidence below 1 without its leading zero):
//!
//! ```yaml
//! found: |
//!   42 812.345@.912 2401.5@.87x1.05
//!   107 12.25@.95[0.5-3.25]
//! ```
//!
//! Reading also accepts a map of clip id to such strings or to plain lists
//! (`c000001: [{at: 1.5, conf: 0.9}]`), so hand-written or older records still load. The
//! Rust type is unchanged: `BTreeMap<String, Vec<Occurrence>>` keyed by clip id.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserializer, Serializer};

use crate::records::Occurrence;

/// Latest offset an occurrence may have, seconds (about 115 days: no episode is longer,
/// and any finite value below it stays finite when rounded to the millisecond).
pub const MAX_AT_S: f64 = 1e7;

/// Largest speed factor an occurrence may carry.
pub const MAX_SPEED: f32 = 4.0;

/// The one rule for an occurrence the archive may hold: an offset in `[0, MAX_AT_S)`,
/// a confidence in `[0, 1]`, a speed factor in `(0, MAX_SPEED]`, a matched part with
/// `0 <= start < end`, every value finite. The recorder refuses reports that break it
/// and the reader refuses records that do, so nothing is stored that cannot be read back.
pub fn check(o: &Occurrence) -> Result<(), String> {
    if !(o.at.is_finite() && (0.0..MAX_AT_S).contains(&o.at)) {
        return Err(format!("offset {} s is not in [0, {MAX_AT_S})", o.at));
    }
    if !(o.conf.is_finite() && (0.0..=1.0).contains(&o.conf)) {
        return Err(format!("confidence {} is not in [0, 1]", o.conf));
    }
    if let Some(speed) = o.speed {
        if !(speed.is_finite() && speed > 0.0 && speed <= MAX_SPEED) {
            return Err(format!("speed {speed} is not in (0, {MAX_SPEED}]"));
        }
    }
    if let Some([start, end]) = o.part {
        if !(start.is_finite() && end.is_finite() && 0.0 <= start && start < end) {
            return Err(format!(
                "matched part [{start}, {end}] is not 0 <= start < end"
            ));
        }
    }
    Ok(())
}

/// Rounds seconds to the millisecond (what the archive keeps).
pub fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// Rounds a confidence or speed factor to 3 decimals (what the archive keeps).
pub fn round_3(value: f32) -> f32 {
    ((value as f64 * 1000.0).round() / 1000.0) as f32
}

/// A confidence without its leading zero (`0.912` -> `.912`): one byte per occurrence.
fn short(conf: f32) -> String {
    let text = conf.to_string();
    match text.strip_prefix("0.") {
        Some(rest) => format!(".{rest}"),
        None => text,
    }
}

/// Writes one clip's occurrences in the compact form.
pub fn format_list(occurrences: &[Occurrence]) -> String {
    let mut out = String::with_capacity(occurrences.len() * 16);
    for (i, o) in occurrences.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{}@{}", round_ms(o.at), short(round_3(o.conf)));
        if let Some(speed) = o.speed {
            let _ = write!(out, "x{}", round_3(speed));
        }
        if let Some([start, end]) = o.part {
            let _ = write!(out, "[{}-{}]", round_ms(start), round_ms(end));
        }
    }
    out
}

/// Parses one clip's occurrences from the compact form; `None` names the bad token.
pub fn parse_list(text: &str) -> Result<Vec<Occurrence>, String> {
    text.split_whitespace().map(parse_one).collect()
}

fn parse_one(token: &str) -> Result<Occurrence, String> {
    let bad = || format!("occurrence {token:?} is not <at>@<conf>[x<speed>][[<start>-<end>]]");
    let (at, rest) = token.split_once('@').ok_or_else(bad)?;
    let (rest, part) = match rest.split_once('[') {
        Some((head, tail)) => {
            let inner = tail.strip_suffix(']').ok_or_else(bad)?;
            let (s, e) = inner.split_once('-').ok_or_else(bad)?;
            let s: f64 = s.parse().map_err(|_| bad())?;
            let e: f64 = e.parse().map_err(|_| bad())?;
            (head, Some([s, e]))
        }
        None => (rest, None),
    };
    let (conf, speed) = match rest.split_once('x') {
        Some((c, s)) => (c, Some(s.parse::<f32>().map_err(|_| bad())?)),
        None => (rest, None),
    };
    let at: f64 = at.parse().map_err(|_| bad())?;
    let conf: f32 = conf.parse().map_err(|_| bad())?;
    let occurrence = Occurrence {
        at,
        conf,
        speed,
        part,
    };
    check(&occurrence).map_err(|why| format!("occurrence {token:?}: {why}"))?;
    Ok(occurrence)
}

/// The compact table: one line per found clip, `<clip number> <occurrences>`.
pub fn format_table(found: &BTreeMap<String, Vec<Occurrence>>) -> String {
    let mut out = String::with_capacity(found.len() * 40);
    for (clip, occurrences) in found {
        match crate::paths::clip_number(clip).filter(|n| crate::paths::clip_id(*n) == *clip) {
            Some(number) => {
                let _ = write!(out, "{number}");
            }
            None => out.push_str(clip),
        }
        if !occurrences.is_empty() {
            out.push(' ');
            out.push_str(&format_list(occurrences));
        }
        out.push('\n');
    }
    out
}

/// Parses the compact table back into clip ids and occurrences.
pub fn parse_table(text: &str) -> Result<BTreeMap<String, Vec<Occurrence>>, String> {
    let mut found = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let clip = if key.bytes().all(|b| b.is_ascii_digit()) {
            let number: u32 = key
                .parse()
                .map_err(|_| format!("clip number {key:?} is out of range"))?;
            crate::paths::clip_id(number)
        } else {
            key.to_string()
        };
        found.insert(clip, parse_list(rest)?);
    }
    Ok(found)
}

/// `serialize_with` for `ResearchRecord::found`: the compact table (a YAML block
/// scalar), or `{}` when nothing was found.
pub fn serialize<S: Serializer>(
    found: &BTreeMap<String, Vec<Occurrence>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if found.is_empty() {
        return serializer.serialize_map(Some(0))?.end();
    }
    serializer.serialize_str(&format_table(found))
}

/// `deserialize_with` for `ResearchRecord::found`: the compact table, or a map of clip
/// id to compact strings or plain lists.
pub fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, Vec<Occurrence>>, D::Error> {
    deserializer.deserialize_any(FoundVisitor)
}

struct FoundVisitor;

impl<'de> Visitor<'de> for FoundVisitor {
    type Value = BTreeMap<String, Vec<Occurrence>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a table of `<clip number> <occurrences>` lines or a map of clip id to occurrences",
        )
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        parse_table(text).map_err(E::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut found = BTreeMap::new();
        while let Some(clip) = access.next_key::<String>()? {
            let List(occurrences) = access.next_value()?;
            found.insert(clip, occurrences);
        }
        Ok(found)
    }
}

struct List(Vec<Occurrence>);

impl<'de> serde::Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ListVisitor)
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = List;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("occurrences as \"<at>@<conf> ...\" or a list of {at, conf}")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<List, E> {
        parse_list(text).map(List).map_err(E::custom)
    }

    fn visit_unit<E: de::Error>(self) -> Result<List, E> {
        Ok(List(Vec::new()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List, A::Error> {
        let mut out = Vec::new();
        while let Some(o) = seq.next_element::<Occurrence>()? {
            check(&o).map_err(de::Error::custom)?;
            out.push(o);
        }
        Ok(List(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ResearchRecord;

    fn occ(at: f64, conf: f32) -> Occurrence {
        Occurrence {
            at,
            conf,
            speed: None,
            part: None,
        }
    }

    #[test]
    fn compact_form_rounds_and_round_trips() {
        let list = vec![
            occ(812.345_4, 0.912_4),
            Occurrence {
                at: 2401.5,
                conf: 0.87,
                speed: Some(1.050_2),
                part: Some([0.5, 3.250_1]),
            },
        ];
        let text = format_list(&list);
        assert_eq!(text, "812.345@.912 2401.5@.87x1.05[0.5-3.25]");
        let back = parse_list(&text).unwrap();
        assert_eq!(back[0], occ(812.345, 0.912));
        assert_eq!(back[1].speed, Some(1.05));
        assert_eq!(back[1].part, Some([0.5, 3.25]));
    }

    #[test]
    fn records_read_every_form_and_write_the_table() {
        let plain = "episode: e0000001\nfound:\n  c000001:\n  - at: 1.5\n    conf: 0.9\n  c000002: 3.25@0.8 7@0.75\n";
        let record: ResearchRecord =
            crate::records::decode("/research/e0000001", plain.as_bytes()).unwrap();
        assert_eq!(record.found["c000001"], vec![occ(1.5, 0.9)]);
        assert_eq!(
            record.found["c000002"],
            vec![occ(3.25, 0.8), occ(7.0, 0.75)]
        );
        let written = String::from_utf8(crate::records::encode("/r", &record).unwrap()).unwrap();
        assert!(
            written.contains("found: |\n  1 1.5@.9\n  2 3.25@.8 7@.75\n"),
            "{written}"
        );
        let again: ResearchRecord = crate::records::decode("/r", written.as_bytes()).unwrap();
        assert_eq!(again, record);
        let empty = ResearchRecord::new("e0000001");
        let written = String::from_utf8(crate::records::encode("/r", &empty).unwrap()).unwrap();
        assert!(written.contains("found: {}"), "{written}");
        assert_eq!(
            crate::records::decode::<ResearchRecord>("/r", written.as_bytes()).unwrap(),
            empty
        );
    }

    #[test]
    fn odd_clip_ids_survive_the_table() {
        let mut found = BTreeMap::new();
        found.insert("c0000042".to_string(), vec![occ(1.0, 0.5)]);
        found.insert("c000007".to_string(), vec![]);
        assert_eq!(parse_table(&format_table(&found)).unwrap(), found);
    }

    #[test]
    fn garbage_is_refused_with_the_token() {
        for bad in [
            "1.5",
            "x@0.9",
            "1.5@0.9[1-",
            "1.5@0.9xq",
            "NaN@0.5",
            "inf@-3",
            "-5@7",
            "1@.9x0",
            "1@.9[3-1]",
        ] {
            let err = parse_list(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
