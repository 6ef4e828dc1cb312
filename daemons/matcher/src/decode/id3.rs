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

/// Where an ID3v2 tag at the start of the source ends (its declared size, a footer
/// included), if the source starts with one.
pub(super) fn tag_end(source: &mut Box<dyn MediaSource>) -> Option<u64> {
    let mut head = [0u8; 10];
    source.seek(SeekFrom::Start(0)).ok()?;
    let read = source.read_exact(&mut head);
    let _ = source.seek(SeekFrom::Start(0));
    read.ok()?;
    (&head[..3] == b"ID3").then(|| declared_end(&head))
}

/// The end of a tag from its 10-byte header: 10 + its syncsafe size (+ 10 for a footer).
fn declared_end(head: &[u8; 10]) -> u64 {
    let size = head[6..10]
        .iter()
        .fold(0u64, |acc, b| (acc << 7) | (u64::from(*b) & 0x7f));
    10 + size + if head[5] & 0x10 != 0 { 10 } else { 0 }
}

/// An ID3v2 tag at the start of the source whose own size is where the audio starts but
/// one of whose frames claims more bytes than the tag holds (a sloppy tagger; a hostile
/// 0xFFFFFFF0 made the reader allocate 4 GiB, aborting a process under a memory limit,
/// and 1 byte over failed the whole episode as "not an audio file"): (the tag's end, the
/// reason). The tag is only metadata and its size bounds it, so the caller reads from
/// its end, as ffmpeg does. Rewinds the source.
pub(super) fn frame_overrun(source: &mut Box<dyn MediaSource>) -> Option<(u64, String)> {
    let end = tag_end(source)?;
    if end > MAX_TAG {
        return None;
    }
    let mut tag = Vec::new();
    let read = source.by_ref().take(end).read_to_end(&mut tag);
    let _ = source.seek(SeekFrom::Start(0));
    read.ok()?;
    if (tag.len() as u64) < end {
        return None;
    }
    overrun(&tag).map(|reason| (end, reason))
}

/// The frame of a whole tag (`tag`: header and body) that claims more than the tag
/// holds, described, if one does. Padding or bytes that are no frame end the walk
/// (left to the reader, as before).
fn overrun(tag: &[u8]) -> Option<String> {
    let version = *tag.get(3)?;
    let flags = *tag.get(5)?;
    let (id_len, head_len) = match version {
        2 => (3usize, 6usize),
        3 | 4 => (4, 10),
        _ => return None,
    };
    let body_end = tag.len() - if flags & 0x10 != 0 { 10 } else { 0 };
    let body = tag.get(10..body_end)?;
    let mut pos = 0usize;
    if version >= 3 && flags & 0x40 != 0 {
        // An extended header: v2.3 counts the bytes after its size field, v2.4 all.
        let b = body.get(..4)?;
        pos = match version {
            3 => 4 + u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize,
            _ => b
                .iter()
                .fold(0usize, |acc, x| (acc << 7) | usize::from(*x & 0x7f)),
        };
    }
    while let Some(head) = body.get(pos..pos + head_len) {
        let id = &head[..id_len];
        if !id
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            return None;
        }
        let s = &head[id_len..];
        let size = match version {
            2 => u64::from(u32::from_be_bytes([0, s[0], s[1], s[2]])),
            // iTunes wrote v2.4 sizes without syncsafe bytes: those are read plainly.
            4 if s[..4].iter().all(|b| b & 0x80 == 0) => s[..4]
                .iter()
                .fold(0u64, |acc, b| (acc << 7) | u64::from(*b)),
            _ => u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
        };
        let left = (body.len() - pos - head_len) as u64;
        if size > left {
            return Some(format!(
                "its ID3v2.{version} tag's frame {} at byte {} claims {size} bytes where the tag holds {left} more: the tag was skipped by its own size (it is only metadata; the audio after it is whole)",
                String::from_utf8_lossy(id),
                10 + pos
            ));
        }
        pos += head_len + size as usize;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(version: u8, frame_size: u32, data: usize) -> Vec<u8> {
        let mut body = b"TIT2".to_vec();
        body.extend_from_slice(&frame_size.to_be_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend(std::iter::repeat_n(b'a', data));
        let mut t = vec![b'I', b'D', b'3', version, 0, 0];
        let n = body.len() as u32;
        t.extend([
            (n >> 21) as u8 & 0x7f,
            (n >> 14) as u8 & 0x7f,
            (n >> 7) as u8 & 0x7f,
            n as u8 & 0x7f,
        ]);
        t.extend(body);
        t
    }

    #[test]
    fn a_frame_claiming_more_than_its_tag_is_named() {
        assert_eq!(overrun(&tag(3, 20, 20)), None);
        let r = overrun(&tag(3, 21, 20)).unwrap_or_default();
        assert!(
            r.contains("frame TIT2") && r.contains("claims 21 bytes"),
            "{r}"
        );
        assert!(overrun(&tag(3, 0xFFFF_FFF0, 20)).is_some());
        assert_eq!(overrun(&tag(4, 20, 20)), None);
    }
}
