//! Builders for every path in the tree, relative to the chroot.
//!
//! Each builder has a row in [`EXAMPLES`]; a test checks that every example matches a
//! pattern of `schema.yml` with the same shape, and that every pattern has a builder.

use crate::JobState;

/// Default chroot under which the whole tree lives.
pub const DEFAULT_CHROOT: &str = "/archivist";

/// `/meta`
pub const META: &str = "/meta";
/// `/clock`
pub const CLOCK: &str = "/clock";
/// `/counters/jobs`
pub const JOB_COUNTER: &str = "/counters/jobs";
/// `/counters/clips`
pub const CLIP_COUNTER: &str = "/counters/clips";
/// `/counters/episodes`
pub const EPISODE_COUNTER: &str = "/counters/episodes";
/// `/counters/batches`
pub const BATCH_COUNTER: &str = "/counters/batches";
/// `/batches`
pub const BATCHES: &str = "/batches";
/// `/control/hold-batches`
pub const HOLD_BATCHES: &str = "/control/hold-batches";
/// `/catalog/episodes`
pub const EPISODES: &str = "/catalog/episodes";
/// `/catalog/clips`
pub const CLIPS: &str = "/catalog/clips";
/// `/catalog/aliases`
pub const ALIASES: &str = "/catalog/aliases";
/// `/research`
pub const RESEARCH: &str = "/research";
/// `/jobs`
pub const JOBS: &str = "/jobs";
/// `/leases`
pub const LEASES: &str = "/leases";
/// `/reports`
pub const REPORTS: &str = "/reports";
/// `/researchers`
pub const RESEARCHERS: &str = "/researchers";
/// `/daemons`
pub const DAEMONS: &str = "/daemons";
/// `/election`: one directory per role that elects a leader (`planner`, `reaper`).
pub const ELECTION: &str = "/election";
/// `/consumers`
pub const CONSUMERS: &str = "/consumers";
/// `/control/pause`
pub const PAUSES: &str = "/control/pause";
/// `/control/hold`: holds of catalog records.
pub const HOLDS: &str = "/control/hold";
/// `/signals`
pub const SIGNALS: &str = "/signals";
/// `/signals/catalog`: bumped after a catalog transaction commits.
pub const SIGNAL_CATALOG: &str = "/signals/catalog";
/// `/signals/research`: bumped after research is stored.
pub const SIGNAL_RESEARCH: &str = "/signals/research";

/// Every persistent directory `archivist init` creates, parents first.
pub fn directories() -> Vec<String> {
    let mut dirs: Vec<String> = [
        "/counters",
        JOB_COUNTER,
        CLIP_COUNTER,
        EPISODE_COUNTER,
        BATCH_COUNTER,
        CLOCK,
        "/catalog",
        EPISODES,
        CLIPS,
        ALIASES,
        RESEARCH,
        JOBS,
        "/queues",
        LEASES,
        REPORTS,
        RESEARCHERS,
        DAEMONS,
        CONSUMERS,
        ELECTION,
        "/control",
        PAUSES,
        HOLDS,
        SIGNALS,
        SIGNAL_CATALOG,
        SIGNAL_RESEARCH,
        BATCHES,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    dirs.extend(JobState::ALL.iter().map(|s| queue(*s)));
    dirs.extend(JobState::ALL.iter().map(|s| consumers(*s)));
    dirs.extend(["planner", "reaper"].iter().map(|r| election(r)));
    dirs
}

/// `/control/hold/{record}`: the hold of an episode or clip (`e0000042`, `c000007`).
pub fn hold(record: &str) -> String {
    format!("{HOLDS}/{record}")
}

/// `/catalog/episodes/{episode}` (before the database; read only by `migrate`)
pub fn episode(id: &str) -> String {
    format!("{EPISODES}/{id}")
}

/// `/catalog/clips/{clip}`
pub fn clip(id: &str) -> String {
    format!("{CLIPS}/{id}")
}

/// `/catalog/aliases/{alias}`
pub fn alias(key: &str) -> String {
    format!("{ALIASES}/{key}")
}

/// `/research/{episode}`
pub fn research(episode: &str) -> String {
    format!("{RESEARCH}/{episode}")
}

/// `/jobs/{job}`
pub fn job(id: &str) -> String {
    format!("{JOBS}/{id}")
}

/// `/jobs/{job}/lock`
pub fn job_lock(id: &str) -> String {
    format!("{JOBS}/{id}/lock")
}

/// `/queues/{state}`
pub fn queue(state: JobState) -> String {
    format!("/queues/{}", state.as_str())
}

/// `/queues/{state}/{entry}`
pub fn queue_entry(state: JobState, entry: &str) -> String {
    format!("/queues/{}/{entry}", state.as_str())
}

/// `/leases/{job}`
pub fn lease(job: &str) -> String {
    format!("{LEASES}/{job}")
}

/// `/reports/{report}`
pub fn report(name: &str) -> String {
    format!("{REPORTS}/{name}")
}

/// The deterministic report name for one clip of one job.
pub fn report_name(job: &str, clip: &str) -> String {
    format!("{job}-{clip}")
}

/// The job a report belongs to, from its name `<job>-<clip>` ([`report_name`]'s
/// inverse): the recorder groups reports by it, `delete` and `fsck` find a job's reports
/// by it.
pub fn report_job(name: &str) -> Option<&str> {
    name.split_once('-')
        .map(|(job, _)| job)
        .filter(|j| !j.is_empty())
}

/// `/researchers/{member}`
pub fn researcher(member: &str) -> String {
    format!("{RESEARCHERS}/{member}")
}

/// `/daemons/{member}`
pub fn daemon(member: &str) -> String {
    format!("{DAEMONS}/{member}")
}

/// `/election/{role}`
pub fn election(role: &str) -> String {
    format!("{ELECTION}/{role}")
}

/// `/election/{role}/n_` (the prefix of a sequential candidate node)
pub fn election_candidate_prefix(role: &str) -> String {
    format!("/election/{role}/n_")
}

/// `/consumers/{state}`
pub fn consumers(state: JobState) -> String {
    format!("{CONSUMERS}/{}", state.as_str())
}

/// `/consumers/{state}/{member}`
pub fn consumer(state: JobState, member: &str) -> String {
    format!("{}/{member}", consumers(state))
}

/// `/control/pause/{state}`
pub fn pause(state: JobState) -> String {
    format!("{PAUSES}/{}", state.as_str())
}

/// `/batches/{batch}`
pub fn batch(id: &str) -> String {
    format!("{BATCHES}/{id}")
}

/// `/batches/{batch}/lock`
pub fn batch_lock(id: &str) -> String {
    format!("{BATCHES}/{id}/lock")
}

/// `/batches/{batch}/webhook`: the batch's webhook URL, a secret node (readers get no
/// READ), because a webhook URL usually carries the token that authorises posting to it.
pub fn batch_webhook(id: &str) -> String {
    format!("{BATCHES}/{id}/webhook")
}

/// `/batches/{batch}/reports`
pub fn batch_reports(id: &str) -> String {
    format!("{BATCHES}/{id}/reports")
}

/// `/batches/{batch}/reports/{report}` for report number `n` (1 is the first).
pub fn batch_report(id: &str, n: u32) -> String {
    format!("{BATCHES}/{id}/reports/{}", batch_report_name(n))
}

/// A report's node name: `r` + 4 digits, so names sort in report order.
pub fn batch_report_name(n: u32) -> String {
    format!("r{n:04}")
}

/// A report's number back from its node name.
pub fn batch_report_number(name: &str) -> Option<u32> {
    name.strip_prefix('r')?.parse().ok()
}

/// Batch id from its number: `b` + 7 digits.
pub fn batch_id(number: u64) -> String {
    format!("b{number:07}")
}

/// Job id from its number: `j` + 10 digits.
pub fn job_id(number: u64) -> String {
    format!("j{number:010}")
}

/// Clip id from its number: `c` + 6 digits (more digits beyond a million).
pub fn clip_id(number: u32) -> String {
    format!("c{number:06}")
}

/// Clip number back from its id.
pub fn clip_number(id: &str) -> Option<u32> {
    id.strip_prefix('c')?.parse().ok()
}

/// Episode id from its number: `e` + 7 digits.
pub fn episode_id(number: u64) -> String {
    format!("e{number:07}")
}

/// A path pattern and a builder call that makes one concrete path of it.
pub type Example = (&'static str, fn() -> String);

/// One example of every path builder, for the schema-drift test.
pub const EXAMPLES: &[Example] = &[
    ("/meta", || META.to_string()),
    ("/clock", || CLOCK.to_string()),
    ("/counters/jobs", || JOB_COUNTER.to_string()),
    ("/counters/clips", || CLIP_COUNTER.to_string()),
    ("/counters/episodes", || EPISODE_COUNTER.to_string()),
    ("/counters/batches", || BATCH_COUNTER.to_string()),
    ("/catalog/episodes", || EPISODES.to_string()),
    ("/catalog/episodes/{episode}", || episode("e0000001")),
    ("/catalog/clips", || CLIPS.to_string()),
    ("/catalog/clips/{clip}", || clip("c000001")),
    ("/catalog/aliases", || ALIASES.to_string()),
    ("/catalog/aliases/{alias}", || alias("url-0123abcd")),
    ("/research", || RESEARCH.to_string()),
    ("/research/{episode}", || research("e0000001")),
    ("/jobs", || JOBS.to_string()),
    ("/jobs/{job}", || job("j0000000001")),
    ("/jobs/{job}/lock", || job_lock("j0000000001")),
    ("/queues/{state}", || queue(JobState::Pending)),
    ("/queues/{state}/{entry}", || {
        queue_entry(
            JobState::Pending,
            "7fffffffffffffff-0000000000000-j0000000001",
        )
    }),
    ("/leases", || LEASES.to_string()),
    ("/leases/{job}", || lease("j0000000001")),
    ("/reports", || REPORTS.to_string()),
    ("/reports/{report}", || {
        report(&report_name("j0000000001", "c000001"))
    }),
    ("/researchers", || RESEARCHERS.to_string()),
    ("/researchers/{member}", || researcher("host-1234")),
    ("/daemons", || DAEMONS.to_string()),
    ("/daemons/{member}", || daemon("planner-host-1234")),
    ("/election/{role}", || election("planner")),
    ("/election/{role}/{candidate}", || {
        format!("{}0000000001", election_candidate_prefix("planner"))
    }),
    ("/consumers", || CONSUMERS.to_string()),
    ("/consumers/{state}", || consumers(JobState::Pending)),
    ("/consumers/{state}/{member}", || {
        consumer(JobState::Pending, "researcher-a-0x1")
    }),
    ("/control/pause", || PAUSES.to_string()),
    ("/control/pause/{state}", || pause(JobState::Pending)),
    ("/control/hold-batches", || HOLD_BATCHES.to_string()),
    ("/control/hold", || HOLDS.to_string()),
    ("/control/hold/{record}", || hold("e0000001")),
    ("/signals", || SIGNALS.to_string()),
    ("/signals/catalog", || SIGNAL_CATALOG.to_string()),
    ("/signals/research", || SIGNAL_RESEARCH.to_string()),
    ("/batches", || BATCHES.to_string()),
    ("/batches/{batch}", || batch(&batch_id(1))),
    ("/batches/{batch}/lock", || batch_lock("b0000001")),
    ("/batches/{batch}/webhook", || batch_webhook("b0000001")),
    ("/batches/{batch}/reports", || batch_reports("b0000001")),
    ("/batches/{batch}/reports/{report}", || {
        batch_report("b0000001", 1)
    }),
];
