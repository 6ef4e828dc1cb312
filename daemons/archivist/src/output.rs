//! Standard output of every command, written so that a reader going away
//! (`archivist jobs -o json | head -1`) is a quiet success.
//!
//! `println!` panics when stdout is a closed pipe (Rust ignores SIGPIPE, so the write
//! returns `EPIPE`). Restoring SIGPIPE's default action instead would kill the process
//! (exit status 141, a failure under `set -o pipefail`) possibly in the middle of a
//! change, with a lock still held. Here a closed pipe only discards the rest of the
//! output: the command finishes its work and exits with its own status, like
//! `git log | head`. Any other write error (a full disk behind `>`) is reported once
//! and makes the command fail ([`failed`]).

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: writing; 1: the reader went away (output discarded); 2: a write failed.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Writes formatted text to stdout (the body of [`out!`] and [`outln!`]).
pub fn write(args: std::fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != 0 {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| stdout.flush());
    if let Err(e) = written {
        if e.kind() == ErrorKind::BrokenPipe {
            STATE.store(1, Ordering::Relaxed);
        } else if STATE.swap(2, Ordering::Relaxed) != 2 {
            eprintln!("archivist: cannot write the output: {e}");
        }
    }
}

/// Whether the reader went away: a command that would write forever (`status --watch`)
/// stops.
pub fn reader_gone() -> bool {
    STATE.load(Ordering::Relaxed) == 1
}

/// Whether writing the output failed for another reason than a reader going away.
pub fn failed() -> bool {
    STATE.load(Ordering::Relaxed) == 2
}

/// Standard output as an [`std::io::Write`] for streamed output (`export`), under the
/// same rule as [`out!`]: once the reader has gone, every write fails with
/// `BrokenPipe` (so a stream stops early) and [`reader_gone`] says why; any other error
/// is reported once and makes [`failed`] true.
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if reader_gone() {
            return Err(ErrorKind::BrokenPipe.into());
        }
        let written = std::io::stdout().lock().write_all(buf);
        match written {
            Ok(()) => Ok(buf.len()),
            Err(e) => {
                let broken = e.kind() == ErrorKind::BrokenPipe;
                STATE.store(if broken { 1 } else { 2 }, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if reader_gone() {
            return Err(ErrorKind::BrokenPipe.into());
        }
        std::io::stdout().lock().flush().inspect_err(|e| {
            let broken = e.kind() == ErrorKind::BrokenPipe;
            STATE.store(if broken { 1 } else { 2 }, Ordering::Relaxed);
        })
    }
}

/// `print!` that never panics (see the module's documentation).
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*)) };
}

/// `println!` that never panics (see the module's documentation).
macro_rules! outln {
    () => { $crate::output::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write(format_args!("{}\n", format_args!($($arg)*))) };
}
