//! `archivist serve-files DIR`: a static HTTP file server for the quickstart, tests and
//! chaos runs, with optional injected failures (seeded, so a run can be replayed).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use clap::Args;
use rand::{Rng, SeedableRng};
use tower_http::services::ServeDir;

use crate::cli::GlobalOpts;

/// Arguments of `archivist serve-files`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to serve.
    pub dir: PathBuf,
    /// Address to bind (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// Fraction of requests answered with 503, for fault tests.
    #[arg(long, default_value_t = 0.0)]
    pub fail_rate: f64,
    /// Seed of the failure injection.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Clone)]
struct Faults {
    rate: f64,
    rng: Arc<Mutex<rand::rngs::StdRng>>,
}

async fn inject(State(faults): State<Faults>, request: Request, next: Next) -> Response {
    let fail = faults.rate > 0.0
        && faults
            .rng
            .lock()
            .map(|mut rng| rng.gen_bool(faults.rate.clamp(0.0, 1.0)))
            .unwrap_or(false);
    if fail {
        tracing::info!(path = %request.uri(), "injected failure");
        return (StatusCode::SERVICE_UNAVAILABLE, "injected failure\n").into_response();
    }
    next.run(request).await
}

/// Runs the file server until SIGTERM/SIGINT.
pub async fn run(_global: &GlobalOpts, args: ServeArgs) -> Result<ExitCode> {
    let faults = Faults {
        rate: args.fail_rate,
        rng: Arc::new(Mutex::new(rand::rngs::StdRng::seed_from_u64(args.seed))),
    };
    let app = Router::new()
        .fallback_service(ServeDir::new(&args.dir))
        .layer(middleware::from_fn_with_state(faults, inject));
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let bound = listener.local_addr()?;
    outln!("serving {} at http://{bound}/", args.dir.display());
    let shutdown = crate::shutdown::on_signal();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .context("file server")?;
    Ok(ExitCode::SUCCESS)
}
