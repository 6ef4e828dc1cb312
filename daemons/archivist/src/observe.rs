//! Metrics and health over HTTP: `/metrics` (Prometheus text, rendered by
//! `metrics-exporter-prometheus` from what the libraries record through the `metrics`
//! facade), `/healthz` (the process is up) and `/readyz` (every role's ZooKeeper session
//! is alive and registered; see `archivist_engine::health`).

use std::net::SocketAddr;

use anyhow::{Context, Result};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

/// Installs the process-wide metrics recorder.
pub fn install() -> Result<PrometheusHandle> {
    PrometheusBuilder::new()
        .install_recorder()
        .context("installing the metrics recorder")
}

/// The router serving `/metrics`, `/healthz` and `/readyz`.
pub fn router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(move || std::future::ready(handle.render())))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(|| async {
                let roles = archivist_engine::health::report();
                let body: String = roles
                    .iter()
                    .map(|(role, why)| match why {
                        None => format!("{role}: ready\n"),
                        Some(why) => format!("{role}: not ready: {why}\n"),
                    })
                    .collect();
                if archivist_engine::health::is_ready() {
                    (StatusCode::OK, body)
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        if body.is_empty() {
                            "no role registered\n".into()
                        } else {
                            body
                        },
                    )
                }
            }),
        )
}

/// Serves metrics and health on `addr` until `shutdown`; returns the bound address.
pub async fn serve(addr: SocketAddr, shutdown: CancellationToken) -> Result<SocketAddr> {
    let handle = install()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let app = router(handle);
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    tracing::info!(%bound, "serving /metrics, /healthz and /readyz");
    Ok(bound)
}
