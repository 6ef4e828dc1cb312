//! `archivist`: every daemon and every admin command, as subcommands of one binary.
//!
//! `main` parses arguments, sets up logging, runs the command, and maps the result to an
//! exit code, printing the error chain once.

// First, so that `out!` and `outln!` are in scope in every module after it.
#[macro_use]
mod output;

mod cli;
mod cmd;
mod config;
mod context;
mod deployment;
mod logging;
mod observe;
mod shutdown;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    logging::init(&cli.global, cli.command.is_daemon());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("archivist: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let global = cli.global.clone();
    match runtime.block_on(cmd::run(cli)) {
        Ok(_) if output::failed() || shutdown::stopped_by_fault() => {
            std::process::ExitCode::from(1)
        }
        Ok(code) => code,
        Err(err) => {
            eprintln!("archivist: {}", describe(&err, &global));
            std::process::ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, each cause once (an engine error already shows
/// its client error, which is also its source: "not authorized: not authorized"), and,
/// for a refused read or write, the identity used and where it is configured.
fn describe(err: &anyhow::Error, global: &cli::GlobalOpts) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    if archivist_engine::error::refused_by_acl(err.as_ref()) {
        let hint = match context::zk_config(global) {
            Ok(config) => archivist_engine::error::refusal_hint(&config),
            Err(_) => "connected as an identity its configuration does not give".to_string(),
        };
        text.push_str(&format!(" ({hint})"));
    }
    text
}
