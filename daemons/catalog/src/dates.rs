//! Feed dates `feed-rs` does not read, read here.
//!
//! `feed-rs` reads RFC 2822 and RFC 3339 dates with numeric or `GMT`/`UT` zones. Real
//! feeds also write zone abbreviations (`BST`, `CET`, `AEST`, `JST`...), no zone at all,
//! `+01` offsets, `2024-01-02 10:00:00` and `02-Jan-2024`. Those are read here; a date
//! with no zone is taken as UTC (`docs/catalog.md` says so). A date that even this
//! cannot read is reported as a warning on its item, never silently dropped.

use time::{Date, Month, PrimitiveDateTime, Time, UtcOffset};

/// Offsets of the zone abbreviations feeds use, in minutes east of UTC. Ambiguous ones
/// (`IST`: India, Ireland or Israel) are not guessed.
const ZONES: &[(&str, i32)] = &[
    ("UT", 0),
    ("UTC", 0),
    ("GMT", 0),
    ("Z", 0),
    ("WET", 0),
    ("WEST", 60),
    ("BST", 60),
    ("CET", 60),
    ("CEST", 120),
    ("MET", 60),
    ("MEST", 120),
    ("EET", 120),
    ("EEST", 180),
    ("MSK", 180),
    ("EST", -300),
    ("EDT", -240),
    ("CST", -360),
    ("CDT", -300),
    ("MST", -420),
    ("MDT", -360),
    ("PST", -480),
    ("PDT", -420),
    ("AKST", -540),
    ("AKDT", -480),
    ("HST", -600),
    ("AST", -240),
    ("ADT", -180),
    ("NST", -210),
    ("NDT", -150),
    ("JST", 540),
    ("KST", 540),
    ("HKT", 480),
    ("SGT", 480),
    ("AWST", 480),
    ("ACST", 570),
    ("ACDT", 630),
    ("AEST", 600),
    ("AEDT", 660),
    ("NZST", 720),
    ("NZDT", 780),
];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Reads a feed date (see the module docs) as RFC 3339 in UTC
/// (`2024-01-02T09:00:00+00:00`, the form `feed-rs`'s dates are stored in), or `None`.
pub fn parse_lenient(text: &str) -> Option<String> {
    let text = text.trim();
    let (date, time, zone) = split_iso(text).or_else(|| split_rfc822(text))?;
    let offset_minutes = match zone.trim() {
        "" => 0,
        z => zone_minutes(z)?,
    };
    let offset = UtcOffset::from_whole_seconds(offset_minutes.checked_mul(60)?).ok()?;
    let utc = PrimitiveDateTime::new(date, time)
        .assume_offset(offset)
        .to_offset(UtcOffset::UTC);
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}+00:00",
        utc.year(),
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second()
    ))
}

/// `+0100`, `+01:00`, `+01`, `-05`, or an abbreviation of [`ZONES`].
fn zone_minutes(zone: &str) -> Option<i32> {
    if let Some((_, m)) = ZONES.iter().find(|(n, _)| n.eq_ignore_ascii_case(zone)) {
        return Some(*m);
    }
    let (sign, digits) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let digits: String = digits.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        1 | 2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    (h <= 18 && m < 60).then_some(sign * (h * 60 + m))
}

/// `HH:MM[:SS[.frac]]`.
fn clock(text: &str) -> Option<Time> {
    let mut parts = text.split(':');
    let h: u8 = parts.next()?.parse().ok()?;
    let m: u8 = parts.next()?.parse().ok()?;
    let s: u8 = match parts.next() {
        Some(s) => s.split('.').next()?.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Time::from_hms(if h == 24 { 0 } else { h }, m, s).ok()
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][zone]`: date, time, zone text.
fn split_iso(text: &str) -> Option<(Date, Time, String)> {
    let bytes = text.as_bytes();
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let year: i32 = text.get(..4)?.parse().ok()?;
    let month: u8 = text.get(5..7)?.parse().ok()?;
    let day: u8 = text.get(8..10)?.parse().ok()?;
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let rest = text.get(10..)?;
    let rest = rest.strip_prefix(['T', 't', ' ']).unwrap_or(rest);
    if rest.trim().is_empty() {
        return Some((date, Time::MIDNIGHT, String::new()));
    }
    let clock_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let time = clock(&rest[..clock_end])?;
    Some((date, time, rest[clock_end..].trim().to_string()))
}

/// `[Weekday,] DD Mon YYYY HH:MM[:SS] [zone]`, the date parts separated by blanks or
/// `-` (`02-Jan-2024`): date, time, zone text.
fn split_rfc822(text: &str) -> Option<(Date, Time, String)> {
    let text = match text.split_once(',') {
        Some((day, rest)) if day.chars().all(|c| c.is_ascii_alphabetic()) => rest,
        _ => text,
    };
    let mut words = text.split_whitespace();
    let first = words.next()?;
    let (d, mon, y) = if first.contains('-') {
        let mut p = first.split('-');
        (p.next()?, p.next()?, p.next()?)
    } else {
        (first, words.next()?, words.next()?)
    };
    let day: u8 = d.parse().ok()?;
    let mon = mon.get(..3)?.to_ascii_lowercase();
    let month = MONTHS.iter().position(|m| *m == mon)? as u8 + 1;
    let year: i32 = match y.parse::<i32>().ok()? {
        y @ 0..=49 => 2000 + y,
        y @ 50..=99 => 1900 + y,
        y => y,
    };
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let time = match words.next() {
        Some(t) => clock(t)?,
        None => Time::MIDNIGHT,
    };
    let zone: Vec<&str> = words.collect();
    if zone.len() > 1 {
        return None;
    }
    Some((date, time, zone.first().copied().unwrap_or("").to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_feed_rs_drops_are_read() {
        let p = |t: &str| parse_lenient(t);
        let utc10 = Some("2024-01-02T10:00:00+00:00".to_string());
        assert_eq!(p("Tue, 02 Jan 2024 11:00:00 CET"), utc10);
        assert_eq!(p("Tue, 02 Jan 2024 11:00:00 BST"), utc10);
        assert_eq!(p("Tue, 02 Jan 2024 20:00:00 AEST"), utc10);
        assert_eq!(p("Tue, 02 Jan 2024 19:00:00 JST"), utc10);
        assert_eq!(p("Tue, 02 Jan 2024 10:00:00"), utc10);
        assert_eq!(p("Tue, 02-Jan-2024 10:00:00 GMT"), utc10);
        assert_eq!(p("Tue, 02 Jan 2024 10:00 GMT"), utc10);
        assert_eq!(p("2024-01-02T10:00:00"), utc10);
        assert_eq!(p("2024-01-02 10:00:00"), utc10);
        assert_eq!(p("2024-01-02T11:00:00+01"), utc10);
        assert_eq!(p("2024-01-02T10:00:00.000+0000"), utc10);
        assert_eq!(p("2024-01-02T05:00:00-05:00"), utc10);
        assert_eq!(
            p("2024-01-02"),
            Some("2024-01-02T00:00:00+00:00".to_string())
        );
        assert_eq!(p("last tuesday"), None);
        assert_eq!(p("Tue, 32 Jan 2024 10:00:00 GMT"), None);
        assert_eq!(p("Tue, 02 Jan 2024 10:00:00 XYZ"), None);
        assert_eq!(p("2024-13-02T10:00:00"), None);
    }
}
