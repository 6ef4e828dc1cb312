//! Decoding audio files/streams to mono f32 at [`ANALYSIS_RATE`].
//!
//! Uses symphonia (MP3, AAC and ALAC in MP4/M4A, Ogg Vorbis, FLAC, WAV/PCM), mixes
//! *all* channels to mono (plain average; a stereo block whose channels are in
//! opposite phase, so the average cancels, is taken as its side signal), resamples with rubato's FFT resampler
//! (its delay is compensated, so sample 0 of the output is time 0 of the input) and
//! low-passes the result to the analysis band ([`ANALYSIS_BAND_HZ`]) so a signal means
//! the same whatever rate and encoder it came from.
//!
//! Every container's encoder delay and padding are removed, so an offset means the
//! same thing whatever the episode was encoded with:
//! - MP3: the LAME/Xing tag (symphonia's gapless mode; without it a LAME MP3 comes out
//!   ~25 ms late);
//! - Ogg Vorbis: the granule positions (symphonia's gapless mode);
//! - every codec in MP4 (AAC, ALAC, MP3, Opus, FLAC, PCM): the `iTunSMPB` tag or the
//!   edit list ([`mp4`]), which symphonia 0.5 ignores (AAC came out 1024 frames late:
//!   128 ms at 8 kHz; MP3 in MP4, whose delay only the edit list declares, 25 ms);
//! - raw ADTS AAC, and AAC in an MP4 stating neither (fragmented MP4): AAC-LC's
//!   conventional 1024 priming samples;
//! - joined MP3 files: each part's own LAME tag ([`mp3::segments`]);
//! - FLAC and WAV have none.
//!
//! **All or nothing.** An episode is researched only when all of it decoded, because a
//! stored "not found" must mean "not in the audio", never "not in the part we read":
//! - a stream whose sample rate (or channel count) changes midway is decoded whole, each
//!   segment resampled on its own and joined end to end;
//! - a packet that does not decode is replaced by silence of its length (so later
//!   offsets stay true) and noted; more than [`MAX_LOST_S`] of it is a
//!   [`DecodeError::Incomplete`];
//! - a stream that breaks midway, or that decodes to less than the duration its
//!   container declares (beyond [`duration_tolerance_s`]), is a
//!   [`DecodeError::Incomplete`] naming what was decoded and what was expected;
//! - an Ogg page or FLAC frame that starts later (or earlier) than the one before it ended (pages or
//!   frames cut out midway) is incomplete ([`continuity`]);
//! - a body whose container declares no length is checked at its end ([`tail`]): a last
//!   Ogg page without the end-of-stream flag or a last frame cut short is incomplete;
//! - an ID3v2 tag claiming more bytes than it holds (audio frames inside it) is refused
//!   ([`id3`]): the start of the audio would be skipped;
//! - a WAV whose RIFF holds audio after its `data` chunk's declared end (a second
//!   `data` chunk, a stale size) is refused ([`wav`]);
//! - a fragmented MP4 whose fragment starts later (or earlier) than the ones before it
//!   end (a fragment cut out or repeated midway) is incomplete ([`fragments`]);
//! - an MP3 whose valid LAME tag's CRC of the music does not match the body (frames
//!   lost and others repeated, the count unchanged) is incomplete ([`lame_crc`]);
//! - an MP4 whose `mdhd` timescale contradicts its AAC configuration's rate (its sample
//!   durations are AAC frames at that rate) is refused: the edit list would be read in
//!   the wrong unit;
//! - a FLAC whose STREAMINFO contradicts its frame headers is named as corrupt
//!   ([`flac_head`]), not "not an audio file";
//! - an MP4 sample table counting more entries than its box holds is refused before
//!   the reader allocates for them ([`tables`]), and so is any other header length
//!   that sizes an allocation (an ALAC cookie's frame length, a FLAC comment or picture
//!   length: [`lengths`]); an ID3v2 frame overrunning its tag has the tag skipped;
//! - an MP3 frame reaching back for more main data than the frames before it left free
//!   (a bit reservoir underflow after a stream's first frame: frames cut out or
//!   repeated midway) is incomplete ([`reservoir`]);
//! - an MP3 holding other frames than its Xing/LAME header declares (data inserted
//!   midway) is incomplete: every offset after the insertion would be wrong.

mod band;
pub mod container;
mod continuity;
mod flac_head;
mod fragments;
pub mod guard;
mod id3;
mod lame_crc;
mod lengths;
mod mp3;
mod mp4;
mod opus;
mod resample;
mod reservoir;
mod tables;
mod tail;
mod walk;
mod wav;
mod wav_fmt;

pub use band::ANALYSIS_BAND_HZ;

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};
use symphonia::core::audio::{AudioBufferRef, SampleBuffer, Signal};
use symphonia::core::codecs::{self as sc, CodecType, Decoder, DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::{FormatOptions, Packet};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use crate::ANALYSIS_RATE;
use resample::MonoResampler;

pub use symphonia::core::io::MediaSource as Source;

/// Lowest accepted source sample rate (Hz).
pub const MIN_SOURCE_RATE: u32 = 1000;
/// Lowest sample rate (Hz) whose audio holds the whole analysis band
/// ([`ANALYSIS_BAND_HZ`], twice it by Nyquist): below it the band's top is missing, the
/// whitened clip weighs it as much as the rest, and a clip plainly there was "not
/// found" (every clip in a 4 kHz episode). Such a stream is refused
/// ([`DecodeError::RateBelowBand`]), never matched to a silent "not found".
pub const MIN_MATCH_RATE: u32 = ANALYSIS_BAND_HZ as u32 * 2;
/// Highest accepted source sample rate (Hz).
pub const MAX_SOURCE_RATE: u32 = 768_000;
/// Most audio (seconds, in total) that may be replaced by silence because its packets
/// did not decode before the whole decode is refused. A few damaged frames in a long
/// episode cannot hide a clip; more means the file is broken.
pub const MAX_LOST_S: f64 = 0.5;

/// Longest audio decoded by default ([`DecodeLimits::max_duration_s`]): 12 hours, far
/// past any podcast episode, and about 1.4 GB of analysis samples at its end.
pub const MAX_DURATION_S: f64 = 12.0 * 3600.0;

/// Bounds on what one decode may produce. `max_bytes` bounds a download, not what it
/// decodes to: a 64 kB FLAC of constant frames decoded to 10 hours (1.5 GB), a 261 kB
/// one to 40 hours (an 8.6 GB allocation that aborted the process, every job in it),
/// so the decoded duration is capped too, for every codec: checked against what the
/// container declares before decoding, and against what has decoded as it goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeLimits {
    /// Longest audio accepted, in seconds; longer is [`DecodeError::TooLong`].
    pub max_duration_s: f64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_duration_s: MAX_DURATION_S,
        }
    }
}

/// How far the decoded duration may fall short of the container's before the decode is
/// [`DecodeError::Incomplete`]: 100 ms plus 0.1 % (a frame of rounding, never a clip).
pub fn duration_tolerance_s(expected_s: f64) -> f64 {
    0.1 + expected_s * 0.001
}

/// Decoded audio: mono f32 samples at [`ANALYSIS_RATE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecodedAudio {
    /// Mono samples at [`ANALYSIS_RATE`] (all source channels averaged).
    pub samples: Vec<f32>,
    /// Sample rate of the source stream (Hz); its first segment's when it changes.
    pub source_rate: u32,
    /// Number of channels in the source stream.
    pub channels: u16,
    /// Duration of the decoded audio in seconds.
    pub duration_s: f64,
    /// The duration the container declares (after encoder delay and padding), if any.
    #[serde(default)]
    pub expected_duration_s: Option<f64>,
    /// The source rate of each segment, in order (one entry unless the rate changes).
    #[serde(default)]
    pub segment_rates: Vec<u32>,
    /// Non-fatal notes (a rate change, a few damaged packets replaced by silence, a
    /// stream longer than its header says).
    pub warnings: Vec<String>,
}

/// Why a file or stream could not be decoded. Every variant keeps the input's name.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Serialize, Deserialize)]
pub enum DecodeError {
    /// The file could not be opened or read.
    #[error("{input}: cannot read: {reason}")]
    Io {
        /// Offending input (path or label).
        input: String,
        /// Underlying error text.
        reason: String,
    },
    /// No known container/format or no audio track: not an audio file.
    #[error("{input}: not an audio file (no supported container or audio track): {reason}")]
    NotAudio {
        /// Offending input.
        input: String,
        /// Underlying error text.
        reason: String,
    },
    /// The container is known but the codec is not supported; the reason names it.
    #[error("{input}: unsupported codec: {reason}")]
    UnsupportedCodec {
        /// Offending input.
        input: String,
        /// The codec's name and what is supported.
        reason: String,
    },
    /// The stream is corrupt or truncated before any audio decoded.
    #[error("{input}: corrupt or truncated stream: {reason}")]
    Corrupt {
        /// Offending input.
        input: String,
        /// Underlying error text.
        reason: String,
    },
    /// Only part of the audio decoded: the stream broke midway, too many packets were
    /// lost, or it is shorter than its container declares. Nothing is researched.
    #[error("{input}: incomplete: decoded {decoded_s:.3} s{expected}: {reason}; an episode is researched only when all of it decodes", expected = match .expected_s { Some(e) => format!(" of the {e:.3} s the container declares"), None => String::new() })]
    Incomplete {
        /// Offending input.
        input: String,
        /// Seconds decoded (from the start).
        decoded_s: f64,
        /// Seconds the container declares, if it does.
        expected_s: Option<f64>,
        /// What went wrong.
        reason: String,
    },
    /// The container lays the audio out in a way this decoder cannot play truly (an MP4
    /// edit list with two stretches of media): refused, since offsets would be wrong.
    #[error("{input}: not decoded: {reason}")]
    Unsupported {
        /// Offending input.
        input: String,
        /// What is laid out, and why it cannot be played truly.
        reason: String,
    },
    /// The audio is longer than [`DecodeLimits::max_duration_s`] (declared by its
    /// container, or decoded so far): refused before it exhausts memory.
    #[error("{input}: too long: {what} {duration_s:.3} s, over the {max_s:.0} s ({hours:.1} h) this decoder accepts (a decompression bomb, or an episode longer than any podcast: the limit bounds the memory a decode takes)", hours = .max_s / 3600.0)]
    TooLong {
        /// Offending input.
        input: String,
        /// "its container declares" or "it decoded to more than".
        what: String,
        /// The declared or decoded duration.
        duration_s: f64,
        /// The limit.
        max_s: f64,
    },
    /// The stream decoded to zero samples.
    #[error("{input}: stream contains no audio samples")]
    Empty {
        /// Offending input.
        input: String,
    },
    /// The sample rate is too low to hold the analysis band ([`MIN_MATCH_RATE`]).
    #[error("{input}: sample rate {rate} Hz is below the {min} Hz the matcher needs: it compares audio up to {band} Hz, which a stream at {rate} Hz does not hold, so every clip would be \"not found\"; encode it at {min} Hz or more (8000 Hz is enough)", min = MIN_MATCH_RATE, band = ANALYSIS_BAND_HZ)]
    RateBelowBand {
        /// Offending input.
        input: String,
        /// The stream's rate.
        rate: u32,
    },
    /// The sample rate is missing or outside [`MIN_SOURCE_RATE`]..=[`MAX_SOURCE_RATE`].
    #[error("{input}: absurd or missing sample rate {rate:?} Hz")]
    AbsurdSampleRate {
        /// Offending input.
        input: String,
        /// Declared rate, if any.
        rate: Option<u32>,
    },
}

impl DecodeError {
    /// The same error naming `input` instead (the URL a user knows, not a local file).
    pub fn relabel(self, label: &str) -> DecodeError {
        let input = label.to_string();
        match self {
            DecodeError::Io { reason, .. } => DecodeError::Io { input, reason },
            DecodeError::NotAudio { reason, .. } => DecodeError::NotAudio { input, reason },
            DecodeError::UnsupportedCodec { reason, .. } => {
                DecodeError::UnsupportedCodec { input, reason }
            }
            DecodeError::Corrupt { reason, .. } => DecodeError::Corrupt { input, reason },
            DecodeError::Incomplete {
                decoded_s,
                expected_s,
                reason,
                ..
            } => DecodeError::Incomplete {
                input,
                decoded_s,
                expected_s,
                reason,
            },
            DecodeError::Unsupported { reason, .. } => DecodeError::Unsupported { input, reason },
            DecodeError::Empty { .. } => DecodeError::Empty { input },
            DecodeError::TooLong {
                what,
                duration_s,
                max_s,
                ..
            } => DecodeError::TooLong {
                input,
                what,
                duration_s,
                max_s,
            },
            DecodeError::AbsurdSampleRate { rate, .. } => {
                DecodeError::AbsurdSampleRate { input, rate }
            }
            DecodeError::RateBelowBand { rate, .. } => DecodeError::RateBelowBand { input, rate },
        }
    }
}

/// PCM codecs: their container (WAV, AIFF) declares the exact frame count.
const PCM_CODECS: &[CodecType] = &[
    sc::CODEC_TYPE_PCM_S8,
    sc::CODEC_TYPE_PCM_U8,
    sc::CODEC_TYPE_PCM_S16LE,
    sc::CODEC_TYPE_PCM_S16BE,
    sc::CODEC_TYPE_PCM_U16LE,
    sc::CODEC_TYPE_PCM_U16BE,
    sc::CODEC_TYPE_PCM_S24LE,
    sc::CODEC_TYPE_PCM_S24BE,
    sc::CODEC_TYPE_PCM_U24LE,
    sc::CODEC_TYPE_PCM_U24BE,
    sc::CODEC_TYPE_PCM_S32LE,
    sc::CODEC_TYPE_PCM_S32BE,
    sc::CODEC_TYPE_PCM_U32LE,
    sc::CODEC_TYPE_PCM_U32BE,
    sc::CODEC_TYPE_PCM_F32LE,
    sc::CODEC_TYPE_PCM_F32BE,
    sc::CODEC_TYPE_PCM_F64LE,
    sc::CODEC_TYPE_PCM_F64BE,
    sc::CODEC_TYPE_PCM_ALAW,
    sc::CODEC_TYPE_PCM_MULAW,
];

/// ADPCM codecs: their WAV declares the exact frame count too (`fact`, or the blocks).
const ADPCM_CODECS: &[CodecType] = &[sc::CODEC_TYPE_ADPCM_MS, sc::CODEC_TYPE_ADPCM_IMA_WAV];

/// Codecs this build decodes, for error messages.
pub const SUPPORTED_CODECS: &str = "MP3, AAC-LC, ALAC, Vorbis, Opus, FLAC, PCM, ADPCM";

/// A codec's name for an operator ("Opus", "ALAC", ...), from symphonia's type.
pub fn codec_name(codec: CodecType) -> String {
    let name = match codec {
        sc::CODEC_TYPE_OPUS => "Opus",
        sc::CODEC_TYPE_ALAC => "ALAC",
        sc::CODEC_TYPE_AAC => "AAC",
        sc::CODEC_TYPE_MP1 => "MPEG-1 Layer I",
        sc::CODEC_TYPE_MP2 => "MPEG-1 Layer II",
        sc::CODEC_TYPE_MP3 => "MP3",
        sc::CODEC_TYPE_VORBIS => "Vorbis",
        sc::CODEC_TYPE_FLAC => "FLAC",
        sc::CODEC_TYPE_SPEEX => "Speex",
        sc::CODEC_TYPE_WAVPACK => "WavPack",
        sc::CODEC_TYPE_MONKEYS_AUDIO => "Monkey's Audio",
        sc::CODEC_TYPE_TTA => "TTA",
        sc::CODEC_TYPE_MUSEPACK => "Musepack",
        sc::CODEC_TYPE_EAC3 => "E-AC-3",
        sc::CODEC_TYPE_DCA => "DTS",
        sc::CODEC_TYPE_ATRAC1 | sc::CODEC_TYPE_ATRAC3 | sc::CODEC_TYPE_ATRAC3PLUS => "ATRAC",
        sc::CODEC_TYPE_ATRAC9 => "ATRAC9",
        other => return format!("codec {other}"),
    };
    name.to_string()
}

/// The reason an audio track's codec is refused: its name and what is supported. For a
/// codec this build does decode (a 5.1 AAC-LC track), what is really refused: the form
/// of it (its channel count), never "AAC is not supported (this build decodes AAC-LC)".
pub fn unsupported_reason(params: &sc::CodecParameters, detail: &str) -> String {
    let name = codec_name(params.codec);
    let decoded = [
        sc::CODEC_TYPE_AAC,
        sc::CODEC_TYPE_MP3,
        sc::CODEC_TYPE_ALAC,
        sc::CODEC_TYPE_VORBIS,
        sc::CODEC_TYPE_FLAC,
    ];
    if decoded.contains(&params.codec) {
        let channels = params
            .channels
            .map(|c| c.count())
            .or_else(|| params.channel_layout.map(|l| l.into_channels().count()));
        let form = match channels {
            Some(n) if n > 2 => format!("with {n} channels"),
            _ => "in this form".to_string(),
        };
        return format!(
            "{name} {form} is not supported (this build decodes {name} in mono or stereo): {detail}"
        );
    }
    format!("{name} is not supported (this build decodes {SUPPORTED_CODECS}): {detail}")
}

/// Decodes a file (the extension is used as a format hint).
pub fn decode_file(path: &Path) -> Result<DecodedAudio, DecodeError> {
    decode_file_with(path, &DecodeLimits::default())
}

/// [`decode_file`] under `limits`.
pub fn decode_file_with(path: &Path, limits: &DecodeLimits) -> Result<DecodedAudio, DecodeError> {
    let input = path.display().to_string();
    let file = File::open(path).map_err(|e| DecodeError::Io {
        input: input.clone(),
        reason: e.to_string(),
    })?;
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_owned);
    decode_source_with(Box::new(file), ext.as_deref(), &input, limits)
}

/// Decodes any symphonia media source (e.g. a file or an in-memory
/// `std::io::Cursor<Vec<u8>>` with a downloaded body). `hint_ext` is an
/// optional file extension used as a format hint ("mp3", "m4a", ...).
pub fn decode_reader(
    source: Box<dyn MediaSource>,
    hint_ext: Option<&str>,
) -> Result<DecodedAudio, DecodeError> {
    decode_source(source, hint_ext, "<stream>")
}

/// AAC-LC encoder priming (samples) assumed for raw ADTS, which cannot declare it.
const AAC_PRIMING: u64 = 1024;

/// The segments of an MP3 body and where each starts among the reader's packets.
struct Mp3Plan {
    segments: Vec<mp3::Segment>,
    /// Whether bytes (tags, junk) follow the last frame.
    trailing: bool,
    /// The packet index at which each segment starts.
    starts: Vec<u64>,
}

impl Mp3Plan {
    fn new((segments, walked): (Vec<mp3::Segment>, walk::Walk)) -> Mp3Plan {
        let starts = segments
            .iter()
            .scan(0u64, |at, s| {
                let start = *at;
                *at += s.frames;
                Some(start)
            })
            .collect();
        Mp3Plan {
            segments,
            trailing: walked.trailing,
            starts,
        }
    }

    /// The decode's warning for joined files, the first join at `first_s`: each part's
    /// delay and padding its Xing/LAME frame declares are removed; a part without one
    /// (joined where a tag marks the join) has LAME's usual delay removed, and its end
    /// padding, which nothing declares, stays (under one frame).
    fn joined_note(&self, first_s: f64) -> String {
        let untagged: Vec<String> = self.segments[..self.segments.len() - 1]
            .iter()
            .enumerate()
            .filter(|(_, s)| s.tag.is_none())
            .map(|(k, s)| {
                format!(
                    "part {} (under {:.0} ms)",
                    k + 1,
                    s.frame_samples as f64 * 1e3 / f64::from(s.rate.max(1))
                )
            })
            .collect();
        let mut note = format!(
            "{} MP3 files joined (at {first_s:.3} s first); each one's encoder delay and padding removed",
            self.segments.len()
        );
        if !untagged.is_empty() {
            note.push_str(&format!(
                ", but the end padding of {}, which has no Xing/LAME frame to declare it, stays: offsets after it may be late by up to that much",
                untagged.join(", ")
            ));
        }
        note
    }

    /// Audio frames the walk found in all segments.
    fn frames(&self) -> u64 {
        self.segments.iter().map(|s| s.frames).sum()
    }

    /// Why the stream cannot be trusted, if it cannot: a file holding other than the
    /// frames its Xing/LAME header declares (data inserted or lost midway, so every
    /// offset after that point would be off), or the reader having read other frames
    /// than the walk found.
    fn check(&self, packets: u64) -> Option<String> {
        for (k, s) in self.segments.iter().enumerate() {
            if let Some(declared) = s.tag.and_then(|t| t.frames) {
                if declared != s.frames {
                    let which = if self.segments.len() > 1 {
                        format!(
                            "part {} of the {} its Xing/Info frames and rate changes split it into",
                            k + 1,
                            self.segments.len()
                        )
                    } else {
                        "the stream".to_string()
                    };
                    if s.frames < declared && k + 1 == self.segments.len() {
                        // Fewer frames at the end, none skipped midway (the walk would
                        // have said): a file cut short, whatever its download said.
                        return Some(format!(
                            "{which} holds {} MP3 frames where its Xing/LAME header declares {declared}: {} frames missing, the file cut short at the end (or whole frames cut out midway), so a clip in the missing part would be stored as not found",
                            s.frames,
                            declared - s.frames
                        ));
                    }
                    return Some(format!(
                        "{which} holds {} MP3 frames where its Xing/LAME header declares {declared}: data inserted or lost midway (damage, or an ad the server stitched in: dynamic ad insertion is not supported), so offsets after it would be wrong",
                        s.frames
                    ));
                }
            }
        }
        let walked = self.frames();
        (self.segments.len() > 1 && walked != packets).then(|| {
            format!("the MP3 reader read {packets} frames where a walk of the stream found {walked}: junk between or after the frames that looks like MP3 data, so where each part starts is unknown")
        })
    }
}

/// Which end-of-body check ([`tail`]) a container needs.
#[derive(Debug, Clone, Copy)]
enum EndCheck {
    /// None: the container declares its length (WAV, MP4) or FLAC's own checks apply.
    None,
    /// The last Ogg page must be whole and end the stream.
    Ogg,
    /// The last frame must be whole.
    Frames(tail::Frames),
}

/// Messages from the decoding thread to the resampling thread.
enum Msg {
    /// Mono samples at the current segment's rate.
    Samples(Vec<f32>),
    /// The following samples are at this rate (a new segment).
    Rate(u32),
}

/// Mono samples per message from the decoding thread to the resampling thread.
const SEND_CHUNK: usize = 1 << 16;

/// Frames to drop at the start of the stream and to keep after them (MP4 gapless).
#[derive(Debug, Clone, Copy)]
struct Trim {
    skip: u64,
    keep: Option<u64>,
    /// Frames produced by the decoder so far, before trimming.
    pos: u64,
}

impl Trim {
    /// Trims the `frames` mono samples just appended to `chunk`; returns how many stay.
    fn apply(&mut self, chunk: &mut Vec<f32>, frames: usize) -> usize {
        let start = chunk.len() - frames;
        let from = self.pos;
        let to = from + frames as u64;
        self.pos = to;
        let keep_to = match self.keep {
            Some(k) => to.min(self.skip + k),
            None => to,
        };
        let keep_from = from.max(self.skip);
        if keep_to <= keep_from {
            chunk.truncate(start);
            return 0;
        }
        chunk.truncate(start + (keep_to - from) as usize);
        chunk.drain(start..start + (keep_from - from) as usize);
        (keep_to - keep_from) as usize
    }
}

/// The checks of a body's leading metadata that must run before symphonia's probe
/// reads it, shared by the decoder and the researcher's probe (one rule): an ID3v2 tag
/// whose size lies about where the audio starts ([`id3`]), and header lengths the reader
/// would trust to allocate ([`lengths`]). `Ok` with the source to read (past an ID3v2
/// tag one of whose frames overruns it: only metadata, bounded by its own size; it failed
/// the episode as "not an audio file") and notes for the decode's warnings; `Err` with
/// the reason the file is corrupt. A source that cannot seek is returned as it is.
pub fn checked_source(
    mut source: Box<dyn MediaSource>,
) -> Result<(Box<dyn MediaSource>, Vec<String>), String> {
    let mut notes = Vec::new();
    if !source.is_seekable() {
        return Ok((source, notes));
    }
    id3::check_tag_size(&mut source)?;
    if let Some((end, reason)) = id3::frame_overrun(&mut source) {
        let len = source.byte_len().unwrap_or(u64::MAX);
        notes.push(reason);
        source = Box::new(Bounded::window(source, end, len));
    }
    lengths::check_flac_metadata(&mut source)?;
    Ok((source, notes))
}

/// Like [`decode_reader`] but names the input (path or URL) in errors.
pub fn decode_source(
    source: Box<dyn MediaSource>,
    hint_ext: Option<&str>,
    input: &str,
) -> Result<DecodedAudio, DecodeError> {
    decode_source_with(source, hint_ext, input, &DecodeLimits::default())
}

/// [`decode_source`] under `limits`.
pub fn decode_source_with(
    mut source: Box<dyn MediaSource>,
    hint_ext: Option<&str>,
    input: &str,
    limits: &DecodeLimits,
) -> Result<DecodedAudio, DecodeError> {
    let max_s = limits.max_duration_s;
    let input = input.to_owned();
    let (checked, mut notes) = checked_source(source).map_err(|reason| DecodeError::Corrupt {
        input: input.clone(),
        reason,
    })?;
    source = checked;
    let tail = if source.is_seekable() {
        tail::read_tail(&mut source)
    } else {
        None
    };
    if let Some(name) = container::sniff(&mut source) {
        return Err(DecodeError::Unsupported {
            input,
            reason: format!(
                "its container is {name}, which this build does not read (it reads {})",
                container::READ_CONTAINERS
            ),
        });
    }
    let wav_streamed = source.is_seekable() && wav::streamed(&mut source);
    if source.is_seekable() {
        if let Err((rate, reason)) = wav_fmt::check_fmt(&mut source) {
            check_rate(Some(rate), &input)?;
            return Err(DecodeError::Corrupt { input, reason });
        }
        if let Some(codec) = wav_fmt::unsupported_codec(&mut source) {
            return Err(DecodeError::UnsupportedCodec {
                input,
                reason: format!(
                    "{codec} is not supported (this build decodes PCM, float, A-law, mu-law and ADPCM in WAV; serve the audio in its own container, MP3 as .mp3)"
                ),
            });
        }
        wav::check_data_chunks(&mut source).map_err(|reason| DecodeError::Corrupt {
            input: input.clone(),
            reason,
        })?;
    }
    // An MP4's `moov`, read once for the checks below (gapless data, sample tables,
    // timescale); the source is rewound for the reader.
    let moov = if source.is_seekable() {
        let moov = mp4::find_moov(&mut source);
        let _ = source.seek(std::io::SeekFrom::Start(0));
        moov
    } else {
        None
    };
    // An MP4 missing its end: named as cut short, not as "not an audio file".
    if source.is_seekable() {
        if let Some(reason) = mp4::cut_short(&mut source) {
            return Err(DecodeError::Incomplete {
                input,
                decoded_s: 0.0,
                expected_s: None,
                reason,
            });
        }
    }
    let mp4_statement =
        mp4::gapless_of(moov.as_deref()).map_err(|reason| DecodeError::Unsupported {
            input: input.clone(),
            reason,
        })?;
    // Two MP4 files joined: only the first's tables would be read.
    if mp4_statement != mp4::Statement::NotMp4 && source.is_seekable() {
        if let Some(at) = mp4::second_file(&mut source) {
            return Err(DecodeError::Unsupported {
                input,
                reason: format!(
                    "a second MP4 file (its ftyp box) starts at byte {at} after the first one's boxes: two files joined, of which only the first would be examined (decode and encode them again as one file)"
                ),
            });
        }
    }
    // Sample-table counts the boxes cannot hold: refused before the reader allocates.
    if let Some(moov) = &moov {
        let len = source.byte_len().unwrap_or(u64::MAX);
        tables::check_moov(moov, len).map_err(|reason| DecodeError::Corrupt {
            input: input.clone(),
            reason,
        })?;
    }
    // A fragmented MP4's fragments must follow each other ([`fragments`]): a gap is
    // reported once the rest has decoded (so the reason says how much did).
    let fragment_gap = if source.is_seekable() && mp4_statement != mp4::Statement::NotMp4 {
        match fragments::check(&mut source).map_err(|reason| DecodeError::Corrupt {
            input: input.clone(),
            reason,
        })? {
            fragments::Fragments::Gap(reason) => Some(reason),
            fragments::Fragments::None | fragments::Fragments::Continuous => None,
        }
    } else {
        None
    };
    // The sound track's timescale and first duration, to check the edit list's unit.
    let mp4_timing = moov.as_deref().and_then(mp4::sound_timing);
    let mp4_gapless = match mp4_statement {
        mp4::Statement::Stated(g) => Some(g),
        _ => None,
    };
    // Bytes appended after an MP4's last box: the reader sees only the boxes.
    if wav_streamed {
        notes.push(
            "a streamed WAV (size 0xFFFFFFFF: length unknown): decoded to the end of the body"
                .to_string(),
        );
    }
    if source.is_seekable() {
        if let Some(end) = mp4::boxes_end(&mut source) {
            let total = source.byte_len().unwrap_or(end);
            notes.push(format!(
                "{} bytes after the last MP4 box are not audio (ignored)",
                total.saturating_sub(end)
            ));
            source = Box::new(Bounded::new(source, end));
        }
    }
    let mp3_start = if source.is_seekable() && mp4_statement == mp4::Statement::NotMp4 {
        mp3::read_start(&mut source)
    } else {
        None
    };
    // Joined MP3 files and data inserted midway: every frame walked ([`mp3::segments`]).
    let sniffed_mpeg = tail.as_ref().is_some_and(|t| {
        t.head.starts_with(b"ID3") || t.head.get(..4).and_then(tail::mpeg_frame_len).is_some()
    });
    let mp3_segments = match &tail {
        Some(t) if sniffed_mpeg && mp4_statement == mp4::Statement::NotMp4 => {
            mp3::segments(&mut source, tail::trailer_len(t))
        }
        _ => None,
    };
    // A valid LAME tag's CRC of the music: frames lost and others repeated ([`lame_crc`]).
    let music_crc_fault = match &tail {
        Some(_) if sniffed_mpeg && mp4_statement == mp4::Statement::NotMp4 => {
            lame_crc::music_crc_fault(&mut source)
        }
        _ => None,
    };
    // Raw ADTS: every frame walked too, for bytes skipped midway ([`walk`]).
    let adts_walk = match &tail {
        Some(t)
            if mp4_statement == mp4::Statement::NotMp4
                && walk::starts_with(&mut source, tail::Frames::Adts) =>
        {
            walk::walk(
                &mut source,
                tail::Frames::Adts,
                tail::trailer_len(t),
                |_, _, _| {},
            )
        }
        _ => None,
    };
    // A FLAC whose STREAMINFO contradicts its frames: named if the reader gives up.
    let flac_mismatch = match &tail {
        Some(t) if t.head.starts_with(b"fLaC") => flac_head::mismatch(&mut source),
        _ => None,
    };
    let mss = MediaSourceStream::new(source, Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = hint_ext {
        hint.with_extension(ext);
    }
    let fmt_opts = FormatOptions {
        enable_gapless: true,
        ..Default::default()
    };
    let container = tail
        .as_ref()
        .map_or("container", |t| guard::container_name(&t.head));
    let corrupt = |reason: String| DecodeError::Corrupt {
        input: input.clone(),
        reason,
    };
    let probed = guard::guarded(
        || format!("the {container} reader, reading the header"),
        || {
            symphonia::default::get_probe().format(
                &hint,
                mss,
                &fmt_opts,
                &MetadataOptions::default(),
            )
        },
    )
    .map_err(corrupt)?
    .map_err(|e| match e {
        SymError::IoError(ref io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
            DecodeError::Io {
                input: input.clone(),
                reason: e.to_string(),
            }
        }
        _ => match flac_mismatch.clone() {
            Some(reason) => DecodeError::Corrupt {
                input: input.clone(),
                reason,
            },
            None => DecodeError::NotAudio {
                input: input.clone(),
                reason: e.to_string(),
            },
        },
    })?;
    let mut format = probed.format;
    let track = audio_track(format.tracks()).map_err(|reason| match reason {
        None => DecodeError::NotAudio {
            input: input.clone(),
            reason: "no audio track".into(),
        },
        Some(reason) => DecodeError::Unsupported {
            input: input.clone(),
            reason,
        },
    })?;
    let track_id = track.id;
    let mut params = track.codec_params.clone();
    // MP4's sample entry holds the rate as 16.16 fixed point: 88.2 and 96 kHz do not fit.
    // The decoder's own configuration (what it decodes at) has the true rate.
    let configured = match (params.codec, params.extra_data.as_deref()) {
        (sc::CODEC_TYPE_AAC, Some(asc)) => asc_rate(asc),
        // ALAC's magic cookie: 24 bytes (48 with a channel layout), the rate at 20..24.
        (sc::CODEC_TYPE_ALAC, Some(cookie)) if cookie.len() >= 24 => Some(u32::from_be_bytes([
            cookie[20], cookie[21], cookie[22], cookie[23],
        ])),
        _ => None,
    };
    if let Some(rate) = configured.filter(|r| *r > 0) {
        params.sample_rate = Some(rate);
    }
    // Opus in MP4: its `dOps` box holds the pre-skip big-endian where OpusHead holds it
    // little-endian (the decoder read 312 as 14337 and dropped 0.3 s), and the edit list
    // states the pre-skip as its media time. The decoder skips nothing; the edit list
    // (or, without one, the pre-skip) trims, as for every codec in MP4.
    // symphonia leaves its channels unset (the channel count is byte 9, as in OpusHead).
    let mp4_opus_pre_skip = if opus::is_opus(&params) && mp4_statement != mp4::Statement::NotMp4 {
        if params.channels.is_none() {
            use symphonia::core::audio::Channels;
            params.channels = match params.extra_data.as_deref().and_then(|d| d.get(9)) {
                Some(1) => Some(Channels::FRONT_LEFT),
                Some(2) => Some(Channels::FRONT_LEFT | Channels::FRONT_RIGHT),
                _ => None,
            };
        }
        params.extra_data.as_mut().and_then(|d| {
            let b = d.get_mut(10..12)?;
            let pre_skip = u16::from_be_bytes([b[0], b[1]]);
            b.fill(0);
            Some(u64::from(pre_skip))
        })
    } else {
        None
    };
    let params = params;
    let source_rate = check_rate(params.sample_rate, &input)?;
    if let (Some((scale, delta)), Some(g)) = (mp4_timing, mp4_gapless) {
        let aac = params.codec == sc::CODEC_TYPE_AAC;
        if aac && g.priming_scale == scale && scale != source_rate {
            let sbr = params
                .extra_data
                .as_deref()
                .and_then(|asc| asc.first())
                .is_some_and(|b| matches!(b >> 3, 5 | 29));
            if let Some(reason) = timescale_contradiction(scale, delta, source_rate, sbr) {
                return Err(DecodeError::Corrupt { input, reason });
            }
        }
    }
    if params.codec == sc::CODEC_TYPE_ALAC {
        if let Some(cookie) = params.extra_data.as_deref() {
            lengths::check_alac_cookie(cookie).map_err(corrupt)?;
        }
    }
    let mut decoder = guard::guarded(
        || {
            format!(
                "the {} decoder, reading its configuration",
                codec_name(params.codec)
            )
        },
        || make_decoder(&params, &input),
    )
    .map_err(corrupt)??;
    let is_mp3 = params.codec == sc::CODEC_TYPE_MP3;
    // Without a Xing/Info/VBRI frame symphonia's MP3 reader estimates the length from the
    // first frame's bitrate and, in gapless mode, cuts every packet past it: a VBR file
    // lost its end (or was refused as data inserted midway). Nothing declares such a
    // stream's length: the whole of it is decoded, and its end checked by [`tail`].
    let mp3_length_estimated = is_mp3 && mp3_start == Some(mp3::Start::NoTag);
    // An MP4's edit list (or iTunSMPB) is what players play, whatever the codec: MP3 in
    // MP4 declares LAME's delay only there (ffmpeg moves it from the LAME tag into the
    // edit list), and an edit cutting FLAC or PCM is as real as one cutting AAC. (Only
    // AAC and ALAC had it applied: MP3 in MP4 came out 25 ms late, a FLAC edit skipping
    // 0.5 s 500 ms late.) One rule for every codec, never an edit list ignored.
    let is_mp4_track = mp4_gapless.is_some();
    let mut trim = mp4_gapless.filter(|_| is_mp4_track).map(|g| {
        let (skip, keep) = g.frames(source_rate);
        Trim { skip, keep, pos: 0 }
    });
    // The MP4 edit list's pause before the audio (empty edits): played as silence.
    let mp4_delay = mp4_gapless
        .filter(|_| is_mp4_track)
        .map(|g| g.delay_frames(source_rate))
        .unwrap_or(0);
    // No delay from symphonia: a tag it missed (CRC frames, a LAME extension failing its
    // CRC-16), an Info header whose LAME extension is blank (symphonia reads a delay of
    // 0 from it) or missing, or no tag at all.
    let blank_extension = params.delay == Some(0)
        && matches!(
            mp3_start,
            Some(mp3::Start::TagWithoutDelay { stated: false, .. })
        );
    if is_mp3
        && mp4_statement == mp4::Statement::NotMp4
        && (params.delay.is_none() || blank_extension)
    {
        if let Some(mp3::Start::TagWithoutDelay { delay, stated }) = mp3_start {
            notes.push(if stated {
                format!("the MP3's LAME tag fails its CRC-16: its encoder delay ({delay} samples) used, as ffmpeg does")
            } else {
                format!("the MP3's Xing/Info header has no LAME extension: LAME's usual encoder delay ({delay} samples) removed, as for an MP3 with no tag")
            });
        }
        trim = mp3_start
            .map(mp3::Start::skip)
            .filter(|skip| *skip > 0)
            .map(|skip| Trim {
                skip,
                keep: None,
                pos: 0,
            });
    }
    // Raw ADTS AAC has no edit list or tag: the encoder's priming is the convention,
    // 1024 samples for AAC-LC (ffmpeg's `aac` and fdk-aac both write it; it came out
    // 23 ms late at 44.1 kHz). In MP4 the AudioSpecificConfig is the extra data.
    let is_adts = params.codec == sc::CODEC_TYPE_AAC && params.extra_data.is_none();
    if is_adts {
        trim = Some(Trim {
            skip: AAC_PRIMING,
            keep: None,
            pos: 0,
        });
    }
    // AAC in an MP4 that states neither an edit list nor iTunSMPB (fragmented MP4 as
    // DASH/HLS/CMAF packagers write it, `ffmpeg -use_editlist 0`): nothing marks the
    // priming, so the same convention as raw ADTS (it came out 23 ms late at 44.1 kHz,
    // 128 ms at 8 kHz, and the same audio in an ordinary M4A 23 ms earlier). The
    // declared length, when the sample tables give one, includes the priming (nothing
    // is cut to it: a fragmented file's `moov` may declare less than its fragments hold).
    let aac_mp4_unstated =
        mp4_statement == mp4::Statement::Unstated && params.codec == sc::CODEC_TYPE_AAC && !is_adts;
    if aac_mp4_unstated {
        trim = Some(Trim {
            skip: AAC_PRIMING,
            keep: None,
            pos: 0,
        });
        notes.push(format!(
            "the MP4 states no encoder delay (no edit list, no iTunSMPB): AAC-LC's conventional {AAC_PRIMING} priming samples removed"
        ));
    }
    if let (Some(pre_skip), mp4::Statement::Unstated) = (mp4_opus_pre_skip, mp4_statement) {
        trim = Some(Trim {
            skip: pre_skip,
            keep: None,
            pos: 0,
        });
    }
    // Ogg Opus: the reader counts the last granule position, which includes the pre-skip
    // the decoder drops (a pre-skip of 48312 was refused as "decoded 119.000 s of the
    // 120.007 s the container declares").
    let ogg_opus_pre_skip = (opus::is_opus(&params) && mp4_statement == mp4::Statement::NotMp4)
        .then(|| opus::head_pre_skip(params.extra_data.as_deref().unwrap_or_default()));
    // The duration the container declares: MP3 only with a LAME tag (without one the
    // reader estimates it from the first frame's bitrate, wrong for VBR).
    let expected_frames = match &trim {
        // ADTS's count is estimated from the average frame size: not a declaration.
        Some(_) if is_adts => None,
        Some(_) if aac_mp4_unstated => params
            .n_frames
            .filter(|n| *n > AAC_PRIMING)
            .map(|n| n - AAC_PRIMING),
        Some(t) => t.keep.map(|k| k + mp4_delay),
        None if is_mp3 && params.delay.is_none() => None,
        // A WAV written to a pipe declares no length: read to the end of the body.
        None if wav_streamed => None,
        None => match ogg_opus_pre_skip {
            Some(skip) => params.n_frames.map(|n| n.saturating_sub(skip)),
            None => params.n_frames,
        },
    };
    let head = tail.as_ref().map(|t| t.head.as_slice()).unwrap_or_default();
    let native_flac = params.codec == sc::CODEC_TYPE_FLAC && head.starts_with(b"fLaC");
    let end_check = if head.starts_with(b"OggS") {
        EndCheck::Ogg
    } else if is_adts {
        EndCheck::Frames(tail::Frames::Adts)
    } else if matches!(
        params.codec,
        sc::CODEC_TYPE_MP1 | sc::CODEC_TYPE_MP2 | sc::CODEC_TYPE_MP3
    ) && !head.starts_with(b"RIFF")
    {
        EndCheck::Frames(tail::Frames::Mpeg)
    } else {
        EndCheck::None
    };
    // STREAMINFO's largest block: a fixed-blocksize frame's number times it is its
    // first sample.
    let flac_block = params
        .extra_data
        .as_deref()
        .filter(|_| native_flac)
        .and_then(|si| si.get(2..4))
        .map(|b| u64::from(u16::from_be_bytes([b[0], b[1]])));
    let expected_s = expected_frames.map(|n| n as f64 / source_rate as f64);
    // FLAC's STREAMINFO and a WAV's data size (or `fact` chunk, for ADPCM) declare the
    // exact frame count, no rounding: one frame fewer is a lost frame, never a tolerance
    // (ADPCM blocks cut out at the end or midway hid 185 ms under it).
    let exact_frames = expected_frames
        .filter(|n| *n > 0 && trim.is_none())
        .filter(|_| {
            params.codec == sc::CODEC_TYPE_FLAC
                || PCM_CODECS.contains(&params.codec)
                || ADPCM_CODECS.contains(&params.codec)
        });
    let is_mpeg = matches!(
        params.codec,
        sc::CODEC_TYPE_MP1 | sc::CODEC_TYPE_MP2 | sc::CODEC_TYPE_MP3
    );
    // The frame walk of this stream, for bytes skipped midway (lost audio).
    let frame_walk = match (&mp3_segments, adts_walk) {
        (Some((_, w, _)), _) if is_mpeg => Some((*w, "MPEG audio")),
        (_, Some(w)) if is_adts => Some((w, "ADTS")),
        _ => None,
    };
    // Frames cut out or repeated midway that left the bit reservoir short ([`reservoir`]).
    let underflow = mp3_segments
        .as_ref()
        .filter(|_| is_mp3)
        .and_then(|(_, _, u)| u.clone());
    let mp3_plan = mp3_segments
        .filter(|_| is_mp3)
        .map(|(segments, walked, _)| Mp3Plan::new((segments, walked)));
    // A tagless MP3 marks neither its length nor, if it is files joined without tags
    // (a pre-roll ad encoded apart, `cat` of `lame -t` files), where they meet: the
    // second file's encoder delay and the first's padding would stay in the middle.
    if mp3_start == Some(mp3::Start::NoTag)
        && mp3_plan.as_ref().is_none_or(|p| p.segments.len() < 2)
    {
        let (rate, frame) = mp3_plan
            .as_ref()
            .and_then(|p| p.segments.first())
            .map_or((44_100, 1152), |s| (s.rate.max(1), s.frame_samples));
        let late_ms = (mp3::LAME_DELAY + mp3::DECODER_DELAY + frame) as f64 * 1e3 / f64::from(rate);
        notes.push(format!(
            "the MP3 has no Xing/LAME frame: LAME's usual encoder delay removed; nothing in such a file marks where files were joined without tags, so if it is several files joined, offsets after a join are up to {late_ms:.0} ms late (the next file's encoder delay and this one's end padding)"
        ));
    }
    // Ogg pages and FLAC frames say where their audio starts: a jump is a lost stretch.
    // (A body that cannot be sniffed, not seekable, is known by its codec.)
    let unsniffed = head.is_empty();
    let mut continuity =
        if head.starts_with(b"OggS") || (unsniffed && params.codec == sc::CODEC_TYPE_VORBIS) {
            Some(continuity::Continuity::ogg())
        } else if native_flac || (unsniffed && params.codec == sc::CODEC_TYPE_FLAC) {
            Some(continuity::Continuity::new(
                "FLAC frame headers' sample numbers",
            ))
        } else {
            None
        };
    // Before anything is sized from it (the resampler's output is).
    // (A declaration only: an MP3 or ADTS length estimated from one frame's bitrate
    // can be far off.)
    let declared_s = expected_frames.map(|n| n as f64 / source_rate as f64);
    if let Some(d) = declared_s.filter(|d| *d > max_s) {
        return Err(DecodeError::TooLong {
            input,
            what: "its container declares".into(),
            duration_s: d,
            max_s,
        });
    }
    let mono = MonoResampler::new(source_rate, expected_frames.unwrap_or(0), &input)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(64);
    std::thread::scope(|scope| {
        // Resampling runs on a second thread, pipelined with decoding.
        let worker_input = input.clone();
        let worker = scope.spawn(move || -> Result<Vec<f32>, DecodeError> {
            let mut current = mono;
            let mut done: Vec<f32> = Vec::new();
            for msg in rx {
                match msg {
                    Msg::Samples(chunk) => current.push_interleaved(&chunk, 1)?,
                    Msg::Rate(rate) => {
                        let next = MonoResampler::new(rate, 0, &worker_input)?;
                        let seg = std::mem::replace(&mut current, next).finish()?;
                        if done.is_empty() {
                            done = seg;
                        } else {
                            done.extend_from_slice(&seg);
                        }
                    }
                }
            }
            let seg = current.finish()?;
            if done.is_empty() {
                Ok(seg)
            } else {
                done.extend_from_slice(&seg);
                Ok(done)
            }
        });
        let mut state = Progress {
            rate: source_rate,
            decoded_s: 0.0,
            frames_in: 0,
            lost_s: 0.0,
            lost_packets: 0,
            first_lost: None,
            segment_rates: vec![source_rate],
            channels: params.channels.map(|c| c.count() as u16).unwrap_or(0),
            warnings: notes,
        };
        let mut sample_buf: Option<SampleBuffer<f32>> = None;
        let mut chunk: Vec<f32> = Vec::with_capacity(SEND_CHUNK + 8192);
        if mp4_delay > 0 {
            state.warnings.push(format!(
                "the MP4 edit list starts the audio after a pause of {:.3} s (empty edits): played as silence, as players do",
                mp4_delay as f64 / source_rate as f64
            ));
            let mut left = mp4_delay;
            while left > 0 {
                let n = left.min(SEND_CHUNK as u64);
                chunk.extend(std::iter::repeat_n(0.0, n as usize));
                flush(&tx, &mut chunk);
                left -= n;
            }
            // Not counted in `frames_in`: a file of nothing but a pause is still empty.
            state.decoded_s = mp4_delay as f64 / source_rate as f64;
        }
        let mut held: Option<Packet> = None;
        let mut past_declared_end = false;
        let mut mp3_packets: u64 = 0;
        // Samples the MP3 reader trimmed at the end so far, and the padding its LAME tag
        // declares (less the decoder's delay, as the reader counts it).
        let mut mp3_trimmed_end: u64 = 0;
        let mp3_padding = u64::from(params.padding.unwrap_or(0));
        let mut seg_trim = Trim {
            skip: 0,
            keep: None,
            pos: 0,
        };
        let mut broke: Option<String> = None;
        // Two files joined (a chained Ogg, two FLAC files): what the container declares
        // is the first file's length, so it is not set against what decoded ("decoded
        // 60.022 s of the 60.000 s ... incomplete" read as a contradiction).
        let mut joined = false;
        let mut ended = false;
        loop {
            let next = if ended {
                None
            } else {
                loop {
                    let read = guard::guarded(
                        || {
                            format!(
                                "the {container} reader, after {:.3} s of audio",
                                state.decoded_s
                            )
                        },
                        || format.next_packet(),
                    );
                    let read = match read {
                        Ok(read) => read,
                        Err(reason) if state.frames_in == 0 && held.is_none() => {
                            return Err(DecodeError::Corrupt { input, reason });
                        }
                        Err(reason) => {
                            broke = Some(reason);
                            ended = true;
                            break None;
                        }
                    };
                    match read {
                        Ok(p) if p.track_id() == track_id => break Some(p),
                        Ok(_) => continue,
                        Err(SymError::IoError(e))
                            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                        {
                            ended = true;
                            break None;
                        }
                        Err(SymError::ResetRequired) => {
                            // A new logical stream (chained Ogg) with its own tracks.
                            joined = true;
                            broke = Some(
                                "a second Ogg stream with its own tracks follows the first (a chained Ogg: files joined, or a live stream's next track); chained streams are not supported, and the first alone is not the whole episode"
                                    .to_string(),
                            );
                            ended = true;
                            break None;
                        }
                        Err(e) => {
                            if state.frames_in == 0 && held.is_none() {
                                return Err(DecodeError::Corrupt {
                                    input,
                                    reason: e.to_string(),
                                });
                            }
                            broke = Some(format!("the stream broke: {e}"));
                            ended = true;
                            break None;
                        }
                    }
                }
            };
            // Decode the packet before this one, now that we know whether one follows:
            // the MP3 reader cuts everything past the length its header declares, wrong
            // for joined files (the rest of the stream would be silently dropped).
            let Some(mut packet) = std::mem::replace(&mut held, next) else {
                if ended {
                    break;
                }
                continue;
            };
            if let Some(gap) = continuity
                .as_mut()
                .and_then(|c| c.check(&packet, state.rate))
            {
                if broke.is_none() {
                    broke = Some(gap);
                }
                held = None;
                ended = true;
                continue;
            }
            let mp3_walked = mp3_plan.as_ref().map(Mp3Plan::frames);
            if mp3_walked.is_some_and(|n| mp3_packets >= n) {
                // Past every frame the walk found: false frames in bytes after the audio
                // (a tag's binary data) are not audio; with no such bytes, the reader
                // read a false frame midway and this one is real.
                if mp3_plan.as_ref().is_some_and(|p| p.trailing) {
                    state.warnings.push(format!(
                        "bytes after the last of the {mp3_packets} MP3 frames are not audio (ignored)"
                    ));
                } else if broke.is_none() {
                    broke = Some(format!(
                        "the MP3 reader read more than the {mp3_packets} frames a walk of the stream found: junk midway that looks like MP3 data, so later offsets cannot be trusted"
                    ));
                }
                held = None;
                ended = true;
                continue;
            }
            if mp3_length_estimated && packet.trim_end > 0 {
                // The reader cut the stream at its bitrate estimate, not a declaration.
                packet.dur += u64::from(packet.trim_end);
                packet.trim_end = 0;
            }
            let mut in_later_segment = false;
            if let Some(plan) = mp3_plan.as_ref().filter(|p| p.segments.len() > 1) {
                // A later joined file: its own delay and padding, not the first file's.
                let idx = mp3_packets;
                if idx >= plan.segments[0].frames {
                    in_later_segment = true;
                    packet.dur += u64::from(packet.trim_start) + u64::from(packet.trim_end);
                    packet.trim_start = 0;
                    packet.trim_end = 0;
                    if let Some(k) = plan.starts.iter().position(|s| *s == idx) {
                        let (skip, keep) = plan.segments[k].trim();
                        seg_trim = Trim { skip, keep, pos: 0 };
                        if !past_declared_end {
                            past_declared_end = true;
                            state.warnings.push(plan.joined_note(state.decoded_s));
                        }
                    }
                }
            } else if is_mp3
                && packet.trim_end > 0
                && broke.is_none()
                && mp3_walked.is_none_or(|n| mp3_packets + 1 < n)
                && {
                    // The reader trims the frames past the declared length; LAME's
                    // padding may fill more than one frame (the last all padding), so
                    // only trimming beyond the padding is audio past the declared end.
                    mp3_trimmed_end += u64::from(packet.trim_end);
                    mp3_trimmed_end > mp3_padding
                }
            {
                let declared =
                    expected_s.map_or("the length".to_string(), |e| format!("the {e:.3} s"));
                broke = Some(format!(
                    "the stream goes on past {declared} its Xing/LAME header declares with no new file's header there: data inserted midway (damage, or an ad the server stitched in: dynamic ad insertion is not supported; every offset after it would be late) or a file joined without a header"
                ));
                ended = true;
                held = None;
            }
            if is_mp3 {
                mp3_packets += 1;
            }
            let packet_at = state.decoded_s;
            let decoded = guard::guarded(
                || {
                    format!(
                        "the {} decoder, on the packet at {packet_at:.3} s",
                        codec_name(params.codec)
                    )
                },
                || decoder.decode(&packet),
            );
            let decoded = match decoded {
                Ok(d) => d,
                Err(reason) if state.frames_in == 0 => {
                    return Err(DecodeError::Corrupt { input, reason });
                }
                Err(reason) => {
                    broke = Some(reason);
                    break;
                }
            };
            let frames = match decoded {
                Ok(buf) => {
                    let spec = *buf.spec();
                    if spec.rate != state.rate {
                        // Some decoders follow a rate change themselves.
                        check_rate(Some(spec.rate), &input)?;
                        flush(&tx, &mut chunk);
                        let _ = tx.send(Msg::Rate(spec.rate));
                        state.new_segment(spec.rate);
                    }
                    state.channels = spec.channels.count().max(1) as u16;
                    let frames = mix(&buf, &mut sample_buf, &mut chunk);
                    state.zero_non_finite(&mut chunk, frames);
                    frames
                }
                Err(SymError::DecodeError(msg)) => {
                    // A changed signal (sample rate, channels) needs a fresh decoder.
                    // (Not Opus: its signal never changes, and a fresh decoder would drop
                    // the pre-skip again midway.)
                    let mut fresh = make_decoder(&params, &input)?;
                    let retried = if opus::is_opus(&params) {
                        Err(SymError::DecodeError("opus: invalid packet"))
                    } else {
                        fresh.decode(&packet)
                    };
                    let changed = match retried {
                        Ok(buf) => {
                            let spec = *buf.spec();
                            check_rate(Some(spec.rate), &input)?;
                            flush(&tx, &mut chunk);
                            if spec.rate != state.rate {
                                let _ = tx.send(Msg::Rate(spec.rate));
                                state.warnings.push(format!(
                                    "sample rate changes from {} to {} Hz at {:.3} s; each part resampled",
                                    state.rate, spec.rate, state.decoded_s
                                ));
                                state.new_segment(spec.rate);
                            }
                            state.channels = spec.channels.count().max(1) as u16;
                            let frames = mix(&buf, &mut sample_buf, &mut chunk);
                            state.zero_non_finite(&mut chunk, frames);
                            Some(frames)
                        }
                        Err(_) => None,
                    };
                    match changed {
                        Some(frames) => {
                            decoder = fresh;
                            frames
                        }
                        None => {
                            // Keep time: silence as long as the lost packet.
                            let n = packet_frames(&packet, &params, state.rate);
                            state.lose(n, msg);
                            chunk.extend(std::iter::repeat_n(0.0, n));
                            n
                        }
                    }
                }
                Err(e) => {
                    if state.frames_in == 0 {
                        return Err(DecodeError::Corrupt {
                            input,
                            reason: e.to_string(),
                        });
                    }
                    broke = Some(format!("the decoder stopped: {e}"));
                    ended = true;
                    held = None;
                    0
                }
            };
            let frames = match &mut trim {
                Some(t) => t.apply(&mut chunk, frames),
                None => frames,
            };
            let frames = if in_later_segment {
                seg_trim.apply(&mut chunk, frames)
            } else {
                frames
            };
            state.frames_in += frames as u64;
            state.decoded_s += frames as f64 / state.rate as f64;
            if state.decoded_s > max_s {
                return Err(DecodeError::TooLong {
                    input,
                    what: "it decoded to more than".into(),
                    duration_s: state.decoded_s,
                    max_s,
                });
            }
            if chunk.len() >= SEND_CHUNK {
                flush(&tx, &mut chunk);
            }
        }
        // Frames skipped midway come first: what the reader then did with the rest
        // (read more or fewer frames than declared) follows from them.
        if let Some(reason) = frame_walk.and_then(|(walked, name)| walked.lost_reason(name)) {
            broke = Some(reason);
        }
        if let Some(reason) = fragment_gap.clone().filter(|_| broke.is_none()) {
            broke = Some(reason);
        }
        if let (Some(plan), None) = (&mp3_plan, &broke) {
            broke = plan.check(mp3_packets);
        }
        // Frames back at sample 0 in a native FLAC: find where the second file starts.
        if native_flac && continuity.as_ref().is_some_and(|c| c.restarted()) {
            let mut stream = format.into_inner();
            if let Some(at) = flac_head::second_stream(&mut stream) {
                joined = true;
                broke = Some(format!(
                    "a second FLAC stream (its fLaC marker and STREAMINFO) starts at byte {at}: two FLAC files joined, and the second's frames number from 0 again, so every offset in it would be wrong (decode and encode them again as one file)"
                ));
            }
        }
        let flac_tail = tail.as_ref().zip(flac_block).filter(|_| broke.is_none());
        if let Some((t, block)) = flac_tail {
            // The reader drops a last frame it cannot delimit (bytes follow it that are
            // not a frame): find it by its CRC and decode it, up to the declared count.
            let want = exact_frames.unwrap_or(u64::MAX);
            while state.frames_in < want && state.segment_rates.len() == 1 {
                let at = state.frames_in;
                let found = tail::flac_frame_at(t, at, block, |data, n| {
                    let p = Packet::new_from_slice(track_id, at, n, data);
                    matches!(decoder.decode(&p), Ok(buf) if buf.frames() as u64 == n)
                });
                let Some((data, n)) = found else { break };
                let p = Packet::new_from_slice(track_id, at, n, data);
                let Ok(buf) = decoder.decode(&p) else { break };
                let frames = mix(&buf, &mut sample_buf, &mut chunk);
                state.zero_non_finite(&mut chunk, frames);
                state.frames_in += frames as u64;
                state.decoded_s += frames as f64 / state.rate as f64;
                state.warnings.push(format!(
                    "the FLAC frame at sample {at} is followed by bytes that are not FLAC (junk or a tag): decoded it, ignored them"
                ));
            }
            if exact_frames.is_none() && tail::flac_frame_begins(t, state.frames_in, block) {
                broke = Some(format!(
                    "the body ends inside the FLAC frame that starts at sample {}: truncated",
                    state.frames_in
                ));
            }
        }
        if let Some(t) = tail.as_ref().filter(|_| broke.is_none()) {
            let end = match end_check {
                EndCheck::Ogg => tail::ogg_end(t).map(|junk| (junk, "Ogg page")),
                EndCheck::Frames(kind) => tail::mpeg_end(t, kind).map(|junk| (junk, "frame")),
                EndCheck::None => Ok((0, "")),
            };
            match end {
                Err(reason) => broke = Some(reason),
                Ok((0, _)) => {}
                Ok((junk, what)) => state.warnings.push(format!(
                    "{junk} bytes after the last {what} are not audio (ignored)"
                )),
            }
        }
        // Last: a body the structural checks above found fault with is named by them.
        if let Some(reason) = music_crc_fault.clone().filter(|_| broke.is_none()) {
            broke = Some(reason);
        }
        // A tagged file's CRC says more than the reservoir: it comes first.
        if let Some(reason) = underflow.clone().filter(|_| broke.is_none()) {
            broke = Some(reason);
        }
        flush(&tx, &mut chunk);
        drop(tx);
        if state.frames_in == 0 {
            if state.lost_packets > 0 {
                return Err(DecodeError::Corrupt {
                    input,
                    reason: format!("{} undecodable packets, no audio", state.lost_packets),
                });
            }
            return Err(DecodeError::Empty { input });
        }
        let incomplete = |reason: String| DecodeError::Incomplete {
            input: input.clone(),
            decoded_s: state.decoded_s,
            expected_s: expected_s.filter(|_| !joined),
            reason,
        };
        if let Some(reason) = broke {
            return Err(incomplete(reason));
        }
        if state.lost_s > MAX_LOST_S {
            return Err(incomplete(format!(
                "{} packets ({:.3} s) did not decode, over the {MAX_LOST_S} s allowed; first: {}",
                state.lost_packets,
                state.lost_s,
                state.first_lost.clone().unwrap_or_default()
            )));
        }
        if let Some(n) = exact_frames {
            if state.frames_in < n && state.segment_rates.len() == 1 {
                return Err(incomplete(format!(
                    "{} frames short of the exact {n} its header declares (a frame lost at the end, e.g. to trailing bytes, or a truncated file)",
                    n - state.frames_in
                )));
            }
        }
        if let Some(e) = expected_s {
            if state.decoded_s < e - duration_tolerance_s(e) {
                return Err(incomplete(format!(
                    "{:.3} s short of the declared duration (truncated or damaged file)",
                    e - state.decoded_s
                )));
            }
        }
        if state.lost_packets > 0 {
            state.warnings.push(format!(
                "{} undecodable packets ({:.3} s) replaced by silence; first: {}",
                state.lost_packets,
                state.lost_s,
                state.first_lost.clone().unwrap_or_default()
            ));
        }
        let mut samples = worker.join().map_err(|_| DecodeError::Corrupt {
            input: input.clone(),
            reason: "resampler thread panicked".into(),
        })??;
        band::band_limit(&mut samples);
        let duration_s = samples.len() as f64 / ANALYSIS_RATE as f64;
        Ok(DecodedAudio {
            samples,
            source_rate,
            channels: state.channels,
            duration_s,
            expected_duration_s: expected_s,
            segment_rates: state.segment_rates,
            warnings: state.warnings,
        })
    })
}

/// A media source seen through a window of its bytes, `start..end` (what lies outside
/// is not audio: bytes after an MP4's last box, an ID3v2 tag whose frames overrun it),
/// so the reader sees only what it can read. Positions are relative to `start`.
struct Bounded {
    inner: Box<dyn MediaSource>,
    start: u64,
    end: u64,
    /// Position relative to `start`.
    pos: u64,
}

impl Bounded {
    /// The source cut to its first `len` bytes.
    fn new(inner: Box<dyn MediaSource>, len: u64) -> Bounded {
        Bounded::window(inner, 0, len)
    }

    /// The source from byte `start` to byte `end`, positioned at its start.
    fn window(mut inner: Box<dyn MediaSource>, start: u64, end: u64) -> Bounded {
        let end = end.max(start);
        let pos = match inner.seek(std::io::SeekFrom::Start(start)) {
            Ok(_) => 0,
            Err(_) => end - start,
        };
        Bounded {
            inner,
            start,
            end,
            pos,
        }
    }

    fn len(&self) -> u64 {
        self.end - self.start
    }
}

impl std::io::Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.len().saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.inner.read(&mut buf[..want])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for Bounded {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            std::io::SeekFrom::Start(p) => Some(p),
            std::io::SeekFrom::End(d) => self.len().checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        }
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before 0"))?;
        let at = self.inner.seek(std::io::SeekFrom::Start(
            self.start + target.min(self.len()),
        ))?;
        self.pos = at.saturating_sub(self.start);
        Ok(self.pos)
    }
}

impl MediaSource for Bounded {
    fn is_seekable(&self) -> bool {
        self.inner.is_seekable()
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.len())
    }
}

/// What the decode loop has seen so far.
struct Progress {
    rate: u32,
    decoded_s: f64,
    frames_in: u64,
    lost_s: f64,
    lost_packets: usize,
    first_lost: Option<String>,
    segment_rates: Vec<u32>,
    channels: u16,
    warnings: Vec<String>,
}

impl Progress {
    fn new_segment(&mut self, rate: u32) {
        self.rate = rate;
        self.segment_rates.push(rate);
    }

    /// Replaces NaN and infinite samples among the last `frames` of `chunk` (a float
    /// file can hold them; the FFT resampler panics on them) by silence, counted as lost
    /// audio under the same [`MAX_LOST_S`] rule as an undecodable packet.
    fn zero_non_finite(&mut self, chunk: &mut [f32], frames: usize) {
        let start = chunk.len() - frames;
        let mut bad = 0;
        for s in &mut chunk[start..] {
            if !s.is_finite() {
                *s = 0.0;
                bad += 1;
            }
        }
        if bad > 0 {
            self.lose(bad, &format!("{bad} NaN or infinite samples"));
        }
    }

    fn lose(&mut self, frames: usize, msg: &str) {
        self.lost_packets += 1;
        self.lost_s += frames as f64 / self.rate as f64;
        if self.first_lost.is_none() {
            self.first_lost = Some(format!("at {:.3} s: {msg}", self.decoded_s));
        }
    }
}

/// The sampling frequency of an MPEG-4 AudioSpecificConfig (ISO 14496-3 1.6.2.1).
/// Why an MP4's media timescale `scale` contradicts its AAC configuration's `rate`, if
/// it does: its first sample lasts `delta` units, which an AAC frame (1024 or 960
/// samples at `rate`, 2048 with SBR) fills only in a timescale equal to the rate. A
/// timescale the durations agree with is a true unit (the edit list is converted from
/// it); one they contradict would read the edit list in the wrong unit (every offset
/// 23 ms early for a timescale halved from 44100).
fn timescale_contradiction(scale: u32, delta: u32, rate: u32, sbr: bool) -> Option<String> {
    let frames: &[u64] = if sbr {
        &[1024, 960, 2048]
    } else {
        &[1024, 960]
    };
    let (scale, delta, rate) = (u64::from(scale), u64::from(delta), u64::from(rate));
    // `delta` units of `scale` hold `f` samples of `rate`, within one unit of rounding.
    let fits = |f: u64| (delta * rate).abs_diff(f * scale) <= rate;
    if frames.iter().any(|f| fits(*f)) {
        return None;
    }
    Some(format!(
        "its MP4 media timescale (mdhd) is {scale} but its AAC configuration says {rate} Hz, and its samples last {delta} units each, not an AAC frame at {rate} Hz in that timescale: one of the fields is corrupt, and the edit list (encoder delay) would be read in the wrong unit, so every offset would be wrong"
    ))
}

fn asc_rate(asc: &[u8]) -> Option<u32> {
    const RATES: [u32; 13] = [
        96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
    ];
    let bits = u64::from_be_bytes({
        let mut b = [0u8; 8];
        let n = asc.len().min(8);
        b[..n].copy_from_slice(&asc[..n]);
        b
    });
    let mut pos = 0u32;
    let mut take = |n: u32| -> u64 {
        let v = (bits >> (64 - pos - n)) & ((1u64 << n) - 1);
        pos += n;
        v
    };
    let object = take(5);
    if object == 31 {
        take(6);
    }
    match take(4) {
        15 => u32::try_from(take(24)).ok().filter(|r| *r > 0),
        i => RATES.get(i as usize).copied(),
    }
}

/// The one audio track of a file (tracks symphonia has no codec for, video among them,
/// are not audio). `Err(None)` when there is none; `Err(Some(reason))` when there are
/// several (a language or commentary version, an ad-free mix): only one would be
/// examined, and a clip in another stored as "not found" in audio nobody looked at, so
/// such a file is refused naming its tracks rather than half-researched.
fn audio_track(
    tracks: &[symphonia::core::formats::Track],
) -> Result<&symphonia::core::formats::Track, Option<String>> {
    let audio: Vec<_> = tracks
        .iter()
        .filter(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .collect();
    match audio.as_slice() {
        [] => Err(None),
        [one] => Ok(one),
        many => Err(Some(format!(
            "it holds {} audio tracks ({}): only one would be examined, so a clip in another would be stored as not found; serve each episode with one audio track",
            many.len(),
            many.iter()
                .map(|t| format!("track {}: {}", t.id, codec_name(t.codec_params.codec)))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn check_rate(rate: Option<u32>, input: &str) -> Result<u32, DecodeError> {
    match rate {
        Some(r) if (MIN_SOURCE_RATE..MIN_MATCH_RATE).contains(&r) => {
            Err(DecodeError::RateBelowBand {
                input: input.to_string(),
                rate: r,
            })
        }
        Some(r) if (MIN_SOURCE_RATE..=MAX_SOURCE_RATE).contains(&r) => Ok(r),
        _ => Err(DecodeError::AbsurdSampleRate {
            input: input.to_string(),
            rate,
        }),
    }
}

fn make_decoder(
    params: &sc::CodecParameters,
    input: &str,
) -> Result<Box<dyn Decoder>, DecodeError> {
    make_codec_decoder(params).map_err(|reason| DecodeError::UnsupportedCodec {
        input: input.to_string(),
        reason,
    })
}

/// The decoder this build uses for a track (symphonia's, or libopus for Opus:
/// [`opus`]); `Err` with [`unsupported_reason`]'s text. One rule for the decoder and the
/// researcher's probe, so what the probe accepts is what decodes.
pub fn make_codec_decoder(params: &sc::CodecParameters) -> Result<Box<dyn Decoder>, String> {
    if params.codec == sc::CODEC_TYPE_ALAC {
        if let Some(cookie) = params.extra_data.as_deref() {
            lengths::check_alac_cookie(cookie)?;
        }
    }
    if opus::is_opus(params) {
        return opus::OpusDecoder::new(params)
            .map(|d| Box::new(d) as Box<dyn Decoder>)
            .map_err(|reason| reason.to_string());
    }
    symphonia::default::get_codecs()
        .make(params, &DecoderOptions::default())
        .map_err(|e| unsupported_reason(params, &e.to_string()))
}

/// The frames a packet would have decoded to, at `rate` (for the silence replacing it).
fn packet_frames(packet: &Packet, params: &sc::CodecParameters, rate: u32) -> usize {
    let dur = packet.dur;
    let frames = match params.time_base {
        Some(tb) if tb.denom != rate || tb.numer != 1 => {
            (dur as f64 * tb.numer as f64 / tb.denom as f64 * rate as f64).round() as u64
        }
        _ => dur,
    };
    // A damaged header can claim anything: at most a second per packet.
    frames.min(rate as u64) as usize
}

fn flush(tx: &std::sync::mpsc::SyncSender<Msg>, chunk: &mut Vec<f32>) {
    if chunk.is_empty() {
        return;
    }
    let full = std::mem::replace(chunk, Vec::with_capacity(SEND_CHUNK + 8192));
    let _ = tx.send(Msg::Samples(full));
}

/// Appends the mono mix of `buf` to `out` (the average of its channels, or the side of
/// a stereo block in opposite phase: [`antiphase`]); returns its frames.
fn mix(
    buf: &AudioBufferRef<'_>,
    sample_buf: &mut Option<SampleBuffer<f32>>,
    out: &mut Vec<f32>,
) -> usize {
    let spec = *buf.spec();
    let nch = spec.channels.count().max(1);
    let frames = buf.frames();
    if !downmix_planar(buf, out) {
        // Not f32 planar (PCM, FLAC, ...): through an interleaved copy.
        let needed = buf.capacity() as u64;
        let sb = match sample_buf {
            Some(sb) if sb.capacity() as u64 >= needed * nch as u64 => sb,
            _ => sample_buf.insert(SampleBuffer::<f32>::new(needed, spec)),
        };
        sb.copy_interleaved_ref(buf.clone());
        let data = sb.samples();
        let frames_data = data.chunks_exact(nch).take(frames);
        if nch == 2 && antiphase(frames_data.clone().map(|f| (f[0], f[1]))) {
            out.extend(frames_data.map(|f| (f[0] - f[1]) * 0.5));
        } else {
            let inv = 1.0 / nch as f32;
            out.extend(frames_data.map(|f| f.iter().sum::<f32>() * inv));
        }
    }
    frames
}

/// How much more energy the side signal (L-R)/2 must have than the mid (L+R)/2 before
/// a stereo block is analysed as its side: 20 dB. Channels in opposite phase (L = -R,
/// a wiring or editing slip) cancel to digital silence in the plain average, and an
/// episode heard as silence would store every clip as "not found"; their side signal
/// is the audio. Ordinary stereo has far more mid than side and keeps the average.
const ANTIPHASE_RATIO: f32 = 100.0;

/// Whether a block of stereo frames is in opposite phase (its mid cancels while its
/// side does not), so its side is what it holds ([`ANTIPHASE_RATIO`]).
fn antiphase(frames: impl Iterator<Item = (f32, f32)>) -> bool {
    let (mid, side) = frames.fold((0.0f64, 0.0f64), |(m, s), (l, r)| {
        let (l, r) = (f64::from(l), f64::from(r));
        (m + (l + r) * (l + r), s + (l - r) * (l - r))
    });
    side > 0.0 && side > mid * f64::from(ANTIPHASE_RATIO)
}

/// Appends the average of all channels of `buf` (the side of an [`antiphase`] stereo
/// block) to `out` when it holds planar f32
/// (what the MP3, AAC and Vorbis decoders produce), reading the channel planes directly
/// instead of through an interleaved copy. Returns false for other sample formats.
fn downmix_planar(buf: &AudioBufferRef<'_>, out: &mut Vec<f32>) -> bool {
    let AudioBufferRef::F32(b) = buf else {
        return false;
    };
    let nch = b.spec().channels.count();
    let frames = b.frames();
    if nch == 0 {
        return true;
    }
    if nch == 2 {
        let (l, r) = (&b.chan(0)[..frames], &b.chan(1)[..frames]);
        if antiphase(l.iter().copied().zip(r.iter().copied())) {
            out.extend(l.iter().zip(r).map(|(l, r)| (l - r) * 0.5));
            return true;
        }
    }
    let start = out.len();
    out.extend_from_slice(&b.chan(0)[..frames]);
    let mixed = &mut out[start..];
    for c in 1..nch {
        for (o, v) in mixed.iter_mut().zip(&b.chan(c)[..frames]) {
            *o += *v;
        }
    }
    if nch > 1 {
        let inv = 1.0 / nch as f32;
        mixed.iter_mut().for_each(|o| *o *= inv);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_drops_priming_and_padding_across_packets() {
        let mut t = Trim {
            skip: 1500,
            keep: Some(1000),
            pos: 0,
        };
        let mut out = Vec::new();
        let mut kept = 0;
        for p in 0..4 {
            out.extend((0..1024).map(|i| (p * 1024 + i) as f32));
            kept += t.apply(&mut out, 1024);
        }
        assert_eq!(kept, 1000);
        assert_eq!(out.len(), 1000);
        assert_eq!(out[0], 1500.0);
        assert_eq!(out[999], 2499.0);
    }

    #[test]
    fn a_timescale_its_durations_agree_with_is_kept() {
        // A 90 kHz timescale whose durations are AAC frames at 44.1 kHz: a true unit.
        assert_eq!(timescale_contradiction(90_000, 2090, 44_100, false), None);
        // Halved by a corrupt mdhd, the durations still in 44.1 kHz samples.
        let reason = timescale_contradiction(22_050, 1024, 44_100, false).unwrap_or_default();
        assert!(
            reason.contains("22050") && reason.contains("44100"),
            "{reason}"
        );
        assert!(timescale_contradiction(48_000, 1024, 44_100, false).is_some());
    }

    #[test]
    fn audio_specific_config_rates() {
        // AAC-LC (2), index 0 (96 kHz), stereo.
        assert_eq!(asc_rate(&[0x10, 0x10]), Some(96000));
        // AAC-LC, index 4 (44.1 kHz).
        assert_eq!(asc_rate(&[0x12, 0x10]), Some(44100));
        assert_eq!(asc_rate(&[0x15, 0x88]), Some(8000));
    }

    #[test]
    fn opus_and_alac_are_named() {
        assert_eq!(codec_name(sc::CODEC_TYPE_OPUS), "Opus");
        let mut p = sc::CodecParameters::new();
        p.for_codec(sc::CODEC_TYPE_SPEEX);
        assert!(unsupported_reason(&p, "x").starts_with("Speex is not supported"));
        // A supported codec refused for its layout says so, not "AAC is not supported".
        p.for_codec(sc::CODEC_TYPE_AAC)
            .with_channel_layout(symphonia::core::audio::Layout::FivePointOne);
        let r = unsupported_reason(&p, "x");
        assert!(r.starts_with("AAC with 6 channels is not supported"), "{r}");
    }
}
