//! What the last bytes of a body say about whether it is whole.
//!
//! symphonia's readers end quietly when the body ends: a last MP3, ADTS or FLAC frame
//! cut in the middle is dropped, and an Ogg stream cut at or inside a page just stops.
//! When the container declares no length (an Ogg stream, a streamed FLAC without a
//! total sample count, an MP3 without a LAME tag, raw ADTS AAC) nothing else notices, and
//! a cut-off episode would be researched as if it were whole. So the end of the body is
//! read before decoding and checked here, per container:
//! - Ogg: the last page must be complete (its CRC holds) and carry the end-of-stream flag;
//! - MPEG audio (MP3, MP2) and ADTS AAC: the frames, chained by the lengths their headers
//!   declare, must end where the audio ends (before any ID3v1, APEv2 or Lyrics3 tag);
//! - FLAC: no frame header may start at the sample where decoding stopped (a frame begun
//!   and cut), and a last frame the reader lost to bytes after it (junk, a tag) is found
//!   by its CRC-16 and decoded ([`flac_frame_at`]).
//!
//! The CRCs are symphonia's own ([`symphonia::core::checksum`]), the same the readers use.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::checksum::{Crc16Ansi, Crc32, Crc8Ccitt};
use symphonia::core::io::{MediaSource, Monitor};

/// Bytes read from the end of a body: more than any Ogg page (65,307 bytes) or any
/// FLAC frame a real encoder writes, so the last one is always inside.
const TAIL_BYTES: u64 = 1 << 20;

/// The last bytes of a seekable body.
pub(super) struct Tail {
    /// The bytes (the whole body when it is shorter than [`TAIL_BYTES`]).
    pub bytes: Vec<u8>,
    /// Whether `bytes` starts at the start of the body.
    pub whole: bool,
    /// The body's first bytes (up to 4: which container it is).
    pub head: Vec<u8>,
}

/// Reads the end of a seekable source (and rewinds it).
pub(super) fn read_tail(source: &mut Box<dyn MediaSource>) -> Option<Tail> {
    let len = source.byte_len()?;
    let mut head = Vec::with_capacity(4);
    source.seek(SeekFrom::Start(0)).ok()?;
    source.by_ref().take(4).read_to_end(&mut head).ok()?;
    let from = len.saturating_sub(TAIL_BYTES);
    source.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::with_capacity((len - from) as usize);
    let read = source.by_ref().take(TAIL_BYTES).read_to_end(&mut bytes);
    source.seek(SeekFrom::Start(0)).ok()?;
    read.ok()?;
    Some(Tail {
        bytes,
        whole: from == 0,
        head,
    })
}

/// Checks that an Ogg body ends with a complete end-of-stream page. `Ok` carries the
/// count of bytes after that page (0 for a clean file).
pub(super) fn ogg_end(tail: &Tail) -> Result<usize, String> {
    let b = &tail.bytes;
    for i in (0..b.len().saturating_sub(3)).rev() {
        if &b[i..i + 4] != b"OggS" {
            continue;
        }
        return match ogg_page(&b[i..]) {
            None => continue,
            Some(OggPage::Cut { declared }) => Err(format!(
                "the body ends inside an Ogg page ({} of its {declared} bytes): truncated",
                b.len() - i
            )),
            Some(OggPage::Whole { len, eos: true }) => Ok(b.len() - i - len),
            Some(OggPage::Whole { eos: false, .. }) => {
                Err("the last Ogg page has no end-of-stream flag: the stream was cut short".into())
            }
        };
    }
    Err("no complete Ogg page at the end of the body: truncated".into())
}

/// An Ogg page found at the start of a buffer.
enum OggPage {
    /// A complete page with a valid CRC: its length and end-of-stream flag.
    Whole { len: usize, eos: bool },
    /// A plausible header whose page runs past the buffer.
    Cut { declared: usize },
}

/// The page at the start of `b`, or None when `b` does not start with a page header.
fn ogg_page(b: &[u8]) -> Option<OggPage> {
    if b.len() < 27 || &b[..4] != b"OggS" || b[4] != 0 || b[5] & !0x07 != 0 {
        return None;
    }
    let segs = b[26] as usize;
    let declared = match b.get(27..27 + segs) {
        Some(table) => 27 + segs + table.iter().map(|s| *s as usize).sum::<usize>(),
        None => {
            return Some(OggPage::Cut {
                declared: 27 + segs,
            })
        }
    };
    let Some(page) = b.get(..declared) else {
        return Some(OggPage::Cut { declared });
    };
    let mut crc = Crc32::new(0);
    crc.process_buf_bytes(&page[..22]);
    crc.process_buf_bytes(&[0; 4]);
    crc.process_buf_bytes(&page[26..]);
    let stored = u32::from_le_bytes([page[22], page[23], page[24], page[25]]);
    (crc.crc() == stored).then_some(OggPage::Whole {
        len: declared,
        eos: b[5] & 0x04 != 0,
    })
}

/// How many bytes of trailing tags (ID3v1, APEv2, Lyrics3v2) end the body: the MP3
/// walk ([`super::mp3::segments`]) stops before them (a tag's cover art can hold false
/// frame headers).
pub(super) fn trailer_len(tail: &Tail) -> u64 {
    (tail.bytes.len() - audio_end(&tail.bytes)) as u64
}

/// Where the audio of an MP3 or ADTS body ends: before an ID3v1 tag, an APEv2 tag and
/// a Lyrics3v2 block, in the order taggers append them.
fn audio_end(b: &[u8]) -> usize {
    let mut end = b.len();
    if end >= 128 && &b[end - 128..end - 125] == b"TAG" {
        end -= 128;
    }
    if end >= 15 && &b[end - 9..end] == b"LYRICS200" {
        let size = std::str::from_utf8(&b[end - 15..end - 9])
            .ok()
            .and_then(|s| s.parse::<usize>().ok());
        if let Some(size) = size.filter(|s| s + 15 <= end) {
            end -= size + 15;
        }
    }
    if end >= 32 && &b[end - 32..end - 24] == b"APETAGEX" {
        let f = &b[end - 32..end];
        let size = u32::from_le_bytes([f[12], f[13], f[14], f[15]]) as usize;
        let has_header = f[23] & 0x80 != 0;
        let total = size + if has_header { 32 } else { 0 };
        if total <= end {
            end -= total;
        }
    }
    end
}

/// Which frame syntax [`mpeg_end`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frames {
    /// MPEG-1/2/2.5 audio, layers I-III.
    Mpeg,
    /// AAC in ADTS frames.
    Adts,
}

/// The length in bytes of the frame whose header starts `h`, if it is one.
pub(super) fn frame_len(kind: Frames, h: &[u8]) -> Option<usize> {
    if h.len() < header_len(kind) || h[0] != 0xff {
        return None;
    }
    match kind {
        Frames::Adts => {
            if h[1] & 0xf6 != 0xf0 || (h[2] >> 2) & 0x0f > 12 {
                return None;
            }
            let len = ((h[3] as usize & 3) << 11) | ((h[4] as usize) << 3) | (h[5] as usize >> 5);
            (len >= 7).then_some(len)
        }
        Frames::Mpeg => mpeg_frame_len(h),
    }
}

/// Bytes of a frame header: what [`frame_len`] reads.
fn header_len(kind: Frames) -> usize {
    match kind {
        Frames::Mpeg => 4,
        Frames::Adts => 6,
    }
}

/// The length of an MPEG audio frame from its 4-byte header (free-format frames and
/// reserved values give None).
pub(super) fn mpeg_frame_len(h: &[u8]) -> Option<usize> {
    if h[1] & 0xe0 != 0xe0 {
        return None;
    }
    let version = (h[1] >> 3) & 3; // 0: 2.5, 1: reserved, 2: MPEG-2, 3: MPEG-1
    let layer = (h[1] >> 1) & 3; // 1: III, 2: II, 3: I
    let br_idx = (h[2] >> 4) as usize;
    let sr_idx = ((h[2] >> 2) & 3) as usize;
    let pad = ((h[2] >> 1) & 1) as usize;
    if version == 1 || layer == 0 || br_idx == 0 || br_idx == 15 || sr_idx == 3 {
        return None;
    }
    const RATES: [u32; 3] = [44100, 48000, 32000];
    let rate = RATES[sr_idx]
        >> if version == 3 {
            0
        } else if version == 2 {
            1
        } else {
            2
        };
    const V1_L1: [u32; 15] = [
        0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
    ];
    const V1_L2: [u32; 15] = [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
    ];
    const V1_L3: [u32; 15] = [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ];
    const V2_L1: [u32; 15] = [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
    ];
    const V2_L23: [u32; 15] = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
    let kbps = match (version == 3, layer) {
        (true, 3) => V1_L1[br_idx],
        (true, 2) => V1_L2[br_idx],
        (true, _) => V1_L3[br_idx],
        (false, 3) => V2_L1[br_idx],
        (false, _) => V2_L23[br_idx],
    } as usize;
    let rate = rate as usize;
    Some(match (layer, version == 3) {
        (3, _) => (12_000 * kbps / rate + pad) * 4,
        (2, _) | (1, true) => 144_000 * kbps / rate + pad,
        _ => 72_000 * kbps / rate + pad,
    })
}

/// Checks that the MPEG audio or ADTS frames of a body end where its audio ends (before
/// any trailing tags). `Ok` carries the count of bytes after the last frame that are
/// neither a frame nor a known tag (0 for a clean file).
pub(super) fn mpeg_end(tail: &Tail, kind: Frames) -> Result<usize, String> {
    let b = &tail.bytes;
    let end = audio_end(b);
    let name = match kind {
        Frames::Mpeg => "MPEG audio",
        Frames::Adts => "ADTS",
    };
    // Frames chained from `s` by their declared lengths; a chain of three or more is the
    // stream (a false sync inside a frame rarely chains), unless `s` starts the body.
    let mut s = 0;
    while s < end {
        let mut p = s;
        let mut n = 0usize;
        while let Some(len) = b.get(p..end).and_then(|h| frame_len(kind, h)) {
            if p + len > end {
                if n >= 2 || (tail.whole && s == 0 && n >= 1) {
                    return Err(format!(
                        "the body ends inside an {name} frame ({} of its {len} bytes): truncated",
                        end - p
                    ));
                }
                break;
            }
            n += 1;
            p += len;
            if p == end {
                return Ok(0);
            }
        }
        if n >= 3 && end - p < header_len(kind) && b[p] == 0xff {
            return Err(format!(
                "the body ends inside an {name} frame header ({} bytes): truncated",
                end - p
            ));
        }
        if n >= 3 {
            // A chain broken by bytes that are not a frame: trailing junk or an unknown tag.
            return Ok(end - p);
        }
        s += 1;
    }
    Ok(0)
}

/// A FLAC frame header at the start of `b`: (first sample, block size) when the header
/// parses and its CRC-8 holds. `fixed_block` is the stream's block size (STREAMINFO's
/// maximum), by which a fixed-blocksize frame's number is multiplied.
fn flac_header(b: &[u8], fixed_block: u64) -> Option<(u64, u64)> {
    if b.len() < 6 || b[0] != 0xff || b[1] & 0xfe != 0xf8 {
        return None;
    }
    let variable = b[1] & 1 == 1;
    let bs_code = b[2] >> 4;
    let sr_code = b[2] & 0x0f;
    if bs_code == 0 || sr_code == 15 || b[3] >> 4 > 10 || (b[3] >> 1) & 7 == 3 || b[3] & 1 != 0 {
        return None;
    }
    // The UTF-8-like coded frame or sample number.
    let first = b[4];
    let extra = first.leading_ones() as usize;
    if extra == 1 || extra > 7 {
        return None;
    }
    let mut num = if extra == 0 {
        u64::from(first)
    } else {
        u64::from(first & (0x7f >> extra))
    };
    let mut pos = 5;
    for _ in 1..extra.max(1) {
        let c = *b.get(pos)?;
        if c & 0xc0 != 0x80 {
            return None;
        }
        num = (num << 6) | u64::from(c & 0x3f);
        pos += 1;
    }
    let block = match bs_code {
        1 => 192,
        2..=5 => 576 << (bs_code - 2),
        6 => {
            pos += 1;
            u64::from(*b.get(pos - 1)?) + 1
        }
        7 => {
            pos += 2;
            u64::from(u16::from_be_bytes([*b.get(pos - 2)?, *b.get(pos - 1)?])) + 1
        }
        _ => 256 << (bs_code - 8),
    };
    pos += match sr_code {
        12 => 1,
        13 | 14 => 2,
        _ => 0,
    };
    let mut crc = Crc8Ccitt::new(0);
    crc.process_buf_bytes(b.get(..pos)?);
    if crc.crc() != *b.get(pos)? {
        return None;
    }
    let first_sample = if variable { num } else { num * fixed_block };
    Some((first_sample, block))
}

/// The FLAC frames in the tail whose first sample is `sample`: their byte positions.
fn flac_headers_at(tail: &Tail, sample: u64, fixed_block: u64) -> Vec<(usize, u64)> {
    let b = &tail.bytes;
    (0..b.len().saturating_sub(6))
        .filter(|&i| b[i] == 0xff && b[i + 1] & 0xfe == 0xf8)
        .filter_map(|i| {
            flac_header(&b[i..], fixed_block)
                .filter(|(first, _)| *first == sample)
                .map(|(_, block)| (i, block))
        })
        .collect()
}

/// Whether a FLAC frame starting at `sample` begins in the tail: a body that decoded
/// to `sample` frames and holds such a header was cut inside that frame.
pub(super) fn flac_frame_begins(tail: &Tail, sample: u64, fixed_block: u64) -> bool {
    !flac_headers_at(tail, sample, fixed_block).is_empty()
}

/// The complete FLAC frame starting at `sample` (its bytes and block size): a header for
/// that sample followed by data whose CRC-16 holds at some end, however many bytes
/// follow it. `accept` decodes a candidate (a CRC-16 can hold by chance mid-frame).
pub(super) fn flac_frame_at(
    tail: &Tail,
    sample: u64,
    fixed_block: u64,
    mut accept: impl FnMut(&[u8], u64) -> bool,
) -> Option<(&[u8], u64)> {
    let b = &tail.bytes;
    for (at, block) in flac_headers_at(tail, sample, fixed_block) {
        let mut crc = Crc16Ansi::new(0);
        let mut fed = at;
        for end in at + 8..=b.len() {
            crc.process_buf_bytes(&b[fed..end - 2]);
            fed = end - 2;
            if crc.crc() == u16::from_be_bytes([b[end - 2], b[end - 1]])
                && accept(&b[at..end], block)
            {
                return Some((&b[at..end], block));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_tags_are_not_audio() {
        let mut b = vec![1u8; 1000];
        b.extend_from_slice(b"APETAGEX");
        b.extend_from_slice(&2000u32.to_le_bytes());
        b.extend_from_slice(&32u32.to_le_bytes()); // size: the footer only
        b.extend_from_slice(&[0; 16]); // items, flags (no header), reserved
        let mut id3 = b"TAG".to_vec();
        id3.resize(128, b' ');
        b.extend_from_slice(&id3);
        assert_eq!(audio_end(&b), 1000);
    }

    #[test]
    fn mpeg_frame_lengths() {
        // MPEG-1 layer III, 128 kb/s, 44.1 kHz, no padding: 417 bytes.
        assert_eq!(mpeg_frame_len(&[0xff, 0xfb, 0x90, 0x00]), Some(417));
        // MPEG-2 layer III, 64 kb/s, 22.05 kHz, padded: 209 bytes.
        assert_eq!(mpeg_frame_len(&[0xff, 0xf3, 0x82, 0x00]), Some(209));
    }
}
