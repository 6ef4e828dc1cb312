//! Gaps in a stream whose packets carry their own position.
//!
//! An Ogg page's granule position and a FLAC frame header's frame or sample number say
//! where each packet's audio starts. When whole pages or frames are cut out midway the
//! reader goes on from the next one it finds, and the decode is short by what was cut:
//! less than a duration tolerance can see (a page of `oggenc -q 10` is ~60 ms), and a
//! streamed FLAC declares no length at all. Every offset after the cut would be early,
//! so a packet that starts later than the previous one ended is a lost stretch. A packet
//! that starts earlier (a page repeated midway: a resumed download that re-appended
//! bytes) would be decoded twice and every later offset would be late: refused too.

use symphonia::core::formats::Packet;

/// Longest audio (seconds) that may follow an Ogg stream's end trimming read as a step
/// back: the last page of a stream (ffmpeg's muxer fills a page with about a second).
const END_PAGE_S: f64 = 2.0;

/// Where the next packet must start; one per decode of a positioned stream.
#[derive(Debug)]
pub(super) struct Continuity {
    /// What the positions come from, for the reason ("Ogg granule positions").
    what: &'static str,
    /// One past the last frame of the previous packet, once one was seen.
    next: Option<u64>,
    /// Whether a step back smaller than its packet may be an Ogg stream's end trimming.
    ogg: bool,
    /// Such a step back, taken for end trimming until more than [`END_PAGE_S`] of audio
    /// follows it: (the reason if it was not, frames since).
    pending: Option<(String, u64)>,
    /// Whether a packet went back to sample 0: a second stream from its beginning (two
    /// FLAC files joined), which the caller can name.
    restarted: bool,
}

impl Continuity {
    /// A check of the positions `what` names.
    pub(super) fn new(what: &'static str) -> Continuity {
        Continuity {
            what,
            next: None,
            ogg: false,
            pending: None,
            restarted: false,
        }
    }

    /// A check of an Ogg stream's granule positions. Its last page's granule is where
    /// the audio ends, before the packets' full length: the reader gives the page's first
    /// packet an earlier start by the end trimming when it did not find the stream's end
    /// at the end of the file (an Ogg with a video stream that runs on after the audio
    /// was refused as "repeated midway"). A step back smaller than the packet it occurs
    /// at (a repeated page steps back by at least a whole packet), with the stream ending
    /// within [`END_PAGE_S`] after it, is that trimming.
    pub(super) fn ogg() -> Continuity {
        Continuity {
            ogg: true,
            ..Continuity::new("Ogg granule positions")
        }
    }

    /// Whether a packet went back to sample 0 (see `check`): the stream starts again.
    pub(super) fn restarted(&self) -> bool {
        self.restarted
    }

    /// Why `packet` cannot follow the previous one (it starts later than that one
    /// ended: audio lost between them; or earlier: audio repeated), if it cannot. `rate` turns frames into seconds.
    pub(super) fn check(&mut self, packet: &Packet, rate: u32) -> Option<String> {
        let start = packet.ts();
        let expected = self.next.replace(start.saturating_add(packet.dur()));
        let expected = expected?;
        let seconds = |n: u64| n as f64 / f64::from(rate.max(1));
        if let Some((_, after)) = self.pending.as_mut() {
            *after += packet.dur();
            if seconds(*after) > END_PAGE_S {
                return self.pending.take().map(|(reason, _)| reason);
            }
        }
        if start < expected {
            self.restarted |= start == 0;
            // A page or frame repeated (a resumed download re-appending bytes, a muxer
            // fault): its audio is decoded twice and every later offset would be late.
            let repeated = expected - start;
            let reason = format!(
                "the {} go back from sample {expected} ({:.3} s) to {start}: {repeated} samples ({:.1} ms) repeated midway (pages or frames repeated), so every later offset would be late",
                self.what,
                seconds(expected),
                seconds(repeated) * 1000.0,
            );
            if self.ogg && self.pending.is_none() && repeated < packet.dur() {
                self.pending = Some((reason, 0));
                return None;
            }
            return Some(reason);
        }
        (start > expected).then(|| {
            let missing = start - expected;
            format!(
                "the {} jump from sample {expected} ({:.3} s) to {start}: {missing} samples ({:.1} ms) lost midway (pages or frames cut out), so every later offset would be early",
                self.what,
                expected as f64 / f64::from(rate.max(1)),
                missing as f64 * 1000.0 / f64::from(rate.max(1)),
            )
        })
    }
}
