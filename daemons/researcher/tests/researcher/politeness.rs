//! Politeness (issue 23): one researcher process keeps to a per-host concurrency and
//! request rate whatever its number of jobs, and names itself in `User-Agent`. Two real
//! loopback servers on two addresses (127.0.0.1 and 127.0.0.2) are two hosts.

use std::time::{Duration, Instant};

use archivist_researcher::download::Downloader;
use archivist_researcher::settings::{DownloadSettings, DEFAULT_USER_AGENT};
use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::http::{Route, Server};
use crate::support::{audio, work_dir};

/// Downloads `per_host` episodes from each server at once through one downloader (as
/// the jobs of one process share it); the time they took.
async fn fetch_all(downloader: &Downloader, servers: &[&Server], per_host: usize) -> Duration {
    let dir = work_dir("politeness");
    let never = CancellationToken::new();
    let started = Instant::now();
    let mut fetches = Vec::new();
    for (s, server) in servers.iter().enumerate() {
        for i in 0..per_host {
            let url = format!("{}/episode.wav", server.base);
            let dest = dir.join(format!("{s}-{i}.wav"));
            let (d, never) = (downloader.clone(), never.clone());
            fetches.push(async move { d.fetch(&url, &dest, &never, &|_, _| {}).await });
        }
    }
    for result in join_all(fetches).await {
        result.expect("every download works");
    }
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    took
}

#[tokio::test]
async fn at_most_the_per_host_concurrency_is_in_flight_per_host_and_hosts_do_not_wait_for_each_other(
) {
    let episode = &audio().episode;
    let (a, b) = (
        Server::start_on("127.0.0.1").await,
        Server::start_on("127.0.0.2").await,
    );
    let answer = Duration::from_millis(300);
    for server in [&a, &b] {
        server.route("/episode.wav", Route::slow_audio(episode, answer));
    }
    // No rate limit here: only the concurrency is under test.
    let settings = DownloadSettings::default().with_per_host(2, 0.0, 1);
    let downloader = Downloader::new(settings).expect("downloader");
    let took = fetch_all(&downloader, &[&a, &b], 6).await;
    let slack = Duration::from_millis(100);
    for (name, server) in [("127.0.0.1", &a), ("127.0.0.2", &b)] {
        assert_eq!(server.hits("/episode.wav"), 6, "{name}");
        assert_eq!(
            server.most_at_once(slack),
            2,
            "{name}: two requests in flight at most (and two were)"
        );
    }
    // Each host: 6 requests, 2 at a time, 300 ms each = 900 ms; the hosts side by side
    // (one after the other would be 1.8 s).
    assert!(took >= Duration::from_millis(850), "{took:?}");
    assert!(
        took < Duration::from_millis(1700),
        "{took:?}: hosts waited for each other"
    );
}

#[tokio::test]
async fn requests_to_one_host_keep_to_its_rate_and_name_the_project() {
    let episode = &audio().episode;
    let (a, b) = (
        Server::start_on("127.0.0.1").await,
        Server::start_on("127.0.0.2").await,
    );
    for server in [&a, &b] {
        server.route("/episode.wav", Route::audio(episode));
    }
    // 5 requests a second per host, no burst, many in flight allowed.
    let settings = DownloadSettings::default().with_per_host(16, 5.0, 1);
    let downloader = Downloader::new(settings).expect("downloader");
    fetch_all(&downloader, &[&a, &b], 5).await;
    for (name, server) in [("127.0.0.1", &a), ("127.0.0.2", &b)] {
        let arrivals = server.arrivals();
        assert_eq!(arrivals.len(), 5, "{name}");
        for pair in arrivals.windows(2) {
            let gap = pair[1] - pair[0];
            // 200 ms apart; the limiter's clock and the server's differ by a little.
            assert!(gap >= Duration::from_millis(180), "{name}: {gap:?} apart");
        }
        for agent in server.agents() {
            assert_eq!(agent.as_deref(), Some(DEFAULT_USER_AGENT), "{name}");
        }
    }
    assert!(DEFAULT_USER_AGENT.starts_with(concat!("archivist/", env!("CARGO_PKG_VERSION"))));
    // The hosts are limited each on its own: their first requests came together.
    let (first_a, first_b) = (a.arrivals()[0], b.arrivals()[0]);
    let apart = first_a.max(first_b) - first_a.min(first_b);
    assert!(apart < Duration::from_millis(150), "{apart:?}");
}

#[tokio::test]
async fn the_user_agent_is_configurable() {
    let server = Server::start().await;
    server.route("/episode.wav", Route::audio(&audio().episode));
    let settings = DownloadSettings::default().with_user_agent("archivist/test (+ops@example.org)");
    let downloader = Downloader::new(settings).expect("downloader");
    fetch_all(&downloader, &[&server], 1).await;
    assert_eq!(
        server.agents(),
        vec![Some("archivist/test (+ops@example.org)".to_string())]
    );
}
