//! A native FLAC whose STREAMINFO disagrees with its frame headers (one corrupt field:
//! the sample rate, the channel count or the bit depth). symphonia's reader gives up
//! with "end of stream", which called the file "not an audio file"; the fields that
//! disagree are named instead.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

/// Bytes read from the start to find the first frame (metadata blocks come first: a
/// large picture may push the first frame further, then nothing is said).
const HEAD: u64 = 256 << 10;

/// Which STREAMINFO field the first frame header contradicts, if one does; rewinds.
pub(super) fn mismatch(source: &mut Box<dyn MediaSource>) -> Option<String> {
    let mut buf = Vec::new();
    source.seek(SeekFrom::Start(0)).ok()?;
    source.by_ref().take(HEAD).read_to_end(&mut buf).ok()?;
    let _ = source.seek(SeekFrom::Start(0));
    compare(&buf)
}

fn compare(buf: &[u8]) -> Option<String> {
    if buf.get(..4)? != b"fLaC" {
        return None;
    }
    // STREAMINFO is the first metadata block: rate 20 bits, channels-1 3, bits-1 5.
    let si = buf.get(8..8 + 34)?;
    let rate = (u32::from(si[10]) << 12) | (u32::from(si[11]) << 4) | (u32::from(si[12]) >> 4);
    let channels = u32::from((si[12] >> 1) & 7) + 1;
    let bits = (u32::from(si[12] & 1) << 4 | u32::from(si[13] >> 4)) + 1;
    // Skip the metadata blocks to the first frame.
    let mut at = 4usize;
    loop {
        let header = buf.get(at..at + 4)?;
        let len =
            (usize::from(header[1]) << 16) | (usize::from(header[2]) << 8) | usize::from(header[3]);
        at += 4 + len;
        if header[0] & 0x80 != 0 {
            break;
        }
    }
    let frame = buf.get(at..at + 4)?;
    if frame[0] != 0xff || frame[1] & 0xfe != 0xf8 {
        return None;
    }
    let mut wrong = Vec::new();
    const RATES: [u32; 12] = [
        0, 88_200, 176_400, 192_000, 8000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000,
    ];
    if let Some(r) = RATES.get(usize::from(frame[2] & 0x0f)).filter(|r| **r > 0) {
        if *r != rate {
            wrong.push(format!("sample rate {rate} Hz where its frames say {r} Hz"));
        }
    }
    let assignment = u32::from(frame[3] >> 4);
    let frame_channels = match assignment {
        0..=7 => Some(assignment + 1),
        8..=10 => Some(2),
        _ => None,
    };
    if let Some(c) = frame_channels.filter(|c| *c != channels) {
        wrong.push(format!("{channels} channel(s) where its frames hold {c}"));
    }
    const DEPTHS: [u32; 8] = [0, 8, 12, 0, 16, 20, 24, 32];
    if let Some(b) = DEPTHS
        .get(usize::from((frame[3] >> 1) & 7))
        .filter(|b| **b > 0)
    {
        if *b != bits {
            wrong.push(format!("{bits} bits per sample where its frames have {b}"));
        }
    }
    (!wrong.is_empty()).then(|| {
        format!(
            "its FLAC STREAMINFO disagrees with its frame headers ({}): a corrupt header, so it cannot be decoded truly",
            wrong.join(", ")
        )
    })
}
