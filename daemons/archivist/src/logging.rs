//! Log setup: human lines by default, JSON with `--log-format json`; `RUST_LOG` filters.

use tracing_subscriber::EnvFilter;

use crate::cli::{GlobalOpts, LogFormat};

/// Installs the global subscriber. Logs go to stderr so command output stays clean;
/// daemons log at `info` by default, one-shot commands at `warn` (`RUST_LOG` overrides).
pub fn init(global: &GlobalOpts, daemon: bool) {
    let default = if daemon {
        "info,zookeeper_client=warn"
    } else {
        "warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match global.log_format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
