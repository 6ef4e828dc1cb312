//! Encoder delay and padding of every codec in MP4/M4A/MOV (AAC, ALAC, MP3, Opus,
//! FLAC, PCM: the caller applies one rule to all), which symphonia 0.5's MP4 reader
//! ignores: every AAC encoder primes its output with silence (1024 frames from
//! ffmpeg, 2112 from Apple's), so without this every offset in an `.m4a` episode is late
//! by 128 ms at 8 kHz, 23 ms at 44.1 kHz.
//!
//! Two statements are read, as players do:
//! 1. the `iTunSMPB` tag (`moov/udta/meta/ilst/----`), Apple's and many encoders'
//!    "priming, padding, original length" in samples;
//! 2. the first audio track's edit list (`moov/trak/edts/elst`), whose non-empty edit
//!    starts at the priming (media time) and lasts the original length; it wins over
//!    `iTunSMPB` when it skips anything (a media time over 0: a cut file skips more than
//!    the priming), since it is what players play.
//!
//! Empty edits before it (media time -1, written by `ffmpeg -itsoffset` and muxers that
//! delay a track) are a pause before the audio: kept as silence ([`Gapless::delay`]),
//! or every offset would be early by the delay. An edit list this decoder cannot play
//! truly (two stretches of media, a media rate other than 1) is refused with the reason
//! ([`read_gapless`]'s error), never decoded as if it were not there.
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
    /// Silence before the audio (the edit list's empty edits), in `delay_scale` units.
    pub delay: u64,
    /// Timescale of `delay` (the movie's).
    pub delay_scale: u32,
    /// Where it came from, for the decode notes.
    pub source: &'static str,
}

/// Longest pause before the audio (empty edits) that is played as silence, in seconds.
/// Beyond it the file is refused: a hostile edit list could ask for days of silence.
pub const MAX_DELAY_S: u64 = 600;

impl Gapless {
    /// The pause before the audio in frames at `rate`.
    pub fn delay_frames(&self, rate: u32) -> u64 {
        scale(self.delay, self.delay_scale, rate)
    }

    /// (priming, valid) in frames at `rate`.
    pub fn frames(&self, rate: u32) -> (u64, Option<u64>) {
        (
            scale(self.priming, self.priming_scale, rate),
            self.valid.map(|v| scale(v, self.valid_scale, rate)),
        )
    }
}

/// `t` units of a `timescale` (0: already frames) in frames at `rate`, rounded.
fn scale(t: u64, timescale: u32, rate: u32) -> u64 {
    if timescale == 0 {
        t
    } else {
        let f = (t as u128 * rate as u128 + timescale as u128 / 2) / timescale as u128;
        u64::try_from(f).unwrap_or(u64::MAX)
    }
}

pub(super) fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

pub(super) fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// Iterates the boxes in `data`: (type, body).
pub(super) fn boxes(mut data: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
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

pub(super) fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes(data).find(|(k, _)| k == kind).map(|(_, b)| b)
}

/// What an MP4 source states about its gapless playback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statement {
    /// Not MP4 (no `ftyp` then `moov`), or it could not be read.
    NotMp4,
    /// MP4 with neither an edit list nor `iTunSMPB` (fragmented MP4, `ffmpeg
    /// -use_editlist 0`): the caller applies the codec's convention (AAC-LC: 1024).
    Unstated,
    /// MP4 whose edit list or `iTunSMPB` states it.
    Stated(Gapless),
}

/// The gapless statement of an MP4 whose `moov` [`find_moov`] read (`None`: not an MP4;
/// the decoder's checks of one file share that one read).
/// `Err` with the reason when its edit list asks for what this decoder cannot play
/// truly (two stretches of media, a rate other than 1, a pause over [`MAX_DELAY_S`]).
pub(super) fn gapless_of(moov: Option<&[u8]>) -> Result<Statement, String> {
    match moov {
        Some(moov) => from_moov(moov).map(|g| g.map_or(Statement::Unstated, Statement::Stated)),
        None => Ok(Statement::NotMp4),
    }
}

pub(super) fn find_moov<R: Read + Seek + ?Sized>(src: &mut R) -> Option<Vec<u8>> {
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

/// The first sound track's media timescale (`mdhd`) and its first sample duration
/// (`stts`), in that timescale, from the file's `moov`. An AAC frame lasts 1024 (or 960)
/// samples at its configured rate, so the two show whether the timescale is that rate
/// (or one the durations were written in) or a field that contradicts the rest.
pub(super) fn sound_timing(moov: &[u8]) -> Option<(u32, u32)> {
    boxes(moov).find_map(|(kind, trak)| {
        let mdia = child(trak, b"mdia").filter(|_| &kind == b"trak")?;
        if child(mdia, b"hdlr").and_then(|h| h.get(8..12)) != Some(b"soun".as_slice()) {
            return None;
        }
        let scale = child(mdia, b"mdhd").and_then(|m| match m.first()? {
            1 => be_u32(m.get(20..)?),
            _ => be_u32(m.get(12..)?),
        })?;
        let stts = child(child(child(mdia, b"minf")?, b"stbl")?, b"stts")?;
        let entries = be_u32(stts.get(4..)?)?;
        let delta = be_u32(stts.get(12..)?)?;
        (entries > 0).then_some((scale, delta))
    })
}

/// Where an MP4 file's top-level boxes end when bytes that are no box follow them (a
/// tag or junk appended after the last box, which symphonia's reader takes for a box
/// running past the end and refuses the whole file over). `None` when the boxes run to
/// the end of the source (or past it: a file cut short stays refused), the source is not
/// MP4, or no `moov` and `mdat` were seen before the junk.
pub fn boxes_end<R: Read + Seek + ?Sized>(src: &mut R) -> Option<u64> {
    let found = walk_top_level(src);
    let _ = src.seek(SeekFrom::Start(0));
    found
}

fn walk_top_level<R: Read + Seek + ?Sized>(src: &mut R) -> Option<u64> {
    let len = src.seek(SeekFrom::End(0)).ok()?;
    let mut pos = 0u64;
    let (mut moov, mut mdat, mut fragmented) = (false, false, false);
    while pos < len {
        let (kind, size, is_box) = box_head(src, pos, len)?;
        if pos == 0 && &kind != b"ftyp" {
            return None;
        }
        if !is_box {
            // Whole `moov` and `mdat` before it: every sample the tables name is there
            // (the decoded length is checked against the declared one all the same). A
            // media box cut short, or a fragmented file (more media in `moof`s), is left
            // to the reader, which refuses it.
            let media_cut = matches!(&kind, b"mdat" | b"moof" | b"moov");
            return (moov && mdat && !fragmented && !media_cut).then_some(pos);
        }
        moov |= &kind == b"moov";
        mdat |= &kind == b"mdat";
        fragmented |= &kind == b"moof";
        pos += size;
    }
    None
}

/// Why an MP4 file is cut short, if it is: a media or table box (`mdat`, `moov`, `moof`)
/// declaring more bytes than the file holds after it, or top-level boxes that end
/// cleanly without a `moov` (an encoder writing it last was stopped, or the file was cut
/// before it). The reader refused both as "not an audio file ... end of stream" (outside
/// 18l M3), which says the wrong thing: the file is an MP4 whose end is missing, and an
/// operator should fetch or encode it again. `None` for a whole file, one with junk
/// after its boxes ([`boxes_end`]), or one that is not MP4. Rewinds.
pub fn cut_short<R: Read + Seek + ?Sized>(src: &mut R) -> Option<String> {
    let found = (|| {
        let len = src.seek(SeekFrom::End(0)).ok()?;
        let mut pos = 0u64;
        let mut moov = false;
        while pos < len {
            let (kind, size, is_box) = box_head(src, pos, len)?;
            if pos == 0 && &kind != b"ftyp" {
                return None;
            }
            let media = matches!(&kind, b"mdat" | b"moov" | b"moof");
            if !is_box {
                let past_end = size >= 8 && pos.checked_add(size).is_none_or(|end| end > len);
                return (media && past_end).then(|| {
                    format!(
                        "its MP4 `{}` box at byte {pos} declares {size} bytes, but the file ends {} bytes into it ({} bytes missing): the file is cut short",
                        String::from_utf8_lossy(&kind),
                        len - pos,
                        size - (len - pos)
                    )
                });
            }
            moov |= &kind == b"moov";
            pos += size;
        }
        (pos > 0 && !moov).then(|| {
            format!(
                "its MP4 boxes end at byte {len} without a `moov` box (the sample tables an encoder writes last): the file is cut short, or its encoder never finished"
            )
        })
    })();
    let _ = src.seek(SeekFrom::Start(0));
    found
}

/// The top-level box header at `pos` of a source `len` bytes long: its kind, its size,
/// and whether it is a whole box (printable kind, at least its header, ending within the
/// source).
fn box_head<R: Read + Seek + ?Sized>(
    src: &mut R,
    pos: u64,
    len: u64,
) -> Option<([u8; 4], u64, bool)> {
    let mut head = [0u8; 16];
    src.seek(SeekFrom::Start(pos)).ok()?;
    let got = src.read(&mut head[..8]).ok()?;
    let kind: [u8; 4] = head[4..8].try_into().ok()?;
    let size = match be_u32(&head)? {
        1 if got == 8 && src.read_exact(&mut head[8..16]).is_ok() => be_u64(&head[8..])?,
        0 if got == 8 => len - pos, // "to the end of the file"
        n => u64::from(n),
    };
    let is_box = got == 8
        && kind.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
        && size >= 8
        && pos.checked_add(size).is_some_and(|end| end <= len);
    Some((kind, size, is_box))
}

/// Where a second MP4 file starts among an MP4's top-level boxes (an `ftyp` box after
/// the first: `cat a.m4a b.m4a`), if one does; rewinds. The reader would play the first
/// file's tables over both files' bytes (it failed as "unsupported feature: aac:
/// coupling channel element"), and the second file would never be examined.
pub fn second_file<R: Read + Seek + ?Sized>(src: &mut R) -> Option<u64> {
    let found = (|| {
        let len = src.seek(SeekFrom::End(0)).ok()?;
        let mut pos = 0u64;
        while pos < len {
            let (kind, size, is_box) = box_head(src, pos, len)?;
            if !is_box || (pos == 0 && &kind != b"ftyp") {
                return None;
            }
            if pos > 0 && &kind == b"ftyp" {
                return Some(pos);
            }
            pos += size;
        }
        None
    })();
    let _ = src.seek(SeekFrom::Start(0));
    found
}

fn from_moov(moov: &[u8]) -> Result<Option<Gapless>, String> {
    let edits = edit_list(moov)?;
    let smpb = itunsmpb(moov);
    Ok(match (edits, smpb) {
        // The edit list skips something: it is what is played (a cut file skips more
        // than the priming iTunSMPB states).
        (Some(e), _) if e.priming > 0 => Some(e),
        // An edit list from media time 0 (older iTunes files) leaves the priming to
        // iTunSMPB; its pause before the audio still holds.
        (Some(e), Some(s)) => Some(Gapless {
            delay: e.delay,
            delay_scale: e.delay_scale,
            ..s
        }),
        (e, s) => e.or(s),
    })
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
            delay: 0,
            delay_scale: 0,
            source: "iTunSMPB",
        });
    }
    None
}

/// The first sound track's edit list: its empty edits before the audio (a pause, in
/// the movie timescale) and its one edit of media: media time = priming (in the media
/// timescale), duration = length to play (in the movie timescale). `Ok(None)` without
/// an edit list; `Err` for one that cannot be played truly by dropping and padding.
fn edit_list(moov: &[u8]) -> Result<Option<Gapless>, String> {
    let Some(mvhd) = child(moov, b"mvhd") else {
        return Ok(None);
    };
    let version = |b: &[u8]| -> Option<u32> {
        match b.first()? {
            1 => be_u32(b.get(20..)?),
            _ => be_u32(b.get(12..)?),
        }
    };
    let Some(movie_scale) = version(mvhd) else {
        return Ok(None);
    };
    for (kind, trak) in boxes(moov) {
        if &kind != b"trak" {
            continue;
        }
        let Some(mdia) = child(trak, b"mdia") else {
            continue;
        };
        let is_sound = child(mdia, b"hdlr").and_then(|h| h.get(8..12)) == Some(b"soun".as_slice());
        if !is_sound {
            continue;
        }
        let Some(media_scale) = child(mdia, b"mdhd").and_then(version) else {
            return Ok(None);
        };
        let Some(elst) = child(trak, b"edts").and_then(|e| child(e, b"elst")) else {
            return Ok(None);
        };
        if media_scale == 0 || movie_scale == 0 {
            return Ok(None);
        }
        return edits(elst, movie_scale, media_scale);
    }
    Ok(None)
}

/// Most edits read from one edit list.
const MAX_EDITS: usize = 64;

/// Reads an `elst` body (see [`edit_list`]).
fn edits(elst: &[u8], movie_scale: u32, media_scale: u32) -> Result<Option<Gapless>, String> {
    let Some((&version, count)) = elst.first().zip(be_u32(elst.get(4..).unwrap_or_default()))
    else {
        return Ok(None);
    };
    let count = count as usize;
    if count > MAX_EDITS {
        return Err(format!(
            "its MP4 edit list has {count} edits (over {MAX_EDITS}): an edited presentation this decoder does not play"
        ));
    }
    let entry_len = if version == 1 { 20 } else { 12 };
    let mut delay = 0u64;
    let mut media: Option<(u64, u64)> = None;
    for i in 0..count {
        let Some(e) = elst.get(8 + i * entry_len..8 + (i + 1) * entry_len) else {
            return Ok(None);
        };
        let parsed = if version == 1 {
            be_u64(e)
                .zip(be_u64(&e[8..]))
                .zip(be_u32(&e[16..]))
                .map(|((d, t), r)| (d, t as i64, r))
        } else {
            be_u32(e)
                .zip(be_u32(&e[4..]))
                .zip(be_u32(&e[8..]))
                .map(|((d, t), r)| (u64::from(d), i64::from(t as i32), r))
        };
        let Some((duration, media_time, rate)) = parsed else {
            return Ok(None);
        };
        if media_time == -1 {
            // An empty edit: silence. Before the media it delays the audio; after it, it
            // only lengthens the presentation past the audio.
            if media.is_none() {
                delay = delay.saturating_add(duration);
            }
            continue;
        }
        if media_time < 0 {
            return Err(format!(
                "its MP4 edit list has an edit at media time {media_time} (only -1, a pause, is defined): a damaged or unknown presentation"
            ));
        }
        if media.is_some() {
            return Err(format!(
                "its MP4 edit list plays {} stretches of the media (edit {} starts at media time {media_time}): an edited presentation this decoder does not play, so offsets would be wrong",
                count,
                i + 1
            ));
        }
        if rate != 0x0001_0000 {
            return Err(format!(
                "its MP4 edit list plays the media at rate {:.3} (0 holds a frame): a presentation this decoder does not play, so offsets would be wrong",
                f64::from(rate as i32) / 65536.0
            ));
        }
        media = Some((duration, media_time as u64));
    }
    let Some((duration, media_time)) = media else {
        return Ok(None);
    };
    if delay / u64::from(movie_scale) > MAX_DELAY_S {
        return Err(format!(
            "its MP4 edit list starts the audio after a pause of {} s (empty edits), over the {MAX_DELAY_S} s played as silence",
            delay / u64::from(movie_scale)
        ));
    }
    Ok(Some(Gapless {
        priming: media_time,
        priming_scale: media_scale,
        valid: (duration > 0).then_some(duration),
        valid_scale: movie_scale,
        delay,
        delay_scale: movie_scale,
        source: "edit list",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_gapless<R: Read + Seek + ?Sized>(src: &mut R) -> Result<Statement, String> {
        let moov = find_moov(src);
        let _ = src.seek(SeekFrom::Start(0));
        gapless_of(moov.as_deref())
    }

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
        let Ok(Statement::Stated(g)) = read_gapless(&mut std::io::Cursor::new(file)) else {
            panic!("an edit list must be read");
        };
        assert_eq!(g.frames(44100), (1024, Some(88200)));
        assert_eq!(g.delay_frames(44100), 0);
    }

    #[test]
    fn junk_after_the_last_box_is_found_and_a_cut_box_is_not_junk() {
        let whole = [
            bx(b"ftyp", b"M4A \0\0\0\0"),
            bx(b"mdat", &[1u8; 100]),
            bx(b"moov", &[2u8; 50]),
        ]
        .concat();
        let end = whole.len() as u64;
        let with_junk = [whole.clone(), b"TAG junk".to_vec(), vec![0u8; 64]].concat();
        assert_eq!(boxes_end(&mut std::io::Cursor::new(with_junk)), Some(end));
        assert_eq!(boxes_end(&mut std::io::Cursor::new(whole.clone())), None);
        // The mdat cut short: refused by the reader, never cut to the boxes before it.
        let cut = [
            bx(b"ftyp", b"M4A \0\0\0\0"),
            bx(b"moov", &[2u8; 50]),
            bx(b"mdat", &[1u8; 100]),
        ]
        .concat();
        let cut = cut[..cut.len() - 30].to_vec();
        assert_eq!(boxes_end(&mut std::io::Cursor::new(cut)), None);
    }

    #[test]
    fn not_mp4_is_none() {
        let mut c = std::io::Cursor::new(b"RIFF\0\0\0\0WAVEfmt ".to_vec());
        assert_eq!(read_gapless(&mut c), Ok(Statement::NotMp4));
    }
}
