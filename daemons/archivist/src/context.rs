//! Turning global options and the configuration file into a ZooKeeper configuration and
//! a session. Flags and their environment variables win over the file, which wins over
//! the defaults.

use std::time::Duration;

use anyhow::{Context, Result};
use archivist_engine::config::{
    Credentials, SaslConfig, TlsConfig, DEFAULT_CONNECT, DEFAULT_SESSION_TIMEOUT,
};
use archivist_engine::schema::paths::DEFAULT_CHROOT;
use archivist_engine::{Session, ZkConfig};

use crate::cli::GlobalOpts;
use crate::config::{self, FileConfig, SaslSection, TlsSection};

/// The variable that may hold the SASL password (a flag would show it in `ps`).
pub const SASL_PASSWORD_VAR: &str = "ARCHIVIST_ZK_SASL_PASSWORD";

/// The variable holding digest credentials `user:password` (no flag: see
/// [`refuse_secret_flags`]).
pub const AUTH_VAR: &str = "ARCHIVIST_ZK_AUTH";

/// The variable holding the read-only digest user `user:password`.
pub const READER_VAR: &str = "ARCHIVIST_ZK_READER";

/// The variable holding the database URL (it may carry a password, so it is not a
/// flag's `env`: a password in `--database-url` is refused, one here is fine).
pub const DATABASE_URL_VAR: &str = "ARCHIVIST_DATABASE_URL";

/// Secrets are never taken from the command line, which every user of the host can read
/// (`ps`, `/proc/*/cmdline`) and shells keep in their history. The flags exist only to
/// say so and where the secret goes instead; the value given is never printed.
fn refuse_secret_flags(global: &GlobalOpts) -> Result<()> {
    let given = [
        (
            global.zk_auth.is_some(),
            "--zk-auth",
            AUTH_VAR,
            "zookeeper.auth",
        ),
        (
            global.zk_reader.is_some(),
            "--zk-reader",
            READER_VAR,
            "zookeeper.reader",
        ),
        (
            global.zk_sasl_password.is_some(),
            "--zk-sasl-password",
            SASL_PASSWORD_VAR,
            "zookeeper.sasl.password_file",
        ),
    ];
    if let Some(url) = &global.database_url {
        if archivist_db::url::has_password(url) {
            anyhow::bail!(
                "--database-url {} is refused: a password on the command line is readable by every \
                 user of this host (ps); set {DATABASE_URL_VAR} in the environment or database.url in \
                 the configuration file",
                archivist_db::redact(url)
            );
        }
    }
    for (set, flag, var, key) in given {
        if set {
            anyhow::bail!(
                "{flag} is refused: a password on the command line is readable by every user \
                 of this host (ps); set {var} in the environment or {key} in the configuration file"
            );
        }
    }
    Ok(())
}

/// The configuration file (and `ARCHIVIST__...` overrides) named by the global options.
pub fn file_config(global: &GlobalOpts) -> Result<FileConfig> {
    config::load(global.config.as_deref())
}

/// Below this session timeout (ZooKeeper's default minimum, 2 x the sample tickTime of
/// 2 s) a warning names the rule of docs/operations.md ("Failover and the session
/// timeout"); the value is still used (tests and fast-tick ensembles want it).
const MIN_SESSION_TIMEOUT_MS: u64 = 4000;

/// The ZooKeeper configuration the global options and the file describe.
pub fn zk_config(global: &GlobalOpts) -> Result<ZkConfig> {
    refuse_secret_flags(global)?;
    let file = file_config(global)?.zookeeper;
    let tls = tls_config(global, file.tls.unwrap_or_default())?;
    let sasl = sasl_config(
        global,
        file.sasl.unwrap_or_default(),
        std::env::var(SASL_PASSWORD_VAR).ok(),
    )?;
    let credentials = digest(AUTH_VAR, file.auth, "zookeeper.auth")?;
    let reader = digest(READER_VAR, file.reader, "zookeeper.reader")?;
    let connect = global
        .zk
        .clone()
        .or(file.connect)
        .unwrap_or_else(|| DEFAULT_CONNECT.to_string());
    let chroot = global
        .chroot
        .clone()
        .or(file.chroot)
        .unwrap_or_else(|| DEFAULT_CHROOT.to_string());
    let timeout = global
        .session_timeout_ms
        .or(file.session_timeout_ms)
        .unwrap_or(DEFAULT_SESSION_TIMEOUT.as_millis() as u64);
    if timeout < MIN_SESSION_TIMEOUT_MS {
        tracing::warn!(
            session_timeout_ms = timeout,
            "zookeeper.session_timeout_ms is below {MIN_SESSION_TIMEOUT_MS} ms: the server raises it to \
             2 x tickTime at least, and it must exceed detection + election + reconnect (x2) or a \
             leader election loses every session and its work (docs/operations.md, failover)"
        );
    }
    Ok(ZkConfig::new(connect)
        .with_chroot(chroot)
        .with_session_timeout(Duration::from_millis(timeout))
        .with_credentials(credentials)
        .with_reader(reader)
        .with_tls(tls)
        .with_sasl(sasl))
}

/// Digest `user:password` from the variable `var`, else the file's `key`.
fn digest(var: &str, file: Option<String>, key: &str) -> Result<Option<Credentials>> {
    std::env::var(var)
        .ok()
        .or(file)
        .map(|s| {
            Credentials::parse(&s).with_context(|| format!("{var} / {key} must be user:password"))
        })
        .transpose()
}

/// TLS from the flags over `zookeeper.tls`: on when a CA is named.
fn tls_config(global: &GlobalOpts, file: TlsSection) -> Result<Option<TlsConfig>> {
    let cert = global.zk_tls_cert.clone().or(file.cert);
    let key = global.zk_tls_key.clone().or(file.key);
    let Some(ca) = global.zk_tls_ca.clone().or(file.ca) else {
        if cert.is_some() || key.is_some() {
            anyhow::bail!("zookeeper.tls: a client certificate needs a CA to trust (--zk-tls-ca or zookeeper.tls.ca)");
        }
        return Ok(None);
    };
    if cert.is_some() != key.is_some() {
        anyhow::bail!("zookeeper.tls: give both the client certificate and its key, or neither");
    }
    Ok(Some(TlsConfig {
        ca,
        cert,
        key,
        verify_hostname: file.verify_hostname.unwrap_or(true),
    }))
}

/// SASL from the flags over `zookeeper.sasl`: on when a user is named. The password is
/// read from the password file, else from [`SASL_PASSWORD_VAR`].
fn sasl_config(
    global: &GlobalOpts,
    file: SaslSection,
    password_var: Option<String>,
) -> Result<Option<SaslConfig>> {
    // An empty reader (`ARCHIVIST_ZK_SASL_READER=`) is no reader, not an ACL for the
    // empty SASL id; a name ZooKeeper would read as more than one id is refused.
    let reader = global
        .zk_sasl_reader
        .clone()
        .or(file.reader)
        .filter(|r| !r.trim().is_empty());
    if let Some(r) = &reader {
        if r.trim() != r || r.contains([',', ':', '/']) || r.chars().any(char::is_whitespace) {
            anyhow::bail!("zookeeper.sasl.reader {r:?} is not one SASL user name (no spaces, commas, colons or slashes)");
        }
    }
    let Some(user) = global.zk_sasl_user.clone().or(file.user) else {
        return Ok(None);
    };
    let password = match global.zk_sasl_password_file.clone().or(file.password_file) {
        Some(path) => read_password_file(&path)?,
        None => password_var.with_context(|| {
            format!("zookeeper.sasl: user {user:?} needs a password: zookeeper.sasl.password_file, --zk-sasl-password-file or {SASL_PASSWORD_VAR}")
        })?,
    };
    if password.is_empty() {
        // The server would only say "authentication failed".
        anyhow::bail!("{SASL_PASSWORD_VAR} is empty: set it to user {user:?}'s password, or use zookeeper.sasl.password_file");
    }
    Ok(Some(SaslConfig {
        credentials: Credentials { user, password },
        reader,
    }))
}

/// The SASL password in `path`, without its trailing line break. An empty file is an
/// error naming the file (the server would only say "authentication failed"); a file
/// that group or others may read is used, with a warning (it holds a secret).
fn read_password_file(path: &std::path::Path) -> Result<String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("zookeeper.sasl.password_file: reading {shown}"))?;
    let password = text.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        anyhow::bail!("zookeeper.sasl.password_file: {shown} is empty: write the password in it");
    }
    if let Some(mode) = loose_mode(path) {
        tracing::warn!(
            file = %shown,
            mode = format!("{mode:o}"),
            "zookeeper.sasl.password_file is readable by group or others: chmod 600 it"
        );
    }
    Ok(password.to_string())
}

/// The file's permission bits if group or others may read it.
#[cfg(unix)]
fn loose_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn loose_mode(_: &std::path::Path) -> Option<u32> {
    None
}

/// The directory Archivist keeps its default database in: `$XDG_DATA_HOME/archivist`,
/// else `~/.local/share/archivist` (the XDG base directory rule), else
/// `/var/lib/archivist` for a user without a home.
pub fn data_dir() -> std::path::PathBuf {
    let nonempty = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    if let Some(dir) = nonempty("XDG_DATA_HOME") {
        return std::path::PathBuf::from(dir).join("archivist");
    }
    match nonempty("HOME") {
        Some(home) => std::path::PathBuf::from(home).join(".local/share/archivist"),
        None => std::path::PathBuf::from("/var/lib/archivist"),
    }
}

/// The researcher's media store directory when none is configured: `<data dir>/media`,
/// next to the default database, so episodes outlive a cleaned temporary directory and
/// the quickstart needs nothing new (docs/researcher.md, "Renditions and the media store").
pub fn with_default_media_dir(
    mut s: archivist_researcher::ResearcherSettings,
) -> archivist_researcher::ResearcherSettings {
    if s.media.dir.is_none() {
        s.media.dir = Some(data_dir().join("media"));
    }
    s
}

/// The database when none is configured: a SQLite file in [`data_dir`], shared by the
/// daemons of one machine (so the quickstart and `run --all` need nothing new).
pub fn default_database_url() -> String {
    format!("sqlite://{}", data_dir().join("archivist.db").display())
}

/// The database URL: `--database-url`, else [`DATABASE_URL_VAR`], else `database.url`,
/// else [`default_database_url`].
///
/// A password taken from a configuration file that group or others may read gets a
/// warning, as the SASL password file does (outside 22 finding 15).
pub fn database_url(global: &GlobalOpts) -> Result<String> {
    refuse_secret_flags(global)?;
    let file = file_config(global)?.database;
    let given = global.database_url.clone().or_else(|| {
        std::env::var(DATABASE_URL_VAR)
            .ok()
            .filter(|u| !u.is_empty())
    });
    if given.is_none() {
        if let (Some(url), Some(path)) = (&file.url, global.config.as_deref()) {
            if archivist_db::redact(url) != *url {
                if let Some(mode) = loose_mode(path) {
                    tracing::warn!(
                        file = %path.display(),
                        mode = format!("{mode:o}"),
                        "database.url holds a password and the configuration file is readable by group or others: chmod 600 it, or put the URL in {DATABASE_URL_VAR}"
                    );
                }
            }
        }
    }
    Ok(given.or(file.url).unwrap_or_else(default_database_url))
}

/// Opens the database the options name, brings its schema up to date and checks it
/// belongs to the tree (every daemon and command that writes the catalog or the research
/// archive starts here; see [`crate::deployment`]).
pub async fn database(global: &GlobalOpts) -> Result<archivist_db::Database> {
    open_bound(&database_url(global)?, &zk_config(global)?).await
}

/// [`database`] from a URL and a ZooKeeper configuration (for `run`, whose roles open
/// it again after a failure at start).
pub async fn open_bound(url: &str, zk: &ZkConfig) -> Result<archivist_db::Database> {
    let db = archivist_db::Database::connect(url).await?;
    tracing::debug!(database = db.shown_url(), "database open");
    bind_to_tree(zk, &db, crate::deployment::Mode::Bind).await?;
    Ok(db)
}

/// Opens the database for the read-only commands (`status`, `results`, `export`, `jobs
/// list`, `fsck` without `--repair`): nothing is written to it (a SQLite file is opened
/// `mode=ro`, not migrated), so a file the operator may only read, or a backup on a
/// read-only mount, serves; it is checked against the tree but never bound.
///
/// A SQLite file that does not exist is no database yet when the tree was never bound to
/// one (nothing curated, nothing recorded): the command reads an empty one in memory. A
/// bound tree's missing file is refused (deleted, or a wrong path).
pub async fn database_read_only(global: &GlobalOpts) -> Result<archivist_db::Database> {
    let url = database_url(global)?;
    let zk = zk_config(global)?;
    let db = match archivist_db::Database::connect_read_only(&url).await {
        Ok(db) => db,
        Err(missing @ archivist_db::DbError::Missing { .. }) => {
            if crate::deployment::tree_is_bound(&zk).await? {
                anyhow::bail!(
                    "{missing}, but the tree {} was bound to its database: it was deleted, or \
                     the path is wrong (see docs/operations.md, \"Backup and restore\")",
                    zk.chroot
                );
            }
            tracing::debug!(%missing, "no database yet: reading an empty one");
            archivist_db::Database::connect("sqlite::memory:").await?
        }
        Err(e) => return Err(e.into()),
    };
    tracing::debug!(database = db.shown_url(), "database open read-only");
    bind_to_tree(&zk, &db, crate::deployment::Mode::Check).await?;
    Ok(db)
}

/// Opens the database and brings its schema up to date, without the tree check: for
/// `init` and `run`, which bind it once the tree exists.
pub async fn open_database(global: &GlobalOpts) -> Result<archivist_db::Database> {
    let url = database_url(global)?;
    let db = archivist_db::Database::connect(&url).await?;
    tracing::debug!(database = db.shown_url(), "database open");
    Ok(db)
}

/// Checks (and binds, as `mode` allows) the database against the tree, over a short
/// session of its own. A tree not initialised yet is left to the command's own check
/// (`init` binds after making it).
pub async fn bind_to_tree(
    zk: &ZkConfig,
    db: &archivist_db::Database,
    mode: crate::deployment::Mode,
) -> Result<()> {
    let mut waited = false;
    let session = loop {
        // Said at once when ZooKeeper is slow to answer, not after its connect timeout.
        let attempt = Session::connect_existing(zk);
        tokio::pin!(attempt);
        let connected = match tokio::time::timeout(Duration::from_secs(1), &mut attempt).await {
            Ok(connected) => connected,
            Err(_) => {
                if !waited && mode != crate::deployment::Mode::Check {
                    tracing::warn!(zk = %zk.connect, database = db.shown_url(), "waiting for ZooKeeper to check that the database belongs to the tree");
                    waited = true;
                }
                attempt.await
            }
        };
        match connected {
            Ok(session) => break session,
            Err(archivist_engine::EngineError::NotInitialised { .. }) => return Ok(()),
            // A daemon started before ZooKeeper answers waits for it (it could do no work
            // without it either), and checks the database before it writes anything.
            Err(e @ archivist_engine::EngineError::Unreachable { .. })
                if mode != crate::deployment::Mode::Check =>
            {
                if !waited {
                    tracing::warn!(error = %e, database = db.shown_url(), "waiting for ZooKeeper to check that the database belongs to the tree");
                    waited = true;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let result = crate::deployment::bind(&session, db, mode).await;
    session.close(Duration::from_secs(2)).await;
    result
}

/// Connects and checks the tree was initialised (for admin commands), creating nothing:
/// not even a missing chroot (only `init` makes the tree).
pub async fn connect_initialised(global: &GlobalOpts) -> Result<Session> {
    let session = Session::connect_existing(&zk_config(global)?).await?;
    archivist_engine::tree::check_initialised(&session).await?;
    Ok(session)
}

/// [`connect_initialised`] for a command that writes records (admin actions, batches,
/// curation): it also measures how far ZooKeeper's clock is from this host's, so the
/// events it stamps fall in order with the daemons' (`archivist_engine::clock::stamp_now`).
/// A session that may not write `/clock` stamps with the host's clock.
pub async fn connect_to_write(global: &GlobalOpts) -> Result<Session> {
    let session = connect_initialised(global).await?;
    if let Err(e) = archivist_engine::clock::zk_now_ms(&session).await {
        tracing::debug!(error = %e, "could not read ZooKeeper's clock: events carry this host's time");
    }
    Ok(session)
}

/// [`connect_initialised`] for `fsck`: a damaged `/meta` (garbage, not a newer schema)
/// is let through, so fsck runs and names it (`archivist_engine::tree::check_present`).
pub async fn connect_for_fsck(global: &GlobalOpts) -> Result<Session> {
    let session = Session::connect_existing(&zk_config(global)?).await?;
    archivist_engine::tree::check_present(&session).await?;
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn password_file(name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("archivist-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn global(args: &[&str]) -> GlobalOpts {
        use clap::Parser;
        let mut all = vec!["archivist"];
        all.extend_from_slice(args);
        all.push("init");
        crate::cli::Cli::try_parse_from(all).expect("parse").global
    }

    #[test]
    fn a_database_password_on_the_command_line_is_refused_unshown() {
        let err = database_url(&global(&["--database-url", "postgres://a:hunter2@h/db"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refused") && err.contains("a:***@h/db"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        let url = database_url(&global(&["--database-url", "postgres://a@h/db"])).unwrap();
        assert_eq!(url, "postgres://a@h/db");
    }

    #[test]
    fn the_default_database_is_a_sqlite_file_in_the_data_dir() {
        let url = default_database_url();
        assert!(url.starts_with("sqlite://"), "{url}");
        assert!(url.ends_with("/archivist/archivist.db"), "{url}");
    }

    #[test]
    fn an_empty_password_file_is_named_as_empty() {
        for (name, text) in [("empty.pw", ""), ("nl.pw", "\n"), ("crlf.pw", "\r\n")] {
            let path = password_file(name, text, 0o600);
            let err = read_password_file(&path).unwrap_err().to_string();
            assert!(err.contains("is empty") && err.contains(name), "{err}");
        }
    }

    #[test]
    fn a_password_file_loses_its_line_break_and_loose_modes_are_seen() {
        let path = password_file("good.pw", "secret\n", 0o600);
        assert_eq!(read_password_file(&path).unwrap(), "secret");
        assert_eq!(loose_mode(&path), None);
        let path = password_file("loose.pw", "secret\n", 0o644);
        assert_eq!(read_password_file(&path).unwrap(), "secret");
        assert_eq!(loose_mode(&path), Some(0o644));
    }
}
