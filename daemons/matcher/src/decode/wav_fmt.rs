//! A PCM WAV whose `fmt` fields contradict each other: one corrupt field (a block align
//! of 8 where 16-bit stereo needs 4, a sample rate of 48000 with the byte rate of
//! 44.1 kHz, one channel with the block align of two). The reader trusts the block
//! align and the sample rate and reads garbage of the wrong length: a 120 s episode
//! came out as 60 s (or 26 ms) with every clip stored "not found", and its frame count
//! agreed with what it decoded, so no length check caught it. For PCM, float, A-law and
//! mu-law every field is determined by the others (block align = channels x bytes per
//! sample, byte rate = rate x block align); a file breaking that is refused naming the
//! fields. ADPCM and other codecs have their own block sizes and are not checked here.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

/// Chunks walked before `fmt ` is given up on (a real file has it first or second).
const MAX_CHUNKS: usize = 64;

/// `Err` naming the contradicting fields when the source is a WAV whose `fmt` chunk
/// describes PCM-like audio (PCM, IEEE float, A-law, mu-law, or those in
/// WAVE_FORMAT_EXTENSIBLE) with a block align or byte rate the other fields deny.
/// The `Err` holds the sample rate the chunk declares, so the caller can refuse an
/// absurd rate as that first (the byte rate of a rate of 5 Hz contradicts it too).
/// Rewinds the source.
pub(super) fn check_fmt(source: &mut Box<dyn MediaSource>) -> Result<(), (u32, String)> {
    let fmt = read_fmt(source);
    let _ = source.seek(SeekFrom::Start(0));
    match fmt.and_then(|f| f.contradiction().map(|why| (f.rate, why))) {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// The codec a WAV's `fmt ` chunk names when symphonia's WAV reader does not decode it
/// (it decodes PCM, IEEE float, A-law, mu-law and MS/IMA ADPCM): the reader refused it
/// as "unsupported wave format", which reached an operator as "not an audio file" with
/// the codec unnamed (MP3 in WAV, GSM 6.10, G.726). `None` for any other source.
/// Rewinds the source.
pub(super) fn unsupported_codec(source: &mut Box<dyn MediaSource>) -> Option<String> {
    let fmt = read_fmt(source);
    let _ = source.seek(SeekFrom::Start(0));
    let f = fmt?;
    let tag = if f.tag == EXTENSIBLE {
        f.sub_tag?
    } else {
        f.tag
    };
    if [PCM, MS_ADPCM, FLOAT, ALAW, MULAW, IMA_ADPCM].contains(&tag) {
        return None;
    }
    Some(format!("{} in WAV (format tag 0x{tag:04x})", tag_name(tag)))
}

/// The codec a WAV format tag names (Microsoft's registered tags most often met).
fn tag_name(tag: u16) -> &'static str {
    match tag {
        0x0050 => "MPEG-1 audio (Layer I/II)",
        0x0055 => "MP3",
        0x0031 => "GSM 6.10",
        0x0040 | 0x0045 | 0x0064 => "G.721/G.726 ADPCM",
        0x0022 => "DSP Group TrueSpeech",
        0x0161..=0x0163 => "WMA",
        0x0092 | 0x2000 => "AC-3",
        0x2001 => "DTS",
        0x00ff | 0x1600 | 0x1610 | 0x4143 => "AAC",
        0x6750 | 0x674f => "Vorbis",
        0x704f => "Opus",
        0xf1ac => "FLAC",
        _ => "an unknown codec",
    }
}

/// The fields of a `fmt ` chunk this check needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fmt {
    tag: u16,
    channels: u16,
    rate: u32,
    byte_rate: u32,
    block_align: u16,
    bits: u16,
    /// The sub-format's tag for WAVE_FORMAT_EXTENSIBLE (its GUID's first two bytes).
    sub_tag: Option<u16>,
}

const PCM: u16 = 1;
const MS_ADPCM: u16 = 2;
const FLOAT: u16 = 3;
const ALAW: u16 = 6;
const MULAW: u16 = 7;
const IMA_ADPCM: u16 = 0x11;
const EXTENSIBLE: u16 = 0xfffe;

impl Fmt {
    /// Why the fields cannot all be true, if they cannot.
    fn contradiction(&self) -> Option<String> {
        let tag = if self.tag == EXTENSIBLE {
            self.sub_tag?
        } else {
            self.tag
        };
        if ![PCM, FLOAT, ALAW, MULAW].contains(&tag) || self.channels == 0 || self.bits == 0 {
            return None; // another codec, or a header the reader refuses itself
        }
        let align = u32::from(self.channels) * u32::from(self.bits).div_ceil(8);
        if u32::from(self.block_align) != align {
            return Some(format!(
                "its `fmt` chunk contradicts itself: block align {} where {} channel(s) of {} bits need {align} (a corrupt header field: the audio would be read as garbage of the wrong length)",
                self.block_align, self.channels, self.bits
            ));
        }
        let byte_rate = u64::from(self.rate) * u64::from(self.block_align);
        if u64::from(self.byte_rate) != byte_rate {
            return Some(format!(
                "its `fmt` chunk contradicts itself: byte rate {} where a sample rate of {} Hz with block align {} needs {byte_rate} (a corrupt sample rate or byte rate: every offset would be wrong)",
                self.byte_rate, self.rate, self.block_align
            ));
        }
        None
    }
}

/// The `fmt ` chunk of a RIFF/WAVE source, if it is one and has one.
fn read_fmt(source: &mut Box<dyn MediaSource>) -> Option<Fmt> {
    let mut head = [0u8; 12];
    source.seek(SeekFrom::Start(0)).ok()?;
    source.read_exact(&mut head).ok()?;
    if &head[..4] != b"RIFF" || &head[8..12] != b"WAVE" {
        return None;
    }
    let mut at = 12u64;
    for _ in 0..MAX_CHUNKS {
        let mut h = [0u8; 8];
        source.seek(SeekFrom::Start(at)).ok()?;
        source.read_exact(&mut h).ok()?;
        let size = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
        if &h[..4] == b"fmt " {
            let mut b = [0u8; 26];
            let n = size.min(26) as usize;
            source.read_exact(&mut b[..n]).ok()?;
            return parse(&b[..n]);
        }
        if &h[..4] == b"data" {
            return None;
        }
        at += 8 + size + (size & 1);
    }
    None
}

/// The fields of a `fmt ` chunk's body (at least 16 bytes).
fn parse(b: &[u8]) -> Option<Fmt> {
    let u16_at = |i: usize| Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?));
    let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let tag = u16_at(0)?;
    Some(Fmt {
        tag,
        channels: u16_at(2)?,
        rate: u32_at(4)?,
        byte_rate: u32_at(8)?,
        block_align: u16_at(12)?,
        bits: u16_at(14)?,
        sub_tag: if tag == EXTENSIBLE { u16_at(24) } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(tag: u16, channels: u16, rate: u32, byte_rate: u32, align: u16, bits: u16) -> Fmt {
        Fmt {
            tag,
            channels,
            rate,
            byte_rate,
            block_align: align,
            bits,
            sub_tag: None,
        }
    }

    #[test]
    fn pcm_fields_must_agree_and_other_codecs_are_left_alone() {
        assert_eq!(fmt(PCM, 2, 44100, 176400, 4, 16).contradiction(), None);
        assert_eq!(fmt(PCM, 2, 48000, 288000, 6, 24).contradiction(), None);
        assert_eq!(fmt(PCM, 1, 8000, 8000, 1, 8).contradiction(), None);
        for bad in [
            fmt(PCM, 2, 44100, 176400, 8, 16),
            fmt(PCM, 1, 44100, 176400, 4, 16),
            fmt(PCM, 2, 44100, 176400, 4, 8),
            fmt(PCM, 2, 48000, 176400, 4, 16),
        ] {
            assert!(bad.contradiction().is_some(), "{bad:?}");
        }
        // MS ADPCM: a block of many samples.
        assert_eq!(fmt(2, 1, 8000, 4096, 256, 4).contradiction(), None);
    }
}
