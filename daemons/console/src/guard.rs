//! What every answer passes through, whatever its page: the `Host` check that defeats
//! DNS rebinding, and the security headers.
//!
//! The console has no login: it trusts whoever can reach its address (loopback by
//! default). A web page on `attacker.example` that rebinds its name to 127.0.0.1 makes
//! the operator's browser reach it too, same-origin as far as the browser knows, with
//! `Host: attacker.example`. So a request is served only when its `Host` is an IP
//! address (which no rebinding can produce), `localhost`, or a name in
//! `console.hosts`; any other is refused with 421 (outside try of #24, F2). A request
//! without `Host` (HTTP/1.0 probes) does not come from a browser and is served.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Console;

/// The Content-Security-Policy of every answer: scripts, styles, images and fetches
/// from the console only (no inline script, so neither an injected handler nor a
/// `javascript:` URL runs), media from any http(s) server (episodes play from their
/// own URLs), forms posted to the console only, never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; media-src http: https:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The host part of a `Host` header value (`name`, `1.2.3.4`, `[::1]`), without its
/// port; `None` when what follows the host is not a port of digits
/// (`localhost:7480@evil` passed as `localhost`: outside try 24d L3).
fn host_part(value: &str) -> Option<&str> {
    let (host, port) = match value.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest.split_once(']')?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':')?)),
            }
        }
        None => match value.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        },
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok.then(|| host.trim_end_matches('.'))
}

/// Is this `Host` value one of the names in `console.hosts` (not an address or
/// `localhost`)? Only those may be reached over `https://` through a proxy.
pub fn named_host(value: &str, names: &[String]) -> bool {
    host_part(value.trim()).is_some_and(|host| names.iter().any(|n| n.eq_ignore_ascii_case(host)))
}

/// May a request with this `Host` value be served? See the module's doc.
pub fn host_allowed(value: &str, names: &[String]) -> bool {
    host_part(value.trim()).is_some_and(|host| {
        host.parse::<std::net::IpAddr>().is_ok()
            || host.eq_ignore_ascii_case("localhost")
            || names.iter().any(|n| n.eq_ignore_ascii_case(host))
    })
}

/// Refuses a request whose `Host` is not allowed (421), then adds the security
/// headers to whatever answer the request gets.
pub async fn check(State(console): State<Console>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).cloned();
    let mut response = match host {
        Some(h)
            if !h
                .to_str()
                .is_ok_and(|h| host_allowed(h, &console.settings().hosts)) =>
        {
            tracing::info!(host = ?h, uri = %request.uri(), "refused: Host is not this console's");
            (
                StatusCode::MISDIRECTED_REQUEST,
                "this console answers only to its address, localhost, or a name in console.hosts (docs/console.md, \"Access\")\n",
            )
                .into_response()
        }
        _ => next.run(request).await,
    };
    if let Some(crate::error::DbFailed(why)) = response.extensions().get::<crate::error::DbFailed>()
    {
        console.inner.db_failures.note(why);
    }
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Pages show live state (and action forms carrying the version they read): a
    // browser or proxy must not answer from a stored copy (outside try 24b N14). An
    // answer that set its own (`no-store` on sign-in) keeps it.
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    // Not `no-referrer`: with it, browsers send `Origin: null` on the console's own
    // form posts, which the actions' CSRF check refuses.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn addresses_localhost_and_configured_names_pass_other_names_do_not() {
        let names = vec!["console.internal".to_string()];
        for ok in [
            "127.0.0.1:7480",
            "127.0.0.1",
            "[::1]:7480",
            "10.1.2.3:80",
            "localhost:7480",
            "LOCALHOST",
            "console.internal:7480",
            "Console.Internal.",
        ] {
            assert!(host_allowed(ok, &names), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:7480",
            "127.0.0.1.nip.io:7480",
            "localhost.attacker.example",
            "localhost:7480@attacker.example",
            "127.0.0.1:",
            "[::1]x",
            "",
        ] {
            assert!(!host_allowed(bad, &names), "{bad}");
        }
    }
}
