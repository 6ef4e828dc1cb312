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

/// The byte at which a second native FLAC stream starts in `source`: its `fLaC` marker
/// followed by a STREAMINFO block header (type 0, 34 bytes long), which no frame's bytes
/// plausibly hold by chance. Two FLAC files joined (`cat a.flac b.flac`): the second's
/// frame numbers start again at 0. Read only when the frames already went back to 0,
/// to name the cause; rewinds.
pub(super) fn second_stream<R: Read + Seek + ?Sized>(source: &mut R) -> Option<u64> {
    const SIG: usize = 8;
    let found = (|| {
        source.seek(SeekFrom::Start(4)).ok()?;
        let mut buf = vec![0u8; 1 << 16];
        // Bytes carried over from the previous read, so a marker across reads is seen.
        let mut kept = 0usize;
        let mut base = 4u64;
        loop {
            let n = source.read(&mut buf[kept..]).ok()?;
            if n == 0 {
                return None;
            }
            let filled = kept + n;
            if let Some(i) = buf[..filled].windows(SIG).position(is_stream_start) {
                return Some(base + i as u64);
            }
            kept = filled.min(SIG - 1);
            buf.copy_within(filled - kept..filled, 0);
            base += (filled - kept) as u64;
        }
    })();
    let _ = source.seek(SeekFrom::Start(0));
    found
}

/// `fLaC` then a STREAMINFO metadata block header (last-block flag either way).
fn is_stream_start(b: &[u8]) -> bool {
    &b[..4] == b"fLaC" && b[4] & 0x7f == 0 && b[5..8] == [0, 0, 34]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second stream is found wherever it starts, across the 64 KiB reads too, and
    /// a `fLaC` without a STREAMINFO header after it is not a stream.
    #[test]
    fn a_second_stream_is_found_across_reads() {
        let marker = b"fLaC\x80\x00\x00\x22";
        for at in [100usize, 65_536 - 3, 65_536 + 4, 200_000] {
            let mut b = vec![0x55u8; 300_000];
            b[..4].copy_from_slice(b"fLaC");
            b[at..at + 8].copy_from_slice(marker);
            assert_eq!(
                second_stream(&mut std::io::Cursor::new(b)),
                Some(at as u64),
                "{at}"
            );
        }
        let mut b = vec![0x55u8; 1000];
        b[500..504].copy_from_slice(b"fLaC");
        assert_eq!(second_stream(&mut std::io::Cursor::new(b)), None);
    }
}
