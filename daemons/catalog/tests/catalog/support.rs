//! Test helpers: a tiny local HTTP server, fresh stores per backend, catalog readers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use archivist_catalog::identity;
use archivist_catalog::merge::StoredRecord;
use archivist_catalog::{CatalogItem, Kind};
use archivist_db::{catalog, Database};
use archivist_engine::schema::records::AliasTarget;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server answers on a path.
#[derive(Clone)]
pub struct Route {
    pub content_type: String,
    pub body: Vec<u8>,
    pub etag: Option<String>,
    /// Status line after `HTTP/1.1 ` (default `200 OK`).
    pub status: String,
    /// More headers (`content-encoding`, `location`...).
    pub headers: Vec<(String, String)>,
}

impl Route {
    /// A 200 answer with this type and body.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Route {
        Route {
            content_type: content_type.to_string(),
            body: body.into(),
            etag: None,
            status: "200 OK".to_string(),
            headers: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Route {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// A request the server saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub if_none_match: Option<String>,
}

/// A local HTTP/1.1 server (one request per connection) with settable routes.
#[derive(Clone)]
pub struct Server {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server {
            addr: listener.local_addr().unwrap(),
            routes: Arc::default(),
            seen: Arc::default(),
        };
        let s = server.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let mut lines = text.lines();
                    let mut first = lines.next().unwrap_or("").split(' ');
                    let method = first.next().unwrap_or("").to_string();
                    let path = first.next().unwrap_or("").to_string();
                    let mut if_none_match = None;
                    for line in lines {
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("if-none-match") {
                                if_none_match = Some(v.trim().to_string());
                            }
                        }
                    }
                    s.seen.lock().unwrap().push(Seen {
                        method: method.clone(),
                        path: path.clone(),
                        if_none_match: if_none_match.clone(),
                    });
                    let route = s.routes.lock().unwrap().get(&path).cloned();
                    let response = match route {
                        None => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
                        Some(r) if r.etag.is_some() && r.etag == if_none_match => {
                            format!("HTTP/1.1 304 Not Modified\r\netag: {}\r\nconnection: close\r\n\r\n", r.etag.unwrap_or_default()).into_bytes()
                        }
                        Some(r) => {
                            let mut head = format!(
                                "HTTP/1.1 {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                                r.status,
                                r.content_type,
                                r.body.len()
                            );
                            if let Some(etag) = &r.etag {
                                head.push_str(&format!("etag: {etag}\r\n"));
                            }
                            for (name, value) in &r.headers {
                                head.push_str(&format!("{name}: {value}\r\n"));
                            }
                            head.push_str("\r\n");
                            let mut out = head.into_bytes();
                            if method != "HEAD" {
                                out.extend_from_slice(&r.body);
                            }
                            out
                        }
                    };
                    let _ = stream.write_all(&response).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn route(&self, path: &str, content_type: &str, body: &str, etag: Option<&str>) {
        let mut route = Route::ok(content_type, body.as_bytes());
        route.etag = etag.map(str::to_string);
        self.serve(path, route);
    }

    /// Answers `path` with `route`.
    pub fn serve(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.to_string(), route);
    }

    /// Answers `path` with a 302 to `to` (a path on this server).
    pub fn redirect(&self, path: &str, to: &str) {
        let mut route = Route::ok("text/plain", Vec::new()).header("location", to);
        route.status = "302 Found".to_string();
        self.serve(path, route);
    }

    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }
}

/// An RSS feed whose items are (guid, title, enclosure url, type).
pub fn rss(items: &[(&str, &str, &str, &str)]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\"?>\n<rss version=\"2.0\"><channel><title>Test show</title><link>http://example.invalid/</link><description>d</description>\n",
    );
    for (guid, title, url, kind) in items {
        out.push_str(&format!(
            "<item><title>{title}</title><guid isPermaLink=\"false\">{guid}</guid><pubDate>Tue, 02 Jan 2024 10:00:00 GMT</pubDate><description>About {title}</description><enclosure url=\"{url}\" type=\"{kind}\" length=\"1234\"/></item>\n"
        ));
    }
    out.push_str("</channel></rss>\n");
    out
}

pub fn episode(url: &str, title: &str) -> CatalogItem {
    CatalogItem::new(Kind::Episode, url, title, format!("test {title}")).unwrap()
}

pub fn clip(url: &str, title: &str) -> CatalogItem {
    CatalogItem::new(Kind::Clip, url, title, format!("test {title}")).unwrap()
}

/// A fresh ZooKeeper chroot and a fresh database, once per backend the machine offers
/// (SQLite always, PostgreSQL when `ARCHIVIST_TEST_PG` is set).
pub use archivist_testkit::db::fresh_stores as stores;

/// The record an alias points at, if any.
pub async fn id_by_alias(db: &Database, alias: &str) -> Option<String> {
    catalog::aliases(db, &[alias.to_string()])
        .await
        .unwrap()
        .remove(alias)
        .map(|a| a.id)
}

pub async fn id_by_url(db: &Database, url: &str) -> Option<String> {
    id_by_alias(
        db,
        &identity::url_alias(&identity::normalize_url(url).unwrap()),
    )
    .await
}

fn target(kind: Kind) -> AliasTarget {
    match kind {
        Kind::Episode => AliasTarget::Episode,
        Kind::Clip => AliasTarget::Clip,
    }
}

pub async fn record(db: &Database, kind: Kind, id: &str) -> StoredRecord {
    catalog::records(db, target(kind), &[id.to_string()])
        .await
        .unwrap()
        .remove(id)
        .unwrap_or_else(|| panic!("{id} is not in the catalog"))
        .record
}

async fn ids(db: &Database, kind: Kind) -> Vec<String> {
    let mut out = Vec::new();
    catalog::each_record(db, target(kind), |page| {
        out.extend(page.into_iter().map(|r| r.id().to_string()))
    })
    .await
    .unwrap();
    out
}

pub async fn episodes(db: &Database) -> Vec<String> {
    ids(db, Kind::Episode).await
}

pub async fn clips(db: &Database) -> Vec<String> {
    ids(db, Kind::Clip).await
}

/// Every alias name, in order.
pub async fn aliases(db: &Database) -> Vec<String> {
    let mut out = Vec::new();
    catalog::each_alias(db, |page| out.extend(page.into_iter().map(|a| a.name)))
        .await
        .unwrap();
    out
}
