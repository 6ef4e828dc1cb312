//! The overview's chart: research progress and throughput over time, from samples the
//! console keeps in memory of its own overviews (the `status` report it already builds),
//! drawn as inline SVG.
//!
//! Why its own polls rather than the daemons' metrics: the console reads ZooKeeper and
//! the database, the source of truth every daemon writes to; the metrics are per
//! process (each `run` or researcher has its own `/metrics`, and the console would
//! have to be told every address and sum counters that reset on restart). The cost:
//! the history starts when the console starts and is lost on its restart (docs).

use std::collections::VecDeque;
use std::sync::Mutex;

use maud::{html, Markup};

/// One sample of the research progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When (unix ms, the status report's clock).
    pub at_ms: i64,
    /// (episode, clip) pairs researched.
    pub researched: u64,
    /// Pairs in all (catalog episodes × clips).
    pub total: u64,
}

/// Samples at most this far apart are kept: a day of one a minute.
pub const MAX_SAMPLES: usize = 1440;

/// The samples, oldest first, at most [`MAX_SAMPLES`], at least `every_ms` apart.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    /// Adds `sample` unless the last one is younger than `every_ms` (a burst of
    /// overviews adds one sample); drops the oldest beyond [`MAX_SAMPLES`].
    pub fn record(&self, sample: Sample, every_ms: i64) {
        let Ok(mut samples) = self.samples.lock() else {
            return;
        };
        if samples
            .back()
            .is_some_and(|last| sample.at_ms - last.at_ms < every_ms)
        {
            return;
        }
        samples.push_back(sample);
        while samples.len() > MAX_SAMPLES {
            samples.pop_front();
        }
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Pairs researched per minute between consecutive samples, at the later one's time.
pub fn throughput(samples: &[Sample]) -> Vec<(i64, f64)> {
    samples
        .windows(2)
        .filter(|w| w[1].at_ms > w[0].at_ms)
        .map(|w| {
            let pairs = w[1].researched.saturating_sub(w[0].researched) as f64;
            let minutes = (w[1].at_ms - w[0].at_ms) as f64 / 60_000.0;
            (w[1].at_ms, pairs / minutes)
        })
        .collect()
}

const W: f64 = 600.0;
const H: f64 = 120.0;

/// `(x, y)` points of `values` over the time span of `samples`, `y` scaled to `top`.
fn points(values: &[(i64, f64)], from: i64, to: i64, top: f64) -> String {
    let span = (to - from).max(1) as f64;
    let top = if top > 0.0 { top } else { 1.0 };
    values
        .iter()
        .map(|(t, v)| {
            let x = (t - from) as f64 / span * W;
            let y = H - (v / top).clamp(0.0, 1.0) * (H - 10.0);
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Both charts: research progress (pairs researched, of all) and throughput (pairs a
/// minute). Each `svg` carries its figures (`data-samples`, `data-last`) for tests and
/// tools; a line needs two samples, fewer say so.
pub fn svg(samples: &[Sample]) -> Markup {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return html! { p.muted #chart-empty { "No samples yet: the chart fills as the console polls." } };
    };
    let (from, to) = (first.at_ms, last.at_ms);
    let progress: Vec<(i64, f64)> = samples
        .iter()
        .map(|s| (s.at_ms, s.researched as f64))
        .collect();
    let top = samples.iter().map(|s| s.total).max().unwrap_or(0) as f64;
    let rate = throughput(samples);
    let rate_top = rate.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let last_rate = rate.last().map(|(_, v)| *v).unwrap_or(0.0);
    let span = crate::layout::duration_ms(to - from);
    html! {
        div.charts {
            figure {
                figcaption { "Research progress: " (last.researched) " of " (last.total) " pairs researched" }
                svg #progress-chart .chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (W) " " (H) }
                    data-samples=(samples.len()) data-last=(last.researched) role="img" {
                    title { "Pairs researched over the last " (span) }
                    line.axis x1="0" y1=(H) x2=(W) y2=(H) stroke="#999" {}
                    polyline.progress fill="none" stroke="#23395d" stroke-width="2" points=(points(&progress, from, to, top)) {}
                }
            }
            figure {
                figcaption { "Throughput: " (format!("{last_rate:.1}")) " pairs a minute (peak " (format!("{rate_top:.1}")) ")" }
                svg #throughput-chart .chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (W) " " (H) }
                    data-samples=(rate.len()) data-last=(format!("{last_rate:.3}")) role="img" {
                    title { "Pairs researched a minute, between samples" }
                    line.axis x1="0" y1=(H) x2=(W) y2=(H) stroke="#999" {}
                    polyline.throughput fill="none" stroke="#c25e00" stroke-width="2" points=(points(&rate, from, to, rate_top)) {}
                }
            }
            p.muted { "Sampled by this console from its overviews over the last "
                (span) " (" (samples.len()) " samples; kept in memory, lost on restart)." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_ms: i64, researched: u64) -> Sample {
        Sample {
            at_ms,
            researched,
            total: 100,
        }
    }

    #[test]
    fn samples_are_spaced_and_bounded_and_throughput_is_per_minute() {
        let h = History::default();
        h.record(s(0, 0), 60_000);
        h.record(s(30_000, 5), 60_000); // too soon: skipped
        h.record(s(60_000, 10), 60_000);
        h.record(s(180_000, 40), 60_000);
        let samples = h.samples();
        assert_eq!(samples, vec![s(0, 0), s(60_000, 10), s(180_000, 40)]);
        assert_eq!(throughput(&samples), vec![(60_000, 10.0), (180_000, 15.0)]);
        for i in 0..(MAX_SAMPLES as i64 + 10) {
            h.record(s(200_000 + i * 60_000, 50), 60_000);
        }
        assert_eq!(h.samples().len(), MAX_SAMPLES);
        let svg = svg(&samples).into_string();
        assert!(
            svg.contains("data-samples=\"3\"") && svg.contains("data-last=\"40\""),
            "{svg}"
        );
        assert!(
            svg.contains("points=\"0.0,120.0 200.0,109.0 600.0,76.0\""),
            "{svg}"
        );
    }
}
