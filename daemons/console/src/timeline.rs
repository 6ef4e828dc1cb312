//! An episode's timeline as inline SVG: each occurrence a mark at its offset, its
//! confidence as the mark's shade, speed-changed matches in another colour with a
//! triangle above, partial matches hollow with a dashed outline. Each mark links to the
//! episode's media with an HTML media fragment (`URL#t=SECONDS`), which the page's
//! script plays in its player instead of following.

use archivist_admin::results::ResultRow;
use maud::{html, Markup};

use crate::layout::clock;

/// Width of the drawing in SVG units.
const WIDTH: f64 = 1000.0;
/// Left and right margin.
const PAD: f64 = 10.0;
/// Width of a mark.
const MARK: f64 = 8.0;

/// A mark's offset in seconds as written in a media fragment (`t=12.345`).
pub fn fragment_seconds(at: f64) -> String {
    let s = format!("{:.3}", at.max(0.0));
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The media URL as a page may link or play it: only an `http` or `https` URL (any
/// case, after trimming white space), else `None`. Escaping is not enough for a URL
/// attribute: a `javascript:` URL in the catalog (which `curate` refuses, but a hand-
/// edited or migrated database may hold) became the `href` of every mark and the
/// player's `src` (outside try of #24, F3).
pub fn playable(url: &str) -> Option<&str> {
    let url = url.trim();
    let (scheme, rest) = url.split_once(':')?;
    let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    (web && rest.starts_with("//") && !url.chars().any(char::is_control)).then_some(url)
}

/// The [`playable`] media URL without its fragment, to which the player's script and
/// [`media_at`] add `#t=SECONDS` (a catalog URL with a fragment of its own, `...mp3#x`,
/// became `...mp3#x#t=12`, which no browser seeks by: outside try of #24, L7).
pub fn media_base(url: &str) -> Option<&str> {
    let url = playable(url)?;
    Some(url.split('#').next().unwrap_or(url))
}

/// The media URL with a fragment starting playback at `at`, when it is
/// [`playable`].
pub fn media_at(url: &str, at: f64) -> Option<String> {
    let base = media_base(url)?;
    Some(format!("{base}#t={}", fragment_seconds(at)))
}

/// Where an offset falls on the drawing.
fn x_of(at: f64, span: f64) -> f64 {
    PAD + (at / span).clamp(0.0, 1.0) * (WIDTH - 2.0 * PAD - MARK)
}

/// Seconds between axis ticks: about eight ticks over `span`.
fn tick_step(span: f64) -> f64 {
    [1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0]
        .into_iter()
        .find(|s| span / s <= 8.0)
        .unwrap_or(7200.0)
}

/// The SVG of `rows` (only found rows are drawn) over an episode of `duration_s`
/// (when unknown, the last occurrence plus a tenth). `url` is the episode's media.
pub fn svg(rows: &[ResultRow], duration_s: Option<f64>, url: &str) -> Markup {
    let found: Vec<&ResultRow> = rows.iter().filter(|r| r.found && r.at.is_some()).collect();
    let last = found.iter().filter_map(|r| r.at).fold(0.0_f64, f64::max);
    let span = duration_s
        .filter(|d| *d > 0.0)
        .unwrap_or(last * 1.1)
        .max(1.0);
    let step = tick_step(span);
    let ticks: Vec<f64> = (0..)
        .map(|i| i as f64 * step)
        .take_while(|t| *t <= span)
        .collect();
    html! {
        svg.timeline #timeline xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " 90" }
            role="img" aria-label="Where clips occur in the episode" {
            rect x=(PAD) y="20" width=(WIDTH - 2.0 * PAD) height="44" fill="#fff" stroke="#ccc" {}
            @for t in &ticks {
                @let x = x_of(*t, span) + MARK / 2.0;
                line x1=(x) x2=(x) y1="64" y2="70" stroke="#999" {}
                @let anchor = if *t == 0.0 { "start" } else if x > WIDTH - 40.0 { "end" } else { "middle" };
                text x=(x) y="84" font-size="11" text-anchor=(anchor) fill="#555" { (clock(*t)) }
            }
            @for (i, r) in found.iter().enumerate() {
                @let at = r.at.unwrap_or(0.0);
                @let conf = f64::from(r.conf.unwrap_or(0.0)).clamp(0.0, 1.0);
                @let speed = r.speed.is_some_and(|s| (s - 1.0).abs() > f32::EPSILON);
                @let partial = r.part_start.is_some();
                @let x = x_of(at, span);
                @let class = format!("mark{}{}", if speed { " speed" } else { "" }, if partial { " partial" } else { "" });
                a class=(class) id={ "mark-" (i) } href=[media_at(url, at)] data-t=(fragment_seconds(at))
                    data-clip=(r.clip) data-conf=(format!("{conf:.2}")) {
                    title {
                        (r.clip) " " (r.clip_title) " at " (clock(at)) ", confidence " (format!("{conf:.2}"))
                        @if let Some(s) = r.speed { ", speed ×" (format!("{s:.2}")) }
                        @if let (Some(a), Some(b)) = (r.part_start, r.part_end) { ", part " (format!("{a:.1}–{b:.1} s")) " of the clip" }
                    }
                    @if partial {
                        rect x=(x) y="22" width=(MARK) height="40" fill="#fff" fill-opacity="0.01"
                            stroke=(if speed { "#c05600" } else { "#23395d" }) stroke-width="2" stroke-dasharray="4 3"
                            stroke-opacity=(format!("{:.2}", 0.25 + 0.75 * conf)) {}
                    } @else {
                        rect x=(x) y="22" width=(MARK) height="40"
                            fill=(if speed { "#c05600" } else { "#23395d" })
                            fill-opacity=(format!("{:.2}", 0.25 + 0.75 * conf)) {}
                    }
                    @if speed {
                        path d={ "M" (x) " 4 L" (x + MARK) " 4 L" (x + MARK / 2.0) " 16 Z" } fill="#c05600" {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(at: f64, conf: f32, speed: Option<f32>, part: Option<[f64; 2]>) -> ResultRow {
        ResultRow {
            episode: "e1".into(),
            episode_title: String::new(),
            clip: "c000001".into(),
            clip_title: "Jingle".into(),
            found: true,
            at: Some(at),
            conf: Some(conf),
            speed,
            part_start: part.map(|p| p[0]),
            part_end: part.map(|p| p[1]),
            job: None,
            researcher: None,
            error: None,
            rendition: None,
        }
    }

    #[test]
    fn each_found_clip_is_a_mark_at_its_offset_shaded_by_confidence() {
        let rows = [
            row(0.0, 1.0, None, None),
            row(50.0, 0.2, Some(1.1), None),
            row(100.0, 0.9, None, Some([0.0, 1.5])),
        ];
        let svg = svg(&rows, Some(100.0), "http://h/e.mp3").into_string();
        assert_eq!(svg.matches("class=\"mark").count(), 3);
        assert!(svg.contains("href=\"http://h/e.mp3#t=50\""));
        // The start at the left edge, the end at the right, the middle between.
        assert!(svg.contains("x=\"10\" y=\"22\""));
        assert!(svg.contains(&format!(
            "x=\"{}\" y=\"22\"",
            10.0 + 0.5 * (1000.0 - 20.0 - 8.0)
        )));
        assert!(svg.contains("class=\"mark speed\""));
        assert!(svg.contains("class=\"mark partial\""));
        assert!(svg.contains("fill-opacity=\"1.00\""));
        assert!(svg.contains("fill-opacity=\"0.40\""));
    }

    #[test]
    fn fragments_name_the_offset_and_replace_an_existing_fragment() {
        assert_eq!(
            media_at("http://h/e.mp3", 12.5).as_deref(),
            Some("http://h/e.mp3#t=12.5")
        );
        assert_eq!(
            media_at("http://h/e.mp3#x", 3.0).as_deref(),
            Some("http://h/e.mp3#t=3")
        );
        assert_eq!(fragment_seconds(1.23456), "1.235");
        assert_eq!(media_base("http://h/e.mp3#x"), Some("http://h/e.mp3"));
    }

    /// Outside try of #24, F3: `javascript:` media URLs became every mark's href.
    #[test]
    fn only_http_and_https_media_become_links() {
        assert_eq!(playable(" HTTPS://h/e.mp3 "), Some("HTTPS://h/e.mp3"));
        for bad in [
            "javascript:alert(document.domain)//",
            " JaVaScRiPt:alert(7)",
            "data:audio/mp3;base64,AAAA",
            "file:///etc/passwd",
            "vbscript:x",
            "http:alert(1)",
            "",
        ] {
            assert_eq!(playable(bad), None, "{bad}");
            assert_eq!(media_at(bad, 1.0), None, "{bad}");
        }
        let rows = [row(5.0, 1.0, None, None)];
        let svg = svg(&rows, Some(10.0), "javascript:alert(1)//").into_string();
        assert!(!svg.contains("javascript"), "{svg}");
        assert!(!svg.contains("href"), "{svg}");
        assert_eq!(
            svg.matches("class=\"mark").count(),
            1,
            "the mark is still drawn"
        );
    }
}
