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

/// Where the next packet must start; one per decode of a positioned stream.
#[derive(Debug)]
pub(super) struct Continuity {
    /// What the positions come from, for the reason ("Ogg granule positions").
    what: &'static str,
    /// One past the last frame of the previous packet, once one was seen.
    next: Option<u64>,
}

impl Continuity {
    /// A check of the positions `what` names.
    pub(super) fn new(what: &'static str) -> Continuity {
        Continuity { what, next: None }
    }

    /// Why `packet` cannot follow the previous one (it starts later than that one
    /// ended: audio lost between them; or earlier: audio repeated), if it cannot. `rate` turns frames into seconds.
    pub(super) fn check(&mut self, packet: &Packet, rate: u32) -> Option<String> {
        let start = packet.ts();
        let expected = self.next.replace(start.saturating_add(packet.dur()));
        let expected = expected?;
        let seconds = |n: u64| n as f64 / f64::from(rate.max(1));
        if start < expected {
            // A page or frame repeated (a resumed download re-appending bytes, a muxer
            // fault): its audio is decoded twice and every later offset would be late.
            let repeated = expected - start;
            return Some(format!(
                "the {} go back from sample {expected} ({:.3} s) to {start}: {repeated} samples ({:.1} ms) repeated midway (pages or frames repeated), so every later offset would be late",
                self.what,
                seconds(expected),
                seconds(repeated) * 1000.0,
            ));
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
