//! A tiny HTTP/1.1 server for tests: each path serves a scripted behaviour (audio, an
//! error status, a slow or truncated or non-audio body) and counts its requests and the
//! body bytes it sent (`Ok` and `Tagged` routes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a path answers.
#[derive(Clone)]
pub enum Route {
    /// 200 with this body and content type, after `delay`.
    Ok {
        body: Arc<Vec<u8>>,
        content_type: &'static str,
        delay: Duration,
    },
    /// This status, empty body.
    Status(u16),
    /// `status` for the first `times` requests, then `then`.
    FailThen {
        status: u16,
        times: usize,
        then: Box<Route>,
    },
    /// Waits this long before answering anything.
    Slow(Duration),
    /// Announces the whole body's length but sends only `send` bytes, then closes.
    Truncated { body: Arc<Vec<u8>>, send: usize },
    /// 302 to this location.
    Redirect(String),
    /// `206 Partial Content` with the first `send` bytes and a `Content-Range`, to a
    /// plain GET (no `Range` asked).
    Partial { body: Arc<Vec<u8>>, send: usize },
    /// 200 with the whole Content-Length announced, then one byte every `every`.
    Drip {
        body: Arc<Vec<u8>>,
        every: Duration,
        /// The Content-Length announced instead of the body's (a server lying to buy
        /// time), if any.
        claimed: Option<u64>,
    },
    /// `status` with `Retry-After: <retry_after>` for the first `times` requests, then
    /// `then`.
    RetryAfter {
        status: u16,
        retry_after: String,
        times: usize,
        then: Box<Route>,
    },
    /// 200 with `Transfer-Encoding: chunked` (no Content-Length): the first `send`
    /// bytes of `body` in chunks, then the terminating chunk if `end`, else the
    /// connection is closed (a server that died mid-transfer). With `encoding`, a
    /// `Content-Encoding` header (the body already encoded).
    Chunked {
        body: Arc<Vec<u8>>,
        send: usize,
        end: bool,
        encoding: Option<&'static str>,
    },
    /// 200 with neither Content-Length nor chunked encoding (the body ends when the
    /// connection closes): the first `send` bytes of `body`, with `Content-Encoding:
    /// encoding`, then a clean close.
    Unframed {
        body: Arc<Vec<u8>>,
        send: usize,
        encoding: &'static str,
    },
    /// 200 with this `Content-Encoding` and body (already encoded).
    Encoded {
        body: Arc<Vec<u8>>,
        encoding: &'static str,
    },
    /// Audio with an `ETag` and a `Last-Modified`: `304 Not Modified` (no body) to a
    /// request whose `If-None-Match` names the tag, else 200 with the body.
    Tagged { body: Arc<Vec<u8>>, etag: String },
    /// Audio with a `Last-Modified` and no `ETag` (many static hosts): `304 Not
    /// Modified` to a request whose `If-Modified-Since` is at or after that date (RFC
    /// 9110 section 13.1.3), else 200 with the body.
    Dated {
        body: Arc<Vec<u8>>,
        last_modified: std::time::SystemTime,
    },
}

impl Route {
    /// Audio served at once.
    pub fn audio(body: &Arc<Vec<u8>>) -> Route {
        Route::Ok {
            body: body.clone(),
            content_type: "audio/wav",
            delay: Duration::ZERO,
        }
    }

    /// Audio served after a delay.
    pub fn slow_audio(body: &Arc<Vec<u8>>, delay: Duration) -> Route {
        Route::Ok {
            body: body.clone(),
            content_type: "audio/wav",
            delay,
        }
    }
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Route>,
    hits: HashMap<String, usize>,
    bytes: HashMap<String, u64>,
    times: HashMap<String, Vec<std::time::Instant>>,
    /// Each request's `If-None-Match`, in order.
    asked: HashMap<String, Vec<Option<String>>>,
    /// When each request's head arrived and its answer ended.
    spans: Vec<(Instant, Option<Instant>)>,
    /// Each request's `User-Agent`, in order.
    agents: Vec<Option<String>>,
}

/// Records a request's span until dropped (whichever way its answer ends).
struct InFlight(Arc<Mutex<State>>, usize);

impl InFlight {
    fn new(state: &Arc<Mutex<State>>) -> InFlight {
        let mut st = state.lock().unwrap();
        st.spans.push((Instant::now(), None));
        InFlight(state.clone(), st.spans.len() - 1)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut st) = self.0.lock() {
            st.spans[self.1].1 = Some(Instant::now());
        }
    }
}

/// A running server.
#[derive(Clone)]
pub struct Server {
    pub base: String,
    state: Arc<Mutex<State>>,
}

impl Server {
    pub async fn start() -> Server {
        Server::start_on("127.0.0.1").await
    }

    /// A server on another loopback address (`127.0.0.2`: another host to a client).
    pub async fn start_on(ip: &str) -> Server {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state: Arc<Mutex<State>> = Arc::default();
        let st = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = handle(stream, st).await;
                });
            }
        });
        Server {
            base: format!("http://{addr}"),
            state,
        }
    }

    /// Sets what `path` answers; returns its URL.
    pub fn route(&self, path: &str, route: Route) -> String {
        self.state
            .lock()
            .unwrap()
            .routes
            .insert(path.to_string(), route);
        format!("{}{path}", self.base)
    }

    /// When each request for `path` arrived.
    pub fn hit_times(&self, path: &str) -> Vec<std::time::Instant> {
        self.state
            .lock()
            .unwrap()
            .times
            .get(path)
            .cloned()
            .unwrap_or_default()
    }

    /// The most requests this server answered at once: at some request's arrival, how
    /// many others had arrived and went on for more than `slack` after it (a request
    /// whose last bytes the client already has may take a moment to close here).
    pub fn most_at_once(&self, slack: Duration) -> usize {
        let spans = self.state.lock().unwrap().spans.clone();
        let now = Instant::now();
        spans
            .iter()
            .map(|(at, _)| {
                spans
                    .iter()
                    .filter(|(start, end)| start <= at && end.unwrap_or(now) > *at + slack)
                    .count()
                    .max(1)
            })
            .max()
            .unwrap_or(0)
    }

    /// When each request arrived (any path), in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        let spans = self.state.lock().unwrap().spans.clone();
        spans.iter().map(|(at, _)| *at).collect()
    }

    /// The `User-Agent` of each request so far.
    pub fn agents(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().agents.clone()
    }

    /// The `If-None-Match` of each request for `path` so far.
    pub fn if_none_match(&self, path: &str) -> Vec<Option<String>> {
        self.state
            .lock()
            .unwrap()
            .asked
            .get(path)
            .cloned()
            .unwrap_or_default()
    }

    /// Body bytes sent for `path` so far (`Ok` and `Tagged` routes).
    pub fn bytes_served(&self, path: &str) -> u64 {
        self.state
            .lock()
            .unwrap()
            .bytes
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// Requests `path` received so far.
    pub fn hits(&self, path: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .hits
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        304 => "Not Modified",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}

async fn handle(mut stream: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let header = |wanted: &str| {
        text.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_string())
        })
    };
    let if_none_match = header("if-none-match");
    let if_modified_since = header("if-modified-since");
    let _in_flight = InFlight::new(&state);
    let served = |n: usize| {
        *state.lock().unwrap().bytes.entry(path.clone()).or_insert(0) += n as u64;
    };
    let (route, hit) = {
        let mut st = state.lock().unwrap();
        let hit = {
            let h = st.hits.entry(path.clone()).or_insert(0);
            *h += 1;
            *h
        };
        st.times
            .entry(path.clone())
            .or_default()
            .push(std::time::Instant::now());
        st.asked
            .entry(path.clone())
            .or_default()
            .push(if_none_match.clone());
        st.agents.push(header("user-agent"));
        (st.routes.get(&path).cloned(), hit)
    };
    let mut route = route.unwrap_or(Route::Status(404));
    if let Route::FailThen {
        status,
        times,
        then,
    } = &route
    {
        route = if hit <= *times {
            Route::Status(*status)
        } else {
            (**then).clone()
        };
    }
    if let Route::RetryAfter {
        status,
        retry_after,
        times,
        then,
    } = &route
    {
        if hit <= *times {
            let header = format!(
                "HTTP/1.1 {status} {}\r\nRetry-After: {retry_after}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                reason(*status)
            );
            stream.write_all(header.as_bytes()).await?;
            stream.flush().await?;
            return stream.shutdown().await;
        }
        route = (**then).clone();
    }
    match route {
        Route::Ok {
            body,
            content_type,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(header.as_bytes()).await?;
            stream.write_all(&body).await?;
            served(body.len());
        }
        Route::Tagged { body, etag } => {
            let validators =
                format!("ETag: {etag}\r\nLast-Modified: Tue, 24 Nov 2026 10:00:00 GMT\r\n");
            // A list of entity tags (RFC 9110 section 13.1.2): any one matching.
            let matches = if_none_match
                .as_deref()
                .is_some_and(|list| list.split(',').any(|t| t.trim() == etag));
            if matches {
                let header =
                    format!("HTTP/1.1 304 Not Modified\r\n{validators}Connection: close\r\n\r\n");
                stream.write_all(header.as_bytes()).await?;
            } else {
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: audio/wav\r\n{validators}Connection: close\r\n\r\n",
                    body.len()
                );
                stream.write_all(header.as_bytes()).await?;
                stream.write_all(&body).await?;
                served(body.len());
            }
        }
        Route::Dated {
            body,
            last_modified,
        } => {
            let date = httpdate::fmt_http_date(last_modified);
            let not_modified = if_modified_since
                .as_deref()
                .and_then(|d| httpdate::parse_http_date(d).ok())
                .is_some_and(|since| last_modified <= since);
            if not_modified {
                let header = format!(
                    "HTTP/1.1 304 Not Modified\r\nLast-Modified: {date}\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(header.as_bytes()).await?;
            } else {
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: audio/wav\r\nLast-Modified: {date}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                stream.write_all(header.as_bytes()).await?;
                stream.write_all(&body).await?;
                served(body.len());
            }
        }
        Route::Status(status) => {
            let header = format!(
                "HTTP/1.1 {status} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                reason(status)
            );
            stream.write_all(header.as_bytes()).await?;
        }
        Route::Slow(delay) => {
            tokio::time::sleep(delay).await;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await?;
        }
        Route::Truncated { body, send } => {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: audio/wav\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(header.as_bytes()).await?;
            stream.write_all(&body[..send.min(body.len())]).await?;
        }
        Route::Redirect(location) => {
            let header = format!(
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(header.as_bytes()).await?;
        }
        Route::Partial { body, send } => {
            let send = send.min(body.len());
            let header = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {send}\r\nContent-Range: bytes 0-{}/{}\r\nContent-Type: audio/wav\r\nConnection: close\r\n\r\n",
                send.saturating_sub(1),
                body.len()
            );
            stream.write_all(header.as_bytes()).await?;
            stream.write_all(&body[..send]).await?;
        }
        Route::Drip {
            body,
            every,
            claimed,
        } => {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: audio/wav\r\nConnection: close\r\n\r\n",
                claimed.unwrap_or(body.len() as u64)
            );
            stream.write_all(header.as_bytes()).await?;
            for b in body.iter() {
                stream.write_all(&[*b]).await?;
                stream.flush().await?;
                tokio::time::sleep(every).await;
            }
        }
        Route::Encoded { body, encoding } => {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: audio/wav\r\nContent-Encoding: {encoding}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(header.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Route::Chunked {
            body,
            send,
            end,
            encoding,
        } => {
            let encoding = encoding
                .map(|e| format!("Content-Encoding: {e}\r\n"))
                .unwrap_or_default();
            let header = format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: audio/mpeg\r\n{encoding}Connection: close\r\n\r\n"
            );
            stream.write_all(header.as_bytes()).await?;
            for piece in body[..send.min(body.len())].chunks(4096) {
                stream
                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .await?;
                stream.write_all(piece).await?;
                stream.write_all(b"\r\n").await?;
            }
            if end {
                stream.write_all(b"0\r\n\r\n").await?;
            }
        }
        Route::Unframed {
            body,
            send,
            encoding,
        } => {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: audio/wav\r\nContent-Encoding: {encoding}\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(header.as_bytes()).await?;
            stream.write_all(&body[..send.min(body.len())]).await?;
        }
        Route::FailThen { .. } | Route::RetryAfter { .. } => unreachable!("resolved above"),
    }
    stream.flush().await?;
    stream.shutdown().await
}
