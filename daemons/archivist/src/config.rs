//! The configuration file: one YAML file for every daemon, every setting also settable
//! by environment variable.
//!
//! Precedence, lowest first: built-in defaults, the file (`--config FILE` or
//! `ARCHIVIST_CONFIG`), environment variables `ARCHIVIST__<SECTION>__<KEY>` (for example
//! `ARCHIVIST__PLANNER__MAX_CLIPS=100`; nested keys add more `__`), and for single-daemon
//! commands their own flags. Errors name the key's path (`planner.max_clips`).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "ARCHIVIST__";

/// ZooKeeper settings in the file (the global flags win when given).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ZkSection {
    /// Connect string.
    pub connect: Option<String>,
    /// Chroot.
    pub chroot: Option<String>,
    /// Session timeout (ms).
    pub session_timeout_ms: Option<u64>,
    /// Digest credentials `user:password`.
    pub auth: Option<String>,
    /// Read-only digest user `user:password`.
    pub reader: Option<String>,
    /// TLS to the servers' `secureClientPort` (absent: plaintext).
    pub tls: Option<TlsSection>,
    /// SASL authentication (absent: none).
    pub sasl: Option<SaslSection>,
}

/// `zookeeper.tls`: PEM files, read when connecting.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// CA certificate(s) the servers' certificates chain to.
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate, for `ssl.clientAuth=need`.
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's key.
    pub key: Option<std::path::PathBuf>,
    /// Hostname verification (default on).
    pub verify_hostname: Option<bool>,
}

/// `zookeeper.sasl`: DIGEST-MD5 user; the password comes from a file or the environment,
/// never from the file itself or a flag.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SaslSection {
    /// SASL user.
    pub user: Option<String>,
    /// File holding the password (one line).
    pub password_file: Option<std::path::PathBuf>,
    /// SASL user granted READ on the nodes this process creates.
    pub reader: Option<String>,
}

/// `database`: where the catalog and the research archive live.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSection {
    /// `sqlite://PATH` or `postgres://USER:PASSWORD@HOST:PORT/DB` (absent: a SQLite file
    /// in the data directory; see `context::default_database_url`).
    pub url: Option<String>,
}

/// Everything the file can set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// ZooKeeper.
    pub zookeeper: ZkSection,
    /// The database.
    pub database: DatabaseSection,
    /// Address for /metrics, /healthz and /readyz.
    pub metrics_addr: Option<SocketAddr>,
    /// Planner settings.
    pub planner: archivist_planner::PlannerSettings,
    /// Researcher settings.
    pub researcher: archivist_researcher::ResearcherSettings,
    /// Recorder settings.
    pub recorder: archivist_recorder::RecorderSettings,
    /// Reaper settings.
    pub reaper: archivist_recorder::ReaperSettings,
    /// Curator daemon settings.
    pub curator: archivist_catalog::CuratorSettings,
    /// Batcher daemon settings.
    pub batcher: archivist_batches::BatcherSettings,
    /// Web console settings (`archivist console`).
    pub console: archivist_console::ConsoleSettings,
}

fn scalar(text: &str) -> serde_yaml::Value {
    // Blanks parse as YAML null, which turned `ARCHIVIST__CONSOLE__ACTIONS_TOKEN` of 16
    // spaces into "no token" and a silently read-only console (outside try 24c L5):
    // a value given but blank stays the text it is, for the setting's own check.
    if !text.is_empty() && text.trim().is_empty() {
        return serde_yaml::Value::String(text.to_string());
    }
    serde_yaml::from_str(text).unwrap_or_else(|_| serde_yaml::Value::String(text.to_string()))
}

fn set_path(node: &mut serde_yaml::Value, keys: &[String], value: serde_yaml::Value) {
    let Some((first, rest)) = keys.split_first() else {
        *node = value;
        return;
    };
    if !node.is_mapping() {
        *node = serde_yaml::Value::Mapping(Default::default());
    }
    if let Some(map) = node.as_mapping_mut() {
        let child = map
            .entry(serde_yaml::Value::String(first.clone()))
            .or_insert(serde_yaml::Value::Null);
        set_path(child, rest, value);
    }
}

/// Applies `ARCHIVIST__A__B=value` overrides onto a YAML tree.
pub fn apply_env(
    mut root: serde_yaml::Value,
    vars: impl IntoIterator<Item = (String, String)>,
) -> serde_yaml::Value {
    for (name, value) in vars {
        let Some(path) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let keys: Vec<String> = path.split("__").map(|k| k.to_ascii_lowercase()).collect();
        if keys.iter().any(String::is_empty) {
            continue;
        }
        set_path(&mut root, &keys, scalar(&value));
    }
    root
}

/// Parses a config text plus overrides, naming the key path of any error.
pub fn parse(
    text: &str,
    vars: impl IntoIterator<Item = (String, String)>,
    origin: &str,
) -> Result<FileConfig> {
    let root: serde_yaml::Value = if text.trim().is_empty() {
        serde_yaml::Value::Mapping(Default::default())
    } else {
        serde_yaml::from_str(text).with_context(|| format!("{origin}: not YAML"))?
    };
    let root = apply_env(root, vars);
    serde_path_to_error::deserialize::<_, FileConfig>(root).map_err(|e| {
        let path = e.path().to_string();
        anyhow!(
            "{origin}: {}: {}",
            if path == "." {
                "(top level)".to_string()
            } else {
                path
            },
            e.into_inner()
        )
    })
}

/// Loads the file (if any) and the environment overrides.
pub fn load(file: Option<&Path>) -> Result<FileConfig> {
    let (text, origin) = match file {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (String::new(), "environment".to_string()),
    };
    parse(&text, std::env::vars(), &origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// The YAML block of docs/configuration.md says it lists every key with its default:
    /// it must parse (no unknown key) and equal the defaults.
    #[test]
    fn the_documented_file_is_the_defaults() {
        let doc = include_str!("../../../docs/configuration.md");
        let block = doc
            .split("```yaml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a yaml block in docs/configuration.md");
        let block = block.replace("<version>", env!("CARGO_PKG_VERSION"));
        let mut documented = parse(&block, vars(&[]), "docs/configuration.md").unwrap();
        let defaults = parse("", vars(&[]), "t").unwrap();
        // The zookeeper section shows what the flags default to.
        let zk = &documented.zookeeper;
        assert_eq!(
            zk.connect.as_deref(),
            Some(archivist_engine::config::DEFAULT_CONNECT)
        );
        assert_eq!(
            zk.chroot.as_deref(),
            Some(archivist_engine::schema::paths::DEFAULT_CHROOT)
        );
        assert_eq!(
            zk.session_timeout_ms,
            Some(archivist_engine::config::DEFAULT_SESSION_TIMEOUT.as_millis() as u64)
        );
        assert_eq!(zk.tls, None);
        assert_eq!(zk.sasl, None);
        documented.zookeeper = defaults.zookeeper.clone();
        assert_eq!(documented, defaults);
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let c = parse("", vars(&[]), "t").unwrap();
        assert_eq!(c.planner, archivist_planner::PlannerSettings::default());
    }

    #[test]
    fn environment_overrides_the_file() {
        let c = parse(
            "planner:\n  max_clips: 7\n",
            vars(&[
                ("ARCHIVIST__PLANNER__MAX_CLIPS", "9"),
                ("ARCHIVIST__ZOOKEEPER__CHROOT", "/x"),
            ]),
            "t",
        )
        .unwrap();
        assert_eq!(c.planner.max_clips, 9);
        assert_eq!(c.zookeeper.chroot.as_deref(), Some("/x"));
    }

    /// Outside try 24c L5: a blank token from the environment became "no token" (a
    /// read-only console, silently); it is the blank text now, which the console's
    /// check refuses.
    #[test]
    fn a_blank_environment_value_stays_blank_text() {
        let c = parse(
            "",
            vars(&[("ARCHIVIST__CONSOLE__ACTIONS_TOKEN", "                ")]),
            "t",
        )
        .unwrap();
        let token = c.console.actions_token.as_ref().expect("a token, blank");
        assert_eq!(token.0, " ".repeat(16));
        assert!(c.console.check().is_err());
    }

    #[test]
    fn errors_name_the_key_path() {
        let err = parse("planner:\n  max_clips: many\n", vars(&[]), "f.yml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("planner.max_clips"), "{err}");
        let err = parse("planer: {}\n", vars(&[]), "f.yml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("planer"), "{err}");
    }
}
