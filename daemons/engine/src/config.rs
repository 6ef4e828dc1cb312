//! Where ZooKeeper is and how to talk to it.

use std::path::PathBuf;
use std::time::Duration;

use znode_schema::paths::DEFAULT_CHROOT;

/// Default connect string.
pub const DEFAULT_CONNECT: &str = "127.0.0.1:2181";

/// Default session timeout. A session must outlive a leader election: when the leader
/// fails, clients are disconnected until a new leader serves, and a client that stays
/// disconnected for a whole session timeout gives its locks up. With ZooKeeper's usual
/// `tickTime=2000, syncLimit=5`, followers notice a dead leader host after up to 10 s and
/// elect a new one in well under a second to a few seconds under load, so 20 s leaves a
/// margin while staying inside the server's default range (2 to 20 ticks: 4 to 40 s).
/// See docs/operations.md ("Failover").
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Digest credentials (`user:password`) for ACL-protected trees. Never logged: `Debug`
/// prints the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ user: {:?}, password: <hidden> }}",
            self.user
        )
    }
}

impl Credentials {
    /// Parses `user:password`.
    pub fn parse(text: &str) -> Option<Credentials> {
        let (user, password) = text.split_once(':')?;
        (!user.is_empty()).then(|| Credentials {
            user: user.to_string(),
            password: password.to_string(),
        })
    }
}

/// TLS to ZooKeeper's `secureClientPort`: whom to trust and who we are. Paths to PEM
/// files, read when connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// CA certificate(s) the server's certificate must chain to.
    pub ca: PathBuf,
    /// Client certificate (chain), for servers with `ssl.clientAuth=need`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// Check that the server's certificate names the host connected to. On unless an
    /// operator turns it off (which opens the connection to a man in the middle).
    pub verify_hostname: bool,
}

impl TlsConfig {
    /// Trusting `ca`, no client certificate, hostname verification on.
    pub fn new(ca: impl Into<PathBuf>) -> TlsConfig {
        TlsConfig {
            ca: ca.into(),
            cert: None,
            key: None,
            verify_hostname: true,
        }
    }

    /// Presents this certificate and key to the server.
    pub fn with_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }
}

/// SASL authentication when the session is established (DIGEST-MD5, the mechanism of
/// ZooKeeper's `DigestLoginModule`). The ACLs this process sets then name `sasl:<user>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// User and password (the password never prints).
    pub credentials: Credentials,
    /// SASL user granted READ (and nothing else) on the nodes this process creates.
    pub reader: Option<String>,
}

/// How to reach ZooKeeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkConfig {
    /// `host:port[,host:port...]`, optionally followed by a chroot (`/path`).
    pub connect: String,
    /// Chroot under which the tree lives, used when `connect` names none.
    pub chroot: String,
    /// Session timeout.
    pub session_timeout: Duration,
    /// How long to try to connect before reporting ZooKeeper unreachable.
    pub connect_timeout: Duration,
    /// Digest credentials, if the tree is ACL-protected.
    pub credentials: Option<Credentials>,
    /// Digest user allowed to read (but not write) when ACLs are on.
    pub reader: Option<Credentials>,
    /// TLS, when the servers serve clients over TLS.
    pub tls: Option<TlsConfig>,
    /// SASL, when the servers authenticate clients that way (or enforce it).
    pub sasl: Option<SaslConfig>,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig {
            connect: DEFAULT_CONNECT.to_string(),
            chroot: DEFAULT_CHROOT.to_string(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connect_timeout: Duration::from_secs(10),
            credentials: None,
            reader: None,
            tls: None,
            sasl: None,
        }
    }
}

impl ZkConfig {
    /// Who a session of this config authenticates as, for an error message (never a
    /// password): the SASL and digest users, or anyone.
    pub fn identity(&self) -> String {
        let mut ids = Vec::new();
        if let Some(sasl) = &self.sasl {
            ids.push(format!("SASL user {:?}", sasl.credentials.user));
        }
        if let Some(digest) = &self.credentials {
            ids.push(format!("digest user {:?}", digest.user));
        }
        if ids.is_empty() {
            "anyone (no zookeeper.sasl or zookeeper.auth)".to_string()
        } else {
            ids.join(" and ")
        }
    }

    /// A config for a connect string, with defaults for the rest.
    pub fn new(connect: impl Into<String>) -> ZkConfig {
        ZkConfig {
            connect: connect.into(),
            ..ZkConfig::default()
        }
    }

    /// Sets the chroot. Defaults to `/archivist`.
    pub fn with_chroot(mut self, chroot: impl Into<String>) -> Self {
        self.chroot = chroot.into();
        self
    }

    /// Sets the session timeout. Defaults to [`DEFAULT_SESSION_TIMEOUT`].
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the connect timeout. Defaults to 10 s.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets digest credentials. Defaults to none (open ACLs).
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Sets the read-only digest user granted READ on nodes this session creates.
    pub fn with_reader(mut self, reader: Option<Credentials>) -> Self {
        self.reader = reader;
        self
    }

    /// Connects over TLS. Defaults to plaintext.
    pub fn with_tls(mut self, tls: Option<TlsConfig>) -> Self {
        self.tls = tls;
        self
    }

    /// Authenticates with SASL. Defaults to none.
    pub fn with_sasl(mut self, sasl: Option<SaslConfig>) -> Self {
        self.sasl = sasl;
        self
    }

    /// Splits `connect` into hosts and the effective chroot (a chroot in the connect
    /// string wins over [`ZkConfig::chroot`]).
    pub fn hosts_and_chroot(&self) -> (String, String) {
        match self.connect.find('/') {
            Some(i) => (self.connect[..i].to_string(), self.connect[i..].to_string()),
            None => (self.connect.clone(), self.chroot.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chroot_in_connect_string_wins() {
        let c = ZkConfig::new("a:1,b:2/custom");
        assert_eq!(c.hosts_and_chroot(), ("a:1,b:2".into(), "/custom".into()));
        let c = ZkConfig::new("a:1");
        assert_eq!(c.hosts_and_chroot(), ("a:1".into(), "/archivist".into()));
    }

    #[test]
    fn credentials_never_print_the_password() {
        let c = Credentials::parse("ops:s3cret").unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(Credentials::parse("nocolon").is_none());
    }
}
