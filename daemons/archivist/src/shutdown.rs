//! Graceful shutdown: SIGTERM or SIGINT cancels a token that every daemon loop selects on;
//! so does a fault that makes every role of the process useless ([`stop_process`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;

use tokio_util::sync::CancellationToken;

/// Cancelled by [`stop_process`]; every token [`on_signal`] hands out is its child.
static PROCESS: LazyLock<CancellationToken> = LazyLock::new(CancellationToken::new);

/// Whether [`stop_process`] stopped the process (its exit status is then a failure).
static STOPPED_BY_FAULT: AtomicBool = AtomicBool::new(false);

/// Stops every role of this process gracefully (as SIGTERM does), saying why as an error,
/// and makes the exit status a failure, so a supervisor (systemd, compose) restarts it
/// and an operator sees why.
pub fn stop_process(why: &str) {
    if !STOPPED_BY_FAULT.swap(true, Ordering::Relaxed) {
        tracing::error!("{why}: stopping this process");
    }
    PROCESS.cancel();
}

/// Whether [`stop_process`] was called.
pub fn stopped_by_fault() -> bool {
    STOPPED_BY_FAULT.load(Ordering::Relaxed)
}

/// A token cancelled on the first SIGTERM or SIGINT, or by [`stop_process`].
pub fn on_signal() -> CancellationToken {
    let token = PROCESS.child_token();
    let fire = token.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown requested; finishing work in flight");
        fire.cancel();
    });
    token
}
