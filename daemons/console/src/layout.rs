//! The page shell every page shares (navigation, style, the refresh script) and small
//! formatting helpers.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use time::OffsetDateTime;

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
nav { background: #23395d; padding: .5em 1em; }
nav a { color: #fff; margin-right: 1.5em; text-decoration: none; font-weight: 600; }
main { padding: 1em 1.5em; max-width: 1200px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.error, .failed { color: #a40000; }
.muted { color: #777; }
form.filter { display: flex; gap: .6em; flex-wrap: wrap; align-items: end; margin-bottom: 1em; }
form.filter label { display: flex; flex-direction: column; font-size: .85em; }
svg.timeline { width: 100%; height: auto; background: #f7f7f7; border: 1px solid #ccc; }
svg.timeline .mark { cursor: pointer; }
pre.message { white-space: pre-wrap; background: #fff4f4; padding: .5em; border: 1px solid #e0b4b4; }
"#;

/// Polls the page's own URL every `data-refresh` seconds and swaps in every element
/// marked `data-live` (by id) whose content changed, so tables stay current without
/// reloading the page (a playing episode or a half-typed filter is left alone, and an
/// unchanged block keeps its selection). Skipped while the tab is hidden or a form
/// field has the focus.
const REFRESH: &str = r#"
(function () {
  var s = Number(document.body.dataset.refresh || 0);
  if (!s) return;
  setInterval(function () {
    var f = document.activeElement;
    if (document.hidden || (f && /INPUT|SELECT|TEXTAREA/.test(f.tagName))) return;
    fetch(location.href, { cache: "no-store" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (text) {
      if (!text) return;
      var fresh = new DOMParser().parseFromString(text, "text/html");
      document.querySelectorAll("[data-live]").forEach(function (old) {
        var next = fresh.getElementById(old.id);
        if (next && next.outerHTML !== old.outerHTML) old.replaceWith(next);
      });
    }).catch(function () {});
  }, s * 1000);
})();
"#;

/// A whole page: `title`, the body, and polling every `refresh_s` seconds (0: never).
pub fn page(title: &str, refresh_s: u64, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Archivist" }
                style { (PreEscaped(STYLE)) }
            }
            body data-refresh=(refresh_s) {
                nav {
                    a href="/" { "Overview" }
                    a href="/jobs" { "Jobs" }
                    a href="/jobs?state=failed" { "Failures" }
                }
                main { (body) }
                script { (PreEscaped(REFRESH)) }
            }
        }
    }
}

/// When the page's data was read, inside a live block (the refresh swaps it).
pub fn read_at(now_ms: i64) -> Markup {
    html! { p.muted.read-at { "read at " (unix_ms(now_ms)) } }
}

/// A unix-ms time as RFC 3339 (UTC, to the second).
pub fn unix_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .map(rfc3339)
        .unwrap_or_else(|| ms.to_string())
}

/// A time as RFC 3339 (UTC, to the second).
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

/// A duration in ms, as people read it (`3d 4h`, `12m 5s`, `800 ms`).
pub fn duration_ms(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        _ if ms.abs() < 1000 => format!("{ms} ms"),
        _ if s.abs() < 60 => format!("{s}s"),
        _ if s.abs() < 3600 => format!("{}m {}s", s / 60, s % 60),
        _ if s.abs() < 86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A fraction in [0, 1] as a percentage.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Seconds as `h:mm:ss.s`.
pub fn clock(seconds: f64) -> String {
    let tenths = (seconds.max(0.0) * 10.0).round() as u64;
    let (h, m, s, t) = (
        tenths / 36_000,
        tenths / 600 % 60,
        tenths / 10 % 60,
        tenths % 10,
    );
    if h > 0 {
        format!("{h}:{m:02}:{s:02}.{t}")
    } else {
        format!("{m}:{s:02}.{t}")
    }
}

/// A link to a job's page.
pub fn job_link(id: &str) -> Markup {
    html! { a href={ "/jobs/" (id) } { (id) } }
}

/// A link to an episode's page.
pub fn episode_link(id: &str) -> Markup {
    html! { a href={ "/episodes/" (id) } { (id) } }
}

/// A link to a clip's page.
pub fn clip_link(id: &str) -> Markup {
    html! { a href={ "/clips/" (id) } { (id) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_durations_read_as_people_write_them() {
        assert_eq!(clock(83.44), "1:23.4");
        assert_eq!(clock(3723.0), "1:02:03.0");
        assert_eq!(duration_ms(800), "800 ms");
        assert_eq!(duration_ms(125_000), "2m 5s");
        assert_eq!(duration_ms(90_000_000), "1d 1h");
    }

    #[test]
    fn text_is_escaped() {
        let page = page("<t>", 0, html! { p { "<script>x</script>" } }).into_string();
        assert!(page.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(!page.contains("<script>x"));
    }
}
