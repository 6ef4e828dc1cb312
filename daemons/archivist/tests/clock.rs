//! Record stamps follow ZooKeeper's clock, not each host's (outside 17i G9: with a
//! recorder two days behind and a researcher a year ahead, a job's events were listed out
//! of order and its `updated` came before its `created`). A command run on a host whose
//! clock is two days ahead (libfaketime) stamps what it writes within seconds of the
//! real time.

mod support;

use std::process::Command;

use support::Env;

/// Unix milliseconds now, on this (true) clock.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// The `initial_curated` stamp of the only episode in the database at `url`.
fn curated_ms(url: &str) -> i64 {
    let url = url.to_string();
    archivist_testkit::block_on_thread(async move {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&url).await.expect("connect");
        let (ms,): (i64,) = sqlx::query_as("SELECT initial_curated FROM episodes")
            .fetch_one(&mut conn)
            .await
            .expect("the episode");
        conn.close().await.expect("close");
        ms
    })
}

#[test]
fn a_host_two_days_ahead_stamps_records_by_zookeepers_clock() {
    if Command::new("faketime").arg("--version").output().is_err() {
        panic!("faketime is missing: scripts/deps.sh installs it");
    }
    let env = Env::fresh("clock-skew");
    env.ok(&["init"]);
    let dir = support::scratch("clock-skew");
    let manifest = dir.join("manifest.yml");
    std::fs::write(
        &manifest,
        "episodes:\n  - url: http://127.0.0.1:1/one.mp3\n    title: One\n",
    )
    .unwrap();
    let curate = env.command(&["curate", "manifest", manifest.to_str().unwrap()]);
    let program = curate.get_program().to_owned();
    let args: Vec<_> = curate.get_args().map(|a| a.to_owned()).collect();
    let mut skewed = Command::new("faketime");
    skewed.arg("-f").arg("+2d").arg(program).args(args);
    for (name, value) in curate.get_envs() {
        match value {
            Some(value) => skewed.env(name, value),
            None => skewed.env_remove(name),
        };
    }
    let before = now_ms();
    let out = skewed.output().expect("run under faketime");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stamped = curated_ms(&env.database);
    let two_days = 2 * 24 * 3_600_000;
    assert!(
        (stamped - before).abs() < 60_000,
        "stamped {} ms from the true time (the host's clock is {two_days} ms ahead)",
        stamped - before
    );
    drop(curate);
}
