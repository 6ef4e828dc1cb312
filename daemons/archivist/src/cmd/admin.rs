//! Admin commands: the daily work of an ops team, each a thin layer over
//! `archivist-admin` (which the tests share). One file per command group under
//! `cmd/admin/`; this file holds the command tree and the dispatch.
//!
//! Exit codes: 0 success; 1 failure (including `fsck` with faults left); 2 usage error;
//! 3 refused (the job moved or is not in a state the action applies to; nothing was
//! written).

mod actions;
mod control;
mod fsck;
mod ids;
mod jobs;
mod out_file;
pub(crate) mod progress;
pub(crate) mod render;
mod results;
mod status;
mod streamed;
mod tree;

use std::process::ExitCode;

use anyhow::Result;
use archivist_admin::{AdminError, AdminSettings};
use clap::{Args, Subcommand};

use crate::cli::GlobalOpts;

/// Exit code of a refused action (nothing was written).
pub const EXIT_REFUSED: u8 = 3;
/// Exit code of a usage error: an argument whose value cannot be used (clap's own code).
pub const EXIT_USAGE: u8 = 2;

/// Admin subcommands (flattened into the top level: `archivist status`, ...).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Researchers and their load, jobs per state, leases, catalog size, research
    /// progress and the oldest waiting job.
    Status(status::StatusArgs),
    /// List jobs or show one.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Resume a failed job (or every failed job) after its last successful step, with a
    /// fresh lease.
    Retry(actions::RetryArgs),
    /// Hold a job (it stops and waits for `release`), an episode or a clip (the planner
    /// plans nothing for it).
    Hold(control::HoldArgs),
    /// Release a held job (back to pending with a fresh lease), episode or clip.
    Release(control::ReleaseArgs),
    /// Pause a state's queue: its daemons claim nothing new until `resume`.
    Pause(control::PauseArgs),
    /// Resume a paused state's queue.
    Resume(control::ResumeArgs),
    /// Cancel a job (a researcher holding it is asked to stop).
    Cancel(actions::CancelArgs),
    /// Delete a failed, held or cancelled job with its queue entry, lease and reports (asks
    /// first).
    Delete(actions::DeleteArgs),
    /// Where clips occur: in one episode, or one clip across all episodes.
    Results(results::ResultsArgs),
    /// Export the whole research archive as CSV or JSON.
    Export(results::ExportArgs),
    /// The raw ZooKeeper tree with decoded data (like zkCli `ls -R` + `get`).
    Tree(tree::TreeArgs),
    /// Check the tree's invariants; `--repair` fixes the safe faults.
    Fsck(fsck::FsckArgs),
}

/// Options of commands that write.
#[derive(Debug, Clone, Args)]
pub struct ActorOpts {
    /// Name written into job events, locks and pause records (default:
    /// `admin-<user>@<host>`).
    #[arg(long, env = "ARCHIVIST_ADMIN_ACTOR")]
    pub actor: Option<String>,
}

impl ActorOpts {
    /// The admin identity, its control characters (a newline in `$USER`) written as
    /// escapes, as human output shows them, so it is one line in every event, lock and
    /// report (outside try 17p F12: a newline split `paused now (by admin-evil` / `name@vm`).
    pub fn actor(&self) -> String {
        let actor = self.actor.clone().unwrap_or_else(|| {
            format!(
                "admin-{}@{}",
                user_name(),
                archivist_engine::member::hostname()
            )
        });
        render::printable(&actor)
    }

    /// Settings for the library, with this identity.
    pub fn settings(&self) -> AdminSettings {
        AdminSettings::default().with_actor(self.actor())
    }
}

/// Who runs this process: `$USER`, else `$LOGNAME`, else the name `/etc/passwd` gives
/// this process's user id, else `uid<N>` (cron jobs, containers and `env -i` have no
/// `$USER`, and an actor of `admin-unknown` names nobody).
fn user_name() -> String {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok().map(|m| m.uid());
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    resolve_user(
        std::env::var("USER").ok(),
        std::env::var("LOGNAME").ok(),
        uid,
        &passwd,
    )
}

fn resolve_user(
    user: Option<String>,
    logname: Option<String>,
    uid: Option<u32>,
    passwd: &str,
) -> String {
    let named = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    named(user)
        .or_else(|| named(logname))
        .or_else(|| {
            let uid = uid?.to_string();
            passwd.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                (fields.nth(1)? == uid && !name.is_empty()).then(|| name.to_string())
            })
        })
        .or_else(|| uid.map(|u| format!("uid{u}")))
        .unwrap_or_else(|| "unknown".into())
}

/// Runs an admin command.
pub async fn run(global: &GlobalOpts, command: AdminCommand) -> Result<ExitCode> {
    let result = match command {
        AdminCommand::Status(a) => status::run(global, a).await,
        AdminCommand::Jobs(c) => jobs::run(global, c).await,
        AdminCommand::Retry(a) => actions::retry(global, a).await,
        AdminCommand::Hold(a) => control::hold(global, a).await,
        AdminCommand::Release(a) => control::release(global, a).await,
        AdminCommand::Pause(a) => control::pause(global, a).await,
        AdminCommand::Resume(a) => control::resume(global, a).await,
        AdminCommand::Cancel(a) => actions::cancel(global, a).await,
        AdminCommand::Delete(a) => actions::delete(global, a).await,
        AdminCommand::Results(a) => results::run(global, a).await,
        AdminCommand::Export(a) => results::export(global, a).await,
        AdminCommand::Tree(a) => tree::run(global, a).await,
        AdminCommand::Fsck(a) => fsck::run(global, a).await,
    };
    match result {
        Err(err) => match err.downcast_ref::<AdminError>() {
            Some(admin) if admin.is_refusal() => {
                eprintln!("archivist: {admin}");
                Ok(ExitCode::from(EXIT_REFUSED))
            }
            // An unusable argument value is a usage error, as clap's own are (outside
            // 17m L6: a refused lease length exited 1, "failure").
            Some(admin @ AdminError::Invalid(_)) => {
                eprintln!("archivist: {admin}");
                Ok(ExitCode::from(EXIT_USAGE))
            }
            _ => Err(err),
        },
        ok => ok,
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_user;

    #[test]
    fn the_actor_names_a_user_even_without_user_set() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nops:x:1000:1000::/home/ops:/bin/sh\n";
        assert_eq!(
            resolve_user(Some("ann".into()), None, Some(0), passwd),
            "ann"
        );
        assert_eq!(
            resolve_user(None, Some("bob".into()), Some(0), passwd),
            "bob"
        );
        assert_eq!(
            resolve_user(Some("".into()), None, Some(1000), passwd),
            "ops"
        );
        assert_eq!(resolve_user(None, None, Some(0), passwd), "root");
        assert_eq!(resolve_user(None, None, Some(42), passwd), "uid42");
    }

    /// Outside try 17p F12: a newline in the actor split report lines.
    #[test]
    fn the_actor_is_one_printable_line() {
        let opts = super::ActorOpts {
            actor: Some("evil\nname\x1b[31m".into()),
        };
        assert_eq!(opts.actor(), "evil\\nname\\x1b[31m");
    }
}
