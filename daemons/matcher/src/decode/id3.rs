//! An ID3v2 tag whose size field says more than the tag holds (an old tagger's
//! non-syncsafe size, a tag edited in place). Every reader trusts the size and starts
//! that far in: the first seconds of audio, and an MP3's Xing/LAME frame that declares
//! the length, were skipped without a word and every offset came out early (2.5 s for
//! a 100-byte tag claiming 40 kB). Such a file is refused: the audio frames found inside
//! the claimed tag show where the size is wrong.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

use super::tail::{frame_len, Frames};

/// Largest claimed tag searched for frames (a tag with cover art is a few MiB).
const MAX_TAG: u64 = 16 << 20;

/// Consecutive frames that must chain from inside the claimed tag to past its end: a
/// chain of frames is audio, not tag bytes that happen to look like a frame header.
const CHAIN: usize = 4;

/// `Err` with the reason when the source starts with an ID3v2 tag whose claimed end
/// falls inside MPEG audio or ADTS frames that begin within the tag (and rewinds it).
pub(super) fn check_tag_size(source: &mut Box<dyn MediaSource>) -> Result<(), String> {
    let found = find_lie(source);
    let _ = source.seek(SeekFrom::Start(0));
    match found {
        Some((claimed, frames_at)) => Err(format!(
            "its ID3v2 tag claims {claimed} bytes but audio frames begin inside it at byte {frames_at}: the tag's size field is wrong, so a reader would skip the start of the audio and every offset would be early"
        )),
        None => Ok(()),
    }
}

/// (claimed tag length, first frame inside it) for a lying tag.
fn find_lie(source: &mut Box<dyn MediaSource>) -> Option<(u64, usize)> {
    source.seek(SeekFrom::Start(0)).ok()?;
    let mut head = [0u8; 10];
    source.read_exact(&mut head).ok()?;
    if &head[..3] != b"ID3" {
        return None;
    }
    let size = head[6..10]
        .iter()
        .fold(0u64, |acc, b| (acc << 7) | (u64::from(*b) & 0x7f));
    let end = 10 + size + if head[5] & 0x10 != 0 { 10 } else { 0 };
    if end > MAX_TAG {
        return None;
    }
    // The tag and what follows its claimed end, for frames running across it.
    let mut buf = head.to_vec();
    let _ = source
        .by_ref()
        .take(end - 10 + 16 * 1024)
        .read_to_end(&mut buf);
    let end = end as usize;
    let at_end = buf.get(end..).unwrap_or_default();
    let starts_well = at_end.len() < 10
        || at_end.starts_with(b"ID3")
        || [Frames::Mpeg, Frames::Adts]
            .iter()
            .any(|k| frame_len(*k, at_end).is_some());
    if starts_well {
        return None;
    }
    (10..end.min(buf.len())).find_map(|start| {
        [Frames::Mpeg, Frames::Adts]
            .iter()
            .any(|k| chain_crosses(&buf, start, end, *k))
            .then_some((end as u64, start))
    })
}

/// Whether at least [`CHAIN`] frames of `kind` chain from `start` to past `end`.
fn chain_crosses(buf: &[u8], start: usize, end: usize, kind: Frames) -> bool {
    let mut pos = start;
    let mut n = 0;
    while let Some(len) = buf.get(pos..).and_then(|h| frame_len(kind, h)) {
        n += 1;
        pos += len;
        if n >= CHAIN && pos > end {
            return true;
        }
    }
    false
}
