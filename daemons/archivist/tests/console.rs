//! The web console driven in a real headless browser (Debian's `chromium` through
//! `chromedriver`, WebDriver via `fantoccini`) against a real pipeline run: generated
//! episodes served over HTTP on loopback, researched by every daemon, one episode whose
//! media is missing so one job fails. The test loads each page, applies a jobs filter
//! with the form, opens the failed job and reads its exact message, clicks a timeline
//! mark and checks the player's current time is the mark's offset, follows a clip to
//! the episodes it occurs in, sees a page refresh itself, checks that actions are
//! refused (the job stays failed), that a page whose refresh fails says it is stale,
//! and, on a console with an actions token, signs in and retries every failed job on a
//! filter (the count shown before confirming) and sees them go to pending.

mod support;

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use support::{
    fast_config, free_port, generate_sample, http_get, sample_check, scratch, serve_files, Env,
};

/// `chromedriver` on a free loopback port, killed when dropped.
struct Driver {
    child: std::process::Child,
    port: u16,
}

impl Driver {
    fn start(log: &Path) -> Driver {
        let port = free_port();
        // Its own process group, which the browsers it starts join: a test that fails
        // before closing its session leaves no Chromium behind (see Drop).
        let child = Command::new("chromedriver")
            .process_group(0)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/deps.sh installs chromium-driver)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the browsers it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session. `--no-sandbox` because tests run as root here (never
/// outside tests); muted, and allowed to play without a gesture.
async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--mute-audio", "--autoplay-policy=no-user-gesture-required"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session with chromium")
}

/// Runs `script` in the page until `done` holds for its value (or panics after `wait`).
async fn poll_js(
    client: &Client,
    script: &str,
    wait: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + wait;
    loop {
        let value = client.execute(script, vec![]).await.expect("script");
        if done(&value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{script} never held: last {value}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Clicks the element `css` selects.
async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Types `keys` into the element `css` selects.
async fn type_into(client: &Client, css: &str, keys: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .send_keys(keys)
        .await
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
}

async fn text(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .text()
        .await
        .expect("text")
}

fn json_of(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&env.ok(&all)).expect("JSON output")
}

#[test]
fn the_console_shows_the_run_plays_from_a_mark_and_refuses_actions_in_a_browser() {
    let mut env = Env::fresh("console");
    let dir = scratch("console");
    // Its own data directory: nothing of the machine's user is read or written.
    env.extra.push((
        "XDG_DATA_HOME".into(),
        Some(dir.join("data").display().to_string()),
    ));
    let media = dir.join("media");
    std::fs::create_dir_all(&media).expect("media dir");
    let (_files, base) = serve_files(&env, &media, &[]);
    generate_sample(&env, &media, &base, 2, "1.5", &[]);
    env.ok(&["init"]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    // An episode whose media is missing: its job fails with a message.
    let bad = dir.join("bad.yml");
    std::fs::write(
        &bad,
        format!("episodes:\n  - url: {base}/missing.mp3\n    title: Gone\n"),
    )
    .expect("bad manifest");
    env.ok(&["curate", "manifest", bad.to_str().unwrap()]);
    let config = fast_config(&dir);
    let daemons = env.spawn(
        &["--config", config.to_str().unwrap(), "run", "--all"],
        &dir.join("daemons.log"),
    );
    let (rows, _) = sample_check(&env, &media, &dir.join("daemons.log"));
    assert!(
        rows.iter().all(|r| r["verdict"] == "ok"),
        "sample not as expected: {rows:#?}"
    );
    let (failed, _) = archivist_testkit::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || json_of(&env, &["jobs", "list", "--state", "failed"])["jobs"].clone(),
        |jobs| jobs.as_array().is_some_and(|a| !a.is_empty()),
    );
    // Nothing moves from here on: what the pages show is what the CLI shows.
    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop"
    );
    let failed_job = failed[0]["id"].as_str().expect("failed job id").to_string();
    let message = failed[0]["message"]
        .as_str()
        .expect("failure message")
        .to_string();
    let all_jobs: Vec<String> = json_of(&env, &["jobs", "list"])["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["id"].as_str().map(str::to_string))
        .collect();
    assert!(
        all_jobs.len() > 2,
        "the run made several jobs: {all_jobs:?}"
    );

    // The console, refreshing every second, each overview built afresh.
    let console_config = dir.join("console.yml");
    std::fs::write(
        &console_config,
        "console:\n  refresh_s: 1\n  overview_cache_s: 0\n  page_size: 2\n",
    )
    .expect("console config");
    let mut console = env.spawn(
        &[
            "--config",
            console_config.to_str().unwrap(),
            "console",
            "--addr",
            "127.0.0.1:0",
        ],
        &dir.join("console.log"),
    );
    let line = console.wait_for_line("console at ", Duration::from_secs(30));
    let url = line
        .split_whitespace()
        .nth(2)
        .expect("the console's URL")
        .trim_end_matches('/')
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");

    let driver = Driver::start(&dir.join("chromedriver.log"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = browser(&driver).await;

        // Overview: jobs per state, the failure grouped under its reason.
        client.goto(&format!("{url}/")).await.expect("overview");
        assert_eq!(text(&client, "h1").await, "Overview");
        let states = text(&client, "#jobs-per-state").await;
        assert!(states.contains("recorded") && states.contains("failed"), "{states}");
        let failures = text(&client, "#failures").await;
        assert!(failures.contains(message.trim()), "{failures} lacks {message}");
        assert!(text(&client, "#research").await.contains("pairs researched"));
        // The overview refreshes itself: its live block is replaced within seconds.
        client
            .execute("document.getElementById('overview').dataset.stale = 'yes'; return 1", vec![])
            .await
            .expect("mark the block");
        poll_js(
            &client,
            "return document.getElementById('overview').dataset.stale || 'fresh'",
            Duration::from_secs(10),
            |v| v == "fresh",
        )
        .await;

        // Jobs: the filter form, by state and reason text.
        client.goto(&format!("{url}/jobs")).await.expect("jobs");
        let rows_js = "return Array.from(document.querySelectorAll('#jobs tr.job'))\
                       .map(r => r.cells[0].innerText + ' ' + r.dataset.state)";
        // Two jobs a page (page_size: 2): "Next page" until the last, every job once.
        let ids_js = "return Array.from(document.querySelectorAll('#jobs tr.job')).map(r => r.cells[0].innerText)";
        let mut paged: Vec<String> = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let ids = client.execute(ids_js, vec![]).await.expect("rows");
            let ids = ids.as_array().expect("ids").clone();
            assert!(ids.len() <= 2, "a page of at most 2: {ids:?}");
            paged.extend(ids.iter().filter_map(|v| v.as_str().map(str::to_string)));
            match client.find(Locator::Css("#next")).await {
                Ok(next) => click_and_wait(&client, next).await,
                Err(_) => break,
            }
            assert!(pages < 20, "paging does not end");
        }
        assert_eq!(paged, all_jobs, "every job once, in id order, over {pages} pages");
        assert!(pages >= 2);
        client.goto(&format!("{url}/jobs")).await.expect("jobs");
        client
            .find(Locator::Css("select[name=state]"))
            .await
            .expect("state select")
            .select_by_value("failed")
            .await
            .expect("select failed");
        let reason: String = message.chars().skip(2).take(12).collect();
        type_into(&client, "input[name=reason]", &reason.to_uppercase()).await;
        let submit = client
            .find(Locator::Css("#filter button[type=submit]"))
            .await
            .expect("filter button");
        click_and_wait(&client, submit).await;
        let current = client.current_url().await.expect("url");
        assert!(current.as_str().contains("state=failed"), "{current}");
        let filtered = client.execute(rows_js, vec![]).await.expect("rows");
        assert_eq!(filtered, json!([format!("{failed_job} failed")]));
        // A reason no job has: nothing.
        client
            .goto(&format!("{url}/jobs?state=failed&reason=no-such-reason-anywhere"))
            .await
            .expect("jobs");
        assert!(client.find(Locator::Css("#no-jobs")).await.is_ok());

        // The failed job's page: state, the exact message, its history.
        client.goto(&format!("{url}/jobs?state=failed")).await.expect("jobs");
        client
            .find(Locator::LinkText(&failed_job))
            .await
            .expect("the job's link")
            .click()
            .await
            .expect("open the job");
        assert_eq!(text(&client, "#state").await, "failed");
        assert_eq!(text(&client, "#message").await, message.trim());
        let events = client
            .find_all(Locator::Css("#events tr.event"))
            .await
            .expect("events");
        assert!(events.len() >= 2, "{} events", events.len());

        // Read-only: an action is refused, and the job did not move.
        let refused = client
            .execute(
                "return fetch(arguments[0], {method: 'POST'}).then(r => r.text().then(t => [r.status, t]))",
                vec![json!(format!("/jobs/{failed_job}/retry"))],
            )
            .await
            .expect("POST an action");
        assert_eq!(refused[0], 403, "{refused}");
        assert!(refused[1].as_str().unwrap_or("").contains("read-only"), "{refused}");
        let shown = json_of(&env, &["jobs", "show", &failed_job]);
        assert_eq!(shown["job"]["status"], "failed", "{shown}");
        assert_eq!(shown["job"]["retry_count"], failed[0]["retry_count"]);

        // An episode: one mark per occurrence; a click plays from its offset.
        let mut episodes: Vec<String> = json_of(&env, &["jobs", "list", "--state", "recorded"])["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter_map(|j| j["episode"].as_str().map(str::to_string))
            .collect();
        episodes.sort();
        episodes.dedup();
        let (episode, results) = episodes
            .iter()
            .map(|e| (e.clone(), json_of(&env, &["results", "--episode", e])))
            .find(|(_, r)| r["found"].as_u64().unwrap_or(0) > 0)
            .expect("an episode where clips were found");
        let found: Vec<&Value> = results["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .filter(|r| r["found"] == true)
            .collect();
        client.goto(&format!("{url}/episodes/{episode}")).await.expect("episode");
        let marks = client
            .find_all(Locator::Css("#timeline a.mark"))
            .await
            .expect("marks");
        assert_eq!(marks.len(), found.len(), "one mark per occurrence");
        let last = marks.last().expect("a mark");
        let t_attr = last.attr("data-t").await.expect("data-t").expect("a mark's offset");
        let t: f64 = t_attr.parse().expect("a number");
        let at = found
            .iter()
            .filter_map(|r| r["at"].as_f64())
            .fold(f64::NAN, |a, b| if a.is_nan() || b > a { b } else { a });
        assert!((t - at).abs() < 0.001, "the last mark is at {t}, the last occurrence at {at}");
        last.click().await.expect("click the mark");
        let state = poll_js(
            &client,
            "var a = document.getElementById('player'); \
             return [a.readyState, a.seeking, a.currentTime, a.error ? a.error.code : 0, a.currentSrc]",
            Duration::from_secs(20),
            |v| v[0].as_u64().unwrap_or(0) >= 1 && v[1] == false || v[3] != 0,
        )
        .await;
        assert_eq!(state[3], 0, "the player failed: {state}");
        assert!(
            state[4]
                .as_str()
                .unwrap_or("")
                .ends_with(&format!("#t={t_attr}")),
            "{state}"
        );
        let current = state[2].as_f64().expect("currentTime");
        assert!(
            current >= t - 0.01 && current - t < 0.5,
            "the player is at {current} s, the mark at {t} s"
        );

        // The clip of that occurrence: every episode where it occurs.
        let clip = found
            .iter()
            .find(|r| r["at"].as_f64() == Some(at))
            .and_then(|r| r["clip"].as_str())
            .expect("the clip")
            .to_string();
        client.goto(&format!("{url}/clips/{clip}")).await.expect("clip");
        let clip_results = json_of(&env, &["results", "--clip", &clip]);
        let mut expected: Vec<String> = clip_results["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .filter(|r| r["found"] == true)
            .filter_map(|r| r["episode"].as_str().map(str::to_string))
            .collect();
        let shown = client
            .execute(
                "return Array.from(document.querySelectorAll('#occurrences tr.occurrence')).map(r => r.dataset.episode)",
                vec![],
            )
            .await
            .expect("clip rows");
        let mut shown: Vec<String> = shown
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        expected.sort();
        shown.sort();
        assert!(shown.contains(&episode), "{shown:?}");
        assert_eq!(shown, expected);

        // Unknown ids and bad filters are pages saying so, not errors of the server.
        for (path, status) in [
            ("/jobs/j9999999999".to_string(), 404),
            ("/episodes/e999999".to_string(), 404),
            ("/jobs?state=nonsense".to_string(), 400),
        ] {
            let got = client
                .execute(
                    "return fetch(arguments[0]).then(r => r.status)",
                    vec![json!(path)],
                )
                .await
                .expect("fetch");
            assert_eq!(got, status, "{path}");
        }
        // A refresh that fails says so (outside try of #24, F6: failures were dropped
        // and the page looked current): stop the console under an open page.
        client.goto(&format!("{url}/jobs?state=failed")).await.expect("jobs");
        assert!(client.find(Locator::Css("#stale")).await.is_err(), "no banner while it answers");
        assert!(console.is_running(), "the console exited");
        assert!(
            console.stop(Duration::from_secs(10)),
            "the console did not stop on SIGTERM"
        );
        let banner = poll_js(
            &client,
            "var b = document.getElementById('stale'); return b ? b.innerText : ''",
            Duration::from_secs(15),
            |v| v.as_str().is_some_and(|t| !t.is_empty()),
        )
        .await;
        let banner = banner.as_str().unwrap_or("");
        assert!(banner.contains("Not current") && banner.contains("read at 20"), "{banner}");
        // The rows are still there, under the banner.
        assert!(client.find(Locator::Css("#jobs tr.job")).await.is_ok());

        // A console with an actions token: sign in, then retry every failed job on a
        // filter, the count shown before confirming; they go to pending.
        let token = "browser-test-token-0123456789abcdef";
        let actions_config = dir.join("actions.yml");
        std::fs::write(
            &actions_config,
            format!("console:\n  refresh_s: 0\n  actions_token: {token}\n"),
        )
        .expect("actions config");
        // At the default log level (no RUST_LOG): the actions' log lines must be there
        // anyway (outside try 24b, N2: a deleted job keeps no events).
        env.extra.push(("RUST_LOG".into(), None));
        let acting_log = dir.join("console-actions.log");
        let mut acting = env.spawn(
            &["--config", actions_config.to_str().unwrap(), "console", "--addr", "127.0.0.1:0"],
            &acting_log,
        );
        env.extra.pop();
        let line = acting.wait_for_line("console at ", Duration::from_secs(30));
        assert!(line.contains("actions enabled"), "{line}");
        let url = line
            .split_whitespace()
            .nth(2)
            .expect("the console's URL")
            .trim_end_matches('/')
            .to_string();
        let failed_now: Vec<String> = json_of(&env, &["jobs", "list", "--state", "failed"])["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter_map(|j| j["id"].as_str().map(str::to_string))
            .collect();
        assert!(!failed_now.is_empty());
        client.goto(&format!("{url}/login")).await.expect("login");
        type_into(&client, "input[name=name]", "browser").await;
        type_into(&client, "input[name=token]", token).await;
        click(&client, "#login button[type=submit]").await;
        client.wait().for_element(Locator::Css("#overview")).await.expect("signed in");
        client.goto(&format!("{url}/jobs?state=failed")).await.expect("jobs");
        click(&client, "#bulk a.bulk[href*='action=retry']").await;
        let count = client
            .wait()
            .for_element(Locator::Css("#count"))
            .await
            .expect("the count")
            .text()
            .await
            .expect("count");
        assert_eq!(count, failed_now.len().to_string(), "the count before confirming");
        click(&client, "#confirm button[type=submit]").await;
        client.wait().for_element(Locator::Css("#results")).await.expect("results");
        for job in &failed_now {
            let shown = json_of(&env, &["jobs", "show", job]);
            assert_eq!(shown["job"]["status"], "pending", "{shown}");
            let events = shown["job"]["events"].as_array().expect("events");
            let last = events.last().expect("an event");
            assert_eq!(last["by"], "console:browser", "{last}");
            let line = std::fs::read_to_string(&acting_log)
                .unwrap_or_default()
                .lines()
                .find(|l| l.contains("console action") && l.contains(job.as_str()))
                .map(str::to_string);
            let line = line.unwrap_or_else(|| panic!("no console action line for {job} in the default log"));
            assert!(line.contains("console:browser") && line.contains("retry"), "{line}");
        }
        assert!(log_has(&acting_log, "console sign-in"), "the sign-in is logged");
        client.close().await.expect("close the browser");
        assert!(acting.stop(Duration::from_secs(10)), "the actions console did not stop");
    });
}

/// Clicks `element`, which navigates, and waits until the new page has loaded: reading
/// the page right after the click read the old one on a busy machine (the click only
/// starts the navigation).
async fn click_and_wait(client: &Client, element: fantoccini::elements::Element) {
    let before = client.current_url().await.expect("url");
    element.click().await.expect("click");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = client.current_url().await.expect("url");
        let ready = client
            .execute("return document.readyState", vec![])
            .await
            .expect("readyState");
        if now != before && ready == json!("complete") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no navigation from {before} after the click"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the log at `path` holds `needle` now.
fn log_has(path: &Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle))
}

/// The value of the first `attr="..."` after `id="{id}"` in `html`.
fn attr_of(html: &str, id: &str, attr: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let rest = &html[at..];
    let start = rest
        .find(&format!("{attr}=\""))
        .unwrap_or_else(|| panic!("no {attr} on #{id}"))
        + attr.len()
        + 2;
    rest[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `run --all --console ADDR` serves the console as one of its roles: a console whose
/// address is taken fails and is restarted (the other daemons go on) until it is free;
/// it serves a real run with a submitted batch: the batches list and a batch's page with
/// its report (the figures `batch list/show/report` print), the overview's chart (its
/// last sample the researched pairs `status` counts) and failures in the last hour,
/// search by title (paged), and CSV / JSON Lines downloads equal to `results`'s rows;
/// it stops with the process on SIGTERM.
#[test]
fn run_all_serves_the_console_with_batches_chart_search_and_exports() {
    let mut env = Env::fresh("console-run");
    let dir = scratch("console-run");
    env.extra.push((
        "XDG_DATA_HOME".into(),
        Some(dir.join("data").display().to_string()),
    ));
    let media = dir.join("media");
    std::fs::create_dir_all(&media).expect("media dir");
    let (_files, base) = serve_files(&env, &media, &[]);
    generate_sample(&env, &media, &base, 2, "1.5", &[]);
    env.ok(&["init"]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    let bad = dir.join("bad.yml");
    std::fs::write(
        &bad,
        format!("episodes:\n  - url: {base}/missing.mp3\n    title: Gone\n"),
    )
    .expect("bad manifest");
    env.ok(&["curate", "manifest", bad.to_str().unwrap()]);
    let submission = dir.join("batch.yml");
    std::fs::write(
        &submission,
        "name: everything\nepisode_ids: [e0000001, e0000002]\n",
    )
    .expect("batch file");
    env.ok(&["batch", "submit", submission.to_str().unwrap()]);
    let batch = archivist_engine::schema::paths::batch_id(1);

    let config = fast_config(&dir);
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(
        "batcher:\n  poll_ms: 300\nconsole:\n  refresh_s: 0\n  overview_cache_s: 0\n  chart_every_s: 1\n  page_size: 1\n",
    );
    std::fs::write(&config, text).expect("config");
    // The console's address is taken: its role fails and is restarted.
    let blocker = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = blocker.local_addr().expect("addr").port();
    let log = dir.join("daemons.log");
    let mut daemons = env.spawn(
        &[
            "--config",
            config.to_str().unwrap(),
            "run",
            "--all",
            "--console",
            &format!("127.0.0.1:{port}"),
        ],
        &log,
    );
    let (restarted, _) = archivist_testkit::poll_until(
        Duration::from_secs(60),
        Duration::from_millis(200),
        || log_has(&log, "restarting console"),
        |seen| *seen,
    );
    assert!(
        restarted,
        "the console role was not restarted; log {}",
        log.display()
    );
    drop(blocker);
    let line = daemons.wait_for_line("console at ", Duration::from_secs(60));
    assert_eq!(
        line,
        format!("console at http://127.0.0.1:{port}/ (read-only)")
    );
    assert_eq!(http_get(port, "/healthz").map(|(s, _)| s), Some(200));

    let (rows, _) = sample_check(&env, &media, &log);
    assert!(rows.iter().all(|r| r["verdict"] == "ok"), "{rows:#?}");
    let (_, failed) = archivist_testkit::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || json_of(&env, &["jobs", "list", "--state", "failed"])["jobs"].clone(),
        |jobs| jobs.as_array().is_some_and(|a| !a.is_empty()),
    );
    assert!(failed, "the job of the missing media never failed");
    let (shown, reported) = archivist_testkit::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || json_of(&env, &["batch", "show", &batch]),
        |b| b["batch"]["reports"].as_u64().unwrap_or(0) > 0,
    );
    assert!(reported, "the batch has no report: {shown:#}");

    // Batches: the list's figures are `batch list`'s.
    let listed = json_of(&env, &["batch", "list"]);
    let b = &listed[0];
    let done =
        b["progress"]["recorded"].as_u64().unwrap() + b["progress"]["failed"].as_u64().unwrap();
    let total = b["progress"]["total"].as_u64().unwrap();
    let (status, page) = http_get(port, "/batches").expect("batches page");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("data-id=\"{batch}\"")), "{page}");
    assert!(
        page.contains(&format!("<td class=\"num done\">{done}/{total}</td>")),
        "{page}"
    );
    // A batch's page: its pairs and its latest report, with every pair found.
    let (status, page) = http_get(port, &format!("/batches/{batch}")).expect("batch page");
    assert_eq!(status, 200, "{page}");
    let reports = shown["batch"]["reports"].as_u64().unwrap();
    assert_eq!(attr_of(&page, "report", "data-number"), reports.to_string());
    let report = json_of(&env, &["batch", "report", &batch]);
    let found_pairs: usize = report["found"]
        .as_object()
        .expect("found")
        .values()
        .map(|e| e.as_object().map_or(0, |e| e.len()))
        .sum();
    assert!(found_pairs > 0);
    assert_eq!(
        page.matches("<tr class=\"found\">").count(),
        found_pairs,
        "{page}"
    );
    assert_eq!(
        http_get(port, "/batches/b9999999").map(|(s, _)| s),
        Some(404)
    );

    // The overview's chart: samples kept by the console, the last one what `status`
    // counts now (the run is settled once the batch is reported).
    let researched = json_of(&env, &["status"])["research"]["researched_pairs"]
        .as_u64()
        .expect("researched pairs");
    let (overview, charted) = archivist_testkit::poll_until(
        Duration::from_secs(30),
        Duration::from_millis(500),
        || http_get(port, "/").map(|(_, b)| b).unwrap_or_default(),
        |html| {
            html.contains("id=\"progress-chart\"")
                && attr_of(html, "progress-chart", "data-last") == researched.to_string()
                && attr_of(html, "progress-chart", "data-samples")
                    .parse::<u32>()
                    .unwrap_or(0)
                    >= 2
        },
    );
    assert!(
        charted,
        "the chart never showed {researched} pairs in 2+ samples: {overview}"
    );
    assert!(researched > 0);
    assert!(overview.contains("id=\"throughput-chart\""));
    assert!(
        overview.contains("<p id=\"failures-last-hour\">1 of them failed in the last hour"),
        "{overview}"
    );

    // Search by title, a page of one at a time.
    let episode = json_of(&env, &["results", "--episode", "e0000001"]);
    let title = episode["title"].as_str().expect("title").to_string();
    let word: String = title.chars().take(6).collect::<String>().to_uppercase();
    let (status, hits) =
        http_get(port, &format!("/search?q={}", word.replace(' ', "+"))).expect("search");
    assert_eq!(status, 200);
    assert!(hits.contains("href=\"/episodes/e0000001\""), "{hits}");
    assert_eq!(
        hits.matches("<tr class=\"hit\">").count(),
        1,
        "page_size 1: {hits}"
    );
    let (_, none) = http_get(port, "/search?q=no+such+title+anywhere").expect("search");
    assert!(none.contains("id=\"no-hits\""), "{none}");
    assert_eq!(
        http_get(port, "/search?q=x&kind=jobs").map(|(s, _)| s),
        Some(400)
    );

    // Exports: the JSON Lines are `results`'s rows; the CSV has `export`'s header and a
    // line a row.
    let rows_of = |body: &str| -> Vec<Value> {
        body.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    };
    let (status, jsonl) = http_get(port, "/episodes/e0000001/export?format=jsonl").expect("export");
    assert_eq!(status, 200);
    assert_eq!(Value::Array(rows_of(&jsonl)), episode["rows"]);
    let (_, csv) = http_get(port, "/episodes/e0000001/export?format=csv").expect("export");
    assert!(csv.starts_with("episode,episode_title,clip,"), "{csv}");
    assert_eq!(
        csv.lines().count(),
        episode["rows"].as_array().unwrap().len() + 1
    );
    let clip_id = episode["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["found"] == true))
        .and_then(|r| r["clip"].as_str())
        .expect("a clip found in e0000001")
        .to_string();
    let clip = json_of(&env, &["results", "--clip", &clip_id]);
    let (_, jsonl) =
        http_get(port, &format!("/clips/{clip_id}/export?format=jsonl")).expect("export");
    assert!(!rows_of(&jsonl).is_empty());
    assert_eq!(Value::Array(rows_of(&jsonl)), clip["rows"]);
    assert_eq!(
        http_get(port, "/clips/c9999999/export?format=csv").map(|(s, _)| s),
        Some(404)
    );
    assert_eq!(
        http_get(port, &format!("/clips/{clip_id}/export?format=xml")).map(|(s, _)| s),
        Some(400)
    );

    // SIGTERM stops the console with the other roles.
    assert!(daemons.stop(Duration::from_secs(30)), "run did not stop");
    assert!(
        http_get(port, "/healthz").is_none(),
        "the console still answers"
    );
}
