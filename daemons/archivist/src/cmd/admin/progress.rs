//! Progress bars (indicatif) for long scans: drawn on stderr, only on a terminal, and
//! only once a scan has run for a second, so quick commands and pipes stay quiet.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use archivist_admin::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// An [`archivist_admin::Progress`] drawing an indicatif bar.
pub struct Bar {
    enabled: bool,
    state: Mutex<Option<(ProgressBar, Instant, bool)>>,
}

impl Bar {
    /// A bar on stderr, if stderr is a terminal.
    pub fn stderr() -> Bar {
        Bar {
            enabled: std::io::stderr().is_terminal(),
            state: Mutex::new(None),
        }
    }
}

impl Progress for Bar {
    fn begin(&self, what: &str, total: u64) {
        if !self.enabled {
            return;
        }
        let bar = if total > 0 {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden())
        } else {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())
        };
        let style = if total > 0 {
            ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
        } else {
            ProgressStyle::with_template("{spinner} {msg:>12} {pos} nodes {per_sec}")
        };
        if let Ok(style) = style {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        if let Ok(mut state) = self.state.lock() {
            *state = Some((bar, Instant::now(), false));
        }
    }

    fn advance(&self, n: u64) {
        if let Ok(mut state) = self.state.lock() {
            if let Some((bar, started, shown)) = state.as_mut() {
                bar.inc(n);
                if !*shown && started.elapsed() > Duration::from_secs(1) {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    *shown = true;
                }
            }
        }
    }

    fn end(&self) {
        if let Ok(mut state) = self.state.lock() {
            if let Some((bar, _, _)) = state.take() {
                bar.finish_and_clear();
            }
        }
    }
}
