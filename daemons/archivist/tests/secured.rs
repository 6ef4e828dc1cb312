//! The whole pipeline (curate, plan, research, record, admin commands) on a 3-node
//! ensemble that serves clients over TLS only and enforces SASL, started by
//! `scripts/zk.sh ensemble start tls sasl` (its servers talk to each other over TLS as
//! well) with ZooKeeper's sample timing (tickTime 2000,
//! initLimit 10, syncLimit 5) and Archivist's default session timeout. While jobs are in
//! flight the ZooKeeper leader is killed: no session may be declared lost, no job may
//! expire or fail, and every (episode, clip) pair must be recorded right.

mod support;

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use archivist_engine::{Session, ZkConfig};
use archivist_testkit::secured::{self, SecuredZk};
use support::{fast_config, generate_sample, sample_check, served_media, Env};

/// Client ports 26181..26183 (quorum 26191.., election 26201..): clear of zk.sh's
/// default ensemble (22180), the chaos test's (23180) and the topology test's (25180).
const BASE: u16 = 26180;

fn status(env: &Env) -> serde_json::Value {
    let out = env.ok(&["status", "-o", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status JSON ({e}): {out}"))
}

fn count(status: &serde_json::Value, state: &str) -> u64 {
    status["jobs"][state].as_u64().unwrap_or(0)
}

fn failure(env: &Env, args: &[&str]) -> String {
    let out = env.run(args);
    assert!(
        !out.status.success(),
        "archivist {args:?} succeeded but should not have"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_pipeline_runs_over_tls_and_sasl_and_a_leader_kill_loses_no_job() {
    let ensemble = SecuredZk::ensemble(
        BASE,
        &["tls", "sasl"],
        &[
            ("ZK_TICK_MS", "2000"),
            ("ZK_INIT_LIMIT", "10"),
            ("ZK_SYNC_LIMIT", "5"),
        ],
    );
    // The servers talk to each other over TLS too (sslQuorum): every election port,
    // and the leader's quorum port, hands out a certificate of the test CA.
    for port in BASE + 21..=BASE + 23 {
        assert!(
            secured::speaks_verified_tls(port),
            "election port {port} does not speak TLS"
        );
    }
    let first_leader: u16 = ensemble.zk(&["ensemble", "leader"]).parse().unwrap_or(0);
    assert!(
        secured::speaks_verified_tls(BASE + 10 + first_leader),
        "the leader's quorum port {} does not speak TLS",
        BASE + 10 + first_leader
    );
    let pki = secured::pki();
    let path = |name: &str| Some(pki.join(name).display().to_string());
    let var = |name: &str, value: Option<String>| (name.to_string(), value);
    let tls_vars = vec![
        var("ARCHIVIST_ZK_TLS_CA", path("ca.pem")),
        var("ARCHIVIST_ZK_TLS_CERT", path("client.pem")),
        var("ARCHIVIST_ZK_TLS_KEY", path("client.key")),
        // Archivist's own default session timeout, not the tests' short one.
        var("ARCHIVIST_SESSION_TIMEOUT_MS", None),
    ];
    let mut env = Env {
        zk: ensemble.connect.clone(),
        chroot: archivist_testkit::unique_chroot("secured"),
        database: archivist_testkit::db::fresh_binary_database_url("secured"),
        extra: Vec::new(),
    };

    // The ensemble refuses plaintext and anonymous clients, and the error says why.
    let plain = failure(&env, &["init"]);
    assert!(plain.contains("speaks TLS"), "{plain}");
    env.extra = tls_vars.clone();
    let anonymous = failure(&env, &["init"]);
    assert!(
        anonymous.contains("refuses unauthenticated clients"),
        "{anonymous}"
    );

    env.extra.extend([
        var("ARCHIVIST_ZK_SASL_USER", Some("archivist".into())),
        var(
            "ARCHIVIST_ZK_SASL_PASSWORD_FILE",
            path("archivist.password"),
        ),
        var("ARCHIVIST_ZK_SASL_READER", Some("ops".into())),
    ]);
    let (dir, media, _files, base) = served_media(&env, "secured");
    generate_sample(&env, &media, &base, 4, "3", &[]);
    env.ok(&["init"]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    let config = fast_config(&dir);
    let log = dir.join("daemons.log");
    let daemons = env.spawn(
        &["--config", config.to_str().unwrap(), "run", "--all"],
        &log,
    );

    // Kill the leader while jobs are in flight.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let s = status(&env);
        if count(&s, "leased") + count(&s, "researching") > 0 {
            println!("in flight at the kill: {}", s["jobs"]);
            break;
        }
        assert!(
            count(&s, "recorded") < 4,
            "every job finished before the leader could be killed: {s}"
        );
        assert!(
            Instant::now() < deadline,
            "no job started: {s}; logs in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let leader = ensemble.zk(&["ensemble", "leader"]);
    assert!(!leader.is_empty(), "no leader");
    let killed = Instant::now();
    ensemble.zk(&["ensemble", "kill", &leader]);
    let new_leader = loop {
        let found = ensemble.zk(&["ensemble", "leader"]);
        if !found.is_empty() && found != leader {
            break found;
        }
        assert!(killed.elapsed() < Duration::from_secs(60), "no new leader");
        std::thread::sleep(Duration::from_millis(100));
    };
    println!(
        "leader {leader} killed; node {new_leader} leads after {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(3));
    ensemble.zk(&["ensemble", "restart", &leader]);

    let (rows, out) = sample_check(&env, &media, &log);
    let wrong: Vec<_> = rows.iter().filter(|r| r["verdict"] != "ok").collect();
    assert!(wrong.is_empty(), "pairs not as expected: {wrong:#?}");
    assert_eq!(rows.len(), 4 * 4, "one row per (episode, clip)");
    assert!(out.status.success());

    // Admin commands over TLS and SASL: nothing expired, failed or retried.
    let s = status(&env);
    for state in ["expired", "failed", "cancelled"] {
        if count(&s, state) > 0 {
            let listed = env.run(&["jobs", "list", "--state", state, "-o", "json"]);
            let logged = std::fs::read_to_string(&log).unwrap_or_default();
            let warnings: Vec<&str> = logged
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            panic!(
                "{state} jobs after the leader kill: {s}\n{}\nwarnings:\n{}",
                String::from_utf8_lossy(&listed.stdout),
                warnings.join("\n")
            );
        }
    }
    let jobs: serde_json::Value =
        serde_json::from_str(&env.ok(&["jobs", "list", "--state", "recorded", "-o", "json"]))
            .unwrap();
    let jobs = jobs["jobs"].as_array().cloned().unwrap_or_default();
    assert!(!jobs.is_empty(), "no recorded jobs listed");
    for job in &jobs {
        let id = job["id"].as_str().unwrap_or_default();
        let show: serde_json::Value =
            serde_json::from_str(&env.ok(&["jobs", "show", id, "-o", "json"])).unwrap();
        assert_eq!(
            show["job"]["retry_count"], 0,
            "job {id} was retried: {show}"
        );
    }
    env.ok(&["fsck"]);
    let export = env.ok(&["export", "--format", "json"]);
    assert!(export.contains("found") || export.len() > 2, "{export}");
    env.ok(&["tree"]);

    // No daemon declared its session lost.
    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    for lost in ["zookeeper session lost", "treating the session as lost"] {
        assert!(
            !text.contains(lost),
            "a daemon lost its session over the leader kill ({lost}); see {}",
            log.display()
        );
    }

    // Every node is ACL'd to the SASL users: anonymous clients (were the ensemble to admit
    // them) could read nothing, media URLs included. Also the tree's size per subtree.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = ZkConfig::new(ensemble.connect.clone())
            .with_chroot(env.chroot.clone())
            .with_tls(Some(secured::client_tls()))
            .with_sasl(Some(secured::sasl("archivist", None)));
        let session = Session::connect(&config).await.expect("walk session");
        let client = session.client();
        let mut sizes: BTreeMap<String, (usize, i64)> = BTreeMap::new();
        let mut stack = vec!["/".to_string()];
        while let Some(path) = stack.pop() {
            let (acls, stat) = client.get_acl(&path).await.unwrap();
            let named: Vec<String> = acls
                .iter()
                .map(|a| format!("{}:{}", a.scheme(), a.id()))
                .collect();
            assert_eq!(named, ["sasl:archivist", "sasl:ops"], "{path}");
            assert_eq!(acls[1].permission(), archivist_engine::zk::Permission::READ);
            let top = path.split('/').nth(1).unwrap_or_default().to_string();
            let entry = sizes.entry(format!("/{top}")).or_default();
            entry.0 += 1;
            entry.1 += i64::from(stat.data_length);
            for child in client.list_children(&path).await.unwrap_or_default() {
                let base = if path == "/" { "" } else { path.as_str() };
                stack.push(format!("{base}/{child}"));
            }
        }
        println!("tree after 4 episodes x 4 clips (nodes, data bytes): {sizes:?}");
    });

    // The read-only SASL role reads (the engine test proves it cannot write).
    let mut reader = env.clone();
    reader.extra.extend([
        var("ARCHIVIST_ZK_SASL_USER", Some("ops".into())),
        var("ARCHIVIST_ZK_SASL_PASSWORD_FILE", path("ops.password")),
    ]);
    let read = reader.ok(&["jobs", "list", "--state", "recorded", "-o", "json"]);
    assert!(
        read.contains(jobs[0]["id"].as_str().unwrap_or("?")),
        "{read}"
    );
    // `status` and `fsck` write nothing, so the read-only role runs them.
    let s = status(&reader);
    assert_eq!(count(&s, "recorded"), jobs.len() as u64, "{s}");
    reader.ok(&["fsck"]);
}

/// A webhook receiver on loopback: answers every request 204 and sends its request line
/// (which holds the URL's path and query) down the channel.
fn webhook_receiver() -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
    let port = listener.local_addr().expect("its address").port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let mut stream = reader.into_inner();
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
            let _ = tx.send(line.trim().to_string());
        }
    });
    (port, rx)
}

/// Secrets stay with the daemons: the SASL password comes from the environment (a flag
/// for it, or for digest credentials, is refused without echoing it); a batch's webhook
/// URL (with its token) is in a secret node the read-only role cannot read, while that
/// role still runs status, jobs, fsck and batch show and the batcher still delivers; a
/// media URL with a token is refused without showing it; and no secret reaches the
/// daemons' log or the reader's screens.
#[test]
fn secrets_stay_with_the_daemons_and_out_of_the_readers_reach_and_the_logs() {
    // A port of its own (the engine's secured tests use 2291..2294).
    let server = SecuredZk::standalone(2296, &["sasl"], &[]);
    let password = secured::sasl_password("archivist");
    let reader_password = secured::sasl_password("ops");
    let var = |name: &str, value: &str| (name.to_string(), Some(value.to_string()));
    let env = Env {
        zk: server.connect.clone(),
        chroot: archivist_testkit::unique_chroot("secrets"),
        database: archivist_testkit::db::fresh_binary_database_url("secrets"),
        extra: vec![
            var("ARCHIVIST_ZK_SASL_USER", "archivist"),
            var("ARCHIVIST_ZK_SASL_PASSWORD", &password),
            var("ARCHIVIST_ZK_SASL_READER", "ops"),
        ],
    };

    // Passwords on the command line are refused, and not repeated back.
    for (flag, value, var) in [
        (
            "--zk-sasl-password",
            password.clone(),
            "ARCHIVIST_ZK_SASL_PASSWORD",
        ),
        (
            "--zk-auth",
            format!("archivist:{password}"),
            "ARCHIVIST_ZK_AUTH",
        ),
        (
            "--zk-reader",
            format!("ops:{reader_password}"),
            "ARCHIVIST_ZK_READER",
        ),
    ] {
        let err = failure(&env, &[flag, &value, "status"]);
        assert!(err.contains(&format!("{flag} is refused")), "{err}");
        assert!(err.contains(var), "{err}");
        assert!(
            !err.contains(&password),
            "{flag} echoed the password: {err}"
        );
    }

    // The password from ARCHIVIST_ZK_SASL_PASSWORD authenticates against a server that
    // enforces SASL (a wrong one is refused: the variable is really used).
    let mut wrong = env.clone();
    wrong.extra[1] = var("ARCHIVIST_ZK_SASL_PASSWORD", "not-the-password");
    let err = failure(&wrong, &["init"]);
    assert!(err.contains("SASL authentication"), "{err}");
    env.ok(&["init"]);

    // A media URL with a token is refused, the token not shown.
    const MEDIA_TOKEN: &str = "m3d1a-t0ken";
    let out = env.run(&[
        "curate",
        "episode",
        &format!("https://cdn.example/e.mp3?X-Amz-Signature={MEDIA_TOKEN}"),
        "--title",
        "signed",
        "--no-probe",
    ]);
    assert!(!out.status.success(), "a media URL with a token was taken");
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(err.contains("X-Amz-Signature"), "{err}");
    assert!(!err.contains(MEDIA_TOKEN), "{err}");

    // One episode, one clip, and a batch over the catalog with a webhook carrying a token.
    const HOOK_TOKEN: &str = "h00k-t0ken-s3cret";
    let (dir, media, _files, base) = served_media(&env, "secrets");
    generate_sample(&env, &media, &base, 1, "1", &[]);
    env.ok(&[
        "curate",
        "manifest",
        media.join("manifest.yml").to_str().unwrap(),
    ]);
    let (port, posts) = webhook_receiver();
    let hook = format!("http://127.0.0.1:{port}/hook/{HOOK_TOKEN}?token={HOOK_TOKEN}");
    let submission = dir.join("batch.yml");
    std::fs::write(
        &submission,
        format!(
            "name: secrets\nwebhook: {hook}\nepisode_ids: [{}]\n",
            archivist_engine::schema::paths::episode_id(1)
        ),
    )
    .unwrap();
    let submitted = env.ok(&["batch", "submit", submission.to_str().unwrap()]);
    assert!(!submitted.contains(HOOK_TOKEN), "{submitted}");
    let batch = archivist_engine::schema::paths::batch_id(1);

    let config = fast_config(&dir);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("batcher:\n  poll_ms: 300\n");
    std::fs::write(&config, text).unwrap();
    let log = dir.join("daemons.log");
    let daemons = env.spawn(
        &["--config", config.to_str().unwrap(), "run", "--all"],
        &log,
    );
    let line = posts
        .recv_timeout(Duration::from_secs(180))
        .unwrap_or_else(|_| panic!("no webhook delivery; logs in {}", log.display()));
    assert!(
        line.starts_with(&format!("POST /hook/{HOOK_TOKEN}?token={HOOK_TOKEN}")),
        "{line}"
    );

    // The read-only role: operators' commands work, and show no secret.
    let mut reader = env.clone();
    reader.extra = vec![
        var("ARCHIVIST_ZK_SASL_USER", "ops"),
        var("ARCHIVIST_ZK_SASL_PASSWORD", &reader_password),
    ];
    let mut shown = String::new();
    let ((show, detail), delivered) = archivist_testkit::poll_until(
        Duration::from_secs(30),
        Duration::from_millis(300),
        || {
            let show = reader.ok(&["batch", "show", &batch, "-o", "json"]);
            let detail: serde_json::Value = serde_json::from_str(&show).unwrap();
            (show, detail)
        },
        |(_, detail)| detail["batch"]["delivery"]["status"] == "delivered",
    );
    assert!(delivered, "delivery not recorded: {show}");
    assert_eq!(
        detail["batch"]["webhook"],
        format!("http://127.0.0.1:{port}/…"),
        "{show}"
    );
    shown.push_str(&show);
    for args in [
        &["status", "-o", "json"][..],
        &["jobs", "list", "-o", "json"],
        &["batch", "list"],
        &["batch", "show", batch.as_str()],
        &["tree", "/batches"],
        &["fsck"],
    ] {
        shown.push_str(&reader.ok(args));
    }
    assert!(
        !shown.contains(HOOK_TOKEN),
        "a reader saw the token: {shown}"
    );
    // The full role's tree shows the secret node's origin only, too.
    let tree = env.ok(&["tree", "/batches"]);
    assert!(tree.contains("webhook"), "{tree}");
    assert!(!tree.contains(HOOK_TOKEN), "{tree}");

    // The reader may stat the secret node (anyone may) but not read it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let secret = archivist_engine::schema::paths::batch_webhook(&batch);
        let connect = |user: &str| {
            ZkConfig::new(server.connect.clone())
                .with_chroot(env.chroot.clone())
                .with_sasl(Some(secured::sasl(user, None)))
        };
        let ops = Session::connect(&connect("ops"))
            .await
            .expect("reader session");
        assert!(ops.client().check_stat(&secret).await.unwrap().is_some());
        assert_eq!(
            ops.client().get_data(&secret).await.err(),
            Some(archivist_engine::zk::Error::NoAuth),
            "the reader read {secret}"
        );
        let record = archivist_engine::schema::paths::batch(&batch);
        assert!(ops.client().get_data(&record).await.is_ok(), "{record}");
        let owner = Session::connect(&connect("archivist"))
            .await
            .expect("daemon session");
        let (data, _) = owner.client().get_data(&secret).await.unwrap();
        assert!(String::from_utf8_lossy(&data).contains(HOOK_TOKEN));
    });

    assert!(
        daemons.stop(Duration::from_secs(30)),
        "daemons did not stop"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!logged.is_empty(), "the log is empty: {}", log.display());
    for secret in [password.as_str(), &reader_password, HOOK_TOKEN, MEDIA_TOKEN] {
        assert!(
            !logged.contains(secret),
            "the daemons' log holds a secret; see {}",
            log.display()
        );
    }
}
