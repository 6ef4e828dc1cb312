//! Bounded reads for browsing jobs (the web console): a page of jobs matching a filter,
//! and the failed jobs grouped by reason. Unlike `jobs list`, which reads every job it
//! may show, each call reads at most a fixed number of job nodes (`scan_limit`), so a
//! page costs the same at 100 jobs and at 100 000, and says where the next page starts.

use std::collections::BTreeMap;

use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{queue, store, Session};
use serde::Serialize;

use crate::error::Result;
use crate::jobs::{JobFilter, JobSummary, Unreadable};
use crate::scan::{self, Loaded};
use crate::settings::{AdminSettings, Silent};

/// What a page of jobs shows: the filter of `jobs list` plus the console's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQuery {
    /// State and episode, as in `jobs list` ([`JobFilter::matches`]).
    pub filter: JobFilter,
    /// Only jobs whose message (why it is where it is) matches this pattern, by the rule
    /// `retry --all-failed --reason` uses ([`crate::actions::message_matches`]: a
    /// substring, or a glob with `*`, ignoring case), so the console's list and the
    /// CLI select the same jobs (outside try 24b N11).
    pub reason: Option<String>,
    /// Only jobs whose message has this reason ([`reason_of`], the key the failure
    /// groups are made by): a group's link lists exactly that group's jobs.
    pub group: Option<String>,
    /// Only jobs that research this clip.
    pub clip: Option<String>,
    /// Only jobs this action can change ([`crate::actions::Action::applies`]): a bulk
    /// confirmation's page is then full of jobs it can act on (outside try 24c M3: the
    /// first 1000 matching jobs were read, then those it could not change dropped, and
    /// "act again for the rest" showed the same page for ever).
    pub changeable_by: Option<crate::actions::Action>,
    /// Only jobs whose id sorts after this one (the previous page's `next`).
    pub after: Option<String>,
    /// Jobs per page (at least 1).
    pub limit: usize,
    /// Job nodes read at most for one page (at least 1): a filter that matches
    /// few jobs returns a short page and a `next` to go on from, rather than reading
    /// the whole tree.
    pub scan_limit: usize,
}

impl JobQuery {
    /// Does `job` pass every filter of the query?
    pub fn matches(&self, job: &JobRecord) -> bool {
        self.filter.matches(job)
            && self
                .clip
                .as_deref()
                .is_none_or(|c| job.clips.iter().any(|x| x == c))
            && self
                .changeable_by
                .is_none_or(|a| a.applies(job.status, job.request))
            && self.reason.as_deref().is_none_or(|r| {
                job.message
                    .as_deref()
                    .is_some_and(|m| crate::actions::message_matches(r, m))
            })
            && self
                .group
                .as_deref()
                .is_none_or(|g| reason_of(job.message.as_deref()) == g)
    }
}

/// A page of jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPage {
    /// Matching jobs, by id.
    pub jobs: Vec<JobSummary>,
    /// Job nodes that do not decode among those read (run `fsck`).
    pub unreadable: Vec<Unreadable>,
    /// Job nodes read for this page.
    pub scanned: usize,
    /// Where the next page starts (pass as `after`), if there may be more.
    pub next: Option<String>,
}

/// One page of jobs matching `query`, in id order. With a state, only that state's
/// queue is listed (the job's own status must match too, as in `jobs list`); otherwise
/// the names under `/jobs`. Then job nodes after `query.after` are read, a pipelined
/// batch at a time, until the page is full or `scan_limit` nodes were read.
pub async fn page(
    session: &Session,
    settings: &AdminSettings,
    query: &JobQuery,
) -> Result<JobPage> {
    let limit = query.limit.max(1);
    let scan_limit = query.scan_limit.max(1);
    let mut ids: Vec<String> = match query.filter.state {
        Some(state) => queue::list(session, state)
            .await?
            .0
            .into_iter()
            .map(|e| e.job)
            .collect(),
        None => store::children(session, paths::JOBS).await?,
    };
    ids.sort();
    ids.dedup();
    if let Some(after) = query.after.as_deref() {
        ids.retain(|id| id.as_str() > after);
    }
    let mut out = JobPage {
        jobs: Vec::new(),
        unreadable: Vec::new(),
        scanned: 0,
        next: None,
    };
    let chunk = settings.batch_size.clamp(1, scan_limit);
    let mut rest = ids.as_slice();
    // Read what the page still needs, no more: a list every job matches reads exactly
    // one page of records (outside try of #24, F10: 500 read for 50 shown). A filter
    // that matches few doubles the batch each round, up to `batch_size`, so a sparse
    // filter still costs few round trips.
    let mut grow = limit;
    while !rest.is_empty() && out.jobs.len() < limit && out.scanned < scan_limit {
        let needed = limit - out.jobs.len();
        let take = needed
            .max(grow)
            .min(chunk)
            .min(rest.len())
            .min(scan_limit - out.scanned);
        grow = grow.saturating_mul(2);
        let (batch, tail) = rest.split_at(take);
        rest = tail;
        let loaded: Vec<Loaded<JobRecord>> = scan::load(
            session,
            batch.iter().map(|id| paths::job(id)).collect(),
            settings,
            &Silent,
            "jobs",
        )
        .await?;
        out.scanned += take;
        // The last id this page considered: the one that filled it, else the batch's.
        let mut considered = batch.last().cloned();
        for node in loaded {
            match &node.record {
                Ok(job) if query.matches(job) => {
                    out.jobs.push(JobSummary::of(job, &node.stat));
                    if out.jobs.len() == limit {
                        considered = Some(node.name.clone());
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => out.unreadable.push(Unreadable {
                    path: node.path.clone(),
                    error: e.to_string(),
                }),
            }
        }
        out.next = considered.filter(|c| ids.last().is_some_and(|l| l > c));
    }
    Ok(out)
}

/// Longest reason a group shows, in characters; longer reasons are cut with `…`.
pub const REASON_CHARS: usize = 300;

/// Most groups [`failures_by_reason`] returns; the rest are counted, not listed.
pub const MAX_GROUPS: usize = 50;

/// The reason a job's message stands for, which failures are grouped by: the message
/// with every URL replaced by `<url>` and every run of four or more digits (byte
/// counts, offsets, ids' numbers) by `#`, cut to [`REASON_CHARS`]. Download failures
/// carry their URL, so grouping by the exact message made one group per episode (outside
/// try of #24, F5: 1000 groups of one); three-digit numbers such as HTTP statuses stay,
/// since they tell causes apart. The one rule for the overview's groups and for the jobs
/// list's `group` filter its links use.
pub fn reason_of(message: Option<&str>) -> String {
    let Some(message) = message else {
        return "(no message)".into();
    };
    let mut out = String::with_capacity(message.len().min(REASON_CHARS * 4));
    for word in message.split_inclusive(char::is_whitespace) {
        let trimmed = word.trim_end();
        let white = &word[trimmed.len()..];
        let body = trimmed.trim_start_matches(['(', '<', '"', '\'', '[']);
        let lead = &trimmed[..trimmed.len() - body.len()];
        if let Some(i) = body.find("://") {
            if i > 0
                && body[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            {
                let url_end = url_end(body);
                out.push_str(lead);
                out.push_str("<url>");
                out.push_str(&body[url_end..]);
                out.push_str(white);
                continue;
            }
        }
        let mut digits = 0;
        let mut run = String::new();
        for c in word.chars() {
            if c.is_ascii_digit() {
                digits += 1;
                run.push(c);
                continue;
            }
            flush(&mut out, &mut run, digits);
            digits = 0;
            out.push(c);
        }
        flush(&mut out, &mut run, digits);
    }
    // Trimmed: the jobs list trims its filters, and a group's link must find it.
    let mut out = out.trim().to_string();
    if out.chars().count() > REASON_CHARS {
        out = out.chars().take(REASON_CHARS - 1).collect();
        out.push('…');
    }
    out
}

/// Where a URL at the start of `word` ends: before the punctuation that follows it in
/// prose, except a closing bracket the URL itself opened (`http://h/ep(1)` keeps its
/// `)`, which split one 404 into two groups: outside try 24d L1).
fn url_end(word: &str) -> usize {
    let mut end = word.len();
    while let Some(c) = word[..end].chars().last() {
        let opened =
            |open: char| word[..end].matches(open).count() >= word[..end].matches(c).count();
        let trailing = match c {
            ')' => !opened('('),
            ']' => !opened('['),
            '>' | '"' | '\'' | ',' | ';' | ':' | '.' => true,
            _ => false,
        };
        if !trailing {
            break;
        }
        end -= c.len_utf8();
    }
    end
}

/// Writes a run of digits: `#` when it has four or more.
fn flush(out: &mut String, run: &mut String, digits: usize) {
    if digits >= 4 {
        out.push('#');
    } else {
        out.push_str(run);
    }
    run.clear();
}

/// Failed jobs sharing one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonGroup {
    /// The reason the jobs failed with ([`reason_of`] their messages).
    pub reason: String,
    /// How many of the failed jobs read carry it.
    pub count: usize,
    /// The lowest job id carrying it, to open one.
    pub example: String,
    /// That job's message, exactly as recorded.
    pub example_message: String,
    /// How many of them failed in the last hour (their record's `updated` time, which
    /// the failure wrote, within [`RECENT`] of now).
    pub last_hour: usize,
}

/// What "recent" failures are: the overview's "failures in the last hour".
pub const RECENT: time::Duration = time::Duration::HOUR;

/// Failures grouped by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// Jobs in the `failed` queue.
    pub failed: usize,
    /// Those read (at most the limit asked for).
    pub read: usize,
    /// Groups, the largest first, at most [`MAX_GROUPS`].
    pub groups: Vec<ReasonGroup>,
    /// Groups left out beyond [`MAX_GROUPS`].
    pub more_groups: usize,
    /// Jobs in the groups left out.
    pub more_jobs: usize,
    /// Failed jobs read whose failure was in the last hour ([`RECENT`]), in every group.
    pub last_hour: usize,
}

/// The jobs of the `failed` queue grouped by [`reason_of`] their message, reading at
/// most `limit` of them (the queue's most urgent first, its own order); at most
/// [`MAX_GROUPS`] groups, the largest, are returned.
pub async fn failures_by_reason(
    session: &Session,
    settings: &AdminSettings,
    limit: usize,
) -> Result<Failures> {
    let (entries, _) = queue::list(session, JobState::Failed).await?;
    let failed = entries.len();
    let job_paths: Vec<String> = entries
        .iter()
        .take(limit)
        .map(|e| paths::job(&e.job))
        .collect();
    let read = job_paths.len();
    let loaded = scan::load::<JobRecord>(session, job_paths, settings, &Silent, "jobs").await?;
    let mut groups: BTreeMap<String, ReasonGroup> = BTreeMap::new();
    let since = time::OffsetDateTime::now_utc() - RECENT;
    let mut last_hour = 0;
    for job in loaded.iter().filter_map(|n| n.ok()) {
        if job.status != JobState::Failed {
            continue;
        }
        let reason = reason_of(job.message.as_deref());
        let message = job.message.clone().unwrap_or_default();
        let group = groups.entry(reason.clone()).or_insert(ReasonGroup {
            reason,
            count: 0,
            example: job.id.clone(),
            example_message: message.clone(),
            last_hour: 0,
        });
        group.count += 1;
        if job.updated >= since {
            group.last_hour += 1;
            last_hour += 1;
        }
        if job.id < group.example {
            group.example = job.id.clone();
            group.example_message = message;
        }
    }
    let mut groups: Vec<ReasonGroup> = groups.into_values().collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    let rest = groups.split_off(groups.len().min(MAX_GROUPS));
    Ok(Failures {
        failed,
        read,
        groups,
        more_groups: rest.len(),
        more_jobs: rest.iter().map(|g| g.count).sum(),
        last_hour,
    })
}

#[cfg(test)]
mod tests {
    use super::reason_of;

    #[test]
    fn reasons_leave_out_urls_and_long_numbers_and_keep_statuses() {
        let a = reason_of(Some(
            "download failed: GET http://127.0.0.1:47821/many/ep12.mp3 returned 404 Not Found",
        ));
        let b = reason_of(Some(
            "download failed: GET https://cdn.example/x/ep9999.mp3?k=1 returned 404 Not Found",
        ));
        assert_eq!(a, "download failed: GET <url> returned 404 Not Found");
        assert_eq!(a, b);
        assert_ne!(
            a,
            reason_of(Some(
                "download failed: GET http://h/a returned 500 Internal Server Error"
            ))
        );
        assert_eq!(
            reason_of(Some("not audio after 123456 bytes (\"http://h/x.mp3\")")),
            "not audio after # bytes (\"<url>\")"
        );
        // A bracket the URL opened is part of it; one that closes prose is not (24d L1).
        assert_eq!(
            reason_of(Some("GET http://h/ep(1).mp3 returned 404")),
            reason_of(Some("GET http://h/ep(1) returned 404"))
        );
        assert_eq!(
            reason_of(Some("failed (GET http://h/x(2)) twice")),
            "failed (GET <url>) twice"
        );
        assert_eq!(reason_of(None), "(no message)");
        assert_eq!(reason_of(Some("  HTTP 404 \n")), "HTTP 404");
        let long = "x".repeat(5000);
        assert_eq!(reason_of(Some(&long)).chars().count(), super::REASON_CHARS);
    }
}
