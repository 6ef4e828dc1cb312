//! The page shell every page shares (navigation, style, the refresh script) and small
//! formatting helpers.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::assets;
use time::OffsetDateTime;

/// A whole page: `title`, the body, and polling every `refresh_s` seconds (0: never).
///
/// Styles and scripts are files of the console ([`assets`]), not inline, so the
/// Content-Security-Policy ([`crate::guard`]) can forbid inline script: a `javascript:`
/// URL or an injected handler would not run even if one got through.
pub fn page(title: &str, refresh_s: u64, body: Markup) -> Markup {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Archivist" }
                link rel="stylesheet" href=(assets::STYLE_PATH);
            }
            body data-refresh=(refresh_s) {
                nav {
                    a href="/" { "Overview" }
                    a href="/jobs" { "Jobs" }
                    a href="/jobs?state=failed" { "Failures" }
                    a href="/batches" { "Batches" }
                    a href="/search" { "Search" }
                }
                main { (body) }
                script src=(assets::REFRESH_PATH) {}
                script src=(assets::SESSION_PATH) {}
            }
        }
    };
    // Control and bidi characters from records are shown as escapes, as the CLI shows
    // them (outside try of #24, F8): one pass over the page, since no markup of the
    // console's own has any.
    let html = page.into_string();
    if html
        .chars()
        .any(|c| archivist_admin::text::escape(c).is_some())
    {
        PreEscaped(archivist_admin::text::visible(&html))
    } else {
        PreEscaped(html)
    }
}

/// The answer to a sign-in: the session token for the static script to keep in the
/// tab's `sessionStorage` (never a cookie: see [`crate::actions`]); the script then
/// opens the overview. Without scripts, nothing can act (the link still leads on).
pub fn signed_in(name: &str, token: &str) -> Markup {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Signed in · Archivist" }
                link rel="stylesheet" href=(assets::STYLE_PATH);
            }
            body data-refresh="0" data-session=(token) data-operator=(name) {
                main #signed-in {
                    p { "Signed in as " (name) ". " a href="/" { "Continue" } }
                    noscript { p.error { "Actions need JavaScript: the session token is kept by the page, not in a cookie." } }
                }
                script src=(assets::SESSION_PATH) {}
            }
        }
    };
    page
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

    /// Outside try of #24, F8: BEL, ESC and U+202E reached the HTML raw.
    #[test]
    fn control_and_bidi_characters_are_shown_as_the_cli_shows_them() {
        let page = page("a\u{7}\u{1b}[31m", 0, html! { h1 { "x\u{202e}txt.exe" } }).into_string();
        assert!(page.contains("a\\x07\\x1b[31m"), "{page}");
        assert!(page.contains("x\\u{202e}txt.exe"), "{page}");
        assert!(!page.contains('\u{7}') && !page.contains('\u{1b}') && !page.contains('\u{202e}'));
    }
}
