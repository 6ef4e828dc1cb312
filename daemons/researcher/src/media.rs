//! Opens the media store the settings name: a local directory, or an S3-compatible
//! bucket with credentials from a file or the environment (never from the settings
//! file itself, and never logged).

use std::path::Path;

use archivist_media::{MediaError, MediaStore, S3Options};

use crate::settings::{MediaBackend, ResearcherSettings, S3Settings};

const KEY_ID: &str = "AWS_ACCESS_KEY_ID";
const SECRET: &str = "AWS_SECRET_ACCESS_KEY";

/// The store of these settings; logs where it is (never the credentials).
///
/// # Errors
/// The directory cannot be used; the bucket is not named; the credentials cannot be
/// found or read.
pub fn open(settings: &ResearcherSettings) -> Result<MediaStore, MediaError> {
    let max_bytes = settings.media.max_bytes;
    match settings.media.backend {
        MediaBackend::Local => {
            let dir = settings.media.dir_for(&settings.work_dir);
            let store = MediaStore::local(&dir, max_bytes)?;
            tracing::info!(dir = %dir.display(), max_bytes, "media store");
            Ok(store)
        }
        MediaBackend::S3 => {
            let s3 = &settings.media.s3;
            let options = s3_options(s3, |name| std::env::var(name).ok())?;
            let store = MediaStore::s3(&options, max_bytes)?;
            tracing::info!(endpoint = ?s3.endpoint, bucket = %s3.bucket, prefix = %s3.prefix, max_bytes, "media store (S3)");
            Ok(store)
        }
    }
}

/// Proves the store can be used before the researcher takes work: an S3 bucket is
/// listed (a missing bucket, a wrong endpoint and refused credentials all fail here),
/// three tries over about 10 s. Outside try 23d F2: such a store passed `config check`
/// and `/readyz` said ready, and every job quietly downloaded its episode again, the
/// cause seen only in job events and WARN lines. A local directory was checked when it
/// was opened.
///
/// # Errors
/// The store's error, naming the endpoint and bucket (never a secret).
pub async fn probe(store: &MediaStore, settings: &ResearcherSettings) -> Result<(), MediaError> {
    if settings.media.backend != MediaBackend::S3 {
        return Ok(());
    }
    let mut last = None;
    for attempt in 0..3u32 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(2 * u64::from(attempt))).await;
        }
        match tokio::time::timeout(std::time::Duration::from_secs(20), store.stored_bytes()).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => last = Some(e.to_string()),
            Err(_) => last = Some("no answer in 20 s".to_string()),
        }
        tracing::warn!(
            attempt = attempt + 1,
            error = last.as_deref().unwrap_or(""),
            "the S3 media store cannot be listed"
        );
    }
    let s3 = &settings.media.s3;
    Err(MediaError::Config(format!(
        "the S3 media store (endpoint {}, bucket {:?}, prefix {:?}) cannot be used: {}; fix researcher.media.s3 (or use the local backend) and start again",
        s3.endpoint.as_deref().unwrap_or("AWS default"),
        s3.bucket,
        s3.prefix,
        last.unwrap_or_default()
    )))
}

/// The client options of `s3`, the credentials read from its file or from `env`.
///
/// # Errors
/// [`MediaError::Config`] naming what is missing (never a secret's value).
pub fn s3_options(
    s3: &S3Settings,
    env: impl Fn(&str) -> Option<String>,
) -> Result<S3Options, MediaError> {
    if s3.bucket.trim().is_empty() {
        return Err(MediaError::Config(
            "researcher.media.s3.bucket is not set (backend: s3)".into(),
        ));
    }
    let (key_id, secret) = match &s3.credentials_file {
        Some(path) => read_credentials(path)?,
        None => (env(KEY_ID), env(SECRET)),
    };
    let from = match &s3.credentials_file {
        Some(path) => format!("the credentials file {}", path.display()),
        None => "the environment".to_string(),
    };
    let (Some(key_id), Some(secret)) = (key_id, secret) else {
        return Err(MediaError::Config(format!(
            "{from} does not give both {KEY_ID} and {SECRET}"
        )));
    };
    Ok(S3Options {
        endpoint: s3.endpoint.clone(),
        bucket: s3.bucket.clone(),
        region: s3.region.clone(),
        prefix: s3.prefix.clone(),
        access_key_id: key_id,
        secret_access_key: secret,
    })
}

/// `NAME=value` lines (optionally `export NAME=value`, values optionally quoted).
fn read_credentials(path: &Path) -> Result<(Option<String>, Option<String>), MediaError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| MediaError::Config(format!("the credentials file {}: {e}", path.display())))?;
    let mut found = (None, None);
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let value = value
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .to_string();
        match name.trim() {
            KEY_ID => found.0 = Some(value),
            SECRET => found.1 = Some(value),
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_file_else_the_environment_and_are_never_shown() {
        let dir = std::env::temp_dir().join(format!("s3-creds-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("creds");
        std::fs::write(
            &file,
            "# test\nexport AWS_ACCESS_KEY_ID=id-1\nAWS_SECRET_ACCESS_KEY=\"sec-ret-1\"\n",
        )
        .unwrap();
        let s3 = S3Settings {
            bucket: "b".into(),
            credentials_file: Some(file.clone()),
            ..S3Settings::default()
        };
        let o = s3_options(&s3, |_| None).unwrap();
        assert_eq!(
            (o.access_key_id.as_str(), o.secret_access_key.as_str()),
            ("id-1", "sec-ret-1")
        );
        assert!(!format!("{o:?}").contains("sec-ret-1"));
        let env = |name: &str| Some(format!("env-{name}"));
        let from_env = S3Settings {
            bucket: "b".into(),
            ..S3Settings::default()
        };
        let o = s3_options(&from_env, env).unwrap();
        assert_eq!(o.secret_access_key, "env-AWS_SECRET_ACCESS_KEY");
        let err = s3_options(&from_env, |_| None).unwrap_err().to_string();
        assert!(err.contains("AWS_SECRET_ACCESS_KEY"), "{err}");
        let no_bucket = s3_options(&S3Settings::default(), env)
            .unwrap_err()
            .to_string();
        assert!(no_bucket.contains("bucket"), "{no_bucket}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
