//! Fragments cut out of or repeated in a fragmented MP4 (DASH/HLS/CMAF, `ffmpeg
//! -movflags frag_keyframe`).
//!
//! symphonia's MP4 reader plays the fragments (`moof` + `mdat`) one after the other and
//! ignores where each says it starts, so a whole fragment cut out midway (a segment a
//! downloader or packager lost while stitching) decodes "complete", a second or more
//! short, and every later offset is early; a fragment repeated decodes twice and every
//! later offset is late. Every box stays well-formed, so only the fragments' own
//! statements show it, as the Ogg granule positions and FLAC frame numbers do
//! ([`super::continuity`]):
//! - each track fragment's `tfdt` (base media decode time) must equal the track's
//!   samples before it: the `moov`'s own (`stts`) plus every earlier fragment's (`trun`
//!   durations, or the `tfhd`/`trex` default);
//! - where a track fragment has no `tfdt`, the `mfhd` sequence numbers must go up by one.
//!   Where `tfdt` is stated it is the authority: the sequence numbers count fragments,
//!   not time, and a packager may number them otherwise (per segment file), while the
//!   audio is continuous exactly when the decode times are.
//!
//! Only the boxes' headers and the `moov`/`moof` bodies are read (each bounded), never
//! the media.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use super::mp4::{be_u32, be_u64, boxes, child, MAX_MOOV};

/// Largest `moof` read (ffmpeg's are a few hundred bytes; a 10 s video fragment a few
/// tens of KiB).
const MAX_MOOF: u64 = 16 << 20;

/// Difference between a `tfdt` and the samples before it taken as rounding, in seconds
/// (less than one AAC frame at any rate: no whole fragment hides under it).
const TOLERANCE_S: f64 = 0.001;

/// What one track has played so far.
#[derive(Debug, Default, Clone, Copy)]
struct Track {
    /// Media timescale (units per second), from `mdhd`.
    timescale: u32,
    /// `trex`'s default sample duration.
    default_duration: u32,
    /// Sum of the durations of every sample so far (the `moov`'s, then the fragments').
    elapsed: u64,
    /// Fragments of this track seen.
    fragments: u64,
}

/// The result of walking a fragmented MP4's boxes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fragments {
    /// Not fragmented (no `moof`), not MP4, or the walk could not read it: nothing to say.
    None,
    /// Every fragment follows the one before it.
    Continuous,
    /// A fragment does not follow the one before it: why (for an `incomplete` reason).
    Gap(String),
}

/// Walks a seekable MP4 source's top-level boxes and checks its fragments follow each
/// other ([`Fragments`]); `Err` names a fragment box whose counts cannot fit in it
/// (a hostile or damaged file the reader would allocate for). Seeks back to the start.
pub(super) fn check<R: Read + Seek + ?Sized>(src: &mut R) -> Result<Fragments, String> {
    let found = walk(src);
    let _ = src.seek(SeekFrom::Start(0));
    found
}

fn walk<R: Read + Seek + ?Sized>(src: &mut R) -> Result<Fragments, String> {
    let Ok(len) = src.seek(SeekFrom::End(0)) else {
        return Ok(Fragments::None);
    };
    let mut tracks: HashMap<u32, Track> = HashMap::new();
    let mut pos = 0u64;
    let mut last_sequence: Option<u32> = None;
    let mut fragment = 0u64;
    let mut seen_moof = false;
    while pos < len {
        let Some((kind, header, size)) = box_header(src, pos, len) else {
            break;
        };
        if pos == 0 && &kind != b"ftyp" {
            return Ok(Fragments::None);
        }
        let body_len = size - header;
        match &kind {
            b"moov" if body_len <= MAX_MOOV => {
                let moov = read_body(src, pos + header, body_len)?;
                tracks = moov_tracks(&moov);
            }
            b"moof" => {
                seen_moof = true;
                fragment += 1;
                if body_len > MAX_MOOF {
                    return Err(format!(
                        "its MP4 fragment {fragment} (moof at byte {pos}) is {body_len} bytes, over the {MAX_MOOF} a fragment's index may take: a damaged or hostile file"
                    ));
                }
                let moof = read_body(src, pos + header, body_len)?;
                if let Some(gap) =
                    check_moof(&moof, fragment, pos, &mut tracks, &mut last_sequence)?
                {
                    return Ok(Fragments::Gap(gap));
                }
            }
            _ => {}
        }
        pos += size;
    }
    Ok(if seen_moof {
        Fragments::Continuous
    } else {
        Fragments::None
    })
}

/// (type, header length, size) of the box at `pos`, if one is there whole.
fn box_header<R: Read + Seek + ?Sized>(
    src: &mut R,
    pos: u64,
    len: u64,
) -> Option<([u8; 4], u64, u64)> {
    let mut head = [0u8; 16];
    src.seek(SeekFrom::Start(pos)).ok()?;
    src.read_exact(&mut head[..8]).ok()?;
    let kind: [u8; 4] = head[4..8].try_into().ok()?;
    let (header, size) = match be_u32(&head)? {
        1 => {
            src.read_exact(&mut head[8..16]).ok()?;
            (16u64, be_u64(&head[8..])?)
        }
        0 => (8, len - pos),
        n => (8, u64::from(n)),
    };
    (size >= header && pos.checked_add(size)? <= len).then_some((kind, header, size))
}

fn read_body<R: Read + Seek + ?Sized>(src: &mut R, at: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut body = vec![0u8; len as usize];
    src.seek(SeekFrom::Start(at))
        .and_then(|_| src.read_exact(&mut body))
        .map_err(|e| format!("reading the MP4 box at byte {at}: {e}"))?;
    Ok(body)
}

/// Each track's timescale, `trex` default duration and the samples its `moov` holds.
fn moov_tracks(moov: &[u8]) -> HashMap<u32, Track> {
    let mut tracks = HashMap::new();
    for (kind, trak) in boxes(moov) {
        if &kind != b"trak" {
            continue;
        }
        let Some(id) = child(trak, b"tkhd").and_then(|t| match t.first()? {
            1 => be_u32(t.get(20..)?),
            _ => be_u32(t.get(12..)?),
        }) else {
            continue;
        };
        let mdia = child(trak, b"mdia");
        let timescale = mdia
            .and_then(|m| child(m, b"mdhd"))
            .and_then(|m| match m.first()? {
                1 => be_u32(m.get(20..)?),
                _ => be_u32(m.get(12..)?),
            })
            .unwrap_or(0);
        // The samples in the `moov` itself (none with `empty_moov`): the first
        // fragment starts after them.
        let stts = mdia
            .and_then(|m| child(m, b"minf"))
            .and_then(|m| child(m, b"stbl"))
            .and_then(|s| child(s, b"stts"));
        let elapsed = stts.map_or(0, |s| {
            let n = be_u32(s.get(4..).unwrap_or_default()).unwrap_or(0) as usize;
            (0..n)
                .map_while(|i| {
                    let e = s.get(8 + i * 8..16 + i * 8)?;
                    Some(u64::from(be_u32(e)?) * u64::from(be_u32(&e[4..])?))
                })
                .fold(0u64, u64::saturating_add)
        });
        tracks.insert(
            id,
            Track {
                timescale,
                elapsed,
                ..Track::default()
            },
        );
    }
    let mvex = child(moov, b"mvex");
    for (kind, trex) in mvex.map(boxes).into_iter().flatten() {
        if &kind != b"trex" {
            continue;
        }
        if let (Some(id), Some(duration)) = (
            be_u32(trex.get(4..).unwrap_or_default()),
            be_u32(trex.get(12..).unwrap_or_default()),
        ) {
            tracks.entry(id).or_default().default_duration = duration;
        }
    }
    tracks
}

/// Checks one `moof` against what came before; `Ok(Some(reason))` for a gap or a step
/// back, `Err` for a run whose sample count cannot fit its box.
fn check_moof(
    moof: &[u8],
    fragment: u64,
    at: u64,
    tracks: &mut HashMap<u32, Track>,
    last_sequence: &mut Option<u32>,
) -> Result<Option<String>, String> {
    let sequence = child(moof, b"mfhd").and_then(|m| be_u32(m.get(4..)?));
    let previous = std::mem::replace(last_sequence, sequence.or(*last_sequence));
    let mut timed = true;
    for (kind, traf) in boxes(moof) {
        if &kind != b"traf" {
            continue;
        }
        let Some(tfhd) = child(traf, b"tfhd") else {
            continue;
        };
        let flags = be_u32(tfhd).unwrap_or(0) & 0x00ff_ffff;
        let Some(id) = be_u32(tfhd.get(4..).unwrap_or_default()) else {
            continue;
        };
        let mut at_field = 8usize;
        if flags & 0x01 != 0 {
            at_field += 8; // base data offset
        }
        if flags & 0x02 != 0 {
            at_field += 4; // sample description index
        }
        let track = tracks.entry(id).or_default();
        let default_duration = if flags & 0x08 != 0 {
            be_u32(tfhd.get(at_field..).unwrap_or_default()).unwrap_or(track.default_duration)
        } else {
            track.default_duration
        };
        let decode_time = child(traf, b"tfdt").and_then(|t| match t.first()? {
            1 => be_u64(t.get(4..)?),
            _ => be_u32(t.get(4..)?).map(u64::from),
        });
        let mut duration = 0u64;
        for (kind, trun) in boxes(traf) {
            if &kind == b"trun" {
                duration =
                    duration.saturating_add(run_duration(trun, default_duration, fragment, at)?);
            }
        }
        match decode_time {
            Some(time) => {
                let expected = track.elapsed;
                let scale = f64::from(track.timescale.max(1));
                let off_s = (time as f64 - expected as f64) / scale;
                if track.timescale > 0 && off_s.abs() > TOLERANCE_S {
                    let (what, effect) = if off_s > 0.0 {
                        ("cut out before it (fragments lost midway)", "early")
                    } else {
                        ("repeated midway (fragments repeated)", "late")
                    };
                    return Ok(Some(format!(
                        "MP4 fragment {fragment} (moof at byte {at}, sequence number {}) of track {id} starts at {:.3} s (tfdt) but the fragments before it end at {:.3} s: {:.3} s of audio {what}, so every later offset would be {effect}",
                        sequence.map_or("none".to_string(), |s| s.to_string()),
                        time as f64 / scale,
                        expected as f64 / scale,
                        off_s.abs(),
                    )));
                }
            }
            None => timed = false,
        }
        track.elapsed = track.elapsed.saturating_add(duration);
        track.fragments += 1;
    }
    if !timed {
        if let (Some(prev), Some(seq)) = (previous, sequence) {
            if seq != prev.wrapping_add(1) {
                let how = if seq > prev {
                    format!(
                        "{} fragment(s) cut out before it, so every later offset would be early",
                        seq - prev - 1
                    )
                } else {
                    "a fragment repeated or out of order, so every later offset would be late"
                        .to_string()
                };
                return Ok(Some(format!(
                    "MP4 fragment {fragment} (moof at byte {at}) has sequence number {seq} after {prev} and states no decode time (tfdt): {how}"
                )));
            }
        }
    }
    Ok(None)
}

/// The duration of a `trun`'s samples; `Err` when its sample count cannot fit its box.
fn run_duration(trun: &[u8], default: u32, fragment: u64, at: u64) -> Result<u64, String> {
    let flags = be_u32(trun).unwrap_or(0) & 0x00ff_ffff;
    let count = u64::from(be_u32(trun.get(4..).unwrap_or_default()).unwrap_or(0));
    let mut first = 8usize;
    if flags & 0x01 != 0 {
        first += 4; // data offset
    }
    if flags & 0x04 != 0 {
        first += 4; // first sample flags
    }
    let per_sample = [0x100u32, 0x200, 0x400, 0x800]
        .iter()
        .filter(|f| flags & **f != 0)
        .count()
        * 4;
    let room = trun.len().saturating_sub(first) as u64;
    if per_sample > 0 && count.saturating_mul(per_sample as u64) > room {
        return Err(format!(
            "its MP4 fragment {fragment} (moof at byte {at}) has a track run (trun) of {count} samples of {per_sample} bytes each in {room} bytes: a damaged or hostile sample count"
        ));
    }
    if flags & 0x100 == 0 {
        return Ok(count.saturating_mul(u64::from(default)));
    }
    Ok((0..count as usize)
        .filter_map(|i| be_u32(trun.get(first + i * per_sample..)?))
        .map(u64::from)
        .sum())
}
