//! `archivist console`: serves the web console (`archivist-console`) until SIGTERM or
//! Ctrl-C. Read-only unless an actions token is configured; binds to loopback unless
//! told otherwise.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result};
use archivist_admin::AdminSettings;
use archivist_console::Console;
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed)
    /// [default: console.addr, else 127.0.0.1:7480].
    #[arg(long, env = "ARCHIVIST_CONSOLE_ADDR")]
    pub addr: Option<SocketAddr>,
}

/// Runs the console until SIGTERM/SIGINT.
pub async fn run(global: &GlobalOpts, args: ConsoleArgs) -> Result<ExitCode> {
    let mut settings = crate::context::file_config(global)?.console;
    if let Some(addr) = args.addr {
        settings.addr = addr;
    }
    settings.check().map_err(anyhow::Error::msg)?;
    settings.read_token_file().map_err(anyhow::Error::msg)?;
    let mode = if settings.actions_token.is_some() {
        "actions enabled: sign in at /login"
    } else {
        "read-only"
    };
    let session = crate::context::connect_initialised(global).await?;
    let db = crate::context::database(global).await?;
    let addr = settings.addr;
    let console = Console::new(session, db, AdminSettings::default(), settings);
    let shutdown = crate::shutdown::on_signal();
    let (bound, server) = archivist_console::serve(console, addr, shutdown).await?;
    outln!("console at http://{bound}/ ({mode})");
    server
        .await
        .context("the console's server task")?
        .context("serving the console")?;
    Ok(ExitCode::SUCCESS)
}
