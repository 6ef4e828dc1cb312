//! The LAME tag's "MusicCRC": a CRC-16 of every byte after the tag frame, up to the
//! music length the tag states, written by LAME and by ffmpeg's MP3 muxer.
//!
//! Whole frames lost at one place and others repeated at another (a resumed download
//! that skipped a stretch and re-appended one) leave the frame count, the byte count
//! and every frame intact: nothing but this CRC tells that the audio in between moved
//! (offsets were stored 26-78 ms late, a clip 714 ms off and "not found" at its true
//! place). The CRC is checked only when the tag is whole (its own CRC-16, over the
//! frame up to it, holds: a re-tagging tool that rewrote a field invalidates both) and
//! the stated music fits in the body; otherwise nothing is said.
//!
//! `mp3gain` changes every frame's gain field losslessly without updating the CRC; it
//! leaves `MP3GAIN_` items in an APEv2 or ID3 tag, and such a file is not checked
//! (its timing is untouched).
//!
//! CRC-16/ARC (polynomial 0x8005 reflected, initial 0) from the `crc` crate, the
//! algorithm LAME's `CRC_update_lookup` computes.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

use super::mp3::side_info_len;
use super::tail::mpeg_frame_len;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_ARC);

/// Bytes at the end searched for `mp3gain`'s tag items.
const TRAILER: u64 = 16 << 10;

/// Why the audio after a valid LAME tag is not what the encoder wrote (the MusicCRC
/// fails), if it is not; rewinds the source.
pub(super) fn music_crc_fault(source: &mut Box<dyn MediaSource>) -> Option<String> {
    let found = check(source);
    let _ = source.seek(SeekFrom::Start(0));
    found
}

fn check(source: &mut Box<dyn MediaSource>) -> Option<String> {
    let len = source.byte_len()?;
    let mut head = vec![0u8; 10];
    source.seek(SeekFrom::Start(0)).ok()?;
    source.read_exact(&mut head).ok()?;
    // ID3v2: a syncsafe size after a 10-byte header (and a 10-byte footer if flagged).
    let start = if &head[..3] == b"ID3" {
        let size = head[6..10]
            .iter()
            .fold(0u64, |acc, b| (acc << 7) | u64::from(*b & 0x7f));
        10 + size + if head[5] & 0x10 != 0 { 10 } else { 0 }
    } else {
        0
    };
    let mut frame = Vec::with_capacity(2048);
    source.seek(SeekFrom::Start(start)).ok()?;
    source.by_ref().take(2048).read_to_end(&mut frame).ok()?;
    let flen = mpeg_frame_len(frame.get(..4)?)?;
    let frame = frame.get(..flen)?;
    let (lame, music_len, music_crc) = lame_fields(frame)?;
    // The tag's own CRC-16 covers the frame up to it: a valid tag says the encoder wrote it.
    let tag_crc = u16::from_be_bytes([frame[lame + 34], frame[lame + 35]]);
    if CRC16.checksum(&frame[..lame + 34]) != tag_crc {
        return None;
    }
    let music_len = u64::from(music_len);
    // A body shorter than the stated music (frames lost, fewer repeated) is checked up
    // to its end: the CRC cannot match, and a body merely cut short is named as such by
    // the checks of its end, which come first.
    let end = start.checked_add(music_len)?.min(len);
    if music_len <= flen as u64 || end <= start + flen as u64 || mp3gain_tagged(source, len) {
        return None;
    }
    let mut digest = CRC16.digest();
    source.seek(SeekFrom::Start(start + flen as u64)).ok()?;
    let mut left = end - (start + flen as u64);
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        let n = (left.min(buf.len() as u64)) as usize;
        source.read_exact(&mut buf[..n]).ok()?;
        digest.update(&buf[..n]);
        left -= n as u64;
    }
    let got = digest.finalize();
    (got != music_crc).then(|| {
        format!(
            "the MP3's LAME tag (its own CRC-16 holds) declares a CRC-16 of {music_crc:#06x} for its {music_len} bytes of music, but the body's is {got:#06x}: frames were lost, repeated or altered after encoding (a damaged download or cut-and-repeat), so offsets after the damage would be wrong"
        )
    })
}

/// In a Xing/Info frame with a LAME extension: (where the extension starts, its music
/// length, its music CRC).
fn lame_fields(frame: &[u8]) -> Option<(usize, u32, u16)> {
    let b1 = *frame.get(1)?;
    let mpeg1 = (b1 >> 3) & 3 == 3;
    let layer3 = (b1 >> 1) & 3 == 1;
    let mono = frame.get(3)? >> 6 == 3;
    if !layer3 {
        return None;
    }
    let side = side_info_len(mpeg1, mono);
    // LAME writes the tag right after the side information, CRC-protected or not.
    let tag = 4 + side;
    if !matches!(frame.get(tag..tag + 4), Some(b"Xing") | Some(b"Info")) {
        return None;
    }
    let flags = u32::from_be_bytes(frame.get(tag + 4..tag + 8)?.try_into().ok()?);
    let lame = tag
        + 8
        + if flags & 1 != 0 { 4 } else { 0 }
        + if flags & 2 != 0 { 4 } else { 0 }
        + if flags & 4 != 0 { 100 } else { 0 }
        + if flags & 8 != 0 { 4 } else { 0 };
    let ext = frame.get(lame..lame + 36)?;
    if !ext[..4].iter().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let music_len = u32::from_be_bytes(ext[28..32].try_into().ok()?);
    let music_crc = u16::from_be_bytes([ext[32], ext[33]]);
    Some((lame, music_len, music_crc))
}

/// Whether the last [`TRAILER`] bytes hold `mp3gain`'s items (it rewrote the frames).
fn mp3gain_tagged(source: &mut Box<dyn MediaSource>, len: u64) -> bool {
    let from = len.saturating_sub(TRAILER);
    let mut tail = Vec::new();
    let read = source
        .seek(SeekFrom::Start(from))
        .and_then(|_| source.by_ref().take(TRAILER).read_to_end(&mut tail));
    read.is_ok() && tail.windows(8).any(|w| w.eq_ignore_ascii_case(b"MP3GAIN_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_lames() {
        // CRC-16/ARC's check value, as LAME's table computes it.
        assert_eq!(CRC16.checksum(b"123456789"), 0xbb3d);
    }
}
