//! Turning global options and the configuration file into a ZooKeeper configuration and
//! a session. Flags and their environment variables win over the file, which wins over
//! the defaults.

use std::time::Duration;

use anyhow::{Context, Result};
use archivist_engine::config::{Credentials, DEFAULT_CONNECT};
use archivist_engine::schema::paths::DEFAULT_CHROOT;
use archivist_engine::{Session, ZkConfig};

use crate::cli::GlobalOpts;
use crate::config::{self, FileConfig};

/// The configuration file (and `ARCHIVIST__...` overrides) named by the global options.
pub fn file_config(global: &GlobalOpts) -> Result<FileConfig> {
    config::load(global.config.as_deref())
}

/// The ZooKeeper configuration the global options and the file describe.
pub fn zk_config(global: &GlobalOpts) -> Result<ZkConfig> {
    let file = file_config(global)?.zookeeper;
    let credentials = global
        .zk_auth
        .as_deref()
        .or(file.auth.as_deref())
        .map(|s| Credentials::parse(s).context("--zk-auth must be user:password"))
        .transpose()?;
    let reader = global
        .zk_reader
        .as_deref()
        .or(file.reader.as_deref())
        .map(|s| Credentials::parse(s).context("--zk-reader must be user:password"))
        .transpose()?;
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
        .unwrap_or(10_000);
    Ok(ZkConfig::new(connect)
        .with_chroot(chroot)
        .with_session_timeout(Duration::from_millis(timeout))
        .with_credentials(credentials)
        .with_reader(reader))
}

/// Connects and checks the tree was initialised (for admin commands).
pub async fn connect_initialised(global: &GlobalOpts) -> Result<Session> {
    let session = Session::connect(&zk_config(global)?).await?;
    archivist_engine::tree::check_initialised(&session).await?;
    Ok(session)
}
