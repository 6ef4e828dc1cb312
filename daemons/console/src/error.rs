//! Errors: the server's own ([`ConsoleError`]) and a page's ([`PageError`]), which is
//! shown to the browser as a page with the right status.

use std::net::SocketAddr;

use archivist_admin::AdminError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

/// The console could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The address could not be bound (in use, not local...).
    #[error("binding the console address {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A page that could not be built: shown as an error page (404 for an unknown id, 400
/// for bad input, 503 when ZooKeeper or the database fails).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageError {
    /// What the admin library said.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] archivist_db::DbError),
    /// Bad input in the URL.
    #[error("{0}")]
    Invalid(String),
    /// No page has this address.
    #[error("no page has this address")]
    NoPage,
}

impl PageError {
    fn status(&self) -> StatusCode {
        match self {
            PageError::Admin(AdminError::NotFound { .. }) | PageError::NoPage => {
                StatusCode::NOT_FOUND
            }
            PageError::Admin(AdminError::Invalid(_)) | PageError::Invalid(_) => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "console page failed");
        }
        let body = crate::layout::page(
            status.canonical_reason().unwrap_or("error"),
            0,
            html! {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                p.error { (self.to_string()) }
            },
        );
        (status, body).into_response()
    }
}

/// The answer to a URL no page serves.
pub async fn not_found() -> PageError {
    PageError::NoPage
}
