//! `archivist serve-files DIR`: a static HTTP file server for the quickstart, tests and
//! chaos runs, with optional injected failures (seeded, so a run can be replayed).
//! With the global `--metrics-addr` it serves `/metrics` there too: the responses by
//! status, and the body bytes sent by top directory (`archivist_files_sent_bytes_total`,
//! counted as the body goes out, so a benchmark can count the episode bytes its
//! researchers downloaded on the server's side).

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::body::{Body, Bytes, HttpBody};
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

/// The label of a request path's top directory: `clips/` for `/clips/a.wav`, `/` for a
/// file at the root.
fn top_dir(path: &str) -> String {
    match path.trim_start_matches('/').split_once('/') {
        Some((top, _)) => format!("{top}/"),
        None => "/".to_string(),
    }
}

/// A response body that counts its data bytes as they are sent (the length and the end
/// are the inner body's, so a `Content-Length` stays).
struct Counted {
    inner: Body,
    sent: metrics::Counter,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.sent.increment(data.len() as u64);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Counts every response by status and a successful one's body bytes by top directory.
async fn count(request: Request, next: Next) -> Response {
    let dir = top_dir(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    metrics::counter!("archivist_files_responses_total", "status" => status.as_u16().to_string())
        .increment(1);
    if !status.is_success() {
        return response;
    }
    let sent = metrics::counter!("archivist_files_sent_bytes_total", "dir" => dir);
    response.map(|inner| Body::new(Counted { inner, sent }))
}

/// Runs the file server until SIGTERM/SIGINT.
pub async fn run(global: &GlobalOpts, args: ServeArgs) -> Result<ExitCode> {
    let faults = Faults {
        rate: args.fail_rate,
        rng: Arc::new(Mutex::new(rand::rngs::StdRng::seed_from_u64(args.seed))),
    };
    let app = Router::new()
        .fallback_service(ServeDir::new(&args.dir))
        .layer(middleware::from_fn_with_state(faults, inject))
        .layer(middleware::from_fn(count));
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let bound = listener.local_addr()?;
    outln!("serving {} at http://{bound}/", args.dir.display());
    let shutdown = crate::shutdown::on_signal();
    if let Some(addr) = global.metrics_addr {
        crate::observe::serve(addr, shutdown.clone()).await?;
    }
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .context("file server")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::top_dir;

    #[test]
    fn bytes_are_counted_by_top_directory() {
        assert_eq!(top_dir("/episode-1.mp3"), "/");
        assert_eq!(top_dir("/clips/drop.wav"), "clips/");
        assert_eq!(top_dir("/a/b/c.wav"), "a/");
        assert_eq!(top_dir("/"), "/");
    }
}
