//! Header fields that size an allocation, checked before symphonia trusts them: its
//! readers and decoders allocate what a length or count says before reading what it
//! counts, so one hostile field (0xFFFFFFFF) asked for 4 to 34 GiB. An allocation that
//! fails aborts the whole process, every job in it (no panic guard can catch it): an
//! ALAC cookie's 34 GB did so with no memory limit at all, a FLAC comment's or picture's
//! 4 GiB under an address-space limit (`LimitAS=`, `ulimit -v`). The one rule: a
//! field is refused, naming it, when it says more than the bytes that hold it (the
//! block, the file) or more than the format allows.
//!
//! The MP4 sample tables follow the same rule in [`super::tables`]; an ID3v2 frame that
//! claims more than its tag holds is not refused but the tag skipped ([`super::id3`]).

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

/// Most samples per ALAC frame accepted. Apple's encoder and ffmpeg write 4096 (the
/// format's default); 65536 leaves room for any other encoder while bounding the
/// decoder's buffers to a few MiB. (0xFFFFFFFF made it allocate 34 GB and abort.)
pub const MAX_ALAC_FRAME: u32 = 1 << 16;

/// Why an ALAC magic cookie (the `alac` box's body: frameLength first, big-endian)
/// cannot be decoded safely, if it cannot: a frame length of 0 or over
/// [`MAX_ALAC_FRAME`].
pub(super) fn check_alac_cookie(cookie: &[u8]) -> Result<(), String> {
    let Some(field) = cookie.get(..4) else {
        return Ok(());
    };
    let frame_length = u32::from_be_bytes([field[0], field[1], field[2], field[3]]);
    if frame_length == 0 || frame_length > MAX_ALAC_FRAME {
        return Err(format!(
            "its ALAC configuration (magic cookie) gives a frame length (frameLength) of {frame_length} samples, outside 1..={MAX_ALAC_FRAME} (encoders write 4096): a damaged or hostile field (the decoder would allocate buffers for it)"
        ));
    }
    Ok(())
}

/// Largest FLAC metadata read for this check (every block before the audio, a picture
/// included; a block's length is 24 bits, so 16 MiB each).
const MAX_FLAC_META: u64 = 64 << 20;

/// Why a native FLAC's metadata cannot be read safely, if it cannot: a block running
/// past the end of the file, or a VORBIS_COMMENT or PICTURE whose inner length says more
/// than its block holds (after an ID3v2 tag, if one comes first). Rewinds the source.
pub(super) fn check_flac_metadata(source: &mut Box<dyn MediaSource>) -> Result<(), String> {
    let start = super::id3::tag_end(source).unwrap_or(0);
    let found = flac_fault(source, start);
    let _ = source.seek(SeekFrom::Start(0));
    match found {
        Some(reason) => Err(reason),
        None => Ok(()),
    }
}

fn flac_fault(source: &mut Box<dyn MediaSource>, start: u64) -> Option<String> {
    let len = source.byte_len()?;
    source.seek(SeekFrom::Start(start)).ok()?;
    let mut magic = [0u8; 4];
    source.read_exact(&mut magic).ok()?;
    if &magic != b"fLaC" {
        return None;
    }
    let mut at = start + 4;
    let mut read = 0u64;
    loop {
        let mut header = [0u8; 4];
        source.read_exact(&mut header).ok()?;
        let kind = header[0] & 0x7f;
        let block_len = u64::from(u32::from_be_bytes([0, header[1], header[2], header[3]]));
        let body_at = at + 4;
        if body_at + block_len > len {
            return Some(format!(
                "its FLAC metadata block of type {kind} at byte {at} says it is {block_len} bytes long, but the file ends {} bytes after its header: a damaged or hostile length",
                len - body_at.min(len)
            ));
        }
        read += block_len;
        if read > MAX_FLAC_META {
            return None;
        }
        let mut body = vec![0u8; block_len as usize];
        source.read_exact(&mut body).ok()?;
        let fault = match kind {
            4 => vorbis_comment_fault(&body),
            6 => picture_fault(&body),
            _ => None,
        };
        if let Some(fault) = fault {
            let name = if kind == 4 {
                "VORBIS_COMMENT"
            } else {
                "PICTURE"
            };
            return Some(format!(
                "its FLAC {name} block at byte {at} ({block_len} bytes) {fault}: a damaged or hostile length (the reader would allocate it)"
            ));
        }
        if header[0] & 0x80 != 0 {
            return None;
        }
        at = body_at + block_len;
    }
}

/// Takes `n` bytes off the front of `rest`, or says it cannot.
fn take<'a>(rest: &mut &'a [u8], n: u64) -> Option<&'a [u8]> {
    let n = usize::try_from(n).ok().filter(|n| *n <= rest.len())?;
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Some(head)
}

/// A VORBIS_COMMENT body (little-endian lengths): the field that overruns it, if any.
fn vorbis_comment_fault(body: &[u8]) -> Option<String> {
    let le = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let mut rest = body;
    let Some(vendor) = take(&mut rest, 4).map(le) else {
        return Some("is too short for its vendor length".to_string());
    };
    if take(&mut rest, vendor).is_none() {
        return Some(format!(
            "gives its vendor string {vendor} bytes where {} remain",
            rest.len()
        ));
    }
    let Some(count) = take(&mut rest, 4).map(le) else {
        return Some("is too short for its comment count".to_string());
    };
    if count.saturating_mul(4) > rest.len() as u64 {
        return Some(format!(
            "counts {count} comments where {} bytes remain",
            rest.len()
        ));
    }
    for i in 0..count {
        let Some(n) = take(&mut rest, 4).map(le) else {
            return Some(format!("ends before comment {}", i + 1));
        };
        if take(&mut rest, n).is_none() {
            return Some(format!(
                "gives comment {} a length of {n} bytes where {} remain",
                i + 1,
                rest.len()
            ));
        }
    }
    None
}

/// A PICTURE body (big-endian lengths): the field that overruns it, if any.
fn picture_fault(body: &[u8]) -> Option<String> {
    let be = |b: &[u8]| u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let mut rest = body;
    take(&mut rest, 4)?; // picture type
    for field in ["MIME type", "description"] {
        let n = take(&mut rest, 4).map(be)?;
        if take(&mut rest, n).is_none() {
            return Some(format!(
                "gives its {field} a length of {n} bytes where {} remain",
                rest.len()
            ));
        }
    }
    take(&mut rest, 16)?; // width, height, depth, colours
    let n = take(&mut rest, 4).map(be)?;
    (n > rest.len() as u64).then(|| {
        format!(
            "gives its picture data a length of {n} bytes where {} remain",
            rest.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alac_frame_length_is_bounded() {
        let mut cookie = vec![0u8; 24];
        cookie[..4].copy_from_slice(&4096u32.to_be_bytes());
        assert_eq!(check_alac_cookie(&cookie), Ok(()));
        cookie[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = check_alac_cookie(&cookie).unwrap_err();
        assert!(
            err.contains("frameLength") && err.contains("4294967295"),
            "{err}"
        );
        cookie[..4].copy_from_slice(&0u32.to_be_bytes());
        assert!(check_alac_cookie(&cookie).is_err());
    }

    #[test]
    fn comment_and_picture_lengths_must_fit_their_block() {
        let mut vc = Vec::new();
        vc.extend_from_slice(&4u32.to_le_bytes());
        vc.extend_from_slice(b"test");
        vc.extend_from_slice(&1u32.to_le_bytes());
        vc.extend_from_slice(&7u32.to_le_bytes());
        vc.extend_from_slice(b"TITLE=x");
        assert_eq!(vorbis_comment_fault(&vc), None);
        vc[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        let fault = vorbis_comment_fault(&vc).unwrap_or_default();
        assert!(
            fault.contains("comment 1 a length of 4294967295"),
            "{fault}"
        );

        let mut pic = vec![0, 0, 0, 3, 0, 0, 0, 9];
        pic.extend_from_slice(b"image/png");
        pic.extend_from_slice(&[0u8; 20]);
        pic.extend_from_slice(&2u32.to_be_bytes());
        pic.extend_from_slice(&[1, 2]);
        assert_eq!(picture_fault(&pic), None);
        let at = pic.len() - 6;
        pic[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let fault = picture_fault(&pic).unwrap_or_default();
        assert!(
            fault.contains("picture data a length of 4294967295"),
            "{fault}"
        );
    }
}
