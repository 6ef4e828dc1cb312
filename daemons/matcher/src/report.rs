//! Rendering match results as a human table or JSON (the `archivist match`
//! subcommand is thin glue around [`render`]).

use serde::{Deserialize, Serialize};

use crate::matcher::{ClipResult, MatchError};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Human-readable table.
    Table,
    /// Pretty JSON (the [`MatchReport`] serialised).
    Json,
}

/// The result for one clip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClipReport {
    /// Clip label (path, URL or name).
    pub clip: String,
    /// Occurrences, or why the clip could not be matched.
    pub result: Result<ClipResult, MatchError>,
}

/// Everything `archivist match` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchReport {
    /// Episode label (path or URL).
    pub episode: String,
    /// Episode duration (s).
    pub episode_duration_s: f64,
    /// Time spent decoding the episode and the clips (s).
    pub decode_s: f64,
    /// Time spent building the matcher and matching (s).
    pub match_s: f64,
    /// One entry per clip, in input order.
    pub clips: Vec<ClipReport>,
}

fn hms(s: f64) -> String {
    let ms = (s * 1000.0).round() as i64;
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        h,
        rem / 60_000,
        (rem % 60_000) / 1000,
        rem % 1000
    )
}

/// Renders a report as a table or JSON.
pub fn render(report: &MatchReport, format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(report)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialise report: {e}\"}}")),
        Format::Table => {
            let mut s = String::new();
            s.push_str(&format!(
                "episode {} ({})\n",
                report.episode,
                hms(report.episode_duration_s)
            ));
            for c in &report.clips {
                match &c.result {
                    Err(e) => s.push_str(&format!("\n{}: ERROR: {e}\n", c.clip)),
                    Ok(r) => {
                        s.push_str(&format!(
                            "\n{} ({:.3} s): {} occurrence{} [{:.3} s]\n",
                            c.clip,
                            r.clip_duration_s,
                            r.occurrences.len(),
                            if r.occurrences.len() == 1 { "" } else { "s" },
                            r.elapsed_s
                        ));
                        if r.limit_reached {
                            s.push_str(&format!(
                                "  WARNING: more occurrences passed the thresholds than max_occurrences = {}: only the most confident are listed\n",
                                r.occurrences.len()
                            ));
                        }
                        if !r.occurrences.is_empty() {
                            s.push_str(
                                "  offset_s      at            confidence  speed   clip part (s)\n",
                            );
                        }
                        for o in &r.occurrences {
                            let speed = if (o.speed - 1.0).abs() > 1e-4 {
                                format!("{:.3}", o.speed)
                            } else {
                                "1".into()
                            };
                            let also = if o.also_explained_by.is_empty() {
                                String::new()
                            } else {
                                format!("  (also explained by {})", o.also_explained_by.join(", "))
                            };
                            s.push_str(&format!(
                                "  {:<12.3}  {}  {:<10.3}  {:<6}  {:.3}-{:.3}{}\n",
                                o.offset_s,
                                hms(o.offset_s),
                                o.confidence,
                                speed,
                                o.clip_start_s,
                                o.clip_end_s,
                                also
                            ));
                        }
                    }
                }
            }
            s.push_str(&format!(
                "\ndecode {:.3} s, match {:.3} s\n",
                report.decode_s, report.match_s
            ));
            s
        }
    }
}
