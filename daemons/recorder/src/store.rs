//! Storing reports: the database first, then report deletes + lease extension, as one
//! multi.
//!
//! The database holds the research archive (issue 22): [`store_reports`] merges a job's
//! reports into the episode's research in ONE database transaction
//! ([`archivist_db::research::update`]: the episode locked, a clip already researched
//! never stored again), and only after that commit runs the ZooKeeper multi, which
//! deletes the reports it stored (ZooKeeper holds no research since issue 22). A crash
//! between the two leaves the reports in ZooKeeper; the next pass merges them again into
//! a record that already holds them (the database write is a no-op) and runs the multi.
//!
//! [`prepare`] reads the reports and the job's lease and builds the multi; [`commit`]
//! runs it. Because every op is version-checked, a multi built from a stale read fails
//! whole and is rebuilt ([`store_reports`] retries with jitter), so several recorders
//! can store the same job's reports in parallel and a pair is never stored twice,
//! whatever crashes: the database stores a pair once under the episode's lock, a crash
//! before the multi leaves the reports in place, a crash after it leaves them deleted.

use std::time::Duration;

use archivist_db::Database;
use archivist_engine::ops::{self, Op};
use archivist_engine::schema::records::{self, LeaseRecord, ReportRecord};
use archivist_engine::schema::JobState;
use archivist_engine::schema::{occurrences, paths};
use archivist_engine::signal::{self, Signal};
use archivist_engine::{clock, lease, store, zk, EngineError, Session};
use rand::Rng;
use time::OffsetDateTime;

use crate::archive::{self, Merge};
use crate::error::RecorderError;
use crate::settings::RecorderSettings;

/// The job a report belongs to, from its name `<job>-<clip>` (the schema's rule,
/// [`paths::report_job`]).
pub fn job_of(report_name: &str) -> Option<&str> {
    paths::report_job(report_name)
}

/// A multi that stores some reports of one job, and what it will do.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Job (and lease) id.
    pub job: String,
    /// Episode of the reports, if any report was usable.
    pub episode: Option<String>,
    /// Clip ids the database transaction added to the research archive (filled by
    /// [`record_in_database`]).
    pub stored: Vec<String>,
    /// Clip ids that were already researched: their reports are only deleted.
    pub already: Vec<String>,
    /// Report names this multi deletes.
    pub deleted: Vec<String>,
    /// Reports that cannot be stored; left in place.
    pub bad: Vec<RecorderError>,
    /// Whether the multi extends the job's lease.
    pub extends_lease: bool,
    /// Whether one of the reports is its job's final one.
    pub has_final: bool,
    /// The usable reports with their clip numbers, merged into the database before the
    /// multi runs.
    reports: Vec<(ReportRecord, u32)>,
    /// ZooKeeper's clock when prepared: the time of a new run.
    now: Option<OffsetDateTime>,
    ops: Vec<Op>,
}

impl Prepared {
    /// The job's state as its reports tell it, for logs (no extra read on this path): a
    /// final report lands with `researching -> reported`, the others while `researching`;
    /// `unknown` when no report was usable.
    pub fn job_state(&self) -> &'static str {
        match (&self.episode, self.has_final) {
            (None, _) => "unknown",
            (Some(_), true) => JobState::Reported.as_str(),
            (Some(_), false) => JobState::Researching.as_str(),
        }
    }

    /// The operations of the multi (empty: nothing to do).
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
}

fn bad(path: String, reason: impl Into<String>) -> RecorderError {
    RecorderError::BadReport {
        path,
        reason: reason.into(),
    }
}

/// Reads the named reports of `job` (missing ones were stored by someone else) and the
/// lease, and builds the multi that deletes the reports (after the database stored
/// them: [`record_in_database`]).
///
/// The lease is extended only if it exists, names this job, has not expired by
/// ZooKeeper's clock (`mtime + duration_ms`) and no report is final (the final one is
/// followed by the lease's revocation).
pub async fn prepare(
    session: &Session,
    job: &str,
    names: &[String],
) -> Result<Prepared, RecorderError> {
    let mut prepared = Prepared {
        job: job.to_string(),
        ..Prepared::default()
    };
    let report_paths: Vec<String> = names.iter().map(|n| paths::report(n)).collect();
    let reads = report_paths
        .iter()
        .map(|p| session.client().get_data(p))
        .collect();
    let mut reports: Vec<(String, ReportRecord, u32, i32)> = Vec::new();
    for ((name, path), read) in names
        .iter()
        .zip(&report_paths)
        .zip(ops::await_all(reads).await)
    {
        let (bytes, stat) = match read {
            Ok(found) => found,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(EngineError::zk("get", path, e).into()),
        };
        let report: ReportRecord = match records::decode(path, &bytes) {
            Ok(r) => r,
            Err(e) => {
                prepared.bad.push(bad(path.clone(), e.to_string()));
                continue;
            }
        };
        if report.job != job || paths::report_name(&report.job, &report.clip) != *name {
            prepared.bad.push(bad(
                path.clone(),
                format!(
                    "names job {} clip {}, not what its node name says",
                    report.job, report.clip
                ),
            ));
            continue;
        }
        let Some(number) = paths::clip_number(&report.clip) else {
            prepared.bad.push(bad(
                path.clone(),
                format!("clip id {:?} is not c + digits", report.clip),
            ));
            continue;
        };
        if let Err(why) = usable_occurrences(&report) {
            prepared.bad.push(bad(path.clone(), why));
            continue;
        }
        match &prepared.episode {
            None => prepared.episode = Some(report.episode.clone()),
            Some(e) if *e != report.episode => {
                prepared.bad.push(bad(
                    path.clone(),
                    format!(
                        "episode {} differs from {e} in the job's other reports",
                        report.episode
                    ),
                ));
                continue;
            }
            Some(_) => {}
        }
        reports.push((name.clone(), report, number, stat.version));
    }
    if prepared.episode.is_none() {
        return Ok(prepared);
    }
    let now_ms = clock::zk_now_ms(session).await?;
    let now = clock::to_datetime(now_ms);
    prepared.now = Some(now);
    prepared.reports = reports
        .iter()
        .map(|(_, report, number, _)| (report.clone(), *number))
        .collect();
    let mut deletes = Vec::with_capacity(reports.len());
    for (name, report, _, version) in &reports {
        prepared.has_final |= report.is_final;
        prepared.deleted.push(name.clone());
        deletes.push(Op::Delete {
            path: paths::report(name),
            version: Some(*version),
        });
    }
    prepared.ops.extend(deletes);
    if !prepared.has_final && !prepared.deleted.is_empty() {
        if let Some(op) = lease_extension(session, job, now_ms).await? {
            prepared.extends_lease = true;
            prepared.ops.push(op);
        }
    }
    Ok(prepared)
}

/// The write that extends `job`'s lease, if it exists, names the job and has not
/// expired at `now_ms`. An unreadable lease is treated as unknown (no extension).
async fn lease_extension(
    session: &Session,
    job: &str,
    now_ms: i64,
) -> Result<Option<Op>, RecorderError> {
    let path = paths::lease(job);
    let Some((bytes, stat)) = store::read_raw(session, &path).await? else {
        return Ok(None);
    };
    let lease: LeaseRecord = match records::decode(&path, &bytes) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(job, episode = "unknown", state = "unknown", error = %e, "unreadable lease; not extending it");
            return Ok(None);
        }
    };
    if lease.job != job || lease::is_expired(stat.mtime, lease.duration_ms, now_ms) {
        return Ok(None);
    }
    Ok(Some(lease::extend_op(&lease, stat.version, None)?))
}

/// Runs a prepared multi. A precondition failure means another recorder, the reaper or
/// the researcher moved something: prepare again.
pub async fn commit(session: &Session, prepared: &Prepared) -> Result<(), EngineError> {
    ops::commit(session, &prepared.ops).await.map(|_| ())
}

/// Merges the prepared reports into the episode's research in the database, in one
/// transaction (nothing when every clip is stored already), and says in `prepared`
/// which clips it stored and which were there already. Returns how many it stored.
/// The first half of [`store_reports`]; public so a test can stop between it and the
/// multi, as a crash would.
pub async fn record_in_database(
    db: &Database,
    prepared: &mut Prepared,
) -> Result<usize, RecorderError> {
    let (Some(episode), Some(now)) = (prepared.episode.clone(), prepared.now) else {
        return Ok(0);
    };
    if prepared.reports.is_empty() {
        return Ok(0);
    }
    let reports = &prepared.reports;
    let updated = archivist_db::research::update(db, &episode, |record| {
        reports
            .iter()
            .map(|(report, number)| (report, archive::merge(record, report, *number, now)))
            .map(|(report, merge)| (report.clone(), merge))
            .collect::<Vec<_>>()
    })
    .await?;
    prepared.stored.clear();
    prepared.already.clear();
    for (report, merge) in updated.value {
        match merge {
            Merge::Stored { dropped } => {
                if dropped > 0 {
                    metrics::counter!("archivist_recorder_occurrences_dropped_total")
                        .increment(dropped as u64);
                    tracing::warn!(job = %report.job, episode = %report.episode, clip = %report.clip, dropped, kept = archive::MAX_OCCURRENCES_PER_CLIP, "more occurrences than the archive keeps per clip: the most confident are stored");
                }
                prepared.stored.push(report.clip);
            }
            Merge::AlreadyResearched => prepared.already.push(report.clip),
        }
    }
    Ok(prepared.stored.len())
}

/// Stores the named reports of `job` (the database transaction, then one multi per
/// call), re-reading and retrying with jitter while other writers move the research
/// record or the lease.
///
/// # Errors
/// [`RecorderError::Contended`] after `max_attempts` lost races (the reports stay for the
/// next pass); [`RecorderError::Engine`] when ZooKeeper fails. Unusable reports are not
/// an error: they are listed in [`Prepared::bad`] and left in place.
pub async fn store_reports(
    session: &Session,
    db: &Database,
    settings: &RecorderSettings,
    job: &str,
    names: &[String],
) -> Result<Prepared, RecorderError> {
    // Clips an earlier attempt of this call stored (its multi then lost a race): stored
    // by this call, though the database has them by the next attempt.
    let mut stored_here: Vec<String> = Vec::new();
    for attempt in 1..=settings.max_attempts {
        let mut prepared = prepare(session, job, names).await?;
        let in_database = record_in_database(db, &mut prepared).await?;
        stored_here.extend(prepared.stored.iter().cloned());
        prepared.already.retain(|c| !stored_here.contains(c));
        prepared.stored.clone_from(&stored_here);
        if in_database > 0 {
            tracing::debug!(
                job,
                episode = prepared.episode.as_deref().unwrap_or("unknown"),
                stored = in_database,
                "research committed to the database"
            );
            // The wake-up for readers of the database (the planner watches it). A failed
            // bump loses only the wake-up, not the research: the planner's slow re-check
            // of the research seq finds it, so it does not fail the store.
            if let Err(e) = signal::bump(session, Signal::Research, "recorder").await {
                tracing::warn!(job, error = %e, "could not bump /signals/research after the database commit");
            }
        }
        if prepared.ops.is_empty() {
            return Ok(prepared);
        }
        match commit(session, &prepared).await {
            Ok(()) => {
                observe(&prepared);
                return Ok(prepared);
            }
            Err(e) if e.is_conflict() || e.is_retryable() => {
                metrics::counter!("archivist_recorder_store_conflicts_total").increment(1);
                tracing::debug!(job, episode = prepared.episode.as_deref().unwrap_or("unknown"), state = prepared.job_state(), attempt, error = %e, "store raced; re-reading");
                let pause = {
                    let base = settings.retry_backoff.as_millis() as u64;
                    let cap = (base * attempt as u64).min(500);
                    rand::thread_rng().gen_range(0..=cap)
                };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(RecorderError::Contended {
        path: paths::job(job),
        attempts: settings.max_attempts,
    })
}

fn observe(prepared: &Prepared) {
    metrics::counter!("archivist_recorder_clips_stored_total")
        .increment(prepared.stored.len() as u64);
    metrics::counter!("archivist_recorder_clips_already_stored_total")
        .increment(prepared.already.len() as u64);
    if prepared.extends_lease {
        metrics::counter!("archivist_recorder_lease_extensions_total").increment(1);
    }
    tracing::debug!(
        job = %prepared.job,
        episode = prepared.episode.as_deref().unwrap_or("unknown"),
        state = prepared.job_state(),
        stored = prepared.stored.len(),
        already = prepared.already.len(),
        lease_extended = prepared.extends_lease,
        "reports stored"
    );
}

/// A report's occurrences as the archive can hold them: each passes the schema's one
/// rule ([`occurrences::check`], after the rounding the archive applies) and, when the
/// report knows the episode's duration, starts inside the episode. A report that breaks
/// it would store a record nothing can read back, or an answer that cannot be true.
fn usable_occurrences(report: &ReportRecord) -> Result<(), String> {
    for o in &report.occurrences {
        for r in archive::rounded(o).iter().chain(std::iter::once(o)) {
            occurrences::check(r)
                .map_err(|why| format!("occurrence of clip {}: {why}", report.clip))?;
        }
        let duration = report.episode_duration_s;
        if duration.is_finite() && duration > 0.0 && o.at > duration + 1.0 {
            return Err(format!(
                "occurrence of clip {} at {} s starts after the episode's end ({duration} s)",
                report.clip, o.at
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_comes_from_the_report_name() {
        assert_eq!(job_of("j0000000001-c000002"), Some("j0000000001"));
        assert_eq!(job_of("nodash"), None);
        assert_eq!(job_of("-c000002"), None);
    }
}
