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

/// A page that could not be built: shown as an error page (404 for an unknown id or
/// one that is not an id, 400 for bad input, 500 for a damaged record, 503 when
/// ZooKeeper or the database fails).
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
    /// An id in the address is not an id (`..`, `j1/lock`, a NUL): no page has it.
    /// Refused before anything is read (outside try of #24, F4).
    #[error("no {what} has this address: {why}")]
    BadId {
        /// Kind of thing (`job`, `episode`, `clip`).
        what: &'static str,
        /// Why (the library's rule, `archivist_admin::text::node_name`).
        why: String,
    },
    /// ZooKeeper cannot be reached now (the console reconnects by itself).
    #[error("{0}")]
    Unavailable(String),
    /// No page has this address.
    #[error("no page has this address")]
    NoPage,
}

impl PageError {
    /// The id check of an address: `id` when it is one, else [`PageError::BadId`].
    ///
    /// # Errors
    /// [`PageError::BadId`] with the library's reason.
    pub fn check_id<'a>(what: &'static str, id: &'a str) -> Result<&'a str, PageError> {
        archivist_admin::text::node_name(id).map_err(|e| PageError::BadId {
            what,
            why: match e {
                AdminError::Invalid(why) => why,
                other => other.to_string(),
            },
        })
    }

    /// Is this a record that does not decode (the service is fine; the record is
    /// damaged)? Such a page is a 500 saying to run fsck, not a 503 (outside try of
    /// #24, F7).
    fn is_damaged_record(&self) -> bool {
        matches!(
            self,
            PageError::Admin(AdminError::Engine(archivist_engine::EngineError::Record(_)))
        )
    }

    fn status(&self) -> StatusCode {
        match self {
            PageError::Admin(AdminError::NotFound { .. })
            | PageError::NoPage
            | PageError::BadId { .. } => StatusCode::NOT_FOUND,
            _ if self.is_damaged_record() => StatusCode::INTERNAL_SERVER_ERROR,
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
                @if self.is_damaged_record() {
                    p { "The record is damaged, not the service: "
                        code { "archivist fsck" } " names every damaged record and what to do." }
                }
            },
        );
        (status, body).into_response()
    }
}

/// The answer to a URL no page serves.
pub async fn not_found() -> PageError {
    PageError::NoPage
}
