//! The curator daemon: registers under `/daemons` and polls its feeds on an interval.
//!
//! Each poll is a conditional GET with the validators of the last successful poll, so
//! an unchanged feed is a 304 and writes nothing. Validators are kept in memory only
//! after the feed's items were written, so a failed curation is fetched in full again.
//! A lost session stops the loop; [`archivist_engine::daemon::supervise`] reconnects and
//! registers again.

use std::collections::HashMap;
use std::sync::Arc;

use archivist_db::Database;
use archivist_engine::member::{self, Identity};
use archivist_engine::{EngineError, Session, ZkConfig};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::error::CatalogError;
use crate::feed::{self, Fetched, Validators};
use crate::identity;
use crate::report::CurationReport;
use crate::settings::CuratorSettings;

/// What one poll of one feed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// The server answered 304: nothing to do.
    NotModified,
    /// The feed was read and curated.
    Curated(CurationReport),
}

/// Polls feeds, remembering each feed's validators between polls.
pub struct FeedPoller {
    client: reqwest::Client,
    settings: CuratorSettings,
    validators: HashMap<String, Validators>,
}

impl FeedPoller {
    /// A poller with no validators yet (the first poll of each feed is a full GET).
    ///
    /// # Errors
    /// [`CatalogError::BadInput`] if the HTTP client cannot be built.
    pub fn new(settings: CuratorSettings) -> Result<FeedPoller, CatalogError> {
        Ok(FeedPoller {
            client: feed::http_client(&settings.fetch)?,
            settings,
            validators: HashMap::new(),
        })
    }

    /// Fetches one feed (conditionally) and curates it if it changed.
    ///
    /// # Errors
    /// Fetch and parse errors name the feed; nothing is written then.
    pub async fn poll(
        &mut self,
        session: &Session,
        db: &Database,
        feed_url: &str,
    ) -> Result<PollOutcome, CatalogError> {
        let (fetch_url, feed_url) = feed::feed_urls(feed_url)?;
        let fetched = feed::fetch(
            &self.client,
            &fetch_url,
            self.validators.get(&feed_url),
            &self.settings.fetch,
        )
        .await?;
        let (body, validators) = match fetched {
            Fetched::NotModified => {
                metrics::counter!("archivist_catalog_feed_polls_total", "result" => "not_modified")
                    .increment(1);
                tracing::debug!(feed = %feed_url, "feed not modified");
                return Ok(PollOutcome::NotModified);
            }
            Fetched::Document { body, validators } => (body, validators),
        };
        let report = feed::curate_document(
            session,
            db,
            &feed_url,
            body,
            self.settings.priority,
            &self.settings.curate,
        )
        .await?;
        metrics::counter!("archivist_catalog_feed_polls_total", "result" => "curated").increment(1);
        tracing::info!(feed = %feed_url, summary = %report.summary(), "feed curated");
        if validators.etag.is_some() || validators.last_modified.is_some() {
            self.validators.insert(feed_url, validators);
        }
        Ok(PollOutcome::Curated(report))
    }

    /// Polls every configured feed once. A feed that fails is logged and does not stop
    /// the others; only a lost session ends the round early.
    ///
    /// # Errors
    /// [`CatalogError::Engine`] when the session is lost.
    pub async fn poll_all(
        &mut self,
        session: &Session,
        db: &Database,
    ) -> Result<usize, CatalogError> {
        let feeds = self.settings.feeds.clone();
        let mut failed = 0;
        for feed_url in &feeds {
            if session.is_lost() {
                return Err(EngineError::SessionLost("session lost during a poll".into()).into());
            }
            match self.poll(session, db, feed_url).await {
                Ok(_) => {}
                Err(e) if e.is_session_lost() => return Err(e),
                Err(e) => {
                    failed += 1;
                    metrics::counter!("archivist_catalog_feed_polls_total", "result" => "failed")
                        .increment(1);
                    tracing::warn!(feed = %identity::redact_credentials(feed_url), error = %e, "feed poll failed; trying again next interval");
                }
            }
        }
        Ok(failed)
    }
}

fn engine_error(err: CatalogError) -> EngineError {
    match err {
        CatalogError::Engine(e) => e,
        other => EngineError::daemon(other),
    }
}

async fn serve(
    session: Session,
    db: Database,
    identity: Identity,
    poller: Arc<Mutex<FeedPoller>>,
    shutdown: CancellationToken,
) -> Result<(), EngineError> {
    let Some(_membership) = member::register(&session, &identity, 0, None, &shutdown).await? else {
        return Ok(());
    };
    let lost = session.lost();
    let interval = poller.lock().await.settings.interval;
    loop {
        tokio::select! {
            polled = async { poller.lock().await.poll_all(&session, &db).await } => {
                polled.map_err(engine_error)?;
            }
            _ = shutdown.cancelled() => return Ok(()),
            _ = lost.cancelled() => return Err(EngineError::SessionLost("session lost".into())),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.cancelled() => return Ok(()),
            _ = lost.cancelled() => return Err(EngineError::SessionLost("session lost".into())),
        }
    }
}

/// Runs the curator daemon until `shutdown` fires: registers under `/daemons`, polls
/// every feed each `interval`, and restarts on a new session when the session is lost.
///
/// # Errors
/// [`CatalogError::BadInput`] when no feed is configured or a feed URL is unusable.
pub async fn run(
    config: &ZkConfig,
    db: &Database,
    settings: CuratorSettings,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<(), CatalogError> {
    if settings.feeds.is_empty() {
        return Err(CatalogError::bad_input(
            "feeds",
            "no feed to poll: give at least one",
        ));
    }
    for feed_url in &settings.feeds {
        feed::feed_urls(feed_url)?;
    }
    let poller = Arc::new(Mutex::new(FeedPoller::new(settings)?));
    let name = identity.name.clone();
    archivist_engine::daemon::supervise(config, &name, shutdown.clone(), |session| {
        serve(
            session,
            db.clone(),
            identity.clone(),
            poller.clone(),
            shutdown.clone(),
        )
    })
    .await?;
    Ok(())
}
