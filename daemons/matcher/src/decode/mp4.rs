//! Encoder delay and padding of AAC (and ALAC) in MP4/M4A, which symphonia 0.5's MP4
//! reader ignores: every AAC encoder primes its output with silence (1024 frames from
//! ffmpeg, 2112 from Apple's), so without this every offset in an `.m4a` episode is late
//! by 128 ms at 8 kHz, 23 ms at 44.1 kHz.
//!
//! Two statements are read, as players do:
//! 1. the `iTunSMPB` tag (`moov/udta/meta/ilst/----`), Apple's and many encoders'
//!    "priming, padding, original length" in samples;
//! 2. else the first audio track's edit list (`moov/trak/edts/elst`), whose first
//!    non-empty edit starts at the priming (media time) and lasts the original length.
//!
//! Only `moov` is read (bounded to [`MAX_MOOV`] bytes), by a walk over the few box
//! types involved; no crate on crates.io exposes both statements without also
//! demuxing the file a second time.

use std::io::{Read, Seek, SeekFrom};

/// Largest `moov` box read (a two-hour episode's sample tables are a few MiB).
pub const MAX_MOOV: u64 = 64 << 20;

/// What to drop at the start, and how much to keep, each in its own timescale (units
/// per second; 0 means "already in sample frames").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gapless {
    /// Encoder delay (priming).
    pub priming: u64,
    /// Timescale of `priming`.
    pub priming_scale: u32,
    /// Length of the real audio after the priming, when stated.
    pub valid: Option<u64>,
    /// Timescale of `valid`.
    pub valid_scale: u32,
    /// Where it came from, for the decode notes.
    pub source: &'static str,
}

impl Gapless {
    /// (priming, valid) in frames at `rate`.
    pub fn frames(&self, rate: u32) -> (u64, Option<u64>) {
        let conv = |t: u64, scale: u32| -> u64 {
            if scale == 0 {
                t
            } else {
                ((t as u128 * rate as u128 + scale as u128 / 2) / scale as u128) as u64
            }
        };
        (
            conv(self.priming, self.priming_scale),
            self.valid.map(|v| conv(v, self.valid_scale)),
        )
    }
}

fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// Iterates the boxes in `data`: (type, body).
fn boxes(mut data: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        let size = be_u32(data)? as u64;
        let kind: [u8; 4] = data.get(4..8)?.try_into().ok()?;
        let (header, size) = match size {
            1 => (16usize, be_u64(data.get(8..)?)?),
            0 => (8usize, data.len() as u64),
            n => (8usize, n),
        };
        let size = usize::try_from(size).ok()?;
        if size < header || size > data.len() {
            return None;
        }
        let body = &data[header..size];
        data = &data[size..];
        Some((kind, body))
    })
}

fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes(data).find(|(k, _)| k == kind).map(|(_, b)| b)
}

/// Reads the gapless statement of an MP4 source, then seeks it back to the start.
/// `None` when the source is not MP4, has neither statement, or cannot be read.
pub fn read_gapless<R: Read + Seek + ?Sized>(src: &mut R) -> Option<Gapless> {
    let found = find_moov(src).and_then(|moov| from_moov(&moov));
    src.seek(SeekFrom::Start(0)).ok()?;
    found
}

fn find_moov<R: Read + Seek + ?Sized>(src: &mut R) -> Option<Vec<u8>> {
    src.seek(SeekFrom::Start(0)).ok()?;
    let mut pos = 0u64;
    let mut first = true;
    loop {
        let mut head = [0u8; 16];
        src.seek(SeekFrom::Start(pos)).ok()?;
        src.read_exact(&mut head[..8]).ok()?;
        let kind: [u8; 4] = head[4..8].try_into().ok()?;
        if first && &kind != b"ftyp" {
            return None;
        }
        first = false;
        let (header, size) = match be_u32(&head)? {
            1 => {
                src.read_exact(&mut head[8..16]).ok()?;
                (16u64, be_u64(&head[8..])?)
            }
            0 => return None,
            n => (8u64, n as u64),
        };
        if size < header {
            return None;
        }
        if &kind == b"moov" {
            let len = size - header;
            if len > MAX_MOOV {
                return None;
            }
            let mut moov = vec![0u8; len as usize];
            src.read_exact(&mut moov).ok()?;
            return Some(moov);
        }
        pos = pos.checked_add(size)?;
    }
}

fn from_moov(moov: &[u8]) -> Option<Gapless> {
    itunsmpb(moov).or_else(|| edit_list(moov))
}

/// `moov/udta/meta/ilst/----` with `name` iTunSMPB: hex words, the second is the
/// priming, the third the padding, the fourth the original length.
fn itunsmpb(moov: &[u8]) -> Option<Gapless> {
    let meta = child(child(moov, b"udta")?, b"meta")?;
    // `meta` is a full box (4 bytes of version and flags) in MP4, a plain one in QuickTime.
    let ilst = child(meta.get(4..)?, b"ilst").or_else(|| child(meta, b"ilst"))?;
    for (kind, item) in boxes(ilst) {
        if &kind != b"----" {
            continue;
        }
        let name = child(item, b"name").and_then(|n| n.get(4..));
        if name != Some(b"iTunSMPB".as_slice()) {
            continue;
        }
        let data = child(item, b"data")?.get(8..)?;
        let text = std::str::from_utf8(data).ok()?;
        let words: Vec<u64> = text
            .split_whitespace()
            .map(|w| u64::from_str_radix(w, 16))
            .collect::<Result<_, _>>()
            .ok()?;
        let priming = *words.get(1)?;
        let valid = words.get(3).copied().filter(|n| *n > 0);
        return Some(Gapless {
            priming,
            priming_scale: 0,
            valid,
            valid_scale: 0,
            source: "iTunSMPB",
        });
    }
    None
}

/// The first sound track's first non-empty edit: media time = priming (in the media
/// timescale), duration = length to play (in the movie timescale).
fn edit_list(moov: &[u8]) -> Option<Gapless> {
    let mvhd = child(moov, b"mvhd")?;
    let movie_scale = match mvhd.first()? {
        1 => be_u32(mvhd.get(20..)?)?,
        _ => be_u32(mvhd.get(12..)?)?,
    };
    for (kind, trak) in boxes(moov) {
        if &kind != b"trak" {
            continue;
        }
        let mdia = child(trak, b"mdia")?;
        let hdlr = child(mdia, b"hdlr")?;
        if hdlr.get(8..12) != Some(b"soun".as_slice()) {
            continue;
        }
        let mdhd = child(mdia, b"mdhd")?;
        let media_scale = match mdhd.first()? {
            1 => be_u32(mdhd.get(20..)?)?,
            _ => be_u32(mdhd.get(12..)?)?,
        };
        let elst = child(child(trak, b"edts")?, b"elst")?;
        let version = *elst.first()?;
        let count = be_u32(elst.get(4..)?)? as usize;
        let entry_len = if version == 1 { 20 } else { 12 };
        for i in 0..count.min(64) {
            let e = elst.get(8 + i * entry_len..8 + (i + 1) * entry_len)?;
            let (duration, media_time) = if version == 1 {
                (be_u64(e)?, be_u64(&e[8..])? as i64)
            } else {
                (be_u32(e)? as u64, be_u32(&e[4..])? as i32 as i64)
            };
            if media_time < 0 {
                continue; // an empty edit (a pause before the track)
            }
            if media_scale == 0 || movie_scale == 0 {
                return None;
            }
            return Some(Gapless {
                priming: media_time as u64,
                priming_scale: media_scale,
                valid: (duration > 0).then_some(duration),
                valid_scale: movie_scale,
                source: "edit list",
            });
        }
        return None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut v = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(kind);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn edit_list_priming_and_length_are_read() {
        let mut mvhd = vec![0u8; 100];
        mvhd[12..16].copy_from_slice(&1000u32.to_be_bytes());
        let mut mdhd = vec![0u8; 24];
        mdhd[12..16].copy_from_slice(&44100u32.to_be_bytes());
        let mut hdlr = vec![0u8; 24];
        hdlr[8..12].copy_from_slice(b"soun");
        let mut elst = vec![0u8, 0, 0, 0];
        elst.extend_from_slice(&1u32.to_be_bytes());
        elst.extend_from_slice(&2000u32.to_be_bytes()); // 2 s
        elst.extend_from_slice(&1024u32.to_be_bytes());
        elst.extend_from_slice(&0x10000u32.to_be_bytes());
        let mdia = [bx(b"mdhd", &mdhd), bx(b"hdlr", &hdlr)].concat();
        let trak = [bx(b"edts", &bx(b"elst", &elst)), bx(b"mdia", &mdia)].concat();
        let moov = [bx(b"mvhd", &mvhd), bx(b"trak", &trak)].concat();
        let file = [bx(b"ftyp", b"M4A \0\0\0\0"), bx(b"moov", &moov)].concat();
        let g = read_gapless(&mut std::io::Cursor::new(file)).expect("gapless");
        assert_eq!(g.frames(44100), (1024, Some(88200)));
    }

    #[test]
    fn not_mp4_is_none() {
        let mut c = std::io::Cursor::new(b"RIFF\0\0\0\0WAVEfmt ".to_vec());
        assert_eq!(read_gapless(&mut c), None);
    }
}
