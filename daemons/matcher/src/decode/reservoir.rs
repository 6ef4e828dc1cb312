//! The MP3 bit reservoir, as evidence of frames cut out or repeated midway.
//!
//! A layer III frame's side information says where its main data starts:
//! `main_data_begin` bytes before its own slot, in space the frames before it left
//! unused after their own data (the bit reservoir). When whole frames are cut out
//! midway, or repeated, the frame after the damage reaches back into bytes that now
//! belong to other frames' data: more than the frames before it actually left free.
//! The decoder only warns ("invalid main_data_begin, underflow") and decodes the frame
//! with part of its data missing; the stream comes out frames short or long and every
//! later offset moves. So an underflow after the first frame of a stream (where a
//! capture that starts midway may begin) is lost or repeated audio.
//!
//! It catches about half of such damage (a frame after the damage whose
//! `main_data_begin` is 0, or small enough, shows nothing), and never fires on what
//! LAME or ffmpeg write: every frame's data must end before the next one's begins.

use super::mp3::side_info_len;

/// What the frames so far left free, for one stream of layer III frames.
#[derive(Debug, Default)]
pub(super) struct Reservoir {
    /// Bytes after the previous frame's data end, in its slot and before; `None` before
    /// a stream's first frame (it may start midway).
    free: Option<u64>,
    /// Frames seen, and output samples before the current one (for the reason).
    frames: u64,
    samples: u64,
    /// The first underflow: why.
    pub(super) underflow: Option<String>,
}

impl Reservoir {
    /// A new stream starts (a Xing/Info frame, a new file joined): its first frame may
    /// reach back into nothing.
    pub(super) fn restart(&mut self) {
        self.free = None;
    }

    /// Accounts one frame: `head` its first bytes (header, CRC, side information), `len`
    /// its length, `frame_samples` and `rate` for the time in the reason.
    pub(super) fn frame(&mut self, head: &[u8], len: usize, frame_samples: u64, rate: u32) {
        let index = self.frames;
        let at_s = self.samples as f64 / f64::from(rate.max(1));
        self.frames += 1;
        self.samples += frame_samples;
        let Some((begin, main, used)) = main_data(head, len) else {
            self.free = None;
            return;
        };
        if let Some(free) = self.free {
            if begin > free && self.underflow.is_none() {
                self.underflow = Some(format!(
                    "MP3 frame {} (at {at_s:.3} s) takes its data from {begin} bytes before it, but the frames before it left only {free} free (bit reservoir underflow by {} bytes): frames were cut out or repeated midway, so every later offset would be wrong",
                    index + 1,
                    begin - free
                ));
            }
        }
        // This frame's data ends `used` bytes after it starts, `begin` bytes before its
        // slot of `main` bytes: what is left after it is free for the next frames.
        self.free = Some((begin + main).saturating_sub(used));
    }
}

/// (main_data_begin, main data bytes in the frame's slot, bytes its granules use) of a
/// layer III frame whose header and side information are in `head`.
fn main_data(head: &[u8], len: usize) -> Option<(u64, u64, u64)> {
    let b1 = *head.get(1)?;
    if (b1 >> 1) & 3 != 1 {
        return None; // not layer III: no reservoir
    }
    let mpeg1 = (b1 >> 3) & 3 == 3;
    let crc = b1 & 1 == 0;
    let mono = head.get(3)? >> 6 == 3;
    let side = side_info_len(mpeg1, mono);
    let start = 4 + if crc { 2 } else { 0 };
    let mut bits = Bits {
        data: head.get(start..start + side)?,
        pos: 0,
    };
    let channels = if mono { 1 } else { 2 };
    let (begin, granules, rest) = if mpeg1 {
        let begin = bits.take(9)?;
        bits.take(if mono { 5 } else { 3 })?;
        bits.take(4 * channels)?;
        (begin, 2, 47)
    } else {
        let begin = bits.take(8)?;
        bits.take(if mono { 1 } else { 2 })?;
        (begin, 1, 51)
    };
    let mut used_bits = 0u64;
    for _ in 0..granules * channels {
        used_bits += bits.take(12)?;
        bits.take(rest)?;
    }
    let main = (len as u64).checked_sub((start + side) as u64)?;
    Some((begin, main, used_bits.div_ceil(8)))
}

/// A big-endian bit reader over the side information.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn take(&mut self, n: usize) -> Option<u64> {
        let mut v = 0u64;
        for _ in 0..n {
            let byte = *self.data.get(self.pos / 8)?;
            v = (v << 1) | u64::from((byte >> (7 - self.pos % 8)) & 1);
            self.pos += 1;
        }
        Some(v)
    }
}
