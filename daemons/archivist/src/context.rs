//! Turning global options into a ZooKeeper configuration and a session.

use anyhow::{Context, Result};
use archivist_engine::config::Credentials;
use archivist_engine::{Session, ZkConfig};

use crate::cli::GlobalOpts;

/// The ZooKeeper configuration the global options describe.
pub fn zk_config(global: &GlobalOpts) -> Result<ZkConfig> {
    let credentials = global
        .zk_auth
        .as_deref()
        .map(|s| Credentials::parse(s).context("--zk-auth must be user:password"))
        .transpose()?;
    let reader = global
        .zk_reader
        .as_deref()
        .map(|s| Credentials::parse(s).context("--zk-reader must be user:password"))
        .transpose()?;
    Ok(ZkConfig::new(&global.zk)
        .with_chroot(&global.chroot)
        .with_session_timeout(global.session_timeout())
        .with_credentials(credentials)
        .with_reader(reader))
}

/// Connects and checks the tree was initialised (for admin commands).
pub async fn connect_initialised(global: &GlobalOpts) -> Result<Session> {
    let session = Session::connect(&zk_config(global)?).await?;
    archivist_engine::tree::check_initialised(&session).await?;
    Ok(session)
}
