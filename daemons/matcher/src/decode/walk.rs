//! The frame walk of MPEG audio and ADTS bodies, and the bytes it skips midway.
//!
//! MP3 and ADTS frames are found by their sync words; symphonia's readers skip
//! anything between frames quietly (resynchronising at the next header). When a stretch
//! of frames is damaged midway (zeroed, overwritten, cut out, a single flipped bit in a
//! sync word) the frames in it are skipped and the decode is short by their audio: every
//! later offset comes out early (12.5 s for 200 kB zeroed in a tagless 128 kbps MP3, one
//! frame for one flipped bit), and without a Xing/LAME header nothing declares a length
//! to compare with. So every frame is walked here by the length its header declares, and
//! the bytes skipped between one frame and the next that are not a tag (ID3v2, ID3v1,
//! APEv2, as joined files carry) are counted as lost audio. One rule in one place: any
//! such bytes make the decode incomplete ([`Walk::lost`]).
//!
//! Bytes before the first frame (junk a server prepended) and after the last (trailing
//! junk, checked by [`super::tail`]) are not counted: no audio is known to be there.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

use super::tail::{frame_len, Frames};

/// Bytes of a frame handed to the visitor (headers and a Xing/Info tag fit).
pub(super) const HEAD_BYTES: usize = 200;

/// Consecutive frames that must chain after a resynchronisation before the bytes
/// skipped count as lost midway: a false sync word in junk after the last frame rarely
/// chains (a run up to the end of the body counts too).
const CHAIN: u64 = 3;

/// Bytes between frames that are not frames or tags: audio lost or damaged midway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lost {
    /// Where the first stretch starts (byte offset in the body).
    pub first_at: u64,
    /// Bytes skipped in all stretches.
    pub bytes: u64,
    /// How many stretches.
    pub stretches: u64,
}

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Walk {
    /// Frames walked.
    pub frames: u64,
    /// Bytes in those frames.
    pub frame_bytes: u64,
    /// Seconds of audio in those frames, as their headers declare.
    pub frame_s: f64,
    /// Whether bytes (tags, junk) follow the last frame.
    pub trailing: bool,
    /// Bytes skipped midway, if any.
    pub lost: Option<Lost>,
}

impl Walk {
    /// The reason the body cannot be researched, if bytes were skipped midway: `name`
    /// says what the frames are ("MPEG audio", "ADTS"). The audio lost is estimated
    /// from the skipped bytes at the frames' average bytes per second: a lower bound,
    /// since bytes cut out leave only the frame they broke to be seen.
    pub(super) fn lost_reason(&self, name: &str) -> Option<String> {
        let lost = self.lost?;
        let per_s = self.frame_bytes as f64 / self.frame_s.max(1e-3);
        Some(format!(
            "{} bytes between {name} frames are not frames ({} stretch(es), the first at byte {}): at least {:.3} s of audio damaged or cut out midway, which the reader skips, so every offset after it would be early",
            lost.bytes,
            lost.stretches,
            lost.first_at,
            lost.bytes as f64 / per_s.max(1.0),
        ))
    }
}

/// The bytes skipped since the last frame, waiting for frames to chain after them.
#[derive(Debug, Clone, Copy)]
struct Pending {
    at: u64,
    bytes: u64,
    /// Frames walked since the resynchronisation, and their bytes (part of the stretch
    /// if the chain breaks again: false frames in the damage).
    chained: u64,
    chained_bytes: u64,
}

/// Walks every `kind` frame of a seekable source up to its last `trailer` bytes (tags),
/// from the end of a leading ID3v2 tag, handing each frame's first [`HEAD_BYTES`], its
/// length and whether a tag (ID3v2, ID3v1, APEv2) came between it and the frame before
/// (where files were joined: `cat a.mp3 b.mp3` of files with tags) to `visit`;
/// resynchronises byte by byte over anything else,
/// as the readers do, and counts what it skipped midway. Rewinds the source. None when
/// the walk cannot be made (not seekable, no frame).
pub(super) fn walk(
    source: &mut Box<dyn MediaSource>,
    kind: Frames,
    trailer: u64,
    mut visit: impl FnMut(&[u8], usize, bool),
) -> Option<Walk> {
    let whole = source.byte_len()?;
    let len = whole.saturating_sub(trailer);
    source.seek(SeekFrom::Start(0)).ok()?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, source.by_ref());
    let mut head = [0u8; 10];
    let mut pos: u64 = 0;
    if r.read_exact(&mut head).is_ok() {
        pos = id3v2_len(&head).unwrap_or(0);
    }
    let mut buf = [0u8; HEAD_BYTES];
    r.seek(SeekFrom::Start(pos)).ok()?;
    let mut at = pos;
    let mut frames = 0u64;
    let mut frame_bytes = 0u64;
    let mut frame_s = 0.0f64;
    let mut last_end = 0u64;
    let mut pending: Option<Pending> = None;
    let mut lost: Option<Lost> = None;
    // Frames chained since the last skip; the stream has started once CHAIN did (a
    // false frame in junk before the audio is not the start).
    let mut run = 0u64;
    let mut started = false;
    // A tag skipped since the last frame (none before the first frame counts).
    let mut tag_between = false;
    while pos + 4 <= len {
        // The reader's position is `at`; a move within its buffer is cheap.
        r.seek_relative(pos as i64 - at as i64).ok()?;
        let n = read_up_to(&mut r, &mut buf);
        at = pos + n as u64;
        let header = frame_len(kind, &buf[..n.min(6)]);
        if header.is_some_and(|l| pos + l as u64 > len) {
            break; // a frame cut by the end of the body: the reader drops it too
        }
        let Some(flen) = header else {
            // A tag between joined files is not lost audio.
            let tag = tag_len(&buf[..n]);
            let step = tag.unwrap_or_else(|| {
                buf[1..n.max(1)]
                    .iter()
                    .position(|b| *b == 0xff)
                    .map_or(n.max(1), |i| i + 1) as u64
            });
            if tag.is_none() {
                run = 0;
            } else if frames > 0 {
                tag_between = true;
            }
            if started && tag.is_none() {
                let p = pending.get_or_insert(Pending {
                    at: pos,
                    bytes: 0,
                    chained: 0,
                    chained_bytes: 0,
                });
                p.bytes += step + std::mem::take(&mut p.chained_bytes);
                p.chained = 0;
            }
            pos += step;
            continue;
        };
        visit(&buf[..n.min(flen)], flen, std::mem::take(&mut tag_between));
        frames += 1;
        frame_bytes += flen as u64;
        frame_s += seconds(kind, &buf[..n]);
        pos += flen as u64;
        last_end = pos;
        run += 1;
        started |= run >= CHAIN;
        if let Some(p) = pending.as_mut() {
            p.chained += 1;
            p.chained_bytes += flen as u64;
            if p.chained >= CHAIN || pos + 4 > len {
                let l = lost.get_or_insert(Lost {
                    first_at: p.at,
                    bytes: 0,
                    stretches: 0,
                });
                l.bytes += p.bytes;
                l.stretches += 1;
                pending = None;
            }
        }
    }
    drop(r);
    source.seek(SeekFrom::Start(0)).ok()?;
    (frames > 0).then_some(Walk {
        frames,
        frame_bytes,
        frame_s,
        trailing: last_end < whole,
        lost,
    })
}

/// The seconds of audio in the frame whose (valid) header starts `h`.
fn seconds(kind: Frames, h: &[u8]) -> f64 {
    let (samples, rate) = match kind {
        Frames::Mpeg => {
            let version = (h[1] >> 3) & 3; // 0: 2.5, 2: MPEG-2, 3: MPEG-1
            let layer = (h[1] >> 1) & 3; // 1: III, 2: II, 3: I
            let rate = [44_100u32, 48_000, 32_000][usize::from((h[2] >> 2) & 3).min(2)]
                >> match version {
                    3 => 0,
                    2 => 1,
                    _ => 2,
                };
            let samples = match (layer, version) {
                (3, _) => 384,
                (1, v) if v != 3 => 576,
                _ => 1152,
            };
            (samples, rate)
        }
        Frames::Adts => {
            const RATES: [u32; 13] = [
                96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000,
                7350,
            ];
            let rate = RATES[usize::from((h[2] >> 2) & 0x0f).min(12)];
            let blocks = h.get(6).map_or(1, |b| u32::from(b & 3) + 1);
            (1024 * blocks, rate)
        }
    };
    f64::from(samples) / f64::from(rate)
}

/// Whether the first frame of a seekable source (after a leading ID3v2 tag) is a
/// `kind` frame; rewinds the source.
pub(super) fn starts_with(source: &mut Box<dyn MediaSource>, kind: Frames) -> bool {
    let mut first = || -> Option<bool> {
        source.seek(SeekFrom::Start(0)).ok()?;
        let mut head = [0u8; 10];
        let n = read_up_to(source, &mut head);
        let at = id3v2_len(&head[..n]).unwrap_or(0);
        source.seek(SeekFrom::Start(at)).ok()?;
        let mut h = [0u8; 6];
        let n = read_up_to(source, &mut h);
        Some(frame_len(kind, &h[..n]).is_some())
    };
    let found = first().unwrap_or(false);
    let _ = source.seek(SeekFrom::Start(0));
    found
}

/// The length of the ID3v2 tag starting `b` (header, body and footer), if one does.
fn id3v2_len(b: &[u8]) -> Option<u64> {
    let h = b.get(..10)?;
    if &h[..3] != b"ID3" || h[3] == 0xff || h[6..10].iter().any(|x| x & 0x80 != 0) {
        return None;
    }
    let size = h[6..10]
        .iter()
        .fold(0u64, |acc, x| (acc << 7) | u64::from(*x & 0x7f));
    Some(10 + size + if h[5] & 0x10 != 0 { 10 } else { 0 })
}

/// The length of a tag starting `b` between two joined files: ID3v2, ID3v1 (`TAG`, 128
/// bytes), an APEv2 header (its size counts the items and footer).
fn tag_len(b: &[u8]) -> Option<u64> {
    if let Some(n) = id3v2_len(b) {
        return Some(n);
    }
    if b.starts_with(b"TAG") && b.len() >= 128 {
        return Some(128);
    }
    if b.starts_with(b"APETAGEX") && b.len() >= 32 {
        let size = u64::from(u32::from_le_bytes([b[12], b[13], b[14], b[15]]));
        let is_header = b[23] & 0x20 != 0;
        return Some(if is_header { 32 + size } else { 32 });
    }
    None
}

/// Reads as much of `buf` as the reader gives (less at the end).
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CBR MPEG-1 layer III frame (128 kbps, 44.1 kHz, no padding: 417 bytes).
    fn frame() -> Vec<u8> {
        let mut f = vec![0xff, 0xfb, 0x90, 0x00];
        f.resize(417, 0x11);
        f
    }

    fn walked(body: Vec<u8>) -> Walk {
        let mut src: Box<dyn MediaSource> = Box::new(std::io::Cursor::new(body));
        walk(&mut src, Frames::Mpeg, 0, |_, _, _| {}).unwrap()
    }

    #[test]
    fn skipped_bytes_midway_are_lost_and_tags_or_ends_are_not() {
        let clean: Vec<u8> = (0..10).flat_map(|_| frame()).collect();
        assert_eq!(walked(clean.clone()).lost, None);
        // One flipped bit in a sync word: the frame is skipped.
        let mut flipped = clean.clone();
        flipped[417 * 4] = 0xfd;
        let l = walked(flipped).lost.unwrap();
        assert_eq!((l.first_at, l.bytes, l.stretches), (417 * 4, 417, 1));
        // An ID3v2 tag between frames, junk before the first and after the last: none.
        let mut tagged = clean[..417 * 5].to_vec();
        tagged.extend_from_slice(b"ID3\x03\x00\x00\x00\x00\x00\x0a");
        tagged.extend_from_slice(&[0u8; 10]);
        tagged.extend_from_slice(&clean[417 * 5..]);
        tagged.extend_from_slice(&[0x55u8; 300]);
        let mut body = vec![0x22u8; 100];
        body.extend(tagged);
        let w = walked(body);
        assert_eq!((w.lost, w.frames, w.trailing), (None, 10, true));
    }
}
