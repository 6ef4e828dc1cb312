//! Where ZooKeeper is and how to talk to it.

use std::time::Duration;

use znode_schema::paths::DEFAULT_CHROOT;

/// Default connect string.
pub const DEFAULT_CONNECT: &str = "127.0.0.1:2181";

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
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig {
            connect: DEFAULT_CONNECT.to_string(),
            chroot: DEFAULT_CHROOT.to_string(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            credentials: None,
            reader: None,
        }
    }
}

impl ZkConfig {
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

    /// Sets the session timeout. Defaults to 10 s.
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
