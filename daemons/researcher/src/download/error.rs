//! Why a download failed, worded for an operator reading a job's message.

use std::time::Duration;

/// A download that did not produce a usable file. Every variant names the URL (or path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DownloadError {
    /// The URL does not parse.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// Parser message.
        reason: String,
    },
    /// Only http, https (and file, when allowed) are fetched.
    #[error("{url}: unsupported scheme {scheme:?} (only http and https{file})", file = if *.file_allowed { " and file" } else { "" })]
    UnsupportedScheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
        /// Whether file:// would have been accepted.
        file_allowed: bool,
    },
    /// A redirect that was not followed: to another scheme (`file://`, `ftp://`, ...), or
    /// without a usable `Location`. A server must not make us read local files.
    #[error("GET {url} returned {status}: redirect to {location} not followed (only http and https redirects are)")]
    Redirect {
        /// The URL.
        url: String,
        /// HTTP status code.
        status: u16,
        /// The `Location` header, as sent.
        location: String,
    },
    /// The server answered with an error status.
    #[error("GET {url} returned {status} {reason}{after}", after = match .retry_after { Some(d) => format!(" (Retry-After {} s)", d.as_secs()), None => String::new() })]
    Status {
        /// The URL.
        url: String,
        /// HTTP status code.
        status: u16,
        /// Canonical reason phrase.
        reason: String,
        /// The server's `Retry-After`, when it sent a usable one.
        retry_after: Option<Duration>,
    },
    /// A success status that is not a whole body: `206 Partial Content` (or a
    /// `Content-Range`) to a plain GET, `204 No Content`, ... Only a whole `200` body is
    /// researched: half an episode would store "not found" for clips in the other half.
    #[error("GET {url} returned {status} {reason}{range}: only a whole 200 body is researched (a part of an episode is not the episode)", range = match .content_range { Some(r) => format!(" (Content-Range {r})"), None => String::new() })]
    NotWhole {
        /// The URL.
        url: String,
        /// HTTP status code.
        status: u16,
        /// Canonical reason phrase.
        reason: String,
        /// The `Content-Range` header, if sent.
        content_range: Option<String>,
    },
    /// The server asked us to come back later than we are willing to wait.
    #[error("GET {url} returned {status} with Retry-After {} s, over the {} s this researcher waits; try again later (archivist retry)", .wait.as_secs(), .limit.as_secs())]
    RetryAfterTooLong {
        /// The URL.
        url: String,
        /// HTTP status code (429 or 503).
        status: u16,
        /// What the server asked for.
        wait: Duration,
        /// The configured bound.
        limit: Duration,
    },
    /// The body came too slowly: the download budget (a grace period plus the bytes
    /// received at the minimum throughput) ran out. A server dribbling bytes must not hold a slot
    /// forever.
    #[error("GET {url}: too slow: {got} bytes{expected} in {:.1} s, over the download budget of {:.1} s (at least {min_rate} bytes/s on average after a {:.0} s grace, whatever the Content-Length)", .elapsed.as_secs_f64(), .budget.as_secs_f64(), .grace.as_secs_f64(), expected = match .expected { Some(n) => format!(" of {n}"), None => String::new() })]
    TooSlow {
        /// The URL.
        url: String,
        /// Bytes received.
        got: u64,
        /// Content-Length, if announced.
        expected: Option<u64>,
        /// Time spent.
        elapsed: Duration,
        /// The budget that ran out.
        budget: Duration,
        /// The configured minimum throughput (bytes/s).
        min_rate: u64,
        /// The configured grace period.
        grace: Duration,
    },
    /// The body is compressed with a `Content-Encoding` this build does not undo
    /// (gzip, x-gzip and deflate are undone).
    #[error("GET {url}: body has Content-Encoding {encoding:?}, which is not supported (gzip, x-gzip and deflate are)")]
    ContentEncoding {
        /// The URL.
        url: String,
        /// The header's value.
        encoding: String,
    },
    /// The body does not decode as its `Content-Encoding` says (gzip on bytes that are
    /// not gzip, ...). Final: the same bytes come again on a retry.
    #[error("GET {url}: the body does not decode as its Content-Encoding says: {reason}")]
    BadEncoding {
        /// The URL.
        url: String,
        /// The decoder's message.
        reason: String,
    },
    /// The body is (or announces itself as) larger than allowed.
    #[error("GET {url}: body is over the {limit}-byte limit ({detail})")]
    TooLarge {
        /// The URL.
        url: String,
        /// Configured limit.
        limit: u64,
        /// Content-Length or bytes seen.
        detail: String,
    },
    /// The transfer ended before its end: before the announced length arrived, or
    /// without the terminating chunk of chunked encoding.
    #[error("GET {url}: truncated body: got {got} bytes{expected} ({how})", expected = match .expected { Some(n) => format!(" of {n}"), None => String::new() })]
    Truncated {
        /// The URL.
        url: String,
        /// Bytes received (on the wire, before any Content-Encoding is undone).
        got: u64,
        /// Content-Length, if announced.
        expected: Option<u64>,
        /// How the transfer was seen to end early.
        how: String,
    },
    /// No bytes arrived within the read timeout, or no connection within the connect one.
    #[error("GET {url}: timed out {what} after {after:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// Connecting, waiting for headers, reading the body.
        what: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// Connection refused/reset, TLS failure, a broken redirect and the like.
    #[error("GET {url}: {reason}")]
    Network {
        /// The URL.
        url: String,
        /// Client message.
        reason: String,
        /// Worth trying again.
        transient: bool,
    },
    /// What arrived is audio in a codec this build does not decode (named).
    #[error("GET {url}: unsupported codec: {reason}")]
    UnsupportedCodec {
        /// The URL.
        url: String,
        /// The codec's name and what is supported.
        reason: String,
    },
    /// What arrived is not audio.
    #[error("not audio: {content_type} body from {url} ({reason}); starts with {head:?}")]
    NotAudio {
        /// The URL.
        url: String,
        /// Content-Type header (or `unknown`).
        content_type: String,
        /// Why the probe refused it.
        reason: String,
        /// The first bytes, as text where printable.
        head: String,
    },
    /// A local file could not be read or written.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// OS message.
        reason: String,
    },
    /// Every try failed with a transient error.
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        /// Tries made.
        attempts: u32,
        /// The last error.
        last: Box<DownloadError>,
    },
    /// The caller stopped the download.
    #[error("GET {url}: cancelled")]
    Cancelled {
        /// The URL.
        url: String,
    },
}

impl DownloadError {
    /// Could the same request succeed if tried again (timeouts, 5xx, resets, truncation)?
    /// 4xx, oversize, non-audio and bad URLs are final.
    pub fn is_transient(&self) -> bool {
        match self {
            DownloadError::Status { status, .. } => *status >= 500 || *status == 429,
            // Too slow: retrying would hold the slot for another whole budget.
            DownloadError::Truncated { .. } | DownloadError::Timeout { .. } => true,
            DownloadError::Network { transient, .. } => *transient,
            _ => false,
        }
    }

    /// A short label for metrics (`status_404`, `timeout`, `not_audio`, ...).
    pub fn kind(&self) -> String {
        match self {
            DownloadError::BadUrl { .. } => "bad_url".into(),
            DownloadError::UnsupportedScheme { .. } => "scheme".into(),
            DownloadError::Status { status, .. } => format!("status_{status}"),
            DownloadError::Redirect { .. } => "redirect".into(),
            DownloadError::NotWhole { .. } => "not_whole".into(),
            DownloadError::RetryAfterTooLong { .. } => "retry_after".into(),
            DownloadError::TooSlow { .. } => "too_slow".into(),
            DownloadError::ContentEncoding { .. } => "content_encoding".into(),
            DownloadError::BadEncoding { .. } => "bad_encoding".into(),
            DownloadError::TooLarge { .. } => "too_large".into(),
            DownloadError::Truncated { .. } => "truncated".into(),
            DownloadError::Timeout { .. } => "timeout".into(),
            DownloadError::Network { .. } => "network".into(),
            DownloadError::NotAudio { .. } => "not_audio".into(),
            DownloadError::UnsupportedCodec { .. } => "unsupported_codec".into(),
            DownloadError::Io { .. } => "io".into(),
            DownloadError::GaveUp { last, .. } => last.kind(),
            DownloadError::Cancelled { .. } => "cancelled".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_url_and_status() {
        let e = DownloadError::Status {
            url: "http://h/e.mp3".into(),
            status: 404,
            reason: "Not Found".into(),
            retry_after: None,
        };
        assert_eq!(e.to_string(), "GET http://h/e.mp3 returned 404 Not Found");
        assert!(!e.is_transient());
        let gave_up = DownloadError::GaveUp {
            attempts: 3,
            last: Box::new(DownloadError::Truncated {
                url: "http://h/e".into(),
                got: 10,
                expected: Some(20),
                how: "the connection closed".into(),
            }),
        };
        assert_eq!(
            gave_up.to_string(),
            "GET http://h/e: truncated body: got 10 bytes of 20 (the connection closed) (gave up after 3 attempts)"
        );
        assert_eq!(gave_up.kind(), "truncated");
    }
}
