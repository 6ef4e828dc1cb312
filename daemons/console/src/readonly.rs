//! The read-only rule of this slice: the console answers `GET` and `HEAD` only. Any
//! other method (an action such as `POST /jobs/J/retry`, whether or not a route for it
//! exists) is refused with 403 before any handler runs, so no page can change the tree
//! until actions are built with their token and CSRF checks (docs/console.md, "Access").

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What a refused request is told.
pub const REFUSAL: &str =
    "this console is read-only: actions are not enabled (docs/console.md, \"Access\")\n";

/// Passes reads on; refuses every other method with 403.
pub async fn refuse_writes(request: Request, next: Next) -> Response {
    if request.method() == Method::GET || request.method() == Method::HEAD {
        return next.run(request).await;
    }
    tracing::info!(method = %request.method(), uri = %request.uri(), "refused: read-only console");
    (StatusCode::FORBIDDEN, REFUSAL).into_response()
}
