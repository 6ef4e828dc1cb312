//! The read-only rule: without an actions token the console answers `GET` and `HEAD`
//! only. Any other method (an action such as `POST /jobs/J/retry`, whether or not a
//! route for it exists) is refused with 403 before any handler runs, so no page can
//! change the tree. With a token, `POST` reaches the action routes, which check the
//! operator's session, CSRF token and `Origin` themselves ([`crate::actions`]); every
//! other method is still refused.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Console;

/// What a refused request is told.
pub const REFUSAL: &str =
    "this console is read-only: actions are not enabled (docs/console.md, \"Access\")\n";

/// Passes reads on (and `POST` when actions are enabled); refuses every other method
/// with 403.
pub async fn refuse_writes(
    State(console): State<Console>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method();
    if method == Method::GET
        || method == Method::HEAD
        || (method == Method::POST && console.settings().actions_token.is_some())
    {
        return next.run(request).await;
    }
    tracing::info!(method = %request.method(), uri = %request.uri(), "refused: read-only console");
    (StatusCode::FORBIDDEN, REFUSAL).into_response()
}
