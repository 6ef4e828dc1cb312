//! The whole pipeline (curate, plan, research, record, admin commands) on a 3-node
//! ensemble that serves clients over TLS only and enforces SASL, started by
//! `scripts/zk.sh ensemble start tls sasl` with ZooKeeper's sample timing (tickTime 2000,
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
