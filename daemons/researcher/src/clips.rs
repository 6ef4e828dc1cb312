//! Clips, downloaded once and decoded once per process.
//!
//! On disk (in the work directory) a clip is stored by the sha256 of its content
//! (`clips/<hash>`), and `clips/by-url/<sha256 of URL and version>` holds the content
//! hash of a URL already fetched for one version of the clip (its [`clip_stamp`]: the
//! latest curation and the catalog's content hash), so a clip used by a thousand
//! episodes is downloaded once, not once per episode, and a re-curated clip (whose file
//! may have changed at the same URL) is fetched again once instead of being matched in
//! its old form forever.
//!
//! [`clip_stamp`]: archivist_engine::schema::records::clip_stamp In memory, decoded clips (mono 8 kHz) stay in a least-recently-used
//! cache bounded in bytes. Concurrent jobs asking for the same clip wait for one fetch.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use archivist_matcher::decode::{decode_file_with, DecodeError, DecodeLimits};
use tokio_util::sync::CancellationToken;

use crate::download::{sha256_hex, DownloadError, Downloader};

/// A decoded clip.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedClip {
    /// sha256 of the file, lowercase hex.
    pub hash: String,
    /// Mono samples at the matcher's analysis rate.
    pub samples: Vec<f32>,
    /// Duration in seconds.
    pub duration_s: f64,
}

/// Why a clip could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClipError {
    /// Its media could not be downloaded.
    #[error("clip download failed: {0}")]
    Download(#[from] DownloadError),
    /// Its media does not decode.
    #[error("clip decode failed: {0}")]
    Decode(#[from] DecodeError),
    /// The cache directory could not be used.
    #[error("clip cache {path}: {reason}")]
    Cache {
        /// The file or directory.
        path: String,
        /// OS message.
        reason: String,
    },
}

#[derive(Default)]
struct Lru {
    order: VecDeque<String>,
    entries: HashMap<String, Arc<DecodedClip>>,
    bytes: usize,
}

impl Lru {
    fn get(&mut self, hash: &str) -> Option<Arc<DecodedClip>> {
        let hit = self.entries.get(hash).cloned()?;
        if let Some(pos) = self.order.iter().position(|h| h == hash) {
            if let Some(h) = self.order.remove(pos) {
                self.order.push_back(h);
            }
        }
        Some(hit)
    }

    fn insert(&mut self, clip: Arc<DecodedClip>, budget: usize) {
        if self.entries.contains_key(&clip.hash) {
            return;
        }
        self.bytes += clip.samples.len() * 4;
        self.order.push_back(clip.hash.clone());
        self.entries.insert(clip.hash.clone(), clip);
        while self.bytes > budget && self.order.len() > 1 {
            if let Some(old) = self.order.pop_front() {
                if let Some(gone) = self.entries.remove(&old) {
                    self.bytes -= gone.samples.len() * 4;
                }
            }
        }
    }
}

/// The clip cache of one process.
pub struct ClipCache {
    dir: PathBuf,
    downloader: Downloader,
    budget: usize,
    lru: Mutex<Lru>,
    url_hashes: Mutex<HashMap<String, String>>,
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    limits: DecodeLimits,
}

impl std::fmt::Debug for ClipCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClipCache")
            .field("dir", &self.dir)
            .field("budget", &self.budget)
            .finish()
    }
}

impl ClipCache {
    /// A cache under `work_dir/clips` keeping at most `budget` bytes of decoded audio.
    pub fn new(work_dir: &Path, downloader: Downloader, budget: usize) -> ClipCache {
        ClipCache {
            dir: work_dir.join("clips"),
            downloader,
            budget,
            lru: Mutex::default(),
            url_hashes: Mutex::default(),
            in_flight: Mutex::default(),
            limits: DecodeLimits::default(),
        }
    }

    /// Decodes clips within `limits` (the researcher's `max_audio_hours`).
    pub fn with_decode_limits(mut self, limits: DecodeLimits) -> ClipCache {
        self.limits = limits;
        self
    }

    /// Decoded clips held in memory right now.
    pub fn decoded_len(&self) -> usize {
        self.lru.lock().map(|l| l.entries.len()).unwrap_or(0)
    }

    fn cache_err(path: &Path, e: std::io::Error) -> ClipError {
        ClipError::Cache {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    }

    fn known_hash(&self, key: &str) -> Option<String> {
        if let Some(h) = self.url_hashes.lock().ok()?.get(key).cloned() {
            return Some(h);
        }
        let text = std::fs::read_to_string(self.dir.join("by-url").join(sha256_hex(key))).ok()?;
        let hash = text.trim().to_string();
        let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then_some(hash)
    }

    fn remember(&self, key: &str, hash: &str) -> Result<(), ClipError> {
        if let Ok(mut map) = self.url_hashes.lock() {
            map.insert(key.to_string(), hash.to_string());
        }
        let dir = self.dir.join("by-url");
        std::fs::create_dir_all(&dir).map_err(|e| Self::cache_err(&dir, e))?;
        let tmp = dir.join(format!(".{}.tmp", rand::random::<u64>()));
        let path = dir.join(sha256_hex(key));
        std::fs::write(&tmp, hash).map_err(|e| Self::cache_err(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Self::cache_err(&path, e))
    }

    /// The decoded clip at `url` as of `version` (the clip's [`clip_stamp`]: a new
    /// curation is a new version, fetched again once). `known_hash` (the catalog's
    /// content hash, if any) lets a clip already on disk be used without asking the
    /// server.
    ///
    /// [`clip_stamp`]: archivist_engine::schema::records::clip_stamp
    pub async fn get(
        &self,
        url: &str,
        version: &str,
        known_hash: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Arc<DecodedClip>, ClipError> {
        let key = format!("{url}\n{version}");
        let gate = {
            let mut map = self.in_flight.lock().map_err(|_| ClipError::Cache {
                path: self.dir.display().to_string(),
                reason: "in-flight map poisoned".into(),
            })?;
            map.entry(url.to_string()).or_default().clone()
        };
        let _one_at_a_time = gate.lock().await;
        let hash = self
            .known_hash(&key)
            .or_else(|| known_hash.map(str::to_string));
        if let Some(hash) = &hash {
            if let Some(hit) = self.lru.lock().ok().and_then(|mut l| l.get(hash)) {
                metrics::counter!("archivist_researcher_clip_cache_total", "result" => "memory")
                    .increment(1);
                return Ok(hit);
            }
            let path = self.dir.join(hash);
            if path.is_file() {
                metrics::counter!("archivist_researcher_clip_cache_total", "result" => "disk")
                    .increment(1);
                return self.decode(path, hash.clone(), url).await;
            }
        }
        metrics::counter!("archivist_researcher_clip_cache_total", "result" => "miss").increment(1);
        std::fs::create_dir_all(&self.dir).map_err(|e| Self::cache_err(&self.dir, e))?;
        let tmp = self
            .dir
            .join(format!(".download-{}.part", rand::random::<u64>()));
        let fetched = self
            .downloader
            .fetch_audio(url, &tmp, cancel, &|_, _| {})
            .await?;
        let path = self.dir.join(&fetched.sha256);
        std::fs::rename(&tmp, &path).map_err(|e| Self::cache_err(&path, e))?;
        self.remember(&key, &fetched.sha256)?;
        self.decode(path, fetched.sha256, url).await
    }

    async fn decode(
        &self,
        path: PathBuf,
        hash: String,
        url: &str,
    ) -> Result<Arc<DecodedClip>, ClipError> {
        let label = url.to_string();
        let limits = self.limits;
        let decoded = tokio::task::spawn_blocking(move || {
            decode_file_with(&path, &limits).map_err(|e| relabel(e, &label))
        })
        .await
        .map_err(|e| ClipError::Cache {
            path: url.to_string(),
            reason: format!("decode task failed: {e}"),
        })??;
        let clip = Arc::new(DecodedClip {
            hash,
            duration_s: decoded.duration_s,
            samples: decoded.samples,
        });
        if let Ok(mut lru) = self.lru.lock() {
            lru.insert(clip.clone(), self.budget);
        }
        Ok(clip)
    }
}

/// Names the input as the user knows it (the URL) instead of the local file in a decode
/// error.
pub fn relabel(e: DecodeError, label: &str) -> DecodeError {
    e.relabel(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(hash: &str, n: usize) -> Arc<DecodedClip> {
        Arc::new(DecodedClip {
            hash: hash.into(),
            samples: vec![0.0; n],
            duration_s: 0.0,
        })
    }

    #[test]
    fn lru_evicts_least_recently_used_within_budget() {
        let mut lru = Lru::default();
        lru.insert(clip("a", 100), 1000);
        lru.insert(clip("b", 100), 1000);
        assert!(lru.get("a").is_some());
        lru.insert(clip("c", 100), 1000);
        assert!(lru.get("b").is_none(), "b was least recently used");
        assert!(lru.get("a").is_some() && lru.get("c").is_some());
        assert!(lru.bytes <= 1000);
        lru.insert(clip("huge", 10_000), 1000);
        assert!(lru.get("huge").is_some(), "the newest always stays");
        assert_eq!(lru.entries.len(), 1);
    }
}
