//! The `/reports` consumer: stores mid-job reports as they arrive.
//!
//! It sets a children watch on `/reports` before listing (so a report created after the
//! listing still wakes it), groups the reports by job, and stores each job's reports in
//! batches of [`RecorderSettings::batch_size`] with [`store::store_reports`]. Jobs are
//! taken in a random order so parallel recorders spread out instead of racing on the
//! same research record. Polls as a fallback when no watch fires.

use std::collections::{BTreeMap, HashMap, HashSet};

use archivist_db::Database;
use archivist_engine::schema::paths;
use archivist_engine::{store as zkstore, EngineError, Session};
use rand::seq::SliceRandom;
use tokio_util::sync::CancellationToken;

use crate::error::RecorderError;
use crate::settings::RecorderSettings;
use crate::store;

/// What a watcher did until it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchTotals {
    /// Clips this watcher added to research records.
    pub stored: usize,
    /// Reports whose clip was already researched (deleted only).
    pub already: usize,
    /// Multis committed.
    pub commits: usize,
    /// Passes over `/reports`.
    pub passes: usize,
}

/// Groups report names by job, skipping names that name no job and known-bad ones.
pub fn group_by_job(names: &[String], skip: &HashSet<String>) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in names.iter().filter(|n| !skip.contains(*n)) {
        if let Some(job) = store::job_of(name) {
            groups
                .entry(job.to_string())
                .or_default()
                .push(name.clone());
        }
    }
    groups
}

/// One pass over `/reports`: stores every report it can. Returns the totals of the pass;
/// unusable reports are added to `bad` (and logged once) so later passes skip them. A
/// job whose reports cannot be stored and that is `failed` is `parked` at the version
/// seen (logged once, with its episode and state): its reports wait, without a retry
/// every pass, until the job changes (e.g. an operator's `retry`).
pub async fn pass(
    session: &Session,
    db: &Database,
    settings: &RecorderSettings,
    bad: &mut HashSet<String>,
    parked: &mut HashMap<String, i32>,
    shutdown: &CancellationToken,
) -> Result<WatchTotals, RecorderError> {
    let names = zkstore::children(session, paths::REPORTS).await?;
    // Forget bad reports an operator removed.
    let present: HashSet<&String> = names.iter().collect();
    bad.retain(|n| present.contains(n));
    let mut totals = WatchTotals {
        passes: 1,
        ..WatchTotals::default()
    };
    let mut groups: Vec<(String, Vec<String>)> = group_by_job(&names, bad).into_iter().collect();
    groups.shuffle(&mut rand::thread_rng());
    for (job, names) in groups {
        if let Some(version) = parked.get(&job).copied() {
            match archivist_engine::jobs::read_optional(session, &job).await {
                Ok(Some((_, now))) if now == version => continue,
                Err(e) if e.is_session_lost() => return Err(e.into()),
                _ => {
                    parked.remove(&job);
                }
            }
        }
        for batch in names.chunks(settings.batch_size.max(1)) {
            if shutdown.is_cancelled() {
                return Ok(totals);
            }
            match store::store_reports(session, db, settings, &job, batch).await {
                Ok(done) => {
                    totals.stored += done.stored.len();
                    totals.already += done.already.len();
                    totals.commits += usize::from(!done.ops().is_empty());
                    let state = done.job_state();
                    for err in done.bad {
                        if let RecorderError::BadReport { path, .. } = &err {
                            if let Some(name) = path.rsplit('/').next() {
                                bad.insert(name.to_string());
                            }
                        }
                        metrics::counter!("archivist_recorder_bad_reports_total").increment(1);
                        tracing::error!(job = %job, episode = done.episode.as_deref().unwrap_or("unknown"), state, error = %err, "report left in place: cannot be stored");
                    }
                }
                Err(e) if e.is_session_lost() => return Err(e),
                Err(e) => {
                    let seen = archivist_engine::jobs::read_optional(session, &job).await;
                    let (episode, state) = match &seen {
                        Ok(Some((record, _))) => {
                            (record.episode.clone(), record.status.to_string())
                        }
                        Ok(None) => ("unknown".to_string(), "missing".to_string()),
                        Err(_) => ("unknown".to_string(), "unreadable".to_string()),
                    };
                    match seen {
                        Ok(Some((record, version)))
                            if record.status == archivist_engine::schema::JobState::Failed =>
                        {
                            tracing::warn!(job = %job, %episode, %state, error = %e, "storing reports failed and the job is failed; its reports wait until the job changes (e.g. `archivist retry`)");
                            parked.insert(job.clone(), version);
                            break;
                        }
                        _ => {
                            tracing::warn!(job = %job, %episode, %state, error = %e, "storing reports failed; retrying on the next pass")
                        }
                    }
                }
            }
        }
    }
    Ok(totals)
}

/// Runs passes until `shutdown` fires (returns the totals) or the session is lost.
pub async fn run(
    session: &Session,
    db: &Database,
    settings: &RecorderSettings,
    shutdown: CancellationToken,
) -> Result<WatchTotals, RecorderError> {
    let lost = session.lost();
    let mut bad = HashSet::new();
    let mut parked = HashMap::new();
    let mut totals = WatchTotals::default();
    loop {
        if shutdown.is_cancelled() {
            return Ok(totals);
        }
        let watch = session
            .client()
            .get_and_watch_children(paths::REPORTS)
            .await;
        let done = pass(session, db, settings, &mut bad, &mut parked, &shutdown).await?;
        totals.stored += done.stored;
        totals.already += done.already;
        totals.commits += done.commits;
        totals.passes += done.passes;
        let poll = tokio::time::sleep(settings.poll_interval);
        match watch {
            Ok((_, _, watcher)) => tokio::select! {
                _ = watcher.changed() => {}
                _ = poll => {}
                _ = shutdown.cancelled() => return Ok(totals),
                _ = lost.cancelled() => return Err(EngineError::SessionLost("while watching /reports".into()).into()),
            },
            Err(e) => {
                let e = EngineError::zk("watch", paths::REPORTS, e);
                if e.is_session_lost() {
                    return Err(e.into());
                }
                tracing::warn!(error = %e, "cannot watch /reports; polling");
                tokio::select! {
                    _ = poll => {}
                    _ = shutdown.cancelled() => return Ok(totals),
                    _ = lost.cancelled() => return Err(EngineError::SessionLost("while polling /reports".into()).into()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_group_by_job_and_skip_bad_ones() {
        let names: Vec<String> = [
            "j1-c000001",
            "j2-c000001",
            "j1-c000002",
            "junk",
            "j1-c000003",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let skip: HashSet<String> = ["j1-c000003".to_string()].into();
        let groups = group_by_job(&names, &skip);
        assert_eq!(groups["j1"], vec!["j1-c000001", "j1-c000002"]);
        assert_eq!(groups["j2"], vec!["j2-c000001"]);
        assert_eq!(groups.len(), 2);
    }
}
