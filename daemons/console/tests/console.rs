//! The console's server against a real ZooKeeper (each test its own chroot) and a real
//! SQLite database, over real HTTP on loopback: the findings of the outside try of #24
//! that a page's HTML or status shows. (The browser test is
//! `daemons/archivist/tests/console.rs`.)

#[path = "../../admin/tests/fixtures/mod.rs"]
mod fixtures;

use std::net::SocketAddr;
use std::time::Duration;

use archivist_admin::AdminSettings;
use archivist_console::{Console, ConsoleSettings};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{zk, Session};
use archivist_testkit::switch::Switch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// An answer: status, headers (lower-case names, one `name: value` a line), body.
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim())
        })
    }
}

/// `GET path` with `Host: host` (the bound address when `None`).
async fn get_with_host(addr: SocketAddr, path: &str, host: Option<&str>) -> Answer {
    let host = host.map(str::to_string).unwrap_or_else(|| addr.to_string());
    request(addr, "GET", path, &[("Host", host)], "").await
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    get_with_host(addr, path, None).await
}

/// A console over a fresh tree and its database, on a free loopback port.
struct Served {
    session: Session,
    addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(name: &str) -> Served {
    let (_config, session) = archivist_testkit::fresh_tree(name).await;
    let (addr, stop) = serve_on(&session, &session, ConsoleSettings::default()).await;
    Served {
        session,
        addr,
        stop,
    }
}

/// A console over `session` with `settings`, on the database of the tree `tree` works
/// on, on a free loopback port; stops when the token is cancelled.
async fn serve_on(
    tree: &Session,
    session: &Session,
    settings: ConsoleSettings,
) -> (SocketAddr, CancellationToken) {
    let db = archivist_testkit::db::tree_database(tree.chroot()).await;
    let console = Console::new(session.clone(), db, AdminSettings::default(), settings);
    let stop = CancellationToken::new();
    let (addr, _task) = archivist_console::serve(
        console,
        "127.0.0.1:0".parse().expect("address"),
        stop.clone(),
    )
    .await
    .expect("serve");
    (addr, stop)
}

/// A console with actions enabled (the token [`TOKEN`]) over a fresh tree, on a free
/// loopback port: the tree's session, the address, and the token that stops it.
async fn serve_acting(name: &str) -> (Session, SocketAddr, CancellationToken) {
    let (_config, session) = archivist_testkit::fresh_tree(name).await;
    let settings = ConsoleSettings {
        actions_token: Some(archivist_console::settings::Token(TOKEN.into())),
        ..ConsoleSettings::default()
    };
    let (addr, stop) = serve_on(&session, &session, settings).await;
    (session, addr, stop)
}

/// Expires `session` (connected through `switch`) on the server, as a partition longer
/// than the session timeout does: with the session's own connection cut, a second
/// client joins the same session directly and closes it, and the connection comes back
/// to a session that is gone. (A join alone raced the original client winning the
/// session back before the twin's close landed, and the test failed on a loaded CI.)
async fn expire(session: &Session, switch: &Switch) {
    let info = session.client().session().clone();
    switch.cut();
    let mut last = None;
    for _ in 0..5 {
        match zk::Client::connector()
            .with_session(info.clone())
            .with_connection_timeout(Duration::from_secs(10))
            .connect(&archivist_testkit::zk_connect())
            .await
        {
            Ok(twin) => {
                drop(twin);
                last = None;
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    if let Some(e) = last {
        panic!("join the session: {e}");
    }
    // The twin's close is sent by its background task: give it a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    switch.restore();
    assert!(
        archivist_testkit::eventually(Duration::from_secs(30), || async { session.is_lost() })
            .await,
        "the session did not expire"
    );
}

/// F1: after its session expired, the console answered 503 on every ZooKeeper page
/// for ever while /healthz said ok. Now it makes a new session, and /healthz says 503
/// while it cannot.
#[tokio::test]
async fn an_expired_session_is_replaced_and_healthz_tells_the_truth() {
    let (_config, direct) = archivist_testkit::fresh_tree("console-expiry").await;
    let switch = Switch::start().await;
    let through = archivist_engine::ZkConfig::new(switch.addr.clone())
        .with_chroot(direct.chroot())
        .with_session_timeout(Duration::from_secs(10));
    let session = Session::connect_existing(&through)
        .await
        .expect("connect through the switch");
    let (addr, stop) = serve_on(&direct, &session, ConsoleSettings::default()).await;
    let served = Served {
        session: direct.clone(),
        addr,
        stop,
    };
    let job = fixtures::failed_job(&served.session, "e0000001", "HTTP 404").await;
    assert_eq!(get(served.addr, "/jobs").await.status, 200);
    expire(&session, &switch).await;
    let jobs = get(served.addr, "/jobs").await;
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    assert!(jobs.body.contains(&job.id));
    assert_eq!(
        get(served.addr, &format!("/jobs/{}", job.id)).await.status,
        200
    );
    assert_eq!(get(served.addr, "/").await.status, 200);
    let health = get(served.addr, "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    // A tree that is gone cannot be read: /healthz says so.
    let root = served.session.chroot().to_string();
    let raw = zk::Client::connector()
        .connect(&archivist_testkit::zk_connect())
        .await
        .expect("connect");
    archivist_testkit::delete_tree(&raw, &format!("{root}{}", paths::META))
        .await
        .expect("delete /meta");
    let health = get(served.addr, "/healthz").await;
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(health.body.starts_with("zookeeper: "), "{}", health.body);
}

/// F2: any Host was served (DNS rebinding), and no security header was sent.
#[tokio::test]
async fn a_foreign_host_is_refused_and_every_answer_has_security_headers() {
    let served = serve("console-host").await;
    for host in [
        "attacker.example",
        "attacker.example:80",
        "127.0.0.1.nip.io",
    ] {
        let a = get_with_host(served.addr, "/jobs", Some(host)).await;
        assert_eq!(a.status, 421, "{host}: {}", a.body);
        assert!(!a.body.contains("Jobs"), "nothing of the page");
    }
    for host in [
        served.addr.to_string(),
        format!("localhost:{}", served.addr.port()),
    ] {
        let a = get_with_host(served.addr, "/jobs", Some(&host)).await;
        assert_eq!(a.status, 200, "{host}");
        let csp = a.header("content-security-policy").expect("a CSP");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(a.header("x-frame-options"), Some("DENY"));
        assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(a.header("referrer-policy"), Some("same-origin"));
        // Live pages are not answered from a stored copy (outside try 24b N14).
        assert_eq!(a.header("cache-control"), Some("no-cache"));
        // No inline script for the CSP to forbid: the scripts are files.
        assert!(!a.body.contains("<script>"), "{}", a.body);
        assert!(a.body.contains("<script src=\"/static/refresh.js\">"));
    }
    let js = get(served.addr, "/static/refresh.js").await;
    assert_eq!(js.status, 200);
    assert!(js.body.contains("stale"));
}

/// F4: ids that are not ids reached ZooKeeper: a job's child znode was served as a job
/// (200), `..` and NUL answered 503.
#[tokio::test]
async fn ids_that_are_not_ids_are_404_and_never_read() {
    let served = serve("console-ids").await;
    let job = fixtures::failed_job(&served.session, "e0000001", "HTTP 404").await;
    // A copy of the job's record under the job: a node that is not a job.
    let (bytes, _) = served
        .session
        .client()
        .get_data(&paths::job(&job.id))
        .await
        .expect("the job's record");
    archivist_testkit::write_node(
        &served.session,
        &format!("{}/x", paths::job(&job.id)),
        &bytes,
    )
    .await;
    for path in [
        format!("/jobs/{}%2Fx", job.id),
        "/jobs/..%2Fmeta".to_string(),
        "/jobs/..".to_string(),
        format!("/jobs/{}%00", job.id),
        "/jobs/%2Fzookeeper%2Fconfig".to_string(),
        "/episodes/e0000001%2Fx".to_string(),
        "/episodes/..".to_string(),
        "/clips/c000001%2Fx".to_string(),
        "/clips/%07".to_string(),
    ] {
        let a = get(served.addr, &path).await;
        assert_eq!(a.status, 404, "{path}: {}", a.body);
        assert!(a.body.contains("is not an id"), "{path}: {}", a.body);
    }
}

/// F7: a damaged job record made its page 503, as if ZooKeeper failed.
#[tokio::test]
async fn a_damaged_job_record_is_a_500_that_says_to_run_fsck() {
    let served = serve("console-damaged").await;
    archivist_testkit::write_node(&served.session, &paths::job("j0000000077"), b"\xff\xfe{").await;
    let a = get(served.addr, "/jobs/j0000000077").await;
    assert_eq!(a.status, 500, "{}", a.body);
    assert!(a.body.contains("archivist fsck"), "{}", a.body);
}

/// Outside try 24d M2: a results row that does not decode was a 503 on its episode's
/// and its clip's pages, and kept `/healthz` failing for 30 s after every visit: a
/// damaged record, not a failing service, is a 500 that says to run fsck.
#[tokio::test]
async fn a_damaged_results_row_is_a_500_and_leaves_healthz_alone() {
    let served = serve("console-damaged-row").await;
    let db = archivist_testkit::db::tree_database(served.session.chroot()).await;
    let id = fixtures::episode(&served.session, 1, "Show").await;
    fixtures::clip(&served.session, 1, "Jingle").await;
    fixtures::research(&served.session, &id, "j0000000001", &[1], &[(1, 12.5, 0.9)]).await;
    assert_eq!(
        archivist_db::testing::damage_research_runs(&db, &id)
            .await
            .expect("damage"),
        1
    );
    for page in [format!("/episodes/{id}"), "/clips/c000001".to_string()] {
        let a = get(served.addr, &page).await;
        assert_eq!(a.status, 500, "{page}: {}", a.body);
        assert!(a.body.contains("archivist fsck"), "{}", a.body);
    }
    let a = get(served.addr, "/healthz").await;
    assert_eq!(a.status, 200, "{}", a.body);
}

/// F9: a repeated parameter got a bare text/plain 400 from axum.
#[tokio::test]
async fn a_repeated_parameter_gets_the_consoles_error_page() {
    let served = serve("console-params").await;
    let a = get(served.addr, "/jobs?state=failed&state=recorded").await;
    assert_eq!(a.status, 400);
    assert!(a
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    assert!(a.body.contains("duplicate field"), "{}", a.body);
}

/// F3 and F8 on a real page: a `javascript:` media URL is neither a link nor the
/// player's source, and control and bidi characters of a title are shown escaped.
#[tokio::test]
async fn an_episode_with_a_script_url_and_control_characters_is_shown_safely() {
    let served = serve("console-episode").await;
    let db = archivist_testkit::db::tree_database(served.session.chroot()).await;
    let id = paths::episode_id(1);
    let record = archivist_engine::schema::records::EpisodeRecord {
        schema: archivist_engine::schema::SCHEMA_VERSION,
        id: id.clone(),
        air_date: None,
        fields: archivist_testkit::catalog::fields(
            "Bell\u{7} and \u{1b}[31m \u{202e}3pm.exe",
            " JaVaScRiPt:alert(7)//",
            time::OffsetDateTime::UNIX_EPOCH,
        ),
    };
    archivist_db::catalog::put(
        &db,
        &[archivist_db::catalog::CatalogRecord::Episode(record)],
    )
    .await
    .expect("the episode");
    fixtures::clip(&served.session, 1, "Jingle").await;
    fixtures::clip(&served.session, 2, "Sting").await;
    fixtures::research(
        &served.session,
        &id,
        "j0000000001",
        &[1, 2],
        &[(1, 12.5, 0.9)],
    )
    .await;
    let a = get(served.addr, &format!("/episodes/{id}")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body.matches("class=\"mark").count(), 1, "{}", a.body);
    assert!(
        !a.body.to_lowercase().contains("href=\"javascript"),
        "{}",
        a.body
    );
    assert!(
        !a.body.to_lowercase().contains("src=\" javascript"),
        "{}",
        a.body
    );
    assert!(
        !a.body.to_lowercase().contains("src=\"javascript"),
        "{}",
        a.body
    );
    assert!(a.body.contains("id=\"unplayable\""), "{}", a.body);
    assert!(
        a.body.contains("Bell\\x07 and \\x1b[31m \\u{202e}3pm.exe"),
        "{}",
        a.body
    );
    assert!(!a.body.contains('\u{7}') && !a.body.contains('\u{202e}'));
}

/// Outside try 24b N4: the pages offered actions that cannot apply (`hold` on a failed
/// job, all five on a recorded one) and "hold 301 jobs?" on the failed list, each then
/// refused. Pages now offer what `Action::applies` allows, and a bulk confirmation
/// leaves out, and counts, the jobs its action cannot change.
#[tokio::test]
async fn pages_offer_only_the_actions_that_can_change_the_job() {
    let (session, addr, stop) = serve_acting("console-applicable").await;
    let failed =
        fixtures::failed_job(&session, "e0000001", "GET http://h/1.mp3 returned 404").await;
    let recorded = fixtures::recorded_job(&session, "e0000002", &["c000001"]).await;
    let pending = fixtures::job(&session, "e0000003", &["c000001"]).await;
    let offered = |page: &str| -> Vec<String> {
        let Some(at) = page.find("id=\"actions\"") else {
            return vec![];
        };
        let block = &page[at..page[at..].find("</div>").map_or(page.len(), |e| at + e)];
        ["retry", "hold", "release", "cancel", "delete"]
            .into_iter()
            .filter(|a| {
                block.contains(&format!("value=\"{a}\"")) || block.contains(&format!("/{a}\""))
            })
            .map(str::to_string)
            .collect()
    };
    let page = get(addr, &format!("/jobs/{}", failed.id)).await;
    assert_eq!(
        offered(&page.body),
        ["retry", "cancel", "delete"],
        "{}",
        page.body
    );
    let page = get(addr, &format!("/jobs/{}", recorded.id)).await;
    assert!(offered(&page.body).is_empty(), "{}", page.body);
    assert!(page.body.contains("No action applies"), "{}", page.body);
    let page = get(addr, &format!("/jobs/{}", pending.id)).await;
    assert_eq!(offered(&page.body), ["hold", "cancel"], "{}", page.body);
    // The failed list offers no hold, release or cancel in bulk.
    let list = get(addr, "/jobs?state=failed").await;
    assert!(
        list.body.contains("/jobs/bulk?action=retry"),
        "{}",
        list.body
    );
    assert!(
        !list.body.contains("/jobs/bulk?action=hold")
            && !list.body.contains("/jobs/bulk?action=release"),
        "{}",
        list.body
    );
    // The reason filter is the CLI's `--reason` rule: a glob with `*` (N11).
    let list = get(addr, "/jobs?reason=get*1.mp3*404").await;
    assert!(
        list.body.contains(&failed.id) && !list.body.contains(&pending.id),
        "{}",
        list.body
    );
    // A hold confirmation over every job: only the pending one is offered, and a job
    // record that does not decode is named, not silently left out (N12).
    fixtures::raw(&session, &paths::job("j0000000900"), b"status: [unclosed").await;
    let confirm = get(addr, "/jobs/bulk?action=hold").await;
    assert!(
        confirm.body.contains("id=\"unreadable\"") && confirm.body.contains("j0000000900"),
        "{}",
        confirm.body
    );
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert!(
        confirm.body.contains("<span id=\"count\">1</span>"),
        "{}",
        confirm.body
    );
    assert!(
        confirm.body.contains("id=\"left-out\"")
            && confirm.body.contains(&format!("{}@", pending.id))
            && !confirm.body.contains(&format!("{}@", failed.id)),
        "{}",
        confirm.body
    );
    // A confirmation, or a job page, reached from another site or port of this host
    // (the browser's `Sec-Fetch-Site`) carries no action form (outside try 24c M1).
    for path in [
        "/jobs/bulk?action=hold".to_string(),
        format!("/jobs/{}", pending.id),
        format!("/jobs/{}/delete", failed.id),
    ] {
        for (site, armed) in [
            ("same-site", false),
            ("cross-site", false),
            ("same-origin", true),
            ("none", true),
        ] {
            let a = request(
                addr,
                "GET",
                &path,
                &[("Sec-Fetch-Site", site.to_string())],
                "",
            )
            .await;
            assert_eq!(a.status, 200, "{path} {site}: {}", a.body);
            assert_eq!(
                a.body.contains("<form class=\"action\""),
                armed,
                "{path} {site}: {}",
                a.body
            );
            assert_eq!(a.body.contains("id=\"not-armed\""), !armed, "{path} {site}");
        }
    }
    // More jobs posted than one action takes: refused whole, not cut (24c L6).
    let token = sign_in(addr, "alice").await;
    let many: Vec<String> = (1..=1001).map(|n| format!("j{n:010}@0")).collect();
    let a = request(
        addr,
        "POST",
        "/jobs/bulk/retry",
        &[("Origin", format!("http://{addr}"))],
        &format!("session={token}&jobs={}", many.join("+")),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("at most 1000"), "{}", a.body);
    // A delete confirmation of a job delete does not apply to offers no button (L3).
    let page = get(addr, &format!("/jobs/{}/delete", recorded.id)).await;
    assert!(
        page.body.contains("id=\"not-applicable\"")
            && !page.body.contains("<form class=\"action\""),
        "{}",
        page.body
    );
    stop.cancel();
}

/// Outside try 24b N9: wrong sign-ins were answered as fast as they came (81 a second),
/// each a WARN line, and a token of 16 blanks was accepted. Sign-ins are limited to
/// `SIGN_INS_PER_MINUTE` a minute (then 429, the right token too: the limit is what
/// stops a guesser), and blanks do not count towards a token's length.
#[tokio::test]
async fn sign_ins_are_rate_limited_and_a_blank_token_is_refused() {
    let blank = ConsoleSettings {
        actions_token: Some(archivist_console::settings::Token(" ".repeat(16))),
        ..ConsoleSettings::default()
    };
    let why = blank.check().expect_err("a blank token is no token");
    assert!(why.contains("whitespace not counted"), "{why}");
    let (_session, addr, stop) = serve_acting("console-sign-in-limit").await;
    let origin = ("Origin", format!("http://{addr}"));
    let limit = archivist_console::actions::SIGN_INS_PER_MINUTE as usize;
    let post = |body: String| {
        let origin = origin.clone();
        async move { request(addr, "POST", "/login", std::slice::from_ref(&origin), &body).await }
    };
    let wrong = "name=guesser&token=guess-guess-guess-1".to_string();
    for i in 0..limit {
        let a = post(wrong.clone()).await;
        assert_eq!(a.status, 403, "attempt {i}: {}", a.body);
    }
    let a = post(wrong).await;
    assert_eq!(a.status, 429, "{}", a.body);
    assert_eq!(a.header("retry-after"), Some("60"));
    let a = post(format!("name=alice&token={TOKEN}")).await;
    assert_eq!(
        a.status, 429,
        "the limit holds for the right token too: {}",
        a.body
    );
    stop.cancel();
}

/// Outside try 24c M2: with the database's pages damaged (all but the first), every
/// page that reads it answered 503 "malformed" while `/healthz` answered `ok`: it read
/// only the schema version, from a cached page. It now reads every table.
#[tokio::test]
async fn healthz_fails_while_the_databases_tables_cannot_be_read() {
    let served = serve("console-db-damaged").await;
    let db = archivist_testkit::db::tree_database(served.session.chroot()).await;
    fixtures::episode(&served.session, 1, "One").await;
    fixtures::clip(&served.session, 1, "Jingle").await;
    assert_eq!(get(served.addr, "/healthz").await.status, 200);
    drop(db);
    let url = archivist_testkit::db::tree_database_url(served.session.chroot());
    let path = url.trim_start_matches("sqlite://").to_string();
    // Every page after the first damaged, in place (the first, with the header and its
    // change counter, intact: SQLite keeps what it cached), in the file and its WAL.
    for file in [path.clone(), format!("{path}-wal")] {
        let Ok(mut bytes) = std::fs::read(&file) else {
            continue;
        };
        for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1];
        }
        std::fs::write(&file, &bytes).expect("damage the file in place");
    }
    let page = get(served.addr, "/search?q=One").await;
    assert_eq!(page.status, 503, "{}", page.body);
    for _ in 0..5 {
        let a = get(served.addr, "/healthz").await;
        assert_eq!(a.status, 503, "{}", a.body);
        assert!(a.body.contains("database"), "{}", a.body);
    }
}

/// Outside 23b M5: the player plays the episode's URL, whose host may now serve other
/// audio than the pinned rendition the marks were measured on (a re-upload, an ad
/// inserted in front); the page said nothing. It now warns while the rendition served
/// last is not the pin, and stops when the host serves the pin again.
#[tokio::test]
async fn the_episode_page_warns_when_the_host_serves_other_audio_than_the_pin() {
    use archivist_db::renditions::{self, Rendition};
    let served = serve("console-other-audio").await;
    let db = archivist_testkit::db::tree_database(served.session.chroot()).await;
    let id = fixtures::episode(&served.session, 1, "Show").await;
    fixtures::clip(&served.session, 1, "Jingle").await;
    fixtures::research(&served.session, &id, "j0000000001", &[1], &[(1, 12.5, 0.9)]).await;
    let rendition = |sha: char| Rendition {
        episode: id.clone(),
        sha256: sha.to_string().repeat(64),
        bytes: 100,
        duration_s: Some(60.0),
        fetched_at: time::OffsetDateTime::now_utc(),
        url: "https://h.example/e1.mp3".into(),
        final_url: "https://h.example/e1.mp3".into(),
        etag: None,
        last_modified: None,
    };
    renditions::record(&db, &rendition('a'))
        .await
        .expect("pin a");
    renditions::record_run(&db, &id, "j0000000001", &"a".repeat(64), true)
        .await
        .expect("the run was measured on a");
    let page = get(served.addr, &format!("/episodes/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("id=\"other-audio\""), "{}", page.body);
    // Sightings are ordered by their millisecond.
    tokio::time::sleep(Duration::from_millis(3)).await;
    renditions::record(&db, &rendition('b')).await.expect("b");
    let page = get(served.addr, &format!("/episodes/{id}")).await;
    assert!(page.body.contains("id=\"other-audio\""), "{}", page.body);
    assert!(
        page.body.contains(&"b".repeat(12)) && page.body.contains(&"a".repeat(12)),
        "{}",
        page.body
    );
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!(renditions::saw(&db, &id, &"a".repeat(64), None)
        .await
        .expect("saw a"));
    let page = get(served.addr, &format!("/episodes/{id}")).await;
    assert!(!page.body.contains("id=\"other-audio\""), "{}", page.body);
    // The pin moves to b (a left the store) and the host serves b: the marks measured
    // on a are still on other audio than the player plays (outside 23c N2).
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!(
        renditions::move_pin(&db, &id, &"a".repeat(64), &"b".repeat(64))
            .await
            .expect("move")
    );
    assert!(renditions::saw(&db, &id, &"b".repeat(64), None)
        .await
        .expect("saw b"));
    let page = get(served.addr, &format!("/episodes/{id}")).await;
    assert!(
        page.body.contains("id=\"other-audio\"") && page.body.contains("(not served now)"),
        "{}",
        page.body
    );
}

/// A request with a method, headers (`Host` is the bound address unless given) and a
/// form body, over HTTP/1.0 so the body is not chunked.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {path} HTTP/1.0\r\n");
    if !headers.iter().any(|(k, _)| *k == "Host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut raw))
        .await
        .expect("an answer within a minute")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (h, b) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = h.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    Answer {
        status,
        headers: lines
            .map(|l| match l.split_once(':') {
                Some((n, v)) => format!("{}:{v}", n.to_ascii_lowercase()),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        body: b.to_string(),
    }
}

/// The value of the first `name="NAME" value="…"` field in a page.
fn field(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in {page}"))
        + marker.len();
    page[at..].split('"').next().unwrap_or("").to_string()
}

async fn status_of(s: &Session, id: &str) -> String {
    fixtures::read(s, id).await.0.status.to_string()
}

const TOKEN: &str = "a-test-token-of-32-characters-xx";

/// The value of the first `NAME="…"` attribute in a page.
fn attr(page: &str, name: &str) -> String {
    let marker = format!("{name}=\"");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        + marker.len();
    page[at..].split('"').next().unwrap_or("").to_string()
}

/// Signs in as `name`; the session token the answer gives the page to keep.
async fn sign_in(addr: SocketAddr, name: &str) -> String {
    let a = request(
        addr,
        "POST",
        "/login",
        &[("Origin", format!("http://{addr}"))],
        &format!("name={name}&token={TOKEN}"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.header("set-cookie").is_none(), "no cookie: {}", a.headers);
    assert_eq!(a.header("cache-control"), Some("no-store"));
    let token = attr(&a.body, "data-session");
    assert_eq!(token.len(), 64, "{}", a.body);
    token
}

/// Outside try 24d M1: a running job's heartbeat moves its version every few seconds, so
/// hold or cancel from its page was refused unless clicked within 5 s of loading. A job
/// still in the state the page showed (leased, researching) is acted on; any other job
/// whose version moved is not, nor a running job whose state moved.
#[tokio::test]
async fn a_running_jobs_heartbeat_does_not_void_the_page_it_was_shown_on() {
    let (session, addr, stop) = serve_acting("console-heartbeat").await;
    let origin = ("Origin", format!("http://{addr}"));
    let token = sign_in(addr, "alice").await;
    let act = |id: String, action: &'static str, posted: String| {
        let origin = origin.clone();
        let token = token.clone();
        async move {
            let body = format!("session={token}&jobs={posted}");
            request(
                addr,
                "POST",
                &format!("/jobs/{id}/{action}"),
                &[origin],
                &body,
            )
            .await
        }
    };
    let running = fixtures::job(&session, "e0000001", &["c000001"]).await;
    fixtures::drive(
        &session,
        &running.id,
        &[JobState::Leased, JobState::Researching],
        "",
    )
    .await;
    let page = request(addr, "GET", &format!("/jobs/{}", running.id), &[], "").await;
    let posted = field(&page.body, "jobs");
    assert!(posted.ends_with("@researching"), "{posted}");
    fixtures::touch(&session, &running.id).await;
    fixtures::touch(&session, &running.id).await;
    let a = act(running.id.clone(), "hold", posted.clone()).await;
    assert!(a.body.contains("<span id=\"done\">1</span>"), "{}", a.body);
    let held = fixtures::read(&session, &running.id).await.0;
    assert!(
        held.status == JobState::Held || format!("{:?}", held.request).contains("Hold"),
        "{held:?}"
    );

    // A failed job retried and failed again meanwhile: the same state, another failure.
    let failed =
        fixtures::failed_job(&session, "e0000002", "GET http://h/2.mp3 returned 404").await;
    let page = request(addr, "GET", &format!("/jobs/{}", failed.id), &[], "").await;
    let posted = field(&page.body, "jobs");
    fixtures::touch(&session, &failed.id).await;
    let a = act(failed.id.clone(), "retry", posted).await;
    assert!(a.body.contains("<span id=\"moved\">1</span>"), "{}", a.body);
    assert_eq!(status_of(&session, &failed.id).await, "failed");

    // A running job that moved on from the state shown: not acted on.
    let leased = fixtures::job(&session, "e0000003", &["c000001"]).await;
    fixtures::drive(&session, &leased.id, &[JobState::Leased], "").await;
    let page = request(addr, "GET", &format!("/jobs/{}", leased.id), &[], "").await;
    let posted = field(&page.body, "jobs");
    fixtures::drive(&session, &leased.id, &[JobState::Researching], "").await;
    let a = act(leased.id.clone(), "cancel", posted).await;
    assert!(a.body.contains("<span id=\"moved\">1</span>"), "{}", a.body);
    stop.cancel();
}

/// Part 2 of #24 and its second outside try: actions need the token (a signed-in
/// session whose token is in the form's body: nothing a browser sends by itself, so no
/// cookie that other ports of the host would get, N0) and an `Origin` naming the
/// console; they run through the admin library (a failed job goes to pending), one or
/// every job a filter matches (the count shown first), each only at the version the
/// page showed (N1), and are recorded in the job's events as `console:<name>`. A
/// console without a token refuses them all.
#[tokio::test]
async fn actions_need_a_session_token_in_the_body_and_origin_and_record_the_actor() {
    let (session, addr, stop) = serve_acting("console-actions").await;
    let origin = ("Origin", format!("http://{addr}"));
    let one = fixtures::failed_job(
        &session,
        "e0000001",
        "GET http://h/1.mp3 returned 404 Not Found",
    )
    .await;
    let mut many = Vec::new();
    for n in 2..=5 {
        let m = format!("GET http://h/{n}.mp3 returned 404 Not Found");
        many.push(fixtures::failed_job(&session, &format!("e000000{n}"), &m).await);
    }
    let other = fixtures::failed_job(&session, "e0000009", "not audio").await;

    // A wrong token, or a sign-in from another origin: refused.
    let a = request(
        addr,
        "POST",
        "/login",
        std::slice::from_ref(&origin),
        "name=alice&token=wrong",
    )
    .await;
    assert_eq!(a.status, 403);
    let login = format!("name=alice&token={TOKEN}");
    let a = request(
        addr,
        "POST",
        "/login",
        &[("Origin", "http://attacker.example".into())],
        &login,
    )
    .await;
    assert_eq!(a.status, 403);
    let token = sign_in(addr, "alice").await;

    let page = request(addr, "GET", &format!("/jobs/{}", one.id), &[], "").await;
    let posted = field(&page.body, "jobs");
    assert!(posted.starts_with(&format!("{}@", one.id)), "{posted}");
    // Delete on a job's page is a link to a confirmation, not a one-click post (N5).
    assert!(
        !page
            .body
            .contains(&format!("action=\"/jobs/{}/delete\"", one.id)),
        "{}",
        page.body
    );
    let confirm = request(addr, "GET", &format!("/jobs/{}/delete", one.id), &[], "").await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert!(
        confirm.body.contains("<span id=\"state\">failed</span>"),
        "{}",
        confirm.body
    );
    assert_eq!(field(&confirm.body, "jobs"), posted);
    let path = format!("/jobs/{}/retry", one.id);
    // Everything a media server on another port of this host would receive from the
    // operator's browser (any cookies, a Referer, the page's Origin) but not the body's
    // session token: refused (N0).
    let a = request(
        addr,
        "POST",
        &path,
        &[
            origin.clone(),
            ("Cookie", format!("archivist_console={token}")),
            ("Referer", format!("http://{addr}/episodes/e0000001")),
        ],
        &format!("jobs={posted}"),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    // The token in a header instead of the body: refused.
    let a = request(
        addr,
        "POST",
        &path,
        &[origin.clone(), ("Authorization", format!("Bearer {token}"))],
        &format!("jobs={posted}"),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    // The token, but another origin, no Origin, or a wrong token: refused.
    let evil = ("Origin", "http://attacker.example".to_string());
    let body = format!("session={token}&jobs={posted}");
    let a = request(addr, "POST", &path, &[evil], &body).await;
    assert_eq!(a.status, 403);
    let a = request(addr, "POST", &path, &[], &body).await;
    assert_eq!(a.status, 403, "no Origin");
    let wrong = format!("session={}&jobs={posted}", "0".repeat(64));
    let a = request(addr, "POST", &path, std::slice::from_ref(&origin), &wrong).await;
    assert_eq!(a.status, 403);
    // A job posted without the version shown: not acted on.
    let bare = format!("session={token}&jobs={}", one.id);
    let a = request(addr, "POST", &path, std::slice::from_ref(&origin), &bare).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(status_of(&session, &one.id).await, "failed");

    // The session token in the body, same origin: retried, recorded as console:alice.
    let a = request(addr, "POST", &path, std::slice::from_ref(&origin), &body).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let (job, _) = fixtures::read(&session, &one.id).await;
    assert_eq!(job.status.to_string(), "pending");
    let last = job.events.last().expect("an event");
    assert_eq!(
        (last.by.as_str(), last.step.as_str()),
        ("console:alice", "retry")
    );
    // The same form again (the job moved since that page): refused, nothing done.
    let a = request(addr, "POST", &path, std::slice::from_ref(&origin), &body).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("<span id=\"moved\">1</span>"), "{}", a.body);
    assert!(a.body.contains("<span id=\"done\">0</span>"), "{}", a.body);

    // On a filter: the count first, then exactly those jobs, each as shown.
    let group = archivist_admin::browse::reason_of(many[0].message.as_deref());
    let confirm = request(
        addr,
        "GET",
        &format!(
            "/jobs/bulk?action=cancel&state=failed&group={}",
            archivist_console::overview::urlencode(&group)
        ),
        &[],
        "",
    )
    .await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert!(
        confirm.body.contains("<span id=\"count\">4</span>"),
        "{}",
        confirm.body
    );
    // The confirmation shows the filter it was built from and each job's state (N4).
    assert!(
        confirm.body.contains("state=failed") && confirm.body.contains(" (failed) "),
        "{}",
        confirm.body
    );
    let jobs = field(&confirm.body, "jobs");
    // Meanwhile another operator retries one of them: pending now, so a cancel would
    // apply to it, but the operator confirmed cancelling the failed job the page showed.
    let moved = &many[3];
    let cli = AdminSettings::default().with_actor("cli-carol");
    archivist_admin::actions::retry(&session, &cli, &moved.id)
        .await
        .expect("another client retries one job");
    // Confirming (one job posted twice).
    let first = jobs.split(' ').next().expect("a job").to_string();
    let body = format!("session={token}&jobs={}+{first}", jobs.replace(' ', "+"));
    let a = request(
        addr,
        "POST",
        "/jobs/bulk/cancel",
        std::slice::from_ref(&origin),
        &body,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    for j in &many[..3] {
        assert_eq!(status_of(&session, &j.id).await, "cancelled", "{}", j.id);
    }
    let (job, _) = fixtures::read(&session, &moved.id).await;
    assert_eq!(
        job.status.to_string(),
        "pending",
        "the moved job is not cancelled"
    );
    assert_eq!(
        job.events.last().expect("an event").by,
        "cli-carol",
        "the moved job is left alone"
    );
    assert!(a.body.contains("<span id=\"done\">3</span>"), "{}", a.body);
    assert!(a.body.contains("<span id=\"moved\">1</span>"), "{}", a.body);
    assert!(
        a.body.contains("cancel: 3 of 4 jobs"),
        "a job posted twice counts once: {}",
        a.body
    );
    assert_eq!(
        status_of(&session, &other.id).await,
        "failed",
        "outside the filter"
    );

    // Signing out ends the session: its token no longer acts.
    let a = request(
        addr,
        "POST",
        "/logout",
        std::slice::from_ref(&origin),
        &format!("session={token}"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let again = format!("session={token}&jobs={}@0", other.id);
    let a = request(
        addr,
        "POST",
        &format!("/jobs/{}/retry", other.id),
        std::slice::from_ref(&origin),
        &again,
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    stop.cancel();

    // A console without a token: read-only, whatever is sent.
    let served = serve("console-actions-ro").await;
    let a = request(
        served.addr,
        "POST",
        "/login",
        &[("Origin", format!("http://{}", served.addr))],
        &login,
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(a.body.contains("read-only"));
}

/// Outside try 24b, N7 and N8: a sign-in name is at most 64 characters of a safe set;
/// a console behind a TLS-terminating proxy, reached by a name in `console.hosts`,
/// accepts the browser's `Origin: https://name`, but `https://` with an address does
/// not pass.
#[tokio::test]
async fn sign_in_names_are_short_and_https_origins_pass_for_configured_names() {
    let (_config, session) = archivist_testkit::fresh_tree("console-names").await;
    let settings = ConsoleSettings {
        actions_token: Some(archivist_console::settings::Token(TOKEN.into())),
        hosts: vec!["console.internal".into()],
        ..ConsoleSettings::default()
    };
    let (addr, stop) = serve_on(&session, &session, settings).await;
    let origin = ("Origin", format!("http://{addr}"));
    for bad in ["a".repeat(65), "al ice".into(), "al%3Cb%3E".into()] {
        let a = request(
            addr,
            "POST",
            "/login",
            std::slice::from_ref(&origin),
            &format!("name={bad}&token={TOKEN}"),
        )
        .await;
        assert_eq!(a.status, 400, "{bad}: {}", a.body);
    }
    let ok = format!("name={}&token={TOKEN}", "a".repeat(64));
    let a = request(addr, "POST", "/login", std::slice::from_ref(&origin), &ok).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let named = format!("console.internal:{}", addr.port());
    let a = request(
        addr,
        "POST",
        "/login",
        &[
            ("Host", named.clone()),
            ("Origin", format!("https://{named}")),
        ],
        &ok,
    )
    .await;
    assert_eq!(a.status, 200, "behind a TLS proxy: {}", a.body);
    let a = request(
        addr,
        "POST",
        "/login",
        &[("Origin", format!("https://{addr}"))],
        &ok,
    )
    .await;
    assert_eq!(a.status, 403, "https with an address: {}", a.body);
    stop.cancel();
}

/// F1 as an operator saw it: ZooKeeper unreachable for longer than the session timeout,
/// then back. While it is gone a page answers 503 at once (it used to hang until the
/// session expired) and /healthz says 503; once it is back the console makes a new
/// session and serves again (it used to answer 503 for ever).
#[tokio::test]
async fn the_console_survives_a_zookeeper_outage_longer_than_its_session() {
    let (_config, direct) = archivist_testkit::fresh_tree("console-outage").await;
    let job = fixtures::failed_job(&direct, "e0000001", "HTTP 404").await;
    let switch = Switch::start().await;
    let through = archivist_engine::ZkConfig::new(switch.addr.clone())
        .with_chroot(direct.chroot())
        .with_session_timeout(Duration::from_secs(4))
        .with_connect_timeout(Duration::from_secs(10));
    let session = Session::connect_existing(&through)
        .await
        .expect("connect through the proxy");
    let (addr, stop) = serve_on(&direct, &session, ConsoleSettings::default()).await;
    let page = format!("/jobs/{}", job.id);
    assert_eq!(get(addr, &page).await.status, 200);

    switch.cut();
    assert!(
        archivist_testkit::eventually(Duration::from_secs(10), || async {
            session.state() != zk::SessionState::SyncConnected
        })
        .await,
        "the client did not notice the outage"
    );
    let asked = std::time::Instant::now();
    let a = get(addr, &page).await;
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "answered after {:?}",
        asked.elapsed()
    );
    // Past the session timeout: the session is lost, and a new one cannot be made yet:
    // 503 within the console's reconnect wait, not the 10 s connect timeout (N13).
    assert!(
        archivist_testkit::eventually(Duration::from_secs(20), || async { session.is_lost() })
            .await,
        "the session was not lost"
    );
    let asked = std::time::Instant::now();
    assert_eq!(get(addr, &page).await.status, 503);
    assert!(
        asked.elapsed() < archivist_console::zk::RECONNECT_WAIT + Duration::from_secs(1),
        "the first request after the loss answered after {:?}",
        asked.elapsed()
    );
    assert_eq!(get(addr, "/healthz").await.status, 503);

    switch.restore();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let a = get(addr, &page).await;
        if a.status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the console did not recover: {} {}",
            a.status,
            a.body
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let health = get(addr, "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    stop.cancel();
}
