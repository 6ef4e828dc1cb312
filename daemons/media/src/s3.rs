//! An S3-compatible bucket as a media store backend (the `object_store` crate: its
//! request signing, retries, multipart uploads and credentials are real work no
//! hand-written client should redo), so researchers on many machines share one store.
//!
//! Layout under the prefix: `objects/<sha256>` holds the bytes, `used/<sha256>` is an
//! empty marker rewritten on every read and write of the object: its `Last-Modified`
//! is the object's last use (S3 cannot change an object's own time without rewriting
//! it, and keeps no access time).
//!
//! - *Atomic*: an upload (multipart past 10 MB) becomes visible only when it completes,
//!   whole; an aborted one leaves nothing under the object's name.
//! - *Verified on read* by [`crate::MediaStore`]: the bytes are hashed as they stream
//!   into the caller's private file.
//! - *Bounded, least recently used first, across every researcher sharing the prefix*:
//!   after each write the prefix is listed (objects with sizes, markers with times) and
//!   the objects whose last use (the later of the marker's and the object's own time)
//!   is oldest are deleted until the total fits `max_bytes`. The bound is the bucket's
//!   (the prefix's), not one researcher's: any researcher's write evicts anyone's least
//!   recently used episode. Two researchers evicting at once may both delete, so the
//!   total can fall somewhat below the bound (never stay above it for long); a reader
//!   whose object is deleted under it gets a miss or a failed read and downloads the
//!   episode again, never wrong bytes (the hash says). Times have S3's one-second
//!   resolution: uses within one second are in no particular order.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload, RetryConfig};
use tokio::io::AsyncWriteExt;

use crate::backend::{Backend, Read, Written};
use crate::key::KeyHasher;
use crate::{Key, MediaError};

/// Where an S3-compatible store is and how to sign requests to it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// The endpoint URL (`http://127.0.0.1:8333`, `https://s3.eu-west-1.amazonaws.com`);
    /// none: AWS's endpoint for the region.
    pub endpoint: Option<String>,
    /// The bucket (it must exist).
    pub bucket: String,
    /// The region (`us-east-1` when the server does not care).
    pub region: String,
    /// Objects are kept under this prefix (`archivist/media`), so one bucket can hold
    /// other things, or several stores.
    pub prefix: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key: never logged (`Debug` hides it).
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("prefix", &self.prefix)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"(hidden)")
            .finish()
    }
}

/// A bucket (under a prefix) bounded by size, least recently used objects evicted past
/// it (the module doc says how use is kept and what sharing the bucket means).
#[derive(Debug, Clone)]
pub struct S3Bucket {
    store: Arc<dyn ObjectStore>,
    /// For messages: `s3://bucket`, and with the prefix.
    bucket: String,
    name: String,
    prefix: String,
    max_bytes: u64,
}

/// A listed object: key, size, last use (milliseconds since the epoch).
type Entry = (Key, u64, i64);

impl S3Bucket {
    /// A client for the bucket the options name (no request is made yet; an `http://`
    /// endpoint is allowed, for a server on a private network).
    ///
    /// # Errors
    /// [`MediaError::Config`] if the options cannot make a client.
    pub fn connect(options: &S3Options, max_bytes: u64) -> Result<S3Bucket, MediaError> {
        if options.bucket.is_empty() {
            return Err(MediaError::Config("no bucket named".into()));
        }
        // A store that is down must cost a job little: three retries within 20 s, then
        // the job downloads the episode (object_store's default is 10 within 3 min).
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(20),
            ..RetryConfig::default()
        };
        let mut builder = AmazonS3Builder::new()
            .with_retry(retry)
            .with_bucket_name(&options.bucket)
            .with_region(&options.region)
            .with_access_key_id(&options.access_key_id)
            .with_secret_access_key(&options.secret_access_key);
        if let Some(endpoint) = &options.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        // The client's message may name the settings, never the secret's value.
        let store = builder
            .build()
            .map_err(|e| MediaError::Config(e.to_string()))?;
        Ok(S3Bucket::over(
            Arc::new(store),
            &format!("s3://{}", options.bucket),
            &options.prefix,
            max_bytes,
        ))
    }

    /// A store over any `object_store` client (`name` for messages).
    pub fn over(store: Arc<dyn ObjectStore>, name: &str, prefix: &str, max_bytes: u64) -> S3Bucket {
        let prefix = prefix.trim_matches('/').to_string();
        S3Bucket {
            store,
            bucket: name.to_string(),
            name: format!("{name}/{prefix}"),
            prefix,
            max_bytes,
        }
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The object's location in the bucket.
    pub fn object_path(&self, key: &Key) -> ObjectPath {
        self.path("objects", key.as_str())
    }

    /// The client (for tests that damage an object behind the store's back).
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    fn path(&self, dir: &str, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(format!("{dir}/{name}"))
        } else {
            ObjectPath::from(format!("{}/{dir}/{name}", self.prefix))
        }
    }

    fn remote(
        &self,
        path: &ObjectPath,
        action: &'static str,
        e: object_store::Error,
    ) -> MediaError {
        MediaError::Remote {
            location: format!("{}/{}", self.bucket, path),
            action,
            reason: e.to_string(),
        }
    }

    /// Marks the object used now. A failure only makes its last use look older.
    async fn touch(&self, key: &Key) {
        let marker = self.path("used", key.as_str());
        if let Err(e) = self.store.put(&marker, PutPayload::default()).await {
            tracing::warn!(%key, error = %e, store = %self.name, "media store: cannot mark an object used (its last use looks older)");
        }
    }

    async fn read(&self, key: &Key, dest: &Path) -> Result<Read, MediaError> {
        let path = self.object_path(key);
        let got = match self.store.get(&path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(Read::Missing),
            Err(e) => return Err(self.remote(&path, "reading", e)),
        };
        let mut file = tokio::fs::File::create(dest)
            .await
            .map_err(|e| MediaError::io(dest, "creating", e))?;
        let mut hasher = KeyHasher::default();
        let mut bytes = 0u64;
        let mut stream = got.into_stream();
        while let Some(piece) = stream.next().await {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    drop(file);
                    let _ = tokio::fs::remove_file(dest).await;
                    return Err(self.remote(&path, "reading", e));
                }
            };
            hasher.update(&piece);
            bytes += piece.len() as u64;
            file.write_all(&piece)
                .await
                .map_err(|e| MediaError::io(dest, "writing", e))?;
        }
        file.flush()
            .await
            .map_err(|e| MediaError::io(dest, "writing", e))?;
        self.touch(key).await;
        Ok(Read::Copied {
            bytes,
            sha256: hasher.finish(),
        })
    }

    async fn head(&self, key: &Key) -> Result<bool, MediaError> {
        let path = self.object_path(key);
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.remote(&path, "asking for", e)),
        }
    }

    async fn write(&self, key: &Key, src: &Path) -> Result<Written, MediaError> {
        let size = tokio::fs::metadata(src)
            .await
            .map_err(|e| MediaError::io(src, "reading", e))?
            .len();
        if size > self.max_bytes {
            return Ok(Written::default());
        }
        if self.head(key).await? {
            self.touch(key).await;
            let evicted = self.evict(key).await?;
            return Ok(Written {
                stored: true,
                bytes: 0,
                evicted,
            });
        }
        let path = self.object_path(key);
        let mut file = tokio::fs::File::open(src)
            .await
            .map_err(|e| MediaError::io(src, "opening", e))?;
        let mut upload = BufWriter::new(self.store.clone(), path.clone());
        let failed = |e: std::io::Error| MediaError::Remote {
            location: format!("{}/{}", self.bucket, path),
            action: "uploading",
            reason: e.to_string(),
        };
        if let Err(e) = tokio::io::copy(&mut file, &mut upload).await {
            // Nothing appears under the name: abort the multipart upload's parts.
            let _ = upload.abort().await;
            return Err(failed(e));
        }
        // Completes the upload (one PUT, or the multipart upload's completion): the
        // object appears whole, or not at all.
        upload.shutdown().await.map_err(failed)?;
        self.touch(key).await;
        let evicted = self.evict(key).await?;
        Ok(Written {
            stored: true,
            bytes: size,
            evicted,
        })
    }

    /// Objects and their last use; markers without an object are removed.
    async fn listing(&self) -> Result<Vec<Entry>, MediaError> {
        let root = ObjectPath::from(self.prefix.as_str());
        let mut sizes: std::collections::HashMap<Key, (u64, i64)> = Default::default();
        let mut used: std::collections::HashMap<Key, i64> = Default::default();
        let mut list = self.store.list(Some(&root));
        while let Some(meta) = list.next().await {
            let meta = meta.map_err(|e| self.remote(&root, "listing", e))?;
            let mut parts = meta.location.parts().collect::<Vec<_>>();
            let (Some(name), Some(dir)) = (parts.pop(), parts.pop()) else {
                continue;
            };
            let Ok(key) = Key::parse(name.as_ref()) else {
                continue;
            };
            let at = meta.last_modified.timestamp_millis();
            match dir.as_ref() {
                "objects" => {
                    sizes.insert(key, (meta.size, at));
                }
                "used" => {
                    used.insert(key, at);
                }
                _ => {}
            }
        }
        for key in used.keys().filter(|k| !sizes.contains_key(*k)) {
            let _ = self.store.delete(&self.path("used", key.as_str())).await;
        }
        Ok(sizes
            .into_iter()
            .map(|(key, (size, at))| {
                let last = used.get(&key).copied().unwrap_or(at).max(at);
                (key, size, last)
            })
            .collect())
    }

    /// Deletes least recently used objects (never `keep`) until the total fits.
    async fn evict(&self, keep: &Key) -> Result<Vec<(Key, u64)>, MediaError> {
        let mut entries = self.listing().await?;
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
        let mut evicted = Vec::new();
        for (key, size, _) in entries {
            if total <= self.max_bytes {
                break;
            }
            if &key == keep {
                continue;
            }
            if self.remove(&key).await? {
                evicted.push((key, size));
            }
            total = total.saturating_sub(size);
        }
        Ok(evicted)
    }

    async fn remove(&self, key: &Key) -> Result<bool, MediaError> {
        let existed = self.head(key).await?;
        let path = self.object_path(key);
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.remote(&path, "deleting", e)),
        }
        let _ = self.store.delete(&self.path("used", key.as_str())).await;
        Ok(existed)
    }
}

impl Backend for S3Bucket {
    fn read_to<'a>(
        &'a self,
        key: &'a Key,
        dest: &'a Path,
    ) -> BoxFuture<'a, Result<Read, MediaError>> {
        Box::pin(self.read(key, dest))
    }

    fn write_from<'a>(
        &'a self,
        key: &'a Key,
        src: &'a Path,
    ) -> BoxFuture<'a, Result<Written, MediaError>> {
        Box::pin(self.write(key, src))
    }

    fn delete<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>> {
        Box::pin(self.remove(key))
    }

    fn contains<'a>(&'a self, key: &'a Key) -> BoxFuture<'a, Result<bool, MediaError>> {
        Box::pin(self.head(key))
    }

    fn stored_bytes(&self) -> BoxFuture<'_, Result<Option<u64>, MediaError>> {
        Box::pin(async move {
            let entries = self.listing().await?;
            Ok(Some(entries.iter().map(|e| e.1).sum()))
        })
    }
}
