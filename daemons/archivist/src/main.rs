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

/// One-shot commands end quietly when their reader goes away (`archivist jobs | head`),
/// as Unix tools do: Rust ignores SIGPIPE, so a write to a closed pipe returns an error
/// and `println!` panics on it. Restoring the default action ends the process at the
/// first such write instead. Daemons keep SIGPIPE ignored: for them a closed socket is
/// an error to handle, not a reason to exit.
fn end_quietly_on_closed_pipe() {
    // SAFETY: called first thing in `main`, before any thread exists; setting a signal
    // disposition to SIG_DFL has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    if !cli.command.is_daemon() {
        end_quietly_on_closed_pipe();
    }
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
