//! Sessions against secured ZooKeeper servers started by `scripts/zk.sh`: TLS only (no
//! plaintext port, client certificates required) and enforced SASL. Every way of getting
//! the connection wrong must end in an error naming its cause, fast.
//!
//! Ports of their own (2291..2294), never the shared plaintext server's settings.

use std::time::{Duration, Instant};

use archivist_engine::config::{Credentials, SaslConfig, TlsConfig};
use archivist_engine::schema::paths;
use archivist_engine::{zk, EngineError, Session, ZkConfig};
use archivist_testkit::secured::{self, SecuredZk};

const TLS_PORT: u16 = 2291;
const EXPIRED_PORT: u16 = 2292;
const SASL_PORT: u16 = 2293;

/// The cause of a refused connect; panics on success or another error.
async fn refusal(config: &ZkConfig) -> String {
    let started = Instant::now();
    match Session::connect(config).await {
        Err(EngineError::Refused { cause, .. }) => {
            println!("refused: {cause}");
            // The client retries until its connect timeout, then one handshake diagnoses.
            assert!(
                started.elapsed() < config.connect_timeout + Duration::from_secs(8),
                "took {:?} to refuse",
                started.elapsed()
            );
            cause
        }
        Err(other) => panic!("expected a refusal naming the cause, got: {other}"),
        Ok(_) => panic!("connected, but the configuration is wrong: {config:?}"),
    }
}

fn quick(config: ZkConfig) -> ZkConfig {
    config.with_connect_timeout(Duration::from_secs(3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connects_and_each_misconfiguration_names_its_cause() {
    let server = SecuredZk::standalone(TLS_PORT, &["tls"], &[]);
    let expired =
        SecuredZk::standalone(EXPIRED_PORT, &["tls"], &[("ZK_TLS_SERVER_CERT", "expired")]);
    let pki = secured::pki();
    let good = server.config("tls").with_tls(Some(secured::client_tls()));

    // Trusting the CA, presenting the client certificate: a working session.
    let session = Session::connect(&good).await.expect("TLS session");
    archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    assert!(session
        .client()
        .check_stat(paths::JOBS)
        .await
        .unwrap()
        .is_some());
    drop(session);

    // Plaintext client on the TLS-only port.
    let cause = refusal(&quick(server.config("plain"))).await;
    assert!(
        cause.contains("speaks TLS") && cause.contains("zookeeper.tls"),
        "{cause}"
    );

    // TLS client on a plaintext port (the shared test server).
    let plain_server = archivist_testkit::zk_connect();
    let cause = refusal(&quick(
        ZkConfig::new(plain_server.split(',').next().unwrap())
            .with_tls(Some(secured::client_tls())),
    ))
    .await;
    assert!(cause.contains("serves plaintext ZooKeeper"), "{cause}");

    // A CA that did not sign the server's certificate.
    let rogue = TlsConfig {
        ca: pki.join("rogue-ca.pem"),
        ..secured::client_tls()
    };
    let cause = refusal(&quick(server.config("rogue").with_tls(Some(rogue)))).await;
    assert!(
        cause.contains("not signed by a CA") && cause.contains("rogue-ca.pem"),
        "{cause}"
    );

    // Hostname mismatch: the certificate names 127.0.0.1 only.
    let by_name = ZkConfig {
        connect: format!("localhost:{TLS_PORT}"),
        ..good.clone()
    };
    let cause = refusal(&quick(by_name.clone())).await;
    assert!(
        cause.contains("hostname mismatch") && cause.contains("localhost"),
        "{cause}"
    );
    // ... which an operator can turn off (the chain is still checked).
    let unverified = by_name.clone().with_tls(Some(TlsConfig {
        verify_hostname: false,
        ..secured::client_tls()
    }));
    Session::connect(&unverified)
        .await
        .expect("hostname verification off connects");

    // No client certificate for a server that requires one.
    let anonymous_tls = TlsConfig::new(pki.join("ca.pem"));
    let cause = refusal(&quick(
        server.config("nocert").with_tls(Some(anonymous_tls)),
    ))
    .await;
    assert!(cause.contains("wants a client certificate"), "{cause}");

    // An expired server certificate.
    let at_expired = ZkConfig {
        connect: expired.connect.clone(),
        ..good.clone()
    };
    let cause = refusal(&quick(at_expired)).await;
    assert!(cause.contains("expired"), "{cause}");

    // Unreadable files are configuration errors naming the key.
    let missing = TlsConfig::new(pki.join("no-such-ca.pem"));
    match Session::connect(&good.clone().with_tls(Some(missing))).await {
        Err(EngineError::Config(msg)) => assert!(msg.contains("zookeeper.tls.ca"), "{msg}"),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforced_sasl_refuses_the_unauthenticated_and_sasl_acls_hold() {
    let server = SecuredZk::standalone(SASL_PORT, &["sasl"], &[]);
    let base = server.config("sasl");

    // Anonymous and digest-only clients are refused, with the cause.
    let cause = refusal(&base).await;
    assert!(
        cause.contains("refuses unauthenticated clients") && cause.contains("zookeeper.sasl"),
        "{cause}"
    );
    let digest_only = base
        .clone()
        .with_credentials(Credentials::parse("archivist:whatever"));
    let cause = refusal(&digest_only).await;
    assert!(cause.contains("refuses unauthenticated clients"), "{cause}");

    // A TLS client on this plaintext port, which closes unauthenticated sessions: still
    // recognised as plaintext ZooKeeper (outside testing of issue 21 got "closed the
    // connection during the TLS handshake").
    let cause = refusal(&quick(base.clone().with_tls(Some(secured::client_tls())))).await;
    assert!(cause.contains("serves plaintext ZooKeeper"), "{cause}");

    // A wrong password.
    let wrong = base.clone().with_sasl(Some(SaslConfig {
        credentials: Credentials {
            user: "archivist".into(),
            password: "not-the-password".into(),
        },
        reader: None,
    }));
    let cause = refusal(&wrong).await;
    assert!(
        cause.contains("SASL authentication as \"archivist\" failed"),
        "{cause}"
    );
    assert!(
        !cause.contains("not-the-password"),
        "the password leaked: {cause}"
    );

    // The daemons' user: a tree whose ACLs name the SASL users.
    let daemons = base
        .clone()
        .with_sasl(Some(secured::sasl("archivist", Some("ops"))));
    let session = Session::connect(&daemons).await.expect("SASL session");
    archivist_engine::tree::init(&session, "test")
        .await
        .unwrap();
    let (acls, _) = session.client().get_acl(paths::JOBS).await.unwrap();
    let named: Vec<String> = acls
        .iter()
        .map(|a| format!("{}:{}:{:?}", a.scheme(), a.id(), a.permission()))
        .collect();
    assert!(
        acls.iter().any(|a| a.scheme() == "sasl"
            && a.id() == "archivist"
            && a.permission() == zk::Permission::ALL),
        "{named:?}"
    );
    assert!(
        acls.iter().any(|a| a.scheme() == "sasl"
            && a.id() == "ops"
            && a.permission() == zk::Permission::READ),
        "{named:?}"
    );
    assert_eq!(acls.len(), 2, "{named:?}");
    let path = format!("{}/probe", paths::JOBS);
    session
        .client()
        .create(
            &path,
            b"secret",
            &session.create_options(zk::CreateMode::Persistent),
        )
        .await
        .unwrap();

    // The reader role reads and cannot write.
    let reader = Session::connect(&base.clone().with_sasl(Some(secured::sasl("ops", None))))
        .await
        .expect("reader session");
    let (data, _) = reader.client().get_data(&path).await.expect("reader reads");
    assert_eq!(data, b"secret");
    assert_eq!(
        reader
            .client()
            .set_data(&path, b"x", None)
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        reader.client().delete(&path, None).await.unwrap_err(),
        zk::Error::NoAuth
    );
}

/// The `zoo.cfg` block of docs/configuration.md ("Secured ZooKeeper") is what
/// `scripts/zk.sh start tls sasl` writes: the same client-security keys, the same values
/// (but for paths and the port), and no comment after a value (Java properties files
/// would take it as part of the value, and the server would refuse to start).
#[test]
fn the_documented_zoo_cfg_matches_what_zk_sh_writes() {
    const DOC_PORT: u16 = 2294;
    let server = SecuredZk::standalone(DOC_PORT, &["tls", "sasl"], &[]);
    let root = archivist_testkit::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let start = doc
        .find("```properties\n# zoo.cfg")
        .expect("the zoo.cfg block");
    let block = &doc[start + "```properties\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let written =
        std::fs::read_to_string(root.join(format!(".local/zk/standalone-{DOC_PORT}/zoo.cfg")))
            .unwrap();
    let pairs = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap_or((l, ""));
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect()
    };
    let (doc, written) = (pairs(block), pairs(&written));
    for (key, value) in &doc {
        assert!(!value.contains('#'), "{key}: a comment after the value");
        let Some(actual) = written.get(key) else {
            panic!("the doc sets {key}, zk.sh does not");
        };
        if !value.contains('/') && !key.ends_with("Port") {
            assert_eq!(value, actual, "{key}");
        }
    }
    let security = [
        "secureClient",
        "clientPort",
        "ssl.",
        "serverCnxnFactory",
        "authProvider",
        "enforce.",
        "sessionRequire",
    ];
    for key in written.keys() {
        if security.iter().any(|p| key.starts_with(p)) {
            assert!(
                doc.contains_key(key),
                "zk.sh writes {key}, the doc does not"
            );
        }
    }

    // `scripts/zk.sh cli tls sasl`, the zkCli the docs show for such a server, runs `ls /`.
    let out = std::process::Command::new(root.join("scripts/zk.sh"))
        .args(["cli", "tls", "sasl", "--", "ls", "/"])
        .env("ZK_PORT", DOC_PORT.to_string())
        .output()
        .expect("run scripts/zk.sh cli");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("[zookeeper]"),
        "zk.sh cli: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
}
