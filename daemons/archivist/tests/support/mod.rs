//! Running the `archivist` binary in tests: child processes that are stopped when the
//! test ends, a fresh chroot per test, and a scratch directory.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_archivist")
}

/// A scratch directory under the repo's ignored `.local/`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = archivist_testkit::repo_root()
        .join(".local/test-scratch")
        .join(format!("{name}-{}-{:08x}", std::process::id(), rand_u32()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn rand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ (std::process::id() << 8)
}

/// The environment that points the binary at a test chroot.
#[derive(Clone)]
pub struct Env {
    /// Connect string.
    pub zk: String,
    /// Chroot.
    pub chroot: String,
    /// The database (a fresh one per environment; `ARCHIVIST_TEST_DB_BACKEND=postgres`
    /// for PostgreSQL).
    pub database: String,
    /// More variables, after the defaults (`None` removes one: `ARCHIVIST_SESSION_TIMEOUT_MS`
    /// for the built-in default).
    pub extra: Vec<(String, Option<String>)>,
}

impl Env {
    /// A fresh chroot on the test ZooKeeper.
    pub fn fresh(name: &str) -> Env {
        Env {
            zk: archivist_testkit::zk_connect(),
            chroot: archivist_testkit::unique_chroot(name),
            database: archivist_testkit::db::fresh_binary_database_url(name),
            extra: Vec::new(),
        }
    }

    /// The researcher's media store directory of this environment (named after its
    /// chroot, which is unique).
    pub fn media_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!(
            "archivist-test-media{}",
            self.chroot.replace('/', "-")
        ))
    }

    /// A command for the binary with this environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .env("ARCHIVIST_ZK", &self.zk)
            .env("ARCHIVIST_CHROOT", &self.chroot)
            .env("ARCHIVIST_DATABASE_URL", &self.database)
            .env("ARCHIVIST_SESSION_TIMEOUT_MS", "4000")
            // The researcher's media store, one per environment like its database (the
            // default, `<data dir>/media`, would be shared by every test of the machine).
            .env("ARCHIVIST__RESEARCHER__MEDIA__DIR", self.media_dir())
            .env("RUST_LOG", "info,zookeeper_client=warn");
        for (name, value) in &self.extra {
            match value {
                Some(value) => c.env(name, value),
                None => c.env_remove(name),
            };
        }
        c
    }

    /// Runs a command to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run archivist")
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "archivist {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts a long-running command; it is killed when the handle drops.
    pub fn spawn(&self, args: &[&str], log: &std::path::Path) -> Daemon {
        let file = std::fs::File::create(log).expect("log file");
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .expect("spawn archivist");
        Daemon { child: Some(child) }
    }
}

/// A child process, killed (SIGKILL) on drop unless stopped first.
pub struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Reads stdout lines until one matches; returns it.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let lines = archivist_testkit::stdout_lines(self.child.as_mut().expect("a running child"));
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(left).expect("expected line on stdout");
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Whether the process is still running (it has not exited, for any reason).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits up to `timeout` for the process to exit by itself; its status, or `None`
    /// if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Sends a signal.
    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status();
    }

    /// SIGTERM, then waits up to `timeout` for the exit; returns whether it exited.
    pub fn stop(mut self, timeout: Duration) -> bool {
        self.signal("TERM");
        let started = Instant::now();
        if let Some(child) = self.child.as_mut() {
            while started.elapsed() < timeout {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `archivist serve-files DIR` and returns it with its base URL.
pub fn serve_files(env: &Env, dir: &std::path::Path, extra: &[&str]) -> (Daemon, String) {
    let mut args = vec![
        "serve-files",
        dir.to_str().expect("utf-8 path"),
        "--addr",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let mut daemon = env.spawn(&args, &dir.with_extension("files.log"));
    let line = daemon.wait_for_line("serving ", Duration::from_secs(20));
    let url = line
        .rsplit(' ')
        .next()
        .expect("url")
        .trim_end_matches('/')
        .to_string();
    (daemon, url)
}

/// A config file with short timings for tests.
pub fn fast_config(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("archivist.yml");
    std::fs::write(
        &path,
        format!(
            "planner:\n  tick_ms: 500\n  lease_duration_ms: 60000\n  work_item_ttl_ms: 30000\nrecorder:\n  poll_ms: 300\nreaper:\n  interval_ms: 1000\n  work_item_ttl_ms: 30000\nresearcher:\n  concurrency: 2\n  work_dir: {}\n",
            dir.join("work").display()
        ),
    )
    .expect("write config");
    path
}

/// A plain HTTP/1.0 GET on loopback: (status, body), or None if nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// Parses Prometheus text exposition: every sample line is `name{labels} value`.
/// Returns (series with its labels, value); panics on a malformed line.
pub fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = series.split('{').next().unwrap_or_default();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        samples.push((series.to_string(), value));
    }
    samples
}

/// A free loopback port (bound and released; good enough for a test's daemon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `archivist sample generate MEDIA --base-url BASE --episodes N --minutes M [extra..]`.
pub fn generate_sample(
    env: &Env,
    media: &std::path::Path,
    base: &str,
    episodes: usize,
    minutes: &str,
    extra: &[&str],
) {
    let episodes = episodes.to_string();
    let mut args = vec![
        "sample",
        "generate",
        media.to_str().expect("utf-8 path"),
        "--base-url",
        base,
        "--episodes",
        &episodes,
        "--minutes",
        minutes,
    ];
    args.extend_from_slice(extra);
    env.ok(&args);
}

/// `archivist sample check MEDIA --wait-s 300 -o json`: one row per (episode, clip) with
/// its verdict. Panics with the command's stderr and where the logs are if it printed
/// no JSON.
pub fn sample_check(
    env: &Env,
    media: &std::path::Path,
    logs: &std::path::Path,
) -> (Vec<serde_json::Value>, Output) {
    let out = env.run(&[
        "sample",
        "check",
        media.to_str().expect("utf-8 path"),
        "--wait-s",
        "300",
        "--output",
        "json",
    ]);
    let rows = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "sample check printed no JSON ({e}): {}; logs in {}",
            String::from_utf8_lossy(&out.stderr),
            logs.display()
        )
    });
    (rows, out)
}

/// A scratch directory `name` with a `media/` folder served over HTTP on loopback (for
/// sample episodes). Returns (scratch dir, media dir, the file server, its base URL).
pub fn served_media(env: &Env, name: &str) -> (PathBuf, PathBuf, Daemon, String) {
    served_media_with(env, name, &[])
}

/// [`served_media`] with more flags for `serve-files` (`extra`).
pub fn served_media_with(
    env: &Env,
    name: &str,
    extra: &[&str],
) -> (PathBuf, PathBuf, Daemon, String) {
    let dir = scratch(name);
    let media = dir.join("media");
    std::fs::create_dir_all(&media).expect("media dir");
    let (files, base) = serve_files(env, &media, extra);
    (dir, media, files, base)
}

/// The benchmarks' coordinators on `env`: a planner (500 ms tick, 10-minute leases,
/// 5-minute work items; `planner_extra` are more of its flags), a recorder and a reaper,
/// each logging into `logs`.
pub fn start_coordinators(
    env: &Env,
    logs: &std::path::Path,
    planner_extra: &[&str],
) -> Vec<Daemon> {
    let mut planner = vec![
        "planner",
        "--tick-ms",
        "500",
        "--lease-duration-ms",
        "600000",
        "--work-item-ttl-ms",
        "300000",
    ];
    planner.extend_from_slice(planner_extra);
    vec![
        env.spawn(&planner, &logs.join("planner.log")),
        env.spawn(
            &["recorder", "--poll-ms", "300"],
            &logs.join("recorder.log"),
        ),
        env.spawn(
            &["reaper", "--reaper-interval-ms", "2000"],
            &logs.join("reaper.log"),
        ),
    ]
}

/// A researcher named `name` running `concurrency` jobs, its work directory and log in
/// `logs`, polling every 500 ms; `extra` are more of its flags.
pub fn spawn_researcher(
    env: &Env,
    logs: &std::path::Path,
    name: &str,
    concurrency: usize,
    extra: &[&str],
) -> Daemon {
    let work = logs.join(format!("work-{name}"));
    let concurrency = concurrency.to_string();
    let mut args = vec![
        "researcher",
        "--name",
        name,
        "--concurrency",
        &concurrency,
        "--work-dir",
        work.to_str().expect("utf-8 path"),
        "--poll-ms",
        "500",
    ];
    args.extend_from_slice(extra);
    env.spawn(&args, &logs.join(format!("{name}.log")))
}

/// `archivist sample check`'s verdict for a benchmark's table: "all pairs as expected",
/// or "CHECK FAILED: " and the last line it printed.
pub fn check_verdict(check: &Output) -> String {
    if check.status.success() {
        return "all pairs as expected".to_string();
    }
    let out = String::from_utf8_lossy(&check.stdout);
    let err = String::from_utf8_lossy(&check.stderr);
    format!(
        "CHECK FAILED: {}",
        out.lines().chain(err.lines()).last().unwrap_or("no output")
    )
}

/// Every sample of `GET /metrics` on `port`.
pub fn scrape(port: u16) -> Vec<(String, f64)> {
    let (status, body) = http_get(port, "/metrics").expect("the metrics endpoint answers");
    assert_eq!(status, 200, "GET /metrics on port {port}: {body}");
    parse_metrics(&body)
}

/// The value of one series (`name` or `name{label="value"}`, exactly as the exporter
/// writes it) among `samples`; 0 when it has none yet.
pub fn series(samples: &[(String, f64)], name: &str) -> f64 {
    samples
        .iter()
        .filter(|(s, _)| s == name)
        .map(|(_, v)| v)
        .sum()
}

/// A benchmark's sample catalog: `archivist sample generate` (`episodes` of `minutes`,
/// `generate_extra` flags) into a scratch directory `name` served by `serve-files`
/// (`serve_extra` flags). Returns the environment the file server runs with (no chroot
/// of its own), the scratch dir, the media dir, the file server and its base URL.
pub fn bench_sample(
    name: &str,
    episodes: usize,
    minutes: f64,
    serve_extra: &[&str],
    generate_extra: &[&str],
) -> (Env, PathBuf, PathBuf, Daemon, String) {
    let env = Env {
        zk: archivist_testkit::zk_connect(),
        chroot: "/unused".into(),
        database: archivist_testkit::db::fresh_binary_database_url("bench"),
        extra: Vec::new(),
    };
    let (dir, media, files, base) = served_media_with(&env, name, serve_extra);
    generate_sample(
        &env,
        &media,
        &base,
        episodes,
        &minutes.to_string(),
        generate_extra,
    );
    (env, dir, media, files, base)
}
