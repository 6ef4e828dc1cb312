//! The MP3 encoder delay symphonia 0.5 misses, so MP3 offsets are true whatever wrote
//! the file:
//! - with CRC-protected frames (`lame -p`) symphonia rejects the LAME tag (its CRC check
//!   does not allow for the protection bit): it decodes the tag frame as audio and keeps
//!   the encoder delay (offsets ~51 ms late at 44.1 kHz);
//! - without any tag (`lame -t`, `ffmpeg -write_xing 0`) nothing says the delay: the
//!   decoder's own 529 samples and LAME's usual 576 are removed (LAME, also inside
//!   ffmpeg, writes nearly every MP3; another encoder's delay is off by at most a few ms).

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

use super::reservoir::Reservoir;
use super::tail::Frames;
use super::walk;

/// The MP3 decoder's fixed delay (samples), present in every MP3 whatever encoded it.
pub(super) const DECODER_DELAY: u64 = 529;
/// LAME's encoder delay (samples), assumed when no tag declares one: measured with
/// `lame -t` (no tag), the placed clip came out 576 samples late.
pub(super) const LAME_DELAY: u64 = 576;

/// What the first frame of an MP3 says about its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// A CRC-protected Xing/Info frame: it decodes to `frame` samples of silence, then
    /// `delay` samples of encoder delay (the LAME tag's, 0 without one) come before time 0.
    CrcTag { frame: u64, delay: u64 },
    /// A Xing/Info (or VBRI) tag where symphonia finds it (it handles it itself when
    /// the tag has a LAME extension whose CRC-16 holds).
    Tag,
    /// A Xing/Info tag whose delay symphonia drops: its LAME extension fails its CRC-16
    /// (one flipped bit, a field a re-tagging tool rewrote), or there is none. Offsets
    /// came out 25 ms late (50 ms at 22.05 kHz). With an extension its `delay` fields
    /// are used, as ffmpeg does (`stated`); without one LAME's usual delay is assumed,
    /// the convention for an MP3 with no tag at all. Used only when symphonia set no
    /// delay (a valid LAME tag it reads itself).
    TagWithoutDelay { delay: u64, stated: bool },
    /// No tag: nothing declares the encoder delay or the length.
    NoTag,
}

impl Start {
    /// Frames to drop from the start of the decoded stream when symphonia did not.
    pub(super) fn skip(self) -> u64 {
        match self {
            Start::CrcTag { frame, delay } => frame + delay + DECODER_DELAY,
            Start::Tag => 0,
            Start::TagWithoutDelay { delay, .. } => delay + DECODER_DELAY,
            Start::NoTag => LAME_DELAY + DECODER_DELAY,
        }
    }
}

/// Bytes of a layer III frame's side information (after the header and its CRC).
pub(super) fn side_info_len(mpeg1: bool, mono: bool) -> usize {
    match (mpeg1, mono) {
        (true, true) => 17,
        (true, false) => 32,
        (false, true) => 9,
        (false, false) => 17,
    }
}

/// Reads the start of a seekable MP3 source (and rewinds it).
pub(super) fn read_start(source: &mut Box<dyn MediaSource>) -> Option<Start> {
    let mut buf = Vec::with_capacity(1 << 16);
    source.seek(SeekFrom::Start(0)).ok()?;
    let _ = source.by_ref().take(1 << 16).read_to_end(&mut buf);
    let mut start = 0usize;
    if buf.len() >= 10 && &buf[..3] == b"ID3" {
        // ID3v2: a syncsafe size after a 10-byte header (and a 10-byte footer if flagged).
        let size = buf[6..10]
            .iter()
            .fold(0usize, |acc, b| (acc << 7) | (*b as usize & 0x7f));
        start = 10 + size + if buf[5] & 0x10 != 0 { 10 } else { 0 };
        if start + 4096 > buf.len() {
            buf.clear();
            source.seek(SeekFrom::Start(start as u64)).ok()?;
            let _ = source.by_ref().take(8192).read_to_end(&mut buf);
            start = 0;
        }
    }
    let found = parse_start(&buf[start.min(buf.len())..]);
    source.seek(SeekFrom::Start(0)).ok()?;
    found
}

/// The first MPEG audio layer III frame in `buf` and what its tag says.
fn parse_start(buf: &[u8]) -> Option<Start> {
    let pos = (0..buf.len().saturating_sub(4))
        .find(|&i| buf[i] == 0xff && buf[i + 1] & 0xe0 == 0xe0 && (buf[i + 1] >> 1) & 3 == 1)?;
    let b1 = buf[pos + 1];
    let mpeg1 = (b1 >> 3) & 3 == 3;
    let crc = b1 & 1 == 0;
    let mono = buf[pos + 3] >> 6 == 3;
    let side = side_info_len(mpeg1, mono);
    let frame = if mpeg1 { 1152 } else { 576 };
    // LAME writes the tag right after the side information even when a CRC follows the
    // header; other writers may move it past the CRC.
    let is_tag = |at: usize| matches!(buf.get(at..at + 4), Some(b"Xing") | Some(b"Info"));
    // A VBRI frame (Fraunhofer's) is always 32 bytes after the header; symphonia reads
    // its frame count (it declares no delay).
    if buf.get(pos + 36..pos + 40) == Some(b"VBRI".as_slice()) {
        return Some(Start::Tag);
    }
    let Some(tag) = [pos + 4 + side, pos + 6 + side]
        .into_iter()
        .take(if crc { 2 } else { 1 })
        .find(|at| is_tag(*at))
    else {
        return Some(Start::NoTag);
    };
    if !crc {
        return Some(match lame_delay(buf, tag) {
            Some(delay) => Start::TagWithoutDelay {
                delay,
                stated: true,
            },
            None => Start::TagWithoutDelay {
                delay: LAME_DELAY,
                stated: false,
            },
        });
    }
    Some(Start::CrcTag {
        frame,
        delay: lame_delay(buf, tag).unwrap_or(0),
    })
}

/// The encoder delay of the LAME extension after the Xing/Info tag at `tag` in `buf`
/// (its place depends on the tag's flags; delay and padding are 12 bits each at the
/// extension's byte 21), if it has one: an encoder name of letters and digits.
fn lame_delay(buf: &[u8], tag: usize) -> Option<u64> {
    let flags = u32::from_be_bytes(buf.get(tag + 4..tag + 8)?.try_into().ok()?);
    let at = tag
        + 8
        + if flags & 1 != 0 { 4 } else { 0 }
        + if flags & 2 != 0 { 4 } else { 0 }
        + if flags & 4 != 0 { 100 } else { 0 }
        + if flags & 8 != 0 { 4 } else { 0 };
    let lame = buf.get(at..at + 24)?;
    lame[..4]
        .iter()
        .all(|b| b.is_ascii_alphanumeric())
        .then(|| (u64::from(lame[21]) << 4) | (u64::from(lame[22]) >> 4))
}

/// One MP3 file inside a body: joined files (`cat a.mp3 b.mp3`) each start with their
/// own Xing/Info frame, a tag between them (ffmpeg writes an ID3v2 tag at the start of
/// every MP3, tagging tools an ID3v1 at the end), or at least a change of sample rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Segment {
    /// Audio frames walked (the tag frame not counted: the reader drops it).
    pub frames: u64,
    /// Samples per frame (1152 for MPEG-1, 576 for MPEG-2/2.5 layer III).
    pub frame_samples: u64,
    /// Sample rate (Hz).
    pub rate: u32,
    /// What its Xing/Info frame declares, if it has one.
    pub tag: Option<SegmentTag>,
}

/// A segment's Xing/Info frame: its frame count and the LAME tag's delay and padding
/// (in decoder output samples: the decoder's own 529 added to the delay and taken from
/// the padding, as symphonia counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegmentTag {
    /// Audio frames declared.
    pub frames: Option<u64>,
    /// Output samples before the first sample of audio.
    pub delay: u64,
    /// Output samples after the last.
    pub padding: u64,
}

impl Segment {
    /// Output samples to drop at the start and to keep after them, as [`super::Trim`]
    /// wants them. Without a tag, LAME's usual delay is assumed and nothing is cut at
    /// the end.
    pub(super) fn trim(&self) -> (u64, Option<u64>) {
        match self.tag {
            Some(t) => {
                let frames = t.frames.unwrap_or(self.frames);
                let keep = (frames * self.frame_samples).saturating_sub(t.delay + t.padding);
                (t.delay, t.frames.map(|_| keep))
            }
            None => (LAME_DELAY + DECODER_DELAY, None),
        }
    }
}

/// Splits the MPEG audio frames of a seekable source into [`Segment`]s, up to the
/// `trailer` bytes of tags at the end, with what the walk found ([`walk::walk`]: whether
/// bytes follow the last frame, and bytes skipped midway) and the first bit reservoir
/// underflow after a stream's first frame ([`Reservoir`]); rewinds the source. None when
/// the walk cannot be made (not seekable, no frame).
pub(super) fn segments(
    source: &mut Box<dyn MediaSource>,
    trailer: u64,
) -> Option<(Vec<Segment>, walk::Walk, Option<String>)> {
    let mut segs: Vec<Segment> = Vec::new();
    let mut reservoir = Reservoir::default();
    let walked = walk::walk(source, Frames::Mpeg, trailer, |buf, len, after_tag| {
        let b1 = buf[1];
        let mpeg1 = (b1 >> 3) & 3 == 3;
        let layer3 = (b1 >> 1) & 3 == 1;
        let sr_idx = ((buf[2] >> 2) & 3) as usize;
        let rate = [44100u32, 48000, 32000][sr_idx]
            >> match (b1 >> 3) & 3 {
                3 => 0,
                2 => 1,
                _ => 2,
            };
        let frame_samples = match ((b1 >> 1) & 3, mpeg1) {
            (3, _) => 384,
            (1, false) => 576,
            _ => 1152,
        };
        let tag = if layer3 {
            info_tag(buf, mpeg1, buf[3] >> 6 == 3)
        } else {
            None
        };
        let new_segment = match segs.last() {
            None => true,
            Some(last) => {
                tag.is_some()
                    || after_tag
                    || last.rate != rate
                    || last.frame_samples != frame_samples
            }
        };
        if new_segment {
            reservoir.restart();
        }
        if tag.is_none() {
            reservoir.frame(buf, len, frame_samples, rate);
        }
        if new_segment {
            segs.push(Segment {
                frames: 0,
                frame_samples,
                rate,
                tag,
            });
        }
        if tag.is_none() {
            if let Some(last) = segs.last_mut() {
                last.frames += 1;
            }
        }
    })?;
    Some((segs, walked, reservoir.underflow))
}

/// The Xing/Info tag of a layer III frame where the reader looks for one (right after
/// the side information, which must be zero), with its LAME extension.
fn info_tag(frame: &[u8], mpeg1: bool, mono: bool) -> Option<SegmentTag> {
    let side = side_info_len(mpeg1, mono);
    let at = 4 + side;
    let id = frame.get(at..at + 8)?;
    if &id[..4] != b"Xing" && &id[..4] != b"Info" {
        return None;
    }
    if frame[4..at].iter().any(|b| *b != 0) {
        return None;
    }
    let flags = u32::from_be_bytes([id[4], id[5], id[6], id[7]]);
    let mut p = at + 8;
    let frames = if flags & 1 != 0 {
        let f = frame.get(p..p + 4)?;
        p += 4;
        Some(u64::from(u32::from_be_bytes([f[0], f[1], f[2], f[3]])))
    } else {
        None
    };
    p += if flags & 2 != 0 { 4 } else { 0 };
    p += if flags & 4 != 0 { 100 } else { 0 };
    p += if flags & 8 != 0 { 4 } else { 0 };
    let (delay, padding) = match frame.get(p..p + 24) {
        Some(lame) if lame[..4].iter().all(|b| b.is_ascii_alphanumeric()) => {
            let d = (u64::from(lame[21]) << 4) | (u64::from(lame[22]) >> 4);
            let pad = (u64::from(lame[22] & 0x0f) << 8) | u64::from(lame[23]);
            (d + DECODER_DELAY, pad.saturating_sub(DECODER_DELAY))
        }
        _ => (DECODER_DELAY, 0),
    };
    Some(SegmentTag {
        frames,
        delay,
        padding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crc_protected_info_frame_is_found() {
        // MPEG-1 layer III, CRC (protection bit 0), stereo.
        let mut f = vec![0xff, 0xfa, 0x90, 0x00];
        f.extend(std::iter::repeat_n(0u8, 32));
        f.extend_from_slice(b"Info");
        f.extend_from_slice(&[0, 0, 0, 0x0f]); // frames, bytes, TOC, quality
        f.extend(std::iter::repeat_n(0u8, 112));
        f.extend_from_slice(b"LAME3.100");
        f.extend(std::iter::repeat_n(0u8, 12));
        f.extend_from_slice(&[0x24, 0x00, 0x00]); // delay 576
        f.extend(std::iter::repeat_n(0u8, 100));
        assert_eq!(
            parse_start(&f),
            Some(Start::CrcTag {
                frame: 1152,
                delay: 576
            })
        );
    }
}
