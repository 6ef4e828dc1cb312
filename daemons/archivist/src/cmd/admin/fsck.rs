//! `archivist fsck [--repair]`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use archivist_admin::fsck::{FsckReport, Severity};
use archivist_admin::AdminSettings;
use clap::Args;

use super::progress::Bar;
use super::render::{emit, table};
use crate::cli::GlobalOpts;

/// Arguments of `fsck`.
#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Fix what is safe to fix (orphan queue entries, jobs in the wrong or several
    /// queues or none, leases of missing jobs) and say what was done.
    #[arg(long)]
    pub repair: bool,
    /// How far past expiry a lease may be before it is a fault (the reaper's interval),
    /// in seconds.
    #[arg(long, env = "ARCHIVIST_REAPER_INTERVAL_S", default_value_t = 5)]
    pub reaper_interval_s: u64,
}

/// Runs `fsck`: exit 0 when no error is left, 1 otherwise.
pub async fn run(global: &GlobalOpts, args: FsckArgs) -> Result<ExitCode> {
    let session = crate::context::connect_for_fsck(global).await?;
    // Research is checked against the catalog, which is in the database (issue 22);
    // without --repair nothing is written, so the database is opened read-only.
    let db = if args.repair {
        crate::context::database(global).await?
    } else {
        crate::context::database_read_only(global).await?
    };
    let settings =
        AdminSettings::default().with_reaper_interval(Duration::from_secs(args.reaper_interval_s));
    let report =
        archivist_admin::fsck::fsck(&session, &db, &settings, args.repair, &Bar::stderr()).await?;
    emit(global.output, &report, |r| render(r, args.repair))?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render(r: &FsckReport, repair: bool) -> String {
    let mut out = String::new();
    if !r.faults.is_empty() {
        out.push_str(&table(
            &[
                "severity",
                "fault",
                "node",
                "detail",
                if repair { "repair" } else { "--repair would" },
            ],
            r.faults.iter().map(|f| {
                let repair_col = match (&f.repair, f.repaired, &f.repair_error) {
                    (Some(what), true, _) => format!("done: {what}"),
                    (Some(what), false, Some(err)) => format!("failed: {what}: {err}"),
                    (Some(what), false, None) => what.clone(),
                    (None, _, _) => "left to an operator".into(),
                };
                vec![
                    match f.severity {
                        Severity::Error => "ERROR".into(),
                        Severity::Warning => "warning".into(),
                    },
                    serde_json::to_value(f.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    f.path.clone(),
                    f.detail.clone(),
                    repair_col,
                ]
            }),
        ));
    }
    let _ = writeln!(
        out,
        "{} nodes checked: {} error(s) left, {} warning(s), {} repaired{}",
        r.nodes,
        r.errors,
        r.warnings,
        r.repaired,
        if r.is_clean() {
            ": clean"
        } else if !repair && r.faults.iter().any(|f| f.repair.is_some()) {
            ": run with --repair to fix the safe ones"
        } else {
            ""
        }
    );
    out
}
