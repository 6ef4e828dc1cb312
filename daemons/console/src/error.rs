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
    /// What the address names does not exist (a batch, a report), saying which.
    #[error("{0}")]
    NotFound(String),
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
    /// A database row that does not decode counts too (outside try 24d M2: it was a
    /// 503, and kept `/healthz` failing for 30 s after every visit of its page).
    fn is_damaged_record(&self) -> bool {
        matches!(
            self,
            PageError::Admin(AdminError::Engine(archivist_engine::EngineError::Record(_)))
                | PageError::Db(archivist_db::DbError::Corrupt { .. })
                | PageError::Admin(AdminError::Db(archivist_db::DbError::Corrupt { .. }))
        )
    }

    fn status(&self) -> StatusCode {
        match self {
            PageError::Admin(AdminError::NotFound { .. })
            | PageError::NoPage
            | PageError::NotFound(_)
            | PageError::BadId { .. } => StatusCode::NOT_FOUND,
            _ if self.is_damaged_record() => StatusCode::INTERNAL_SERVER_ERROR,
            PageError::Admin(AdminError::Invalid(_)) | PageError::Invalid(_) => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// How long a page's failed database read keeps `/healthz` at 503: the health probe's
/// own reads can be answered from pages SQLite still caches while every other read of
/// a damaged file fails (outside try 24c M2), so what the pages met counts too.
pub const DB_FAILURE_COUNTS_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// A page's answer carries this when the database failed it; the console's middleware
/// ([`crate::guard::check`]) notes it for `/healthz` ([`DbFailures`]).
#[derive(Debug, Clone)]
pub struct DbFailed(pub String);

/// The last database failure a page of one console met, and when.
#[derive(Debug, Default)]
pub struct DbFailures {
    last: std::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl DbFailures {
    /// Notes a page's database failure.
    pub fn note(&self, why: &str) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some((std::time::Instant::now(), why.to_string()));
        }
    }

    /// The failure a page met within [`DB_FAILURE_COUNTS_FOR`], if any.
    pub fn recent(&self) -> Option<String> {
        let last = self.last.lock().ok()?.clone()?;
        (last.0.elapsed() < DB_FAILURE_COUNTS_FOR).then(|| {
            format!(
                "a page's database read failed {} s ago: {}",
                last.0.elapsed().as_secs(),
                last.1
            )
        })
    }
}

impl PageError {
    /// Did the database fail (not a value, not ZooKeeper)?
    fn is_database_failure(&self) -> bool {
        matches!(self, PageError::Db(_) | PageError::Admin(AdminError::Db(_)))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "console page failed");
        }
        let db_failed = (status == StatusCode::SERVICE_UNAVAILABLE && self.is_database_failure())
            .then(|| DbFailed(self.to_string()));
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
        let mut response = (status, body).into_response();
        if let Some(failed) = db_failed {
            response.extensions_mut().insert(failed);
        }
        response
    }
}

/// The answer to a URL no page serves.
pub async fn not_found() -> PageError {
    PageError::NoPage
}
