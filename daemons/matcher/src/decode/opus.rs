//! Opus (Ogg Opus, as many podcast hosts serve it), which symphonia 0.5 reads but does
//! not decode: its Ogg reader delimits the packets, turns the granule positions into
//! timestamps and marks the pre-skip and the end trimming on each packet; this wraps
//! libopus (the reference decoder, through the `opus` crate, linked to Debian's
//! `libopus`) as a symphonia [`Decoder`] that honours those marks. The pure-Rust
//! decoders on crates.io are young ports; libopus is what every player uses.
//!
//! Mono and stereo streams (channel mapping family 0, or family 1 with one stream) are
//! decoded; surround (several Opus streams) is refused with its channel count.

use std::sync::Mutex;

use symphonia::core::audio::{AsAudioBufferRef, AudioBuffer, AudioBufferRef, Signal, SignalSpec};
use symphonia::core::codecs::{
    CodecDescriptor, CodecParameters, Decoder, DecoderOptions, FinalizeResult, CODEC_TYPE_OPUS,
};
use symphonia::core::errors::{Error, Result};
use symphonia::core::formats::Packet;

/// Opus always decodes at 48 kHz.
const RATE: u32 = 48_000;
/// The longest Opus packet: 120 ms at 48 kHz.
const MAX_FRAMES: usize = 5760;

/// libopus behind symphonia's [`Decoder`] trait.
pub(super) struct OpusDecoder {
    /// libopus' state is not `Sync`; the trait wants it, and one thread uses it.
    inner: Mutex<opus::Decoder>,
    params: CodecParameters,
    channels: usize,
    pcm: Vec<f32>,
    buf: AudioBuffer<f32>,
    /// Pre-skip samples still to drop (OpusHead's; symphonia 0.5's Ogg reader does not
    /// mark them: offsets came out 6.5 ms late with ffmpeg's 312).
    to_skip: usize,
}

impl OpusDecoder {
    /// A decoder for an Ogg Opus track; `Err` with the reason for a form it does not
    /// decode (more than two channels, several streams).
    pub(super) fn new(params: &CodecParameters) -> std::result::Result<OpusDecoder, String> {
        let channels = params.channels.ok_or("Opus without a channel layout")?;
        let n = channels.count();
        // OpusHead: byte 18 is the mapping family, 19 the stream count when it is not 0.
        let head = params.extra_data.as_deref().unwrap_or_default();
        let streams = match head.get(18) {
            Some(0) | None => 1,
            Some(_) => head.get(19).copied().unwrap_or(0),
        };
        let layout = match (n, streams) {
            (1, 1) => opus::Channels::Mono,
            (2, 1) => opus::Channels::Stereo,
            _ => {
                return Err(format!(
                    "Opus with {n} channels in {streams} streams is not supported (this build decodes Opus in mono or stereo)"
                ))
            }
        };
        let inner = opus::Decoder::new(RATE, layout).map_err(|e| format!("libopus: {e}"))?;
        let pre_skip = head_pre_skip(head) as usize;
        Ok(OpusDecoder {
            inner: Mutex::new(inner),
            params: params.clone(),
            channels: n,
            pcm: vec![0.0; MAX_FRAMES * n],
            buf: AudioBuffer::new(MAX_FRAMES as u64, SignalSpec::new(RATE, channels)),
            to_skip: pre_skip,
        })
    }
}

impl Decoder for OpusDecoder {
    fn try_new(params: &CodecParameters, _options: &DecoderOptions) -> Result<Self> {
        OpusDecoder::new(params).map_err(|_| Error::Unsupported("opus: this form of Opus"))
    }

    fn supported_codecs() -> &'static [CodecDescriptor] {
        &[]
    }

    fn reset(&mut self) {
        if let Ok(mut d) = self.inner.lock() {
            let _ = d.reset_state();
        }
    }

    fn codec_params(&self) -> &CodecParameters {
        &self.params
    }

    fn decode(&mut self, packet: &Packet) -> Result<AudioBufferRef<'_>> {
        let frames = {
            let mut d = self
                .inner
                .lock()
                .map_err(|_| Error::DecodeError("opus: decoder poisoned"))?;
            d.decode_float(&packet.data, &mut self.pcm, false)
                .map_err(|_| Error::DecodeError("opus: invalid packet"))?
        };
        self.buf.clear();
        self.buf.render_reserved(Some(frames));
        for ch in 0..self.channels {
            let plane = self.buf.chan_mut(ch);
            for (i, s) in plane.iter_mut().enumerate().take(frames) {
                *s = self.pcm[i * self.channels + ch];
            }
        }
        // The pre-skip (counted here, since the reader does not), and the reader's end
        // trimming from the last page's granule position.
        let skip = self.to_skip.min(frames);
        self.to_skip -= skip;
        let start = skip.max(packet.trim_start as usize);
        let end = (packet.trim_end as usize).min(frames - start);
        self.buf.trim(start, end);
        Ok(self.buf.as_audio_buffer_ref())
    }

    fn finalize(&mut self) -> FinalizeResult {
        FinalizeResult::default()
    }

    fn last_decoded(&self) -> AudioBufferRef<'_> {
        self.buf.as_audio_buffer_ref()
    }
}

/// The pre-skip an OpusHead states (bytes 10-11, little-endian; RFC 7845 section 5.1):
/// samples at 48 kHz the decoder drops first. One rule for the decoder, which drops
/// them, and the declared duration, which is the last granule position less them
/// (RFC 7845 section 4.3). `head` is Ogg's OpusHead, not MP4's `dOps`, which holds the
/// pre-skip big-endian.
pub(super) fn head_pre_skip(head: &[u8]) -> u64 {
    head.get(10..12)
        .map_or(0, |b| u64::from(u16::from_le_bytes([b[0], b[1]])))
}

/// Whether `params` is Opus (decoded here, not by symphonia).
pub(super) fn is_opus(params: &CodecParameters) -> bool {
    params.codec == CODEC_TYPE_OPUS
}
