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
    /// A Xing/Info tag where symphonia finds it (it handles it itself).
    Tag,
    /// No tag: nothing declares the encoder delay.
    NoTag,
}

impl Start {
    /// Frames to drop from the start of the decoded stream when symphonia did not.
    pub(super) fn skip(self) -> u64 {
        match self {
            Start::CrcTag { frame, delay } => frame + delay + DECODER_DELAY,
            Start::Tag => 0,
            Start::NoTag => LAME_DELAY + DECODER_DELAY,
        }
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
    let side = match (mpeg1, mono) {
        (true, true) => 17,
        (true, false) => 32,
        (false, true) => 9,
        (false, false) => 17,
    };
    let frame = if mpeg1 { 1152 } else { 576 };
    // LAME writes the tag right after the side information even when a CRC follows the
    // header; other writers may move it past the CRC.
    let is_tag = |at: usize| matches!(buf.get(at..at + 4), Some(b"Xing") | Some(b"Info"));
    let Some(tag) = [pos + 4 + side, pos + 6 + side]
        .into_iter()
        .take(if crc { 2 } else { 1 })
        .find(|at| is_tag(*at))
    else {
        return Some(Start::NoTag);
    };
    if !crc {
        return Some(Start::Tag);
    }
    // The LAME extension follows the 120-byte Xing tag; delay and padding are 12 bits
    // each at its byte 21.
    let delay = match buf.get(tag + 120..tag + 144) {
        Some(lame) if lame[..4].iter().all(|b| b.is_ascii_alphanumeric()) => {
            (u64::from(lame[21]) << 4) | (u64::from(lame[22]) >> 4)
        }
        _ => 0,
    };
    Some(Start::CrcTag { frame, delay })
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
        f.extend(std::iter::repeat_n(0u8, 116));
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
