//! Secured ZooKeeper servers for tests: started by `scripts/zk.sh` with TLS, enforced SASL
//! or both, on ports of their own (never the shared plaintext server), stopped on drop.
//!
//! Certificates and SASL secrets come from `scripts/zk.sh pki` (made once with openssl
//! under `.local/zk/pki`): `ca.pem`, `client.pem`/`client.key`, `rogue-ca.pem` (a CA
//! nothing trusts), and the passwords of the SASL users `archivist` and `ops`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use archivist_engine::config::{Credentials, SaslConfig, TlsConfig};
use archivist_engine::ZkConfig;

use crate::{repo_root, unique_chroot};

/// Java heap of a test server: they hold a few small trees.
const TEST_HEAP: &str = "256m";

/// `zk.sh` variables, owned, plus the one that places the server.
fn owned(env: &[(&str, &str)], place: (&str, u16)) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain([(place.0.to_string(), place.1.to_string())])
        .collect()
}

/// One secured standalone server or 3-node ensemble.
pub struct SecuredZk {
    ensemble: bool,
    env: Vec<(String, String)>,
    /// Connect string (`127.0.0.1:port[,...]`).
    pub connect: String,
}

impl SecuredZk {
    /// A standalone server on `port` with `modes` (`tls`, `sasl`) and extra `zk.sh`
    /// variables (`ZK_TLS_SERVER_CERT=expired`, ...).
    ///
    /// # Panics
    /// When the server does not start.
    pub fn standalone(port: u16, modes: &[&str], env: &[(&str, &str)]) -> SecuredZk {
        Self::start(false, owned(env, ("ZK_PORT", port)), modes)
    }

    /// A 3-node ensemble with client ports `base+1..3` (quorum and election ports
    /// `base+11..13`, `base+21..23`).
    ///
    /// # Panics
    /// When the ensemble does not start.
    pub fn ensemble(base: u16, modes: &[&str], env: &[(&str, &str)]) -> SecuredZk {
        Self::start(true, owned(env, ("ZK_ENSEMBLE_BASE", base)), modes)
    }

    fn start(ensemble: bool, mut env: Vec<(String, String)>, modes: &[&str]) -> SecuredZk {
        if !env.iter().any(|(k, _)| k == "ZK_HEAP") {
            env.push(("ZK_HEAP".into(), TEST_HEAP.into()));
        }
        let mut zk = SecuredZk {
            ensemble,
            env,
            connect: String::new(),
        };
        // A server left over from an interrupted run may have other settings.
        zk.stop();
        let mut args = if ensemble {
            vec!["ensemble", "start"]
        } else {
            vec!["start"]
        };
        args.extend_from_slice(modes);
        let (ok, out) = zk.zk_status(&args);
        assert!(ok, "scripts/zk.sh {args:?} failed: {out}");
        zk.connect = out.lines().last().unwrap_or_default().trim().to_string();
        zk
    }

    /// Runs `scripts/zk.sh` with this server's variables; its stdout.
    pub fn zk(&self, args: &[&str]) -> String {
        self.zk_status(args).1
    }

    fn zk_status(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/zk.sh"))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("run scripts/zk.sh");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            if out.status.success() {
                String::new()
            } else {
                String::from_utf8_lossy(&out.stderr).to_string()
            }
        );
        (out.status.success(), text.trim().to_string())
    }

    fn stop(&self) {
        if self.ensemble {
            self.zk(&["ensemble", "stop"]);
        } else {
            self.zk(&["stop"]);
        }
    }

    /// A config for a fresh chroot on this server, with nothing secured yet.
    pub fn config(&self, name: &str) -> ZkConfig {
        ZkConfig::new(self.connect.clone())
            .with_chroot(unique_chroot(name))
            .with_session_timeout(Duration::from_secs(10))
            .with_connect_timeout(Duration::from_secs(5))
    }
}

impl Drop for SecuredZk {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory of test certificates and SASL secrets (made on first use).
///
/// # Panics
/// When `scripts/zk.sh pki` fails.
pub fn pki() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/zk.sh"))
        .arg("pki")
        .output()
        .expect("run scripts/zk.sh pki");
    assert!(out.status.success(), "scripts/zk.sh pki failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// TLS trusting the test CA, with the test client certificate.
pub fn client_tls() -> TlsConfig {
    let pki = pki();
    TlsConfig::new(pki.join("ca.pem")).with_identity(pki.join("client.pem"), pki.join("client.key"))
}

/// The password `scripts/zk.sh` made for a SASL user (`archivist` or `ops`).
///
/// # Panics
/// When the file is missing.
pub fn sasl_password(user: &str) -> String {
    std::fs::read_to_string(pki().join(format!("{user}.password")))
        .expect("read a SASL password made by scripts/zk.sh")
        .trim()
        .to_string()
}

/// SASL as `user`, with `reader` granted READ.
pub fn sasl(user: &str, reader: Option<&str>) -> SaslConfig {
    SaslConfig {
        credentials: Credentials {
            user: user.to_string(),
            password: sasl_password(user),
        },
        reader: reader.map(str::to_string),
    }
}

/// Does `127.0.0.1:port` complete a TLS handshake with a peer certificate the test CA
/// signed, presenting the server certificate as ZooKeeper's quorum peers do? Asked with
/// `openssl s_client` (zk.sh needs openssl for its certificates anyway), so a test can
/// prove an ensemble's quorum and election ports are encrypted.
///
/// # Panics
/// When openssl cannot be run.
pub fn speaks_verified_tls(port: u16) -> bool {
    let pki = pki();
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-verify_return_error", "-verify_ip", "127.0.0.1", "-CAfile"])
        .arg(pki.join("ca.pem"))
        .arg("-cert")
        .arg(pki.join("server.pem"))
        .arg("-key")
        .arg(pki.join("server.key"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("Verify return code: 0 (ok)") && !text.contains("Cipher is (NONE)")
}
