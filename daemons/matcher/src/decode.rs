//! Decoding audio files/streams to mono f32 at [`ANALYSIS_RATE`].
//!
//! Uses symphonia (MP3, AAC in MP4/M4A, Ogg Vorbis, FLAC, WAV/PCM) with
//! **gapless decoding on** (without it a LAME MP3 comes out ~25 ms late),
//! mixes *all* channels to mono (plain average) and resamples with rubato's
//! FFT resampler (its delay is compensated, so sample 0 of the output is
//! time 0 of the input).
//!
//! Truncated streams: if a stream breaks after some audio was decoded, the
//! decoded prefix is returned and the problem is recorded in
//! [`DecodedAudio::warnings`] (the episode is still useful up to that point).
//! A stream that breaks before any audio decodes is a
//! [`DecodeError::Corrupt`].

use std::fs::File;
use std::path::Path;

use rubato::{FftFixedIn, Resampler};
use serde::{Deserialize, Serialize};
use symphonia::core::audio::{AudioBufferRef, SampleBuffer, Signal};
use symphonia::core::codecs::{DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use crate::ANALYSIS_RATE;

pub use symphonia::core::io::MediaSource as Source;

/// Lowest accepted source sample rate (Hz).
pub const MIN_SOURCE_RATE: u32 = 1000;
/// Highest accepted source sample rate (Hz).
pub const MAX_SOURCE_RATE: u32 = 768_000;

/// Decoded audio: mono f32 samples at [`ANALYSIS_RATE`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecodedAudio {
    /// Mono samples at [`ANALYSIS_RATE`] (all source channels averaged).
    pub samples: Vec<f32>,
    /// Sample rate of the source stream (Hz).
    pub source_rate: u32,
    /// Number of channels in the source stream.
    pub channels: u16,
    /// Duration of the decoded audio in seconds.
    pub duration_s: f64,
    /// Non-fatal problems (e.g. a truncated stream whose prefix decoded).
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
    /// The container is known but the codec is not supported.
    #[error("{input}: unsupported codec: {reason}")]
    UnsupportedCodec {
        /// Offending input.
        input: String,
        /// Underlying error text.
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
    /// The stream decoded to zero samples.
    #[error("{input}: stream contains no audio samples")]
    Empty {
        /// Offending input.
        input: String,
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

/// Decodes a file (the extension is used as a format hint).
pub fn decode_file(path: &Path) -> Result<DecodedAudio, DecodeError> {
    let input = path.display().to_string();
    let file = File::open(path).map_err(|e| DecodeError::Io {
        input: input.clone(),
        reason: e.to_string(),
    })?;
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_owned);
    decode_source(Box::new(file), ext.as_deref(), &input)
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

/// Like [`decode_reader`] but names the input (path or URL) in errors.
pub fn decode_source(
    source: Box<dyn MediaSource>,
    hint_ext: Option<&str>,
    input: &str,
) -> Result<DecodedAudio, DecodeError> {
    let input = input.to_owned();
    let mss = MediaSourceStream::new(source, Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = hint_ext {
        hint.with_extension(ext);
    }
    let fmt_opts = FormatOptions {
        enable_gapless: true,
        ..Default::default()
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, mss, &fmt_opts, &MetadataOptions::default())
        .map_err(|e| match e {
            SymError::IoError(ref io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
                DecodeError::Io {
                    input: input.clone(),
                    reason: e.to_string(),
                }
            }
            _ => DecodeError::NotAudio {
                input: input.clone(),
                reason: e.to_string(),
            },
        })?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| DecodeError::NotAudio {
            input: input.clone(),
            reason: "no audio track".into(),
        })?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let rate = params.sample_rate;
    let source_rate = match rate {
        Some(r) if (MIN_SOURCE_RATE..=MAX_SOURCE_RATE).contains(&r) => r,
        _ => return Err(DecodeError::AbsurdSampleRate { input, rate }),
    };
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| DecodeError::UnsupportedCodec {
            input: input.clone(),
            reason: e.to_string(),
        })?;
    let expected = params.n_frames.unwrap_or(0);
    let mono = MonoResampler::new(source_rate, expected, &input)?;
    // Resampling runs on a second thread, pipelined with decoding.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<f32>>(64);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || -> Result<MonoResampler, DecodeError> {
            let mut mono = mono;
            for chunk in rx {
                mono.push_interleaved(&chunk, 1)?;
            }
            Ok(mono)
        });
        let mut frames_in: u64 = 0;
        let mut channels: u16 = params.channels.map(|c| c.count() as u16).unwrap_or(0);
        let mut warnings = Vec::new();
        let mut sample_buf: Option<SampleBuffer<f32>> = None;
        let mut decode_errors = 0usize;
        let mut chunk: Vec<f32> = Vec::with_capacity(SEND_CHUNK + 8192);
        loop {
            let packet = match format.next_packet() {
                Ok(p) => p,
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(SymError::ResetRequired) => break,
                Err(e) => {
                    if frames_in == 0 {
                        return Err(DecodeError::Corrupt {
                            input,
                            reason: e.to_string(),
                        });
                    }
                    warnings.push(format!(
                        "stream broke after {:.3} s: {e}; keeping the decoded prefix",
                        frames_in as f64 / source_rate as f64
                    ));
                    break;
                }
            };
            if packet.track_id() != track_id {
                continue;
            }
            match decoder.decode(&packet) {
                Ok(buf) => {
                    let spec = *buf.spec();
                    if spec.rate != source_rate {
                        return Err(DecodeError::AbsurdSampleRate {
                            input,
                            rate: Some(spec.rate),
                        });
                    }
                    let nch = spec.channels.count().max(1);
                    channels = nch as u16;
                    let frames = buf.frames();
                    frames_in += frames as u64;
                    if !downmix_planar(&buf, &mut chunk) {
                        // Not f32 planar (PCM, FLAC, ...): through an interleaved copy.
                        let needed = buf.capacity() as u64;
                        let sb = match &mut sample_buf {
                            Some(sb) if sb.capacity() as u64 >= needed * nch as u64 => sb,
                            _ => sample_buf.insert(SampleBuffer::<f32>::new(needed, spec)),
                        };
                        sb.copy_interleaved_ref(buf);
                        let data = sb.samples();
                        let inv = 1.0 / nch as f32;
                        chunk.extend(data.chunks_exact(nch).map(|f| f.iter().sum::<f32>() * inv));
                    }
                    // Hand the resampler large chunks: one message per packet (about
                    // 1,150 frames) costs a thread wake-up each, more than the mixing.
                    if chunk.len() >= SEND_CHUNK {
                        let full =
                            std::mem::replace(&mut chunk, Vec::with_capacity(SEND_CHUNK + 8192));
                        if tx.send(full).is_err() {
                            break;
                        }
                    }
                }
                Err(SymError::DecodeError(msg)) => {
                    decode_errors += 1;
                    if decode_errors == 1 {
                        warnings.push(format!("skipped undecodable packet(s): {msg}"));
                    }
                    continue;
                }
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => {
                    if frames_in == 0 {
                        return Err(DecodeError::Corrupt {
                            input,
                            reason: e.to_string(),
                        });
                    }
                    warnings.push(format!("decoder stopped: {e}; keeping the decoded prefix"));
                    break;
                }
            }
        }
        if !chunk.is_empty() {
            let _ = tx.send(chunk);
        }
        if decode_errors > 1 {
            warnings.push(format!("{decode_errors} undecodable packets skipped"));
        }
        if frames_in == 0 {
            if decode_errors > 0 {
                return Err(DecodeError::Corrupt {
                    input,
                    reason: format!("{decode_errors} undecodable packets, no audio"),
                });
            }
            return Err(DecodeError::Empty { input });
        }
        drop(tx);
        let mono = worker.join().map_err(|_| DecodeError::Corrupt {
            input: input.clone(),
            reason: "resampler thread panicked".into(),
        })??;
        let samples = mono.finish()?;
        let duration_s = samples.len() as f64 / ANALYSIS_RATE as f64;
        Ok(DecodedAudio {
            samples,
            source_rate,
            channels,
            duration_s,
            warnings,
        })
    })
}

/// Mono samples per message from the decoding thread to the resampling thread.
const SEND_CHUNK: usize = 1 << 16;

/// Appends the average of all channels of `buf` to `out` when it holds planar f32
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

/// Streaming mixer + resampler to mono at [`ANALYSIS_RATE`].
struct MonoResampler {
    input: String,
    rs: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    out: Vec<f32>,
    frames_in: u64,
    source_rate: u32,
    outbuf: Vec<Vec<f32>>,
}

impl MonoResampler {
    fn new(source_rate: u32, expected_frames: u64, input: &str) -> Result<Self, DecodeError> {
        let rs = if source_rate == ANALYSIS_RATE {
            None
        } else {
            Some(
                FftFixedIn::<f32>::new(source_rate as usize, ANALYSIS_RATE as usize, 4096, 2, 1)
                    .map_err(|e| DecodeError::AbsurdSampleRate {
                        input: format!("{input} ({e})"),
                        rate: Some(source_rate),
                    })?,
            )
        };
        let cap = (expected_frames as f64 * ANALYSIS_RATE as f64 / source_rate as f64) as usize;
        let outbuf = match &rs {
            Some(r) => vec![vec![0.0; r.output_frames_max()]],
            None => Vec::new(),
        };
        Ok(Self {
            input: input.to_owned(),
            rs,
            pending: Vec::new(),
            out: Vec::with_capacity(cap.min(1 << 27) + 16),
            frames_in: 0,
            source_rate,
            outbuf,
        })
    }

    fn push_interleaved(&mut self, data: &[f32], nch: usize) -> Result<(), DecodeError> {
        let frames = data.len() / nch;
        self.frames_in += frames as u64;
        let target: &mut Vec<f32> = if self.rs.is_some() {
            &mut self.pending
        } else {
            &mut self.out
        };
        if nch == 1 {
            target.extend_from_slice(&data[..frames]);
        } else {
            let inv = 1.0 / nch as f32;
            target.extend(data.chunks_exact(nch).map(|f| f.iter().sum::<f32>() * inv));
        }
        self.drain(false)
    }

    fn drain(&mut self, flush: bool) -> Result<(), DecodeError> {
        let Some(rs) = self.rs.as_mut() else {
            return Ok(());
        };
        let mut pos = 0;
        loop {
            let need = rs.input_frames_next();
            if self.pending.len() - pos >= need {
                let (_, n_out) = rs
                    .process_into_buffer(&[&self.pending[pos..pos + need]], &mut self.outbuf, None)
                    .map_err(|e| DecodeError::Corrupt {
                        input: self.input.clone(),
                        reason: format!("resampler: {e}"),
                    })?;
                self.out.extend_from_slice(&self.outbuf[0][..n_out]);
                pos += need;
            } else {
                break;
            }
        }
        self.pending.drain(..pos);
        if flush {
            // Feed the remainder and then zeros until the delayed tail is out.
            let delay = rs.output_delay();
            let want = (self.frames_in as f64 * ANALYSIS_RATE as f64 / self.source_rate as f64)
                .round() as usize
                + delay;
            let mut first = true;
            while self.out.len() < want {
                let rest: Vec<f32> = if first {
                    std::mem::take(&mut self.pending)
                } else {
                    Vec::new()
                };
                first = false;
                let input: Option<&[&[f32]]> = if rest.is_empty() {
                    None
                } else {
                    Some(&[rest.as_slice()][..])
                };
                let (_, n_out) = rs
                    .process_partial_into_buffer(input, &mut self.outbuf, None)
                    .map_err(|e| DecodeError::Corrupt {
                        input: self.input.clone(),
                        reason: format!("resampler: {e}"),
                    })?;
                self.out.extend_from_slice(&self.outbuf[0][..n_out]);
            }
            self.out.truncate(want);
            self.out.drain(..delay.min(self.out.len()));
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<f32>, DecodeError> {
        self.drain(true)?;
        if self.out.capacity() > self.out.len() + self.out.len() / 8 + 1024 {
            self.out.shrink_to_fit();
        }
        Ok(self.out)
    }
}
