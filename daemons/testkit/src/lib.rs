//! Test harness shared by the crates' integration tests.
//!
//! Tests talk to a real ZooKeeper: `ARCHIVIST_TEST_ZK` (default `127.0.0.1:2181`). If
//! nothing serves there, [`zk_connect`] starts one with `scripts/zk.sh start` (which
//! installs Debian's package if missing). Each test gets its own chroot, so tests run in
//! parallel without seeing each other.
#![deny(missing_docs)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use archivist_engine::{Session, ZkConfig};

pub mod catalog;
pub mod child;
pub mod db;
pub mod lost_reply;
pub mod secured;
pub mod switch;

pub use child::{
    child_args, child_config, child_on, child_process, child_session, expect_args, number_arg,
    run_child, shutdown_on_signal, stdout_lines,
};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn serving(addr: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &match addr.parse() {
            Ok(a) => a,
            Err(_) => return false,
        },
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"srvr").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out.contains("Mode:")
}

/// The ZooKeeper connect string for tests, starting a local server if none serves.
pub fn zk_connect() -> String {
    static CONNECT: OnceLock<String> = OnceLock::new();
    CONNECT
        .get_or_init(|| {
            let connect =
                std::env::var("ARCHIVIST_TEST_ZK").unwrap_or_else(|_| "127.0.0.1:2181".into());
            let first = connect.split(',').next().unwrap_or_default().to_string();
            if !serving(&first) {
                let port = first.rsplit(':').next().unwrap_or("2181").to_string();
                let status = Command::new("bash")
                    .arg(repo_root().join("scripts/zk.sh"))
                    .arg("start")
                    .env("ZK_PORT", port)
                    .status()
                    .expect("run scripts/zk.sh start");
                assert!(status.success(), "scripts/zk.sh start failed");
            }
            prune_stale_trees_once(&first);
            connect
        })
        .clone()
}

/// Digest credentials the access-control tests give their trees; the pruner authenticates
/// with them so it can delete those trees too.
pub const ACL_TEST_CREDENTIALS: &str = "archivist:s3cret";

/// Test and benchmark trees older than this are deleted by [`prune_stale_trees`]: no
/// test or benchmark runs that long, and a shared development server otherwise collects
/// every run's trees (a million nodes slow every write down: snapshots grow with them).
pub const STALE_TREE_AGE: Duration = Duration::from_secs(3600);

/// Deletes the children of `/test` created more than [`STALE_TREE_AGE`] ago, once per
/// process (on a thread of its own, so a test's runtime is not blocked inside an async
/// context). Errors are ignored: another process may be pruning the same trees.
fn prune_stale_trees_once(connect: &str) {
    static PRUNED: OnceLock<()> = OnceLock::new();
    PRUNED.get_or_init(|| {
        let connect = connect.to_string();
        let pruner = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Err(e) = open_test_root(&connect, TEST_ROOT).await {
                    eprintln!("opening {TEST_ROOT} to every test: {e}");
                }
                if let Err(e) = prune_stale_trees(&connect, TEST_ROOT, STALE_TREE_AGE).await {
                    eprintln!("pruning old test trees: {e}");
                }
            });
        });
        let _ = pruner.join();
    });
}

/// The parent of every test's chroot ([`unique_chroot`]).
pub const TEST_ROOT: &str = "/test";

/// Makes `root` exist with an ACL open to anyone (and opens it if it is not). A session
/// creates the missing parents of its chroot with its own ACLs, so on a fresh server the
/// first test to run decided `/test`'s: when that was an access-control test (digest
/// credentials), every other test's chroot creation failed with `NoAuth`. The access
/// tests' credentials are given so a root they closed can be opened again.
pub async fn open_test_root(connect: &str, root: &str) -> Result<(), archivist_engine::zk::Error> {
    use archivist_engine::zk;
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_auth("digest", ACL_TEST_CREDENTIALS.as_bytes())
        .connect(connect)
        .await?;
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match client.create(root, b"", &open).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => return Err(e),
    }
    let (acl, _) = client.get_acl(root).await?;
    if acl.as_slice() != &*zk::Acls::anyone_all() {
        client.set_acl(root, &zk::Acls::anyone_all(), None).await?;
    }
    Ok(())
}

/// Deletes the children of `parent` whose node was created more than `age` ago, with
/// their whole subtrees. Returns how many trees went.
pub async fn prune_stale_trees(
    connect: &str,
    parent: &str,
    age: Duration,
) -> Result<usize, archivist_engine::zk::Error> {
    use archivist_engine::zk;
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_auth("digest", ACL_TEST_CREDENTIALS.as_bytes())
        .connect(connect)
        .await?;
    let names = match client.get_children(parent).await {
        Ok((names, _)) => names,
        Err(zk::Error::NoNode) => return Ok(0),
        Err(e) => return Err(e),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut pruned = 0;
    for name in names {
        let path = format!("{parent}/{name}");
        let Ok(Some(stat)) = client.check_stat(&path).await else {
            continue;
        };
        if now_ms - stat.ctime > age.as_millis() as i64 {
            delete_tree(&client, &path).await?;
            pruned += 1;
        }
    }
    Ok(pruned)
}

/// Deletes `root` and everything under it: lists level by level, then deletes deepest
/// first with many requests in flight at once. Nodes that vanish meanwhile are fine.
pub async fn delete_tree(
    client: &archivist_engine::zk::Client,
    root: &str,
) -> Result<(), archivist_engine::zk::Error> {
    use archivist_engine::zk;
    let mut levels: Vec<Vec<String>> = vec![vec![root.to_string()]];
    while let Some(last) = levels.last() {
        let mut next = Vec::new();
        for chunk in last.chunks(512) {
            let listed: Vec<_> = chunk.iter().map(|p| client.get_children(p)).collect();
            for (parent, result) in chunk.iter().zip(listed) {
                match result.await {
                    Ok((names, _)) => {
                        let base = if parent == "/" { "" } else { parent.as_str() };
                        next.extend(names.into_iter().map(|n| format!("{base}/{n}")));
                    }
                    Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if next.is_empty() {
            break;
        }
        levels.push(next);
    }
    for level in levels.iter().rev() {
        for chunk in level.chunks(512) {
            let deletes: Vec<_> = chunk.iter().map(|p| client.delete(p, None)).collect();
            for result in deletes {
                match result.await {
                    Ok(()) | Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(())
}

/// Runs `work` to its end on a runtime of its own thread, from code that cannot await
/// (synchronous tests of the binary), and works inside a test's runtime too.
pub fn block_on_thread<F>(work: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(work)
    })
    .join()
    .expect("the worker thread")
}

/// A unique chroot for one test.
pub fn unique_chroot(name: &str) -> String {
    format!(
        "{TEST_ROOT}/{name}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// A config for a fresh chroot with a short session timeout.
pub fn config(name: &str) -> ZkConfig {
    ZkConfig::new(zk_connect())
        .with_chroot(unique_chroot(name))
        .with_session_timeout(Duration::from_secs(4))
}

/// Connects to a fresh chroot and creates the tree.
pub async fn fresh_tree(name: &str) -> (ZkConfig, Session) {
    let config = config(name);
    let session = Session::connect(&config)
        .await
        .expect("connect to test ZooKeeper");
    archivist_engine::tree::init(&session, "test")
        .await
        .expect("init tree");
    (config, session)
}

/// Another session on the same tree.
pub async fn another_session(config: &ZkConfig) -> Session {
    Session::connect(config)
        .await
        .expect("connect to test ZooKeeper")
}

/// Polls `check` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates or overwrites a persistent node with `data` (with the session's ACLs): test
/// setup that writes a record the daemons would have written (a lease, a catalog record).
///
/// # Panics
/// If ZooKeeper refuses either.
pub async fn write_node(session: &Session, path: &str, data: &[u8]) {
    use archivist_engine::zk;
    let options = session.create_options(zk::CreateMode::Persistent);
    match session.client().create(path, data, &options).await {
        Ok(_) => {}
        Err(zk::Error::NodeExists) => {
            session
                .client()
                .set_data(path, data, None)
                .await
                .unwrap_or_else(|e| panic!("set {path}: {e}"));
        }
        Err(e) => panic!("create {path}: {e}"),
    }
}

/// Whether `job`'s lock node exists (someone holds the job). One copy for every crate's
/// tests ("lock released" was written out in sixteen places).
///
/// # Panics
/// If ZooKeeper cannot be asked.
pub async fn locked(session: &Session, job: &str) -> bool {
    let path = archivist_engine::schema::paths::job_lock(job);
    archivist_engine::store::exists(session, &path)
        .await
        .unwrap_or_else(|e| panic!("stat {path}: {e}"))
        .is_some()
}

/// Runs `probe` every `every` until `done` accepts its value or `timeout` passes;
/// returns the last value and whether `done` accepted it. The blocking twin of
/// [`eventually`], for tests that drive the `archivist` binary and wait for what it
/// reports (they each wrote the deadline loop out).
pub fn poll_until<T>(
    timeout: Duration,
    every: Duration,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> (T, bool) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let value = probe();
        if done(&value) {
            return (value, true);
        }
        if std::time::Instant::now() >= deadline {
            return (value, false);
        }
        std::thread::sleep(every);
    }
}

/// Every state queue holding an entry for `job`, in the state table's order: a sound tree
/// has exactly one, the queue of the job's status. One copy for every crate's tests (it
/// was written out in the engine's, the recorder's and the admin's).
///
/// # Panics
/// If a queue cannot be listed.
pub async fn queues_holding(
    session: &Session,
    job: &str,
) -> Vec<archivist_engine::schema::JobState> {
    use archivist_engine::schema::JobState;
    let mut found = Vec::new();
    for state in JobState::ALL {
        let (entries, _) = archivist_engine::queue::list(session, state)
            .await
            .expect("list a queue");
        if entries.iter().any(|e| e.job == job) {
            found.push(state);
        }
    }
    found
}

/// Moves a freshly created `pending` job straight into `state`: record and queue entry
/// in one multi. Test setup only: it bypasses the state table, to start a test from a
/// state the daemons would take several steps to reach.
///
/// # Panics
/// If the job is not in `pending` or the multi fails.
pub async fn place_job(
    session: &Session,
    job: archivist_engine::schema::records::JobRecord,
    state: archivist_engine::schema::JobState,
) -> archivist_engine::schema::records::JobRecord {
    use archivist_engine::ops::{self, Mode, Op};
    use archivist_engine::schema::{paths, JobState};
    use archivist_engine::{jobs, store};
    if state == JobState::Pending {
        return job;
    }
    let (current, version) = jobs::read(session, &job.id).await.expect("read job");
    assert_eq!(
        current.status,
        JobState::Pending,
        "place_job moves pending jobs"
    );
    let mut next = current;
    next.status = state;
    let path = paths::job(&job.id);
    let entry = job.queue_entry().name();
    ops::commit(
        session,
        &[
            Op::SetData {
                data: store::encode(&path, &next).expect("encode job"),
                path,
                version: Some(version),
            },
            Op::Delete {
                path: paths::queue_entry(JobState::Pending, &entry),
                version: None,
            },
            Op::Create {
                path: paths::queue_entry(state, &entry),
                data: vec![],
                mode: Mode::Persistent,
            },
        ],
    )
    .await
    .expect("place job");
    next
}

/// A benchmark or long-test knob from the environment, or `default` when unset or
/// unparsable (`BENCH_JOBS=500 cargo bench ...`).
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The 1, 5 and 15 minute load averages, printed next to every benchmark figure (on a
/// shared 2-core machine a figure means little without them).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A comma-separated list knob (`BENCH_E2E_RESEARCHERS=1,2,4`), or `default` parsed the
/// same way when unset; unparsable items are left out.
pub fn env_list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect()
}
