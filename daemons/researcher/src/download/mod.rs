//! Fetching media to a file: streamed (never whole in memory), hashed while it streams,
//! bounded in size and time, retried with backoff on transient errors, and checked to be
//! audio before anyone decodes it.
//!
//! The caller chooses the destination file name (from a job id or a content hash), never
//! the URL, so a hostile URL cannot pick where bytes land.

mod encoding;
mod error;
mod hosts;
mod politeness;
mod probe;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use encoding::BodyDecoder;
use futures_util::FutureExt;
use reqwest::{redirect, Url};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

pub use error::DownloadError;
use hosts::HostBackoff;
use politeness::Politeness;
pub use probe::{check_audio, probe_audio, Refusal};

use crate::settings::DownloadSettings;

/// A file that arrived whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Where it is.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// sha256 of the content, lowercase hex.
    pub sha256: String,
    /// The Content-Type the server sent, if any.
    pub content_type: Option<String>,
    /// Tries it took (1 when the first worked).
    pub attempts: u32,
    /// The URL the body came from, after redirects.
    pub final_url: String,
    /// The validators the server sent, for a later conditional GET.
    pub validators: Validators,
}

/// The answer to a conditional GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A whole body (checked as any download).
    Body(Fetched),
    /// `304 Not Modified`, with the validators the `304` carried (its `ETag` says which
    /// of the entity tags asked with the server still serves).
    NotModified(Validators),
}

/// A response's validators (RFC 9110 section 8.8), sent back as `If-None-Match` and
/// `If-Modified-Since` to ask whether a stored body is still what the server serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag`.
    pub etag: Option<String>,
    /// `Last-Modified`.
    pub last_modified: Option<String>,
}

impl Validators {
    /// True when there is nothing to ask with.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    fn from_headers(headers: &reqwest::header::HeaderMap) -> Validators {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        Validators {
            etag: text(reqwest::header::ETAG),
            last_modified: text(reqwest::header::LAST_MODIFIED),
        }
    }
}

/// Called with the bytes received so far in the current try and the announced total.
pub type Progress<'a> = &'a (dyn Fn(u64, Option<u64>) + Send + Sync);

/// Downloads media; one per process (it pools connections).
#[derive(Debug, Clone)]
pub struct Downloader {
    client: reqwest::Client,
    settings: DownloadSettings,
    /// Per host: not before this instant (a `Retry-After` or a failure's backoff), shared
    /// by every download of this process (episodes and clips).
    hosts: HostBackoff,
    /// Per host: requests in flight and requests a second, shared likewise.
    politeness: Politeness,
}

/// A `304 Not Modified` to a request that asked nothing: no body, and nothing it could
/// refer to (a misconfigured server or cache).
fn not_modified_unasked(url: &str) -> DownloadError {
    DownloadError::Network {
        url: url.to_string(),
        reason: "the server answered 304 Not Modified to a request without validators \
                 (no If-None-Match or If-Modified-Since was sent): no body to research"
            .into(),
        transient: false,
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of a string, lowercase hex (used to name cache entries after URLs).
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Why a body stopped before its end, for the `truncated` message: the transfer was
/// delimited (a Content-Length, chunked encoding) and the server broke it off. A body
/// without either ends when the connection closes, and a close cannot be told from the
/// end: that case never reaches here (see docs/researcher.md, "Bodies whose length
/// nothing declares").
fn ended_early(expected: Option<u64>, chunked: bool, e: &reqwest::Error) -> String {
    let what = match (expected, chunked) {
        (Some(_), _) => "the connection closed before the Content-Length arrived",
        (None, true) => {
            "the transfer ended without its last chunk (chunked encoding broken off by the server)"
        }
        (None, false) => "the connection failed while the body was read",
    };
    format!("{what}: {}", error_chain(e))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

impl Downloader {
    /// Builds the HTTP client: rustls, the timeouts, gzip/deflate `Content-Encoding`
    /// undone, and a redirect policy that follows at most [`MAX_REDIRECTS`] redirects
    /// and only to http/https.
    ///
    /// # Errors
    /// [`DownloadError::Network`] if the TLS backend cannot start.
    pub fn new(settings: DownloadSettings) -> Result<Downloader, DownloadError> {
        let policy = redirect::Policy::custom(|attempt| {
            let scheme = attempt.url().scheme().to_string();
            if scheme != "http" && scheme != "https" {
                let to = attempt.url().to_string();
                attempt.error(format!("refused redirect to {to} (scheme {scheme})"))
            } else if redirects_so_far(attempt.previous().len()) > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .read_timeout(settings.read_timeout)
            .redirect(policy)
            .user_agent(settings.user_agent.clone())
            // Content-Encoding is undone by `encoding::BodyDecoder` (x-gzip and gzip of
            // several members too), never by reqwest: another crate of the workspace turning
            // on one of its decoders must not change what an episode gets.
            .no_gzip()
            .no_deflate()
            .no_brotli()
            .build()
            .map_err(|e| DownloadError::Network {
                url: String::new(),
                reason: format!("cannot build the HTTP client: {}", error_chain(&e)),
                transient: false,
            })?;
        Ok(Downloader {
            client,
            politeness: Politeness::new(&settings),
            settings,
            hosts: HostBackoff::default(),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &DownloadSettings {
        &self.settings
    }

    /// Parses and vets a URL: http, https, and file only when allowed.
    pub fn check_url(&self, url: &str) -> Result<Url, DownloadError> {
        let parsed = Url::parse(url).map_err(|e| DownloadError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        match parsed.scheme() {
            "http" | "https" => Ok(parsed),
            "file" if self.settings.allow_file_urls => Ok(parsed),
            scheme => Err(DownloadError::UnsupportedScheme {
                url: url.to_string(),
                scheme: scheme.to_string(),
                file_allowed: self.settings.allow_file_urls,
            }),
        }
    }

    /// Fetches `url` into `dest` and checks it is audio (a symphonia probe). On any
    /// error the partial file is removed.
    pub async fn fetch_audio(
        &self,
        url: &str,
        dest: &Path,
        cancel: &CancellationToken,
        progress: Progress<'_>,
    ) -> Result<Fetched, DownloadError> {
        let fetched = self.fetch(url, dest, cancel, progress).await?;
        if let Err(e) = check_audio(&fetched.path, url, fetched.content_type.as_deref()).await {
            let _ = tokio::fs::remove_file(dest).await;
            return Err(e);
        }
        Ok(fetched)
    }

    /// A conditional [`Downloader::fetch_audio`]: asks whether the server still serves
    /// one of the bodies `known` describes (their entity tags as one `If-None-Match`
    /// list, RFC 9110 section 13.1.2, and the first's `Last-Modified` as
    /// `If-Modified-Since`); `known` must hold a validator. A server that ignores them
    /// answers with the whole body, checked as any.
    pub async fn fetch_audio_if_changed(
        &self,
        url: &str,
        dest: &Path,
        known: &[Validators],
        cancel: &CancellationToken,
        progress: Progress<'_>,
    ) -> Result<Answer, DownloadError> {
        let answer = self
            .fetch_with(url, dest, Some(known), cancel, progress)
            .await?;
        if let Answer::Body(fetched) = &answer {
            if let Err(e) = check_audio(&fetched.path, url, fetched.content_type.as_deref()).await {
                let _ = tokio::fs::remove_file(dest).await;
                return Err(e);
            }
        }
        Ok(answer)
    }

    /// Fetches `url` into `dest`, retrying transient failures with exponential backoff
    /// and full jitter. On error the partial file is removed.
    pub async fn fetch(
        &self,
        url: &str,
        dest: &Path,
        cancel: &CancellationToken,
        progress: Progress<'_>,
    ) -> Result<Fetched, DownloadError> {
        match self.fetch_with(url, dest, None, cancel, progress).await? {
            Answer::Body(fetched) => Ok(fetched),
            // Only a conditional request is answered 304 (see `get_once`).
            Answer::NotModified(_) => Err(not_modified_unasked(url)),
        }
    }

    /// [`Downloader::fetch`], conditional when `known` validators are given.
    async fn fetch_with(
        &self,
        url: &str,
        dest: &Path,
        known: Option<&[Validators]>,
        cancel: &CancellationToken,
        progress: Progress<'_>,
    ) -> Result<Answer, DownloadError> {
        let parsed = self.check_url(url)?;
        let started = Instant::now();
        let mut attempt = 0u32;
        let host = parsed.host_str().unwrap_or("").to_string();
        let result = loop {
            attempt += 1;
            let pause = self.hosts.wait_for(&host);
            if !pause.is_zero() {
                tracing::info!(%url, %host, ?pause, "backing off this host");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = cancel.cancelled() => break Err(DownloadError::Cancelled { url: url.to_string() }),
                }
            }
            let once = if parsed.scheme() == "file" {
                self.copy_file(url, &parsed, dest, progress)
                    .map(|r| r.map(Answer::Body))
                    .boxed()
            } else {
                self.get_once(url, parsed.clone(), dest, known, progress)
                    .boxed()
            };
            let outcome = tokio::select! {
                r = once => r,
                _ = cancel.cancelled() => Err(DownloadError::Cancelled { url: url.to_string() }),
            };
            match outcome {
                Ok(Answer::Body(mut fetched)) => {
                    fetched.attempts = attempt;
                    break Ok(Answer::Body(fetched));
                }
                Ok(not_modified) => break Ok(not_modified),
                Err(DownloadError::Status {
                    status,
                    retry_after: Some(wait),
                    ..
                }) if wait > self.settings.max_retry_after => {
                    self.hosts.defer(&host, self.settings.max_retry_after);
                    break Err(DownloadError::RetryAfterTooLong {
                        url: url.to_string(),
                        status,
                        wait,
                        limit: self.settings.max_retry_after,
                    });
                }
                Err(e) if e.is_transient() && attempt < self.settings.max_attempts => {
                    // The server's Retry-After (bounded above) is a floor for our backoff;
                    // it holds for every download from that host.
                    let asked = match &e {
                        DownloadError::Status { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    let wait = self.backoff(attempt).max(asked.unwrap_or_default());
                    self.hosts.defer(&host, wait);
                    let wait = self.hosts.wait_for(&host);
                    metrics::counter!("archivist_researcher_download_retries_total", "reason" => e.kind()).increment(1);
                    tracing::warn!(%url, attempt, error = %e, ?wait, "download failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => break Err(DownloadError::Cancelled { url: url.to_string() }),
                    }
                }
                Err(e) if e.is_transient() && attempt > 1 => {
                    break Err(DownloadError::GaveUp {
                        attempts: attempt,
                        last: Box::new(e),
                    })
                }
                Err(e) => break Err(e),
            }
        };
        let secs = started.elapsed().as_secs_f64();
        match &result {
            Ok(Answer::NotModified(_)) => {
                metrics::histogram!("archivist_researcher_download_seconds", "outcome" => "not_modified")
                    .record(secs);
            }
            Ok(Answer::Body(f)) => {
                metrics::counter!("archivist_researcher_download_bytes_total").increment(f.bytes);
                metrics::histogram!("archivist_researcher_download_seconds", "outcome" => "ok")
                    .record(secs);
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(dest).await;
                metrics::histogram!("archivist_researcher_download_seconds", "outcome" => "error")
                    .record(secs);
                metrics::counter!("archivist_researcher_download_failures_total", "reason" => e.kind())
                    .increment(1);
            }
        }
        result
    }

    /// Full-jitter exponential backoff: uniform in [0, min(max, initial * 2^(n-1))].
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .settings
            .initial_backoff
            .saturating_mul(1u32 << (attempt - 1).min(20))
            .min(self.settings.max_backoff);
        let ms = base.as_millis() as u64;
        Duration::from_millis(if ms == 0 {
            0
        } else {
            rand::random::<u64>() % (ms + 1)
        })
    }

    /// The download budget once `received` bytes have arrived: the grace plus those
    /// bytes at the minimum throughput, so after the grace a body must keep up the
    /// minimum average rate as it goes. One rule whatever the Content-Length says: the
    /// time is earned by bytes that arrive, never bought by the size a server announces
    /// (a drip announcing 2 GB held a slot for ~34 h under a budget computed from it).
    pub fn budget(&self, received: u64) -> Duration {
        let rate = self.settings.min_bytes_per_s.max(1);
        self.settings.download_grace + Duration::from_secs_f64(received as f64 / rate as f64)
    }

    fn map_reqwest(&self, url: &str, e: &reqwest::Error, phase: &'static str) -> DownloadError {
        if e.is_timeout() {
            let after = if e.is_connect() {
                self.settings.connect_timeout
            } else {
                self.settings.read_timeout
            };
            return DownloadError::Timeout {
                url: url.to_string(),
                what: if e.is_connect() { "connecting" } else { phase },
                after,
            };
        }
        DownloadError::Network {
            url: url.to_string(),
            reason: error_chain(e),
            transient: !e.is_redirect() && !e.is_builder(),
        }
    }

    async fn get_once(
        &self,
        url: &str,
        parsed: Url,
        dest: &Path,
        known: Option<&[Validators]>,
        progress: Progress<'_>,
    ) -> Result<Answer, DownloadError> {
        // Held until the body is read (or this try fails): the host's slot and rate.
        let _turn = self.politeness.turn(parsed.host_str().unwrap_or("")).await;
        let wait = self.settings.connect_timeout + self.settings.read_timeout;
        let mut request = self
            .client
            .get(parsed)
            .header(reqwest::header::ACCEPT_ENCODING, "gzip, deflate");
        if let Some(known) = known {
            let mut etags: Vec<&str> = Vec::new();
            for etag in known.iter().filter_map(|v| v.etag.as_deref()) {
                if !etags.contains(&etag) {
                    etags.push(etag);
                }
            }
            if !etags.is_empty() {
                request = request.header(reqwest::header::IF_NONE_MATCH, etags.join(", "));
            }
            if let Some(date) = known.first().and_then(|v| v.last_modified.as_deref()) {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, date);
            }
        }
        let response = tokio::time::timeout(wait, request.send())
            .await
            .map_err(|_| DownloadError::Timeout {
                url: url.to_string(),
                what: "waiting for the response",
                after: wait,
            })?
            .map_err(|e| self.map_reqwest(url, &e, "waiting for the response"))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED {
            if known.is_none() {
                return Err(not_modified_unasked(url));
            }
            return Ok(Answer::NotModified(Validators::from_headers(
                response.headers(),
            )));
        }
        let final_url = response.url().to_string();
        let validators = Validators::from_headers(response.headers());
        if status.is_redirection() {
            // reqwest hands back a redirect it would not follow (another scheme).
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned())
                .unwrap_or_else(|| "(no Location header)".into());
            return Err(DownloadError::Redirect {
                url: url.to_string(),
                status: status.as_u16(),
                location,
            });
        }
        if !status.is_success() {
            return Err(DownloadError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_string(),
                retry_after: retry_after(response.headers()),
            });
        }
        let content_range = response
            .headers()
            .get(reqwest::header::CONTENT_RANGE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if status != reqwest::StatusCode::OK || content_range.is_some() {
            return Err(DownloadError::NotWhole {
                url: url.to_string(),
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_string(),
                content_range,
            });
        }
        let encoding = response
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let mut decoder = BodyDecoder::for_header(encoding.as_deref()).map_err(|encoding| {
            DownloadError::ContentEncoding {
                url: url.to_string(),
                encoding,
            }
        })?;
        // Whether the transfer is delimited (a length or chunked encoding), so a body that
        // stops early says so; a body ended by the connection closing cannot.
        let chunked = response
            .headers()
            .get(reqwest::header::TRANSFER_ENCODING)
            .is_some_and(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .to_ascii_lowercase()
                    .contains("chunked")
            });
        let limit = self.settings.max_bytes;
        let expected = response.content_length();
        if let Some(n) = expected {
            if n > limit {
                return Err(DownloadError::TooLarge {
                    url: url.to_string(),
                    limit,
                    detail: format!("Content-Length {n}"),
                });
            }
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut response = response;
        let mut file = create(dest).await?;
        let mut hasher = Sha256::new();
        // Bytes on the wire (what Content-Length counts) and media bytes (decoded).
        let mut wire = 0u64;
        let mut got = 0u64;
        let started = Instant::now();
        let bad_encoding = |e: std::io::Error| DownloadError::BadEncoding {
            url: url.to_string(),
            reason: e.to_string(),
        };
        loop {
            // Whichever comes first: the read timeout (nothing arrives) or the end of the
            // download budget (bytes arrive, but too slowly).
            let budget = self.budget(wire);
            let left = budget.saturating_sub(started.elapsed());
            let wait = self.settings.read_timeout.min(left);
            let chunk = match tokio::time::timeout(wait, response.chunk()).await {
                Ok(chunk) => chunk,
                Err(_) if wait < self.settings.read_timeout => {
                    return Err(DownloadError::TooSlow {
                        url: url.to_string(),
                        got: wire,
                        expected,
                        elapsed: started.elapsed(),
                        budget,
                        min_rate: self.settings.min_bytes_per_s,
                        grace: self.settings.download_grace,
                    })
                }
                Err(_) => {
                    return Err(DownloadError::Timeout {
                        url: url.to_string(),
                        what: "reading the body",
                        after: self.settings.read_timeout,
                    })
                }
            };
            let chunk = match chunk {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(self.map_reqwest(url, &e, "reading the body"))
                }
                Err(e) => {
                    tracing::debug!(%url, error = %error_chain(&e), wire, "body ended early");
                    return Err(DownloadError::Truncated {
                        url: url.to_string(),
                        got: wire,
                        expected,
                        how: ended_early(expected, chunked, &e),
                    });
                }
            };
            wire += chunk.len() as u64;
            let chunk = decoder.feed(&chunk).map_err(bad_encoding)?;
            got += chunk.len() as u64;
            if got > limit {
                return Err(DownloadError::TooLarge {
                    url: url.to_string(),
                    limit,
                    detail: format!("more than {limit} bytes arrived"),
                });
            }
            hasher.update(&chunk);
            write(&mut file, dest, &chunk).await?;
            progress(wire, expected);
        }
        if let Some(n) = expected {
            if wire < n {
                return Err(DownloadError::Truncated {
                    url: url.to_string(),
                    got: wire,
                    expected,
                    how: "the connection closed before the Content-Length arrived".into(),
                });
            }
        }
        // A compressed body must also end whole (its members' trailers, CRCs and
        // lengths). Without a length or chunks the connection's close ended it, so an
        // unfinished stream is a transfer cut short (worth a retry); after a delimited
        // transfer that ended as declared, the bytes themselves are damaged.
        let last = decoder.finish().map_err(|e| {
            if expected.is_none() && !chunked {
                DownloadError::Truncated {
                    url: url.to_string(),
                    got: wire,
                    expected,
                    how: format!("the connection closed before the compressed body's end: {e}"),
                }
            } else {
                DownloadError::BadEncoding {
                    url: url.to_string(),
                    reason: format!("the compressed body does not end whole ({e}): damaged"),
                }
            }
        })?;
        got += last.len() as u64;
        if got > limit {
            return Err(DownloadError::TooLarge {
                url: url.to_string(),
                limit,
                detail: format!("more than {limit} bytes arrived"),
            });
        }
        hasher.update(&last);
        write(&mut file, dest, &last).await?;
        finish(&mut file, dest).await?;
        Ok(Answer::Body(Fetched {
            path: dest.to_path_buf(),
            bytes: got,
            sha256: hex(&hasher.finalize()),
            content_type,
            attempts: 1,
            final_url,
            validators,
        }))
    }

    async fn copy_file(
        &self,
        url: &str,
        parsed: &Url,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<Fetched, DownloadError> {
        let source = parsed.to_file_path().map_err(|_| DownloadError::BadUrl {
            url: url.to_string(),
            reason: "not a local file path".into(),
        })?;
        let io = |e: std::io::Error| DownloadError::Io {
            path: source.display().to_string(),
            reason: e.to_string(),
        };
        let mut input = tokio::fs::File::open(&source).await.map_err(io)?;
        let limit = self.settings.max_bytes;
        let size = input.metadata().await.map_err(io)?.len();
        if size > limit {
            return Err(DownloadError::TooLarge {
                url: url.to_string(),
                limit,
                detail: format!("file is {size} bytes"),
            });
        }
        let mut file = create(dest).await?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0u64;
        loop {
            let n = input.read(&mut buf).await.map_err(io)?;
            if n == 0 {
                break;
            }
            got += n as u64;
            if got > limit {
                return Err(DownloadError::TooLarge {
                    url: url.to_string(),
                    limit,
                    detail: format!("more than {limit} bytes read"),
                });
            }
            hasher.update(&buf[..n]);
            write(&mut file, dest, &buf[..n]).await?;
            progress(got, Some(size));
        }
        finish(&mut file, dest).await?;
        Ok(Fetched {
            path: dest.to_path_buf(),
            bytes: got,
            sha256: hex(&hasher.finalize()),
            content_type: None,
            attempts: 1,
            final_url: url.to_string(),
            validators: Validators::default(),
        })
    }
}

/// Most redirects followed for one download (docs/researcher.md: "at most 10").
pub const MAX_REDIRECTS: usize = 10;

/// Redirects taken when reqwest asks about the next one: `previous` holds every URL
/// requested so far, the original included, so the attempt at hand is redirect number
/// `previous`.
fn redirects_so_far(previous: usize) -> usize {
    previous
}

/// A usable `Retry-After`: delay-seconds or an HTTP date (RFC 9110 section 10.2.3).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn io_error(path: &Path, e: std::io::Error) -> DownloadError {
    DownloadError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

async fn create(path: &Path) -> Result<tokio::fs::File, DownloadError> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| io_error(parent, e))?;
    }
    tokio::fs::File::create(path)
        .await
        .map_err(|e| io_error(path, e))
}

async fn write(file: &mut tokio::fs::File, path: &Path, bytes: &[u8]) -> Result<(), DownloadError> {
    file.write_all(bytes).await.map_err(|e| io_error(path, e))
}

async fn finish(file: &mut tokio::fs::File, path: &Path) -> Result<(), DownloadError> {
    file.flush().await.map_err(|e| io_error(path, e))?;
    file.sync_all().await.map_err(|e| io_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_vetted() {
        let d = Downloader::new(DownloadSettings::default()).unwrap();
        assert!(d.check_url("http://example.com/a.mp3").is_ok());
        assert!(d.check_url("https://example.com/a.mp3").is_ok());
        let err = d.check_url("file:///etc/passwd").unwrap_err();
        assert!(
            matches!(err, DownloadError::UnsupportedScheme { .. }),
            "{err}"
        );
        assert!(d.check_url("ftp://example.com/a.mp3").is_err());
        assert!(d.check_url("not a url").is_err());
        let d = Downloader::new(DownloadSettings::default().with_file_urls(true)).unwrap();
        assert!(d.check_url("file:///tmp/a.wav").is_ok());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let d = Downloader::new(
            DownloadSettings::default()
                .with_backoff(Duration::from_millis(100), Duration::from_millis(400)),
        )
        .unwrap();
        for attempt in 1..10 {
            let cap = (100u64 << (attempt - 1)).min(400);
            assert!(d.backoff(attempt) <= Duration::from_millis(cap));
        }
    }
}
