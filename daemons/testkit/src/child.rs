//! Test-only daemons as child processes of the test binary itself.
//!
//! Some tests need a second process (to SIGKILL it mid-step, or to run several
//! consumers at once). Shipping those helpers as `src/bin` binaries made them part of
//! the production crates (built by `cargo build`, installed by `cargo install`). Instead
//! each helper is an `#[ignore]`d test of the crate's own test binary, and
//! [`child_process`] re-runs that binary with libtest told to run only that test; the
//! helper reads its arguments with [`child_args`]. A normal `cargo test` lists the helper
//! as ignored; `--include-ignored` runs it as a no-op (no child marker in the
//! environment).
//!
//! ```ignore
//! #[test]
//! #[ignore = "a child process of other tests (archivist_testkit::child_process)"]
//! fn my_daemon() {
//!     archivist_testkit::run_child("my_daemon", "my-daemon", run);
//! }
//! async fn run(args: Vec<String>) { /* args[0] is "my-daemon", then the arguments */ }
//!
//! let child = archivist_testkit::child_process("my_daemon").args(["a", "b"]).spawn();
//! ```

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::Duration;

use archivist_engine::{Session, ZkConfig};
use tokio_util::sync::CancellationToken;

/// The environment variable naming the helper test a child process runs.
const CHILD_VAR: &str = "ARCHIVIST_TEST_CHILD";

/// The argument after which a child's own arguments start (libtest stops reading
/// options there and takes the rest as name filters, which match no test exactly).
const ARGS_MARK: &str = "--";

/// A command that runs this test binary as a child running only the ignored helper
/// test `test` (its full path in the binary, e.g. `child::engine_test_consumer`).
/// Arguments added with `.arg`/`.args` reach the helper through [`child_args`]; the
/// helper's stdout is the child's stdout (libtest adds a `running 1 test` line and
/// a result line when the helper returns).
pub fn child_process(test: &str) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("this test binary's path: {e}"));
    let mut cmd = Command::new(exe);
    cmd.args([
        "--ignored",
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "--quiet",
        test,
        ARGS_MARK,
    ])
    .env(CHILD_VAR, test);
    cmd
}

/// [`child_process`] for a helper that works on the tree of `config`: its first two
/// arguments are the connect string and the chroot (read back by [`child_config`]), the
/// helper's own arguments follow.
pub fn child_on(test: &str, config: &ZkConfig) -> Command {
    let (hosts, chroot) = config.hosts_and_chroot();
    let mut cmd = child_process(test);
    cmd.args([hosts, chroot]);
    cmd
}

/// In a child started by [`child_on`]: the config its parent's tree is at (`args[1]` the
/// connect string, `args[2]` the chroot), with `session_timeout`.
pub fn child_config(args: &[String], session_timeout: Duration) -> ZkConfig {
    ZkConfig::new(&args[1])
        .with_chroot(&args[2])
        .with_session_timeout(session_timeout)
}

/// In a child: a session on `config`, or exit with status 1 and the error (a child has
/// nobody to return an error to).
pub async fn child_session(config: &ZkConfig) -> Session {
    match Session::connect(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}

/// In a child: a token cancelled on SIGTERM or SIGINT, so the daemon under test stops
/// as it does in production when its parent stops it.
pub fn shutdown_on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    let fire = shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        } else {
            let _ = tokio::signal::ctrl_c().await;
        }
        fire.cancel();
    });
    shutdown
}

/// The lines a child writes to its piped stdout, as they come, read on a thread of their
/// own (so a test can wait for one with a deadline: `recv_timeout`). The thread reads to
/// the end even when the receiver is gone, so the child never blocks on a full pipe or
/// dies of a closed one. Takes the child's stdout; panics if it was not piped.
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The helper's arguments when this process was started by [`child_process`] for
/// `test`, `None` in a normal test run (the helper then returns at once).
pub fn child_args(test: &str) -> Option<Vec<String>> {
    let wanted = std::env::var(CHILD_VAR).ok()?;
    if !(wanted == test || wanted.ends_with(&format!("::{test}"))) {
        return None;
    }
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == ARGS_MARK)?;
    Some(args[at + 1..].to_vec())
}

/// The body of a child helper test: when this process was started by [`child_process`]
/// for `test`, runs `main` on a multi-threaded runtime with the arguments prefixed by
/// `program` (so `args[1]` is the first argument, as in a `main`); otherwise returns at
/// once (a normal test run).
pub fn run_child<F, Fut>(test: &str, program: &str, main: F)
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(args) = child_args(test) else {
        return;
    };
    let args: Vec<String> = std::iter::once(program.to_string()).chain(args).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{program}: no runtime: {e}"));
    runtime.block_on(main(args));
}

/// Exits with status 2 and `usage` unless a child got `count` arguments (its program name
/// included, as `run_child` passes them).
pub fn expect_args(args: &[String], count: usize, usage: &str) {
    if args.len() != count {
        eprintln!("usage: {usage}");
        std::process::exit(2);
    }
}

/// A child's argument `i` as a number; exits with status 2 naming it otherwise.
pub fn number_arg(args: &[String], i: usize) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("argument {i} must be a number");
        std::process::exit(2)
    })
}
