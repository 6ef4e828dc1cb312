//! `archivist`: every daemon and every admin command, as subcommands of one binary.
//!
//! `main` parses arguments, sets up logging, runs the command, and maps the result to an
//! exit code, printing the error chain once.

mod cli;
mod cmd;
mod config;
mod context;
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
    match runtime.block_on(cmd::run(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("archivist: {err:#}");
            std::process::ExitCode::from(1)
        }
    }
}
