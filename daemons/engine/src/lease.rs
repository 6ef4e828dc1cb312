//! The lease-and-TTL recipe: the one place that says how a lease is made, claimed,
//! extended, revoked and judged expired, and when a waiting work item has waited too
//! long. The planner, researcher, recorder, reaper, admin actions and `fsck` all use it,
//! so they cannot disagree (they did: the planner once expired a job by its own age
//! while the reaper used the later of the job's and its lease's, and undid an
//! operator's `retry` 30 ms after it printed "fresh lease").
//!
//! The rules (ZooKeeper's clock throughout, see [`crate::clock`]):
//! - a lease `/leases/{job}` expires at its node's `mtime` plus `duration_ms`
//!   ([`expires_at`]); every write of the node refreshes `mtime`, so claiming or
//!   extending a lease is a version-checked write of it ([`extend_op`]);
//! - a duration must be positive ([`validate_duration`]); `fsck` reports one that is not;
//! - a waiting (`pending`) work item has waited since the later of its job's and its
//!   lease's creation ([`waiting_since`]): an operator's `retry` or `release` makes a
//!   fresh lease and with it a fresh wait; it expires when that plus the work-item TTL
//!   has passed ([`work_item_expired`], [`expire_waiting`]);
//! - a job that holds its pairs whatever its lease's age, a `reported` job (its answers
//!   are in `/reports`) or a `pending` job while `pending` is paused (nobody may claim
//!   it), keeps its lease: the reaper renews it once past half its duration
//!   ([`keeps_its_lease`], [`renewal_due`]), so its pairs are never planned again
//!   meanwhile and a paused job can still be claimed after `resume`;
//! - the wait is judged by the nodes' own `Stat` (`ctime`), never by the job's data, so
//!   a waiting job whose record does not decode expires like any other: its move to
//!   `expired` writes the record the tree still knows ([`stand_in`]) in place of the
//!   undecodable bytes, with a message saying so ([`UNDECODABLE`]).

use znode_schema::paths;
use znode_schema::queue_key::QueueEntry;
use znode_schema::records::{self, JobRecord, LeaseRecord};
use znode_schema::{JobState, SCHEMA_VERSION};
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::lock::{JobLock, LockGuard};
use crate::ops::{Mode, Op};
use crate::queue::{ProvenStray, StrayProof};
use crate::session::Session;
use crate::store;
use crate::transition::{LockAction, Role, Transition};

/// The message on a job expired because it waited in `pending` past the work-item TTL.
pub const TTL_PASSED: &str = "work-item TTL passed";

/// Added to [`TTL_PASSED`] in the message of a waiting job expired whose record did not
/// decode (the decode error follows): the record now in its place was rebuilt from its
/// queue entry, its node and its lease ([`stand_in`]).
pub const UNDECODABLE: &str =
    "its record did not decode and was replaced by what the tree still knows";

/// The episode of a [`stand_in`] record when the job's lease does not name one either.
pub const UNKNOWN_EPISODE: &str = "unknown";

/// The shortest lease or work-item TTL an operator may configure on a running daemon
/// (`archivist planner --lease-duration-ms/--work-item-ttl-ms`): anything shorter makes
/// the planner create and expire jobs in a loop (~100 jobs/s seen with 1 ms).
pub const MIN_OPERATOR_MS: i64 = 1_000;
/// The longest lease an operator may ask for (30 days): past it, `mtime + duration`
/// leaves the range times are shown in, and no job should be out of reach that long.
pub const MAX_DURATION_MS: i64 = 30 * 24 * 3_600 * 1_000;
/// [`MAX_DURATION_MS`] in seconds (`--lease-duration-s`).
pub const MAX_DURATION_S: u64 = (MAX_DURATION_MS / 1_000) as u64;

/// Refuses a lease duration that is not positive (a lease that is expired when made) or
/// longer than [`MAX_DURATION_MS`].
pub fn validate_duration(duration_ms: i64) -> Result<()> {
    if duration_ms <= 0 {
        Err(EngineError::Config(format!(
            "lease duration {duration_ms} ms: a lease must last a positive time"
        )))
    } else if duration_ms > MAX_DURATION_MS {
        Err(EngineError::Config(format!(
            "lease duration {duration_ms} ms: at most {MAX_DURATION_MS} ms (30 days)"
        )))
    } else {
        Ok(())
    }
}

/// Refuses an operator-set lease duration or work-item TTL (`what` names the flag)
/// shorter than [`MIN_OPERATOR_MS`] or longer than [`MAX_DURATION_MS`].
pub fn validate_operator_ms(what: &str, ms: u128) -> Result<()> {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    if (MIN_OPERATOR_MS..=MAX_DURATION_MS).contains(&ms) {
        Ok(())
    } else {
        Err(EngineError::Config(format!(
            "{what} {ms} ms: must be between {MIN_OPERATOR_MS} ms (1 s) and {MAX_DURATION_MS} ms (30 days)"
        )))
    }
}

/// Refuses a lease that does not outlast the work-item TTL: a waiting item must expire
/// by the TTL before its lease runs out (the planner's settings), and a lease an operator
/// asks for (`retry`/`release --lease-duration-s`) shorter than the TTL promised a
/// "fresh lease" the daemons then did not honour (outside 17d finding 11). `what` names
/// where the lease comes from in the message.
pub fn validate_outlasts_ttl(what: &str, lease_ms: i64, ttl_ms: i64) -> Result<()> {
    if lease_ms > ttl_ms {
        Ok(())
    } else {
        Err(EngineError::Config(format!(
            "{what} {} must be longer than the work-item TTL ({}): a waiting item expires by the TTL before its lease runs out; ask for more than {} s or shorten the TTL (planner.work_item_ttl_ms)",
            show_ms(lease_ms),
            show_ms(ttl_ms),
            ttl_ms.max(0) / 1_000
        )))
    }
}

/// A duration in ms as "N s" when whole seconds, else "N ms".
fn show_ms(ms: i64) -> String {
    if ms % 1_000 == 0 {
        format!("{} s", ms / 1_000)
    } else {
        format!("{ms} ms")
    }
}

/// When a lease expires: its node's `mtime` (the server's time of its last write) plus
/// its duration, in unix ms.
pub fn expires_at(mtime_ms: i64, duration_ms: i64) -> i64 {
    mtime_ms.saturating_add(duration_ms)
}

/// Has a lease last written at `mtime_ms` for `duration_ms` expired at `now_ms`?
pub fn is_expired(mtime_ms: i64, duration_ms: i64, now_ms: i64) -> bool {
    expires_at(mtime_ms, duration_ms) <= now_ms
}

/// Does a job in `state` keep its lease whatever the lease's age (the reaper renews it
/// rather than letting it expire)? A `reported` job holds its answers: its pairs stay
/// covered until a recorder records or fails it (before, while no recorder could store,
/// its lease expired and its pairs were researched again every lease period: outside
/// 17i G3). A `pending` job while `pending` is paused (`pending_paused`) waits because
/// an operator said so, not because a researcher was lost (before, a pause longer than
/// the lease lost every waiting job and an operator's `retry`: outside 17i G2). The one
/// rule; the reaper applies it ([`renewal_due`]).
pub fn keeps_its_lease(state: JobState, pending_paused: bool) -> bool {
    match state {
        JobState::Reported => true,
        JobState::Pending => pending_paused,
        _ => false,
    }
}

/// Is a kept lease ([`keeps_its_lease`]) due for renewal at `now_ms`: past half its
/// duration, so a reaper sweeping more often than that renews it before it expires (the
/// planner counts a lease until [`expires_at`]). A lease already expired is due too. A
/// duration that is not positive is never renewed (`fsck` reports it: `lease_invalid`).
pub fn renewal_due(mtime_ms: i64, duration_ms: i64, now_ms: i64) -> bool {
    duration_ms > 0 && mtime_ms.saturating_add(duration_ms / 2) <= now_ms
}

/// Since when a waiting work item has waited: the later of when it last entered
/// `pending` (`entered_ms`: its queue entry's creation, made by every move into the
/// queue; the job's own creation where the entry is not known) and its lease's creation
/// (an operator's `retry`/`release` replaces the lease, starting a new wait). A
/// researcher's hand-back on shutdown moves the job into `pending` again, a new wait
/// too (outside try 17p F5: a job handed back with 40 s of lease left was expired
/// 100 ms later, when its first claim was older than the TTL, and replaced by a new
/// job, losing its history and retry count).
pub fn waiting_since(entered_ms: i64, lease_ctime_ms: Option<i64>) -> i64 {
    lease_ctime_ms.map_or(entered_ms, |l| l.max(entered_ms))
}

/// Has a waiting work item passed the work-item TTL at `now_ms`? (`entered_ms` as in
/// [`waiting_since`].)
pub fn work_item_expired(
    entered_ms: i64,
    lease_ctime_ms: Option<i64>,
    ttl_ms: i64,
    now_ms: i64,
) -> bool {
    waiting_since(entered_ms, lease_ctime_ms).saturating_add(ttl_ms) <= now_ms
}

/// Until when a lease counts as leased for planning, unix ms: the one rule for a lease
/// nobody can vouch for. A lease that decodes and whose job exists counts until it
/// expires ([`expires_at`]). One that does not decode (its duration is unknown), or
/// whose job does not exist (`job_exists`: left by a `deleteall /jobs/J`, a partial
/// restore, or made by hand), counts only until its node's creation plus the work-item
/// TTL, as a waiting job is judged by its node's age ([`work_item_expired`]): "leased,
/// what for unknown, until then", never "no lease" (that planned a running job's pairs
/// again while it ran: outside 17d finding 17), and never its full duration (a lease
/// without a job kept its pairs out of planning for up to 30 days: outside 17h F8). The
/// reaper removes a lease without a job once it proves the absence ([`remove_jobless`]).
pub fn counts_until(
    duration_ms: Option<i64>,
    job_exists: bool,
    mtime_ms: i64,
    ctime_ms: i64,
    ttl_ms: i64,
) -> i64 {
    let by_age = waiting_since(ctime_ms, None).saturating_add(ttl_ms);
    match duration_ms {
        Some(duration) if job_exists => expires_at(mtime_ms, duration),
        Some(duration) => expires_at(mtime_ms, duration).min(by_age),
        None => by_age,
    }
}

/// Removes `job`'s lease, read at `version`, when its job does not exist: one multi
/// that proves the absence ([`crate::jobs::absent_ops`]: it creates and deletes
/// `/jobs/{job}`, which only succeeds while no such job exists) and deletes the lease at
/// that version. Every job is created with its lease in one multi, so a job created
/// meanwhile makes the multi fail and its lease stays. Returns whether it was removed
/// (`false`: the job exists, or the lease changed or went; nothing was written).
pub async fn remove_jobless(session: &Session, job: &str, version: i32) -> Result<bool> {
    let mut ops = crate::jobs::absent_ops(job);
    ops.push(revoke_op(job, version));
    match crate::ops::commit(session, &ops).await {
        Ok(_) => {
            tracing::warn!(job, episode = "unknown", path = %paths::lease(job), "lease without a job removed (proof: no such job; left by a deleted job, a partial restore, or made by hand): its pairs can be planned again");
            metrics::counter!("archivist_jobless_leases_removed_total").increment(1);
            Ok(true)
        }
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// A new, unclaimed lease on a job's episode and clips.
///
/// # Errors
/// [`EngineError::Config`] for a duration that is not positive.
pub fn new_record(
    job: &str,
    episode: &str,
    clips: &[String],
    duration_ms: i64,
) -> Result<LeaseRecord> {
    validate_duration(duration_ms)?;
    Ok(LeaseRecord {
        schema: SCHEMA_VERSION,
        job: job.to_string(),
        episode: episode.to_string(),
        clips: clips.to_vec(),
        duration_ms,
        holder: None,
        extensions: 0,
        prefer: None,
        prefer_until_ms: None,
    })
}

/// The operation creating `/leases/{job}` with `lease` (part of the multi that creates
/// or re-opens the job).
pub fn create_op(lease: &LeaseRecord) -> Result<Op> {
    let path = paths::lease(&lease.job);
    Ok(Op::Create {
        data: store::encode(&path, lease)?,
        path,
        mode: Mode::Persistent,
    })
}

/// The operation claiming or extending a lease read at `version`: writing it refreshes
/// its `mtime`, so it lasts another `duration_ms` from now. `holder` names the worker
/// (`None` keeps the current holder).
pub fn extend_op(lease: &LeaseRecord, version: i32, holder: Option<&str>) -> Result<Op> {
    let path = paths::lease(&lease.job);
    let mut next = lease.clone();
    if let Some(holder) = holder {
        next.holder = Some(holder.to_string());
    }
    next.extensions = next.extensions.saturating_add(1);
    Ok(Op::SetData {
        data: store::encode(&path, &next)?,
        path,
        version: Some(version),
    })
}

/// The operation revoking (deleting) `job`'s lease at the version read.
pub fn revoke_op(job: &str, version: i32) -> Op {
    Op::Delete {
        path: paths::lease(job),
        version: Some(version),
    }
}

/// Reads `job`'s lease with its stat; data that does not decode is returned as `None`
/// (the node still counts: it can be revoked, and `fsck` reports it).
pub async fn read(session: &Session, job: &str) -> Result<Option<(Option<LeaseRecord>, zk::Stat)>> {
    let path = paths::lease(job);
    Ok(store::read_raw(session, &path)
        .await?
        .map(|(bytes, stat)| (records::decode::<LeaseRecord>(&path, &bytes).ok(), stat)))
}

/// The operations revoking `job`'s lease if it has one (version-checked).
pub async fn revoke_ops(session: &Session, job: &str) -> Result<Vec<Op>> {
    Ok(store::exists(session, &paths::lease(job))
        .await?
        .map(|stat| revoke_op(job, stat.version))
        .into_iter()
        .collect())
}

/// The operations replacing any lease of `job` by a fresh, unclaimed one of
/// `duration_ms` (admin `retry` and `release`): its new `ctime` starts a new wait.
pub async fn renew_ops(session: &Session, job: &JobRecord, duration_ms: i64) -> Result<Vec<Op>> {
    let fresh = new_record(&job.id, &job.episode, &job.clips, duration_ms)?;
    let mut ops = revoke_ops(session, &job.id).await?;
    ops.push(create_op(&fresh)?);
    Ok(ops)
}

/// The work-item TTL in force: the longest a running planner publishes in its
/// `/daemons` registration (the planner's is the TTL the plan was made with) with words
/// naming it, else `fallback_ms` (the caller's own setting) and `None`. One rule for the
/// admin's `retry`/`release` (a fresh lease must outlast it) and the reaper's TTL step
/// (outside try 17p F4: a reaper started with its own shorter TTL expired a job 3 s
/// after `retry` promised a fresh 20 s lease).
pub async fn ttl_in_force(session: &Session, fallback_ms: i64) -> Result<(i64, Option<String>)> {
    let published = crate::member::list(session, paths::DAEMONS)
        .await?
        .into_iter()
        .filter(|m| m.role == "planner")
        .filter_map(|m| m.work_item_ttl_ms.map(|ttl| (ttl, m.name)))
        .max_by_key(|(ttl, _)| *ttl);
    Ok(match published {
        Some((ttl, name)) => (
            ttl,
            Some(format!(
                "the running planner {name}'s, published in {}",
                paths::daemon(&name)
            )),
        ),
        None => (fallback_ms, None),
    })
}

/// The one TTL step: moves every `pending` job that has waited past `ttl_ms`
/// ([`work_item_expired`]) to `expired` ("work-item TTL passed"), revoking its lease, in
/// one multi under the job's lock. The planner runs it before counting and the reaper
/// on every sweep; the lock and version checks make them harmless together. A job
/// locked by someone else, or that moved, is left for the next pass; other per-job
/// errors are logged and skipped; a lost session stops the step. Returns the ids
/// expired.
///
/// While `pending` is paused nothing expires: nobody may claim the jobs, so their wait
/// proves no researcher lost, and expiring them re-created every waiting job each TTL
/// for as long as the pause lasted (new ids, expired nodes kept for the retention,
/// waiting time and retry history reset: outside 17g finding 8). After `resume`, a job
/// that waited past the TTL is claimed or expired by the next pass, once.
pub async fn expire_waiting(
    session: &Session,
    ttl_ms: i64,
    now_ms: i64,
    role: Role,
    by: &str,
    step: &str,
) -> Result<Vec<String>> {
    if crate::consumer::is_paused(session, JobState::Pending).await? {
        return Ok(Vec::new());
    }
    let (entries, _) = crate::queue::list(session, JobState::Pending).await?;
    let mut expired = Vec::new();
    for chunk in entries.chunks(256) {
        let jobs: Vec<_> = chunk
            .iter()
            .map(|e| session.client().check_stat(&paths::job(&e.job)))
            .collect();
        let leases: Vec<_> = chunk
            .iter()
            .map(|e| session.client().check_stat(&paths::lease(&e.job)))
            .collect();
        let jobs = crate::ops::await_all(jobs).await;
        let leases = crate::ops::await_all(leases).await;
        for ((entry, job), lease) in chunk.iter().zip(jobs).zip(leases) {
            let (Ok(job), Ok(lease)) = (job, lease) else {
                continue;
            };
            let Some(job) = job else {
                // An entry naming no job is a stray (made by hand, or left by a repair):
                // removed under proof of the job's absence, so no pass reads it again.
                crate::queue::remove_strays(session, &[stray(entry, StrayProof::NoJob)]).await?;
                continue;
            };
            // The job's creation bounds its entry's (an entry is made with the job or
            // later), so a job not expired by it is not expired: only the candidates
            // cost a read of their entry (and `expire_one` reads it again under the lock).
            let lease_ctime = lease.map(|s| s.ctime);
            if !work_item_expired(job.ctime, lease_ctime, ttl_ms, now_ms) {
                continue;
            }
            let entered = session
                .client()
                .check_stat(&paths::queue_entry(JobState::Pending, &entry.name()))
                .await;
            // The entry gone meanwhile (claimed): nothing waits.
            let Ok(Some(entered)) = entered else {
                continue;
            };
            if !work_item_expired(entered.ctime.max(job.ctime), lease_ctime, ttl_ms, now_ms) {
                continue;
            }
            match expire_one(session, entry, ttl_ms, now_ms, role, by, step).await {
                Ok(true) => expired.push(entry.job.clone()),
                Ok(false) => {}
                Err(e) if e.is_session_lost() => return Err(e),
                Err(e) => {
                    tracing::warn!(job = %entry.job, episode = "unknown", state = %JobState::Pending, error = %e, "work-item TTL: skipped; the next pass retries");
                }
            }
        }
    }
    Ok(expired)
}

async fn expire_one(
    session: &Session,
    entry: &QueueEntry,
    ttl_ms: i64,
    now_ms: i64,
    role: Role,
    by: &str,
    step: &str,
) -> Result<bool> {
    let job_id = entry.job.as_str();
    let Some(lock) = JobLock::try_acquire(session, job_id, by).await? else {
        return Ok(false);
    };
    let lock = LockGuard::new(session, lock);
    let outcome: Result<bool> = async {
        let path = paths::job(job_id);
        let Some((bytes, stat)) = store::read_raw(session, &path).await? else {
            return Ok(false);
        };
        let lease = read(session, job_id).await?;
        let Some(entered) = session
            .client()
            .check_stat(&paths::queue_entry(JobState::Pending, &entry.name()))
            .await
            .map_err(|e| EngineError::zk("stat", entry.name(), e))?
        else {
            return Ok(false);
        };
        let since = entered.ctime.max(stat.ctime);
        if !work_item_expired(since, lease.as_ref().map(|(_, s)| s.ctime), ttl_ms, now_ms) {
            return Ok(false);
        }
        let (job, message) = match records::decode::<JobRecord>(&path, &bytes) {
            Ok(job) => (job, TTL_PASSED.to_string()),
            Err(error) => {
                let known = lease.as_ref().and_then(|(record, _)| record.as_ref());
                let job = stand_in(entry, stat.ctime, known);
                tracing::warn!(job = %job.id, episode = %job.episode, state = %JobState::Pending, %error, "waiting work item whose record does not decode: expiring it by its node's age");
                (job, format!("{TTL_PASSED}; {UNDECODABLE}: {error}"))
            }
        };
        if job.status != JobState::Pending {
            // The entry of a job in another state (copied by hand from another queue)
            // is a stray: removed while the job stays at the version read.
            let proof = StrayProof::JobElsewhere {
                version: stat.version,
            };
            crate::queue::remove_strays(session, &[stray(entry, proof)]).await?;
            return Ok(false);
        }
        // An operator's cancel/hold written while the job was locked (or kept by a
        // hand-back) is honoured, not dropped for `expired`: its pairs stay out of
        // planning as the operator was told.
        let honoured = crate::jobs::requested_move(&job);
        let stopped = honoured.is_some();
        let (to, message, step, result) = match honoured {
            Some((to, why)) => (to, why, "request honoured", "request honoured at the work-item TTL"),
            None => (JobState::Expired, message, step, TTL_PASSED),
        };
        Transition::new(role, &job, stat.version, to)
            .failed()
            .lock(LockAction::Release(lock.lock().clone()))
            .edit(|j| {
                j.message = Some(message.clone());
                if stopped {
                    j.request = None;
                    j.request_reason = None;
                    j.holder = None;
                }
            })
            .event(by, step, result)
            .with_ops(lease.map(|(_, s)| revoke_op(job_id, s.version)))
            .commit(session)
            .await?;
        tracing::info!(job = %job.id, episode = %job.episode, state = %to, reason = %message, "waiting work item past its TTL: {}", if stopped { "operator's request honoured; lease revoked" } else { "expired; lease revoked" });
        Ok(true)
    }
    .await;
    let outcome = match outcome {
        Err(e) if e.is_conflict() => Ok(false),
        other => other,
    };
    lock.settle(outcome, |expired| *expired).await
}

/// The pending-queue `entry` as a stray proven by `proof`.
fn stray(entry: &QueueEntry, proof: StrayProof) -> ProvenStray {
    ProvenStray {
        state: JobState::Pending,
        name: entry.name(),
        job: entry.job.clone(),
        proof,
    }
}

/// What the tree still knows of a waiting job whose record does not decode, as a
/// `pending` record: its id, priority and curation from its queue `entry` (the name the
/// move deletes), its creation from its node's `ctime_ms`, and its episode and clips from
/// its `lease` when that decodes ([`UNKNOWN_EPISODE`] and none otherwise). No media URL,
/// batch or history survive. Its move to `expired` writes this in place of the bytes no
/// one could read, so the job can be shown, and reaped like every expired job (its pairs
/// are then planned again).
pub fn stand_in(entry: &QueueEntry, ctime_ms: i64, lease: Option<&LeaseRecord>) -> JobRecord {
    let created = crate::clock::to_datetime(ctime_ms);
    JobRecord {
        schema: SCHEMA_VERSION,
        id: entry.job.clone(),
        status: JobState::Pending,
        last_successful_status: None,
        retry_count: 0,
        message: None,
        priority: entry.priority,
        curated_ms: entry.curated_ms,
        episode: lease.map_or_else(|| UNKNOWN_EPISODE.to_string(), |l| l.episode.clone()),
        media_url: String::new(),
        clips: lease.map(|l| l.clips.clone()).unwrap_or_default(),
        batch: None,
        holder: None,
        request: None,
        request_reason: None,
        progress: Default::default(),
        created,
        updated: created,
        events: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside tester (issue 17): `release --lease-duration-s 9300000000000000` was
    /// accepted (saturated, shown as 1970), and the planner took a 2 ms lease and a 1 ms
    /// TTL (jobs created and expired ~100/s). Both are bounded here.
    #[test]
    fn absurd_or_spinning_durations_are_refused() {
        assert!(validate_duration(600_000).is_ok());
        assert!(validate_duration(MAX_DURATION_MS).is_ok());
        assert!(validate_duration(MAX_DURATION_MS + 1).is_err());
        assert!(validate_duration(i64::MAX).is_err());
        assert!(validate_duration(0).is_err());
        assert!(validate_operator_ms("ttl", 1).is_err());
        assert!(validate_operator_ms("lease", 2).is_err());
        assert!(validate_operator_ms("lease", 1_000).is_ok());
        assert!(validate_operator_ms("lease", u128::MAX).is_err());
        assert_eq!(MAX_DURATION_S, 2_592_000);
    }

    #[test]
    fn a_lease_must_outlast_the_work_item_ttl() {
        assert!(validate_outlasts_ttl("lease", 600_000, 300_000).is_ok());
        let err = validate_outlasts_ttl("--lease-duration-s", 1_000, 300_000)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("work-item TTL (300 s)") && err.contains("1 s"),
            "{err}"
        );
        assert!(validate_outlasts_ttl("lease", 300_000, 300_000).is_err());
    }

    #[test]
    fn reported_jobs_and_paused_pending_jobs_keep_their_leases() {
        assert!(keeps_its_lease(JobState::Reported, false));
        assert!(keeps_its_lease(JobState::Pending, true));
        assert!(!keeps_its_lease(JobState::Pending, false));
        assert!(!keeps_its_lease(JobState::Leased, true));
        assert!(!keeps_its_lease(JobState::Recorded, true));
        assert!(!renewal_due(1_000, 1_000, 1_499));
        assert!(renewal_due(1_000, 1_000, 1_500));
        assert!(renewal_due(1_000, 1_000, 9_000));
        assert!(!renewal_due(1_000, 0, 9_000));
    }

    #[test]
    fn a_lease_expires_at_its_last_write_plus_its_duration() {
        assert_eq!(expires_at(1_000, 500), 1_500);
        assert!(!is_expired(1_000, 500, 1_499));
        assert!(is_expired(1_000, 500, 1_500));
        assert!(
            is_expired(1_000, -5, 1_000),
            "a negative lease is born expired"
        );
    }

    #[test]
    fn a_fresh_lease_starts_a_fresh_wait() {
        // Job created at 0, TTL 100: expired at 100 on its own age...
        assert!(work_item_expired(0, None, 100, 100));
        assert!(work_item_expired(0, Some(0), 100, 100));
        // ...but an operator renewed its lease at 90: it waits until 190.
        assert!(!work_item_expired(0, Some(90), 100, 150));
        assert!(work_item_expired(0, Some(90), 100, 190));
    }

    #[test]
    fn a_lease_nobody_vouches_for_counts_until_its_node_age_passes_the_ttl() {
        // Created at 100, written at 200, lasting 1,000; TTL 50.
        assert_eq!(counts_until(Some(1_000), true, 200, 100, 50), 1_200);
        assert_eq!(
            counts_until(Some(1_000), false, 200, 100, 50),
            150,
            "no job: by its node's age"
        );
        assert_eq!(
            counts_until(Some(10), false, 100, 100, 50),
            110,
            "no job, sooner expiry: that"
        );
        assert_eq!(counts_until(None, true, 200, 100, 50), 150, "undecodable");
        assert_eq!(counts_until(None, false, 200, 100, 50), 150);
    }

    #[test]
    fn durations_must_be_positive() {
        assert!(validate_duration(1).is_ok());
        assert!(validate_duration(0).is_err());
        assert!(validate_duration(-600_000).is_err());
        assert!(new_record("j0000000001", "e0000001", &[], -1).is_err());
    }
}
