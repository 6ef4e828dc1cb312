//! A WAV whose RIFF holds more audio than its `data` chunk declares: a second `data`
//! chunk, or a stale `data` size (a recorder that crashed before it rewrote the header)
//! with the rest of the samples after it. The reader stops at the declared end and the
//! decode looked complete, so a clip in the rest was stored "not found". Such a file is
//! refused naming what follows the declared audio; chunks that are not audio (`LIST`,
//! `id3 `, padding bytes) after `data` are fine.
//!
//! Bytes past the RIFF's end are audio the reader never sees, too: a recorder that
//! crashed with both its RIFF and `data` sizes stale, two WAVs joined (`cat a.wav
//! b.wav`), a resumed download that re-appended bytes midway (the header untouched, the
//! surplus lies past the RIFF's end and every later offset is late). Such bytes are
//! refused unless they are a tag or chunk (ID3, `LIST`), zeros, or too few to be audio.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

/// Chunks walked after `data` before giving up (a real file has a handful).
const MAX_CHUNKS: usize = 1024;

/// `Err` with the reason when audio follows the first `data` chunk inside the RIFF (and
/// rewinds the source).
pub(super) fn check_data_chunks(source: &mut Box<dyn MediaSource>) -> Result<(), String> {
    let len = source.byte_len();
    let found = len.and_then(|len| find_more_audio(source, len));
    let _ = source.seek(SeekFrom::Start(0));
    found.map_or(Ok(()), Err)
}

/// Whether the source is a WAV written to a pipe (`ffmpeg ... -f wav -`, live
/// recorders): its RIFF or `data` size is 0xFFFFFFFF, "length unknown, read to the end".
/// Its frame count is then unknown too (the reader read 120 s where the size "declared"
/// 24,348 s and the file was refused as truncated); the download's length check guards
/// such a body, as it does a streamed FLAC. Rewinds the source.
pub(super) fn streamed(source: &mut Box<dyn MediaSource>) -> bool {
    let unknown = u64::from(u32::MAX);
    let mut found = || -> Option<bool> {
        let (riff, riff_size) = read_chunk_head(source, 0)?;
        let mut wave = [0u8; 4];
        source.read_exact(&mut wave).ok()?;
        if &riff != b"RIFF" || &wave != b"WAVE" {
            return Some(false);
        }
        if riff_size == unknown {
            return Some(true);
        }
        let mut at = 12u64;
        for _ in 0..MAX_CHUNKS {
            let (id, size) = read_chunk_head(source, at)?;
            if &id == b"data" {
                return Some(size == unknown);
            }
            at += 8 + size + (size & 1);
        }
        Some(false)
    };
    let is = found().unwrap_or(false);
    let _ = source.seek(SeekFrom::Start(0));
    is
}

fn read_chunk_head(source: &mut Box<dyn MediaSource>, at: u64) -> Option<([u8; 4], u64)> {
    let mut h = [0u8; 8];
    source.seek(SeekFrom::Start(at)).ok()?;
    source.read_exact(&mut h).ok()?;
    let id: [u8; 4] = h[..4].try_into().ok()?;
    Some((id, u64::from(u32::from_le_bytes(h[4..8].try_into().ok()?))))
}

/// Whether a chunk header (printable id, size within the RIFF) starts at `at`.
fn chunk_at(source: &mut Box<dyn MediaSource>, at: u64, end: u64) -> bool {
    at + 8 <= end
        && read_chunk_head(source, at).is_some_and(|(id, size)| {
            id.iter().all(|b| b.is_ascii_graphic() || *b == b' ') && at + 8 + size <= end
        })
}

/// Bytes past the RIFF's end that are at most this many are ignored (a stray pad byte,
/// a writer's alignment): under 4 ms of audio even at 8 kHz mono 16-bit.
const PAST_RIFF_SLACK: u64 = 64;

/// The reason the bytes after the RIFF's end (`riff_end`, the body `len` bytes long)
/// are audio that would not be examined, if they are: another RIFF (a joined file) or
/// bytes that are no tag, no chunk and not all zeros.
fn past_riff(source: &mut Box<dyn MediaSource>, riff_end: u64, len: u64) -> Option<String> {
    let surplus = len.checked_sub(riff_end)?;
    if surplus <= PAST_RIFF_SLACK {
        return None;
    }
    let mut head = [0u8; 12];
    source.seek(SeekFrom::Start(riff_end)).ok()?;
    source.read_exact(&mut head).ok()?;
    if &head[..4] == b"RIFF" {
        return Some(format!(
            "a second RIFF file starts at byte {riff_end} where the first one ends ({surplus} bytes follow: two WAV files joined): only the first would be decoded"
        ));
    }
    if head.starts_with(b"ID3") || head.starts_with(b"TAG") || chunk_at(source, riff_end, len) {
        return None;
    }
    source.seek(SeekFrom::Start(riff_end)).ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let mut left = surplus;
    while left > 0 {
        let n = source.read(&mut buf[..left.min(1 << 16) as usize]).ok()?;
        if n == 0 {
            return None;
        }
        if buf[..n].iter().any(|b| *b != 0) {
            return Some(format!(
                "its RIFF ends at byte {riff_end} but {surplus} more bytes follow that are no chunk or tag (RIFF and `data` sizes both stale, as a recorder that crashed leaves them, or bytes a resumed download re-appended midway): audio there would not be examined, or every offset after the repeat would be late"
            ));
        }
        left -= n as u64;
    }
    None
}

fn find_more_audio(source: &mut Box<dyn MediaSource>, len: u64) -> Option<String> {
    let (riff, riff_size) = read_chunk_head(source, 0)?;
    let mut wave = [0u8; 4];
    source.read_exact(&mut wave).ok()?;
    if &riff != b"RIFF" || &wave != b"WAVE" || riff_size == u64::from(u32::MAX) {
        return None; // not WAV, or streamed (length unknown)
    }
    // A RIFF size too small to hold even its `WAVE` form type: a header never finalised
    // (outside 18g N12: "missing data chunk" for a file with 120 s of audio).
    if riff_size < 4 && len > 12 + PAST_RIFF_SLACK {
        return Some(format!(
            "its RIFF size is {riff_size} (a header never finalised: the writer stopped before it wrote the sizes) while {len} bytes follow: its audio cannot be told from the header; rewrite it (e.g. `sox in.wav out.wav`)"
        ));
    }
    let end = (8 + riff_size).min(len);
    let mut at = 12u64;
    let mut data_end = None;
    for _ in 0..MAX_CHUNKS {
        if at + 8 > end {
            return data_end.and_then(|_| past_riff(source, 8 + riff_size, len));
        }
        let (id, size) = read_chunk_head(source, at)?;
        let printable = id.iter().all(|b| b.is_ascii_graphic() || *b == b' ');
        if let Some(data_end) = data_end {
            if &id == b"data" {
                return Some(format!(
                    "it holds a second `data` chunk at byte {at} ({size} bytes) after the one whose audio ends at byte {data_end}: only the first would be decoded"
                ));
            }
            if !printable || at + 8 + size > end {
                return Some(format!(
                    "its `data` chunk declares audio up to byte {data_end} but the RIFF goes on to byte {end} with {} bytes that are no chunk (a stale `data` size: more audio follows the declared end)",
                    end - data_end
                ));
            }
        } else if &id == b"data" {
            if size == u64::from(u32::MAX) {
                // "Length unknown" (a writer to a pipe) under a RIFF whose size is set:
                // the header contradicts itself (outside 18g N12: "chunk length exceeds
                // parent chunk length", which does not say what is wrong).
                return Some(format!(
                    "its `data` chunk at byte {at} declares an unknown length (0xFFFFFFFF, as a writer to a pipe leaves it) while its RIFF declares {riff_size} bytes: the header contradicts itself; rewrite it (e.g. `sox in.wav out.wav`)"
                ));
            }
            data_end = Some(at + 8 + size);
        }
        // Chunks are padded to an even length; some writers leave the pad byte out.
        let next = at + 8 + size;
        at = if size & 1 == 1 && !chunk_at(source, next + 1, end) && chunk_at(source, next, end) {
            next
        } else {
            next + (size & 1)
        };
    }
    None
}
