//! `archivist planner`: clap arguments (each with an `ARCHIVIST_PLANNER_...` environment
//! variable) mapped onto `archivist_planner::PlannerSettings`.
//!
//! Settings come from the defaults, then the configuration file's `planner:` section (and
//! `ARCHIVIST__PLANNER__...` overrides), then the flags given. Invalid settings (a
//! work-item TTL not shorter than the lease) are refused before connecting.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use archivist_engine::member::Identity;
use archivist_planner::PlannerSettings;
use clap::Args;

use crate::cli::GlobalOpts;

/// Arguments of `archivist planner`.
#[derive(Debug, Args)]
pub struct PlannerArgs {
    /// Identity in `/daemons`, `/election/planner` and job events (default
    /// `planner-<host>-<pid>`).
    #[arg(long, env = "ARCHIVIST_PLANNER_NAME")]
    pub name: Option<String>,
    /// Most clips in one work item [default: 50].
    #[arg(long, env = "ARCHIVIST_PLANNER_MAX_CLIPS")]
    pub max_clips: Option<usize>,
    /// Lease duration, in ms (ZooKeeper's clock, from the lease's last write)
    /// [default: 600000].
    #[arg(long, env = "ARCHIVIST_PLANNER_LEASE_DURATION_MS")]
    pub lease_duration_ms: Option<u64>,
    /// How long a work item may wait in the pending queue, in ms; must be shorter than
    /// the lease [default: 300000].
    #[arg(long, env = "ARCHIVIST_PLANNER_WORK_ITEM_TTL_MS")]
    pub work_item_ttl_ms: Option<u64>,
    /// Planning round interval when nothing wakes the planner earlier, in ms
    /// [default: 5000].
    #[arg(long, env = "ARCHIVIST_PLANNER_TICK_MS")]
    pub tick_ms: Option<u64>,
}

/// The settings the file and the flags describe.
pub fn settings(base: PlannerSettings, args: &PlannerArgs) -> PlannerSettings {
    let mut s = base;
    if let Some(n) = args.max_clips {
        s = s.with_max_clips(n);
    }
    if let Some(ms) = args.lease_duration_ms {
        s = s.with_lease_duration(Duration::from_millis(ms));
    }
    if let Some(ms) = args.work_item_ttl_ms {
        s = s.with_work_item_ttl(Duration::from_millis(ms));
    }
    if let Some(ms) = args.tick_ms {
        s = s.with_tick(Duration::from_millis(ms));
    }
    s
}

/// Runs the planner daemon until SIGTERM/SIGINT.
pub async fn run(global: &GlobalOpts, args: PlannerArgs) -> Result<ExitCode> {
    let config = crate::context::zk_config(global)?;
    let file = crate::context::file_config(global)?;
    let settings = settings(file.planner, &args);
    settings.validate()?;
    archivist_engine::lease::validate_operator_ms(
        "lease duration (--lease-duration-ms)",
        settings.lease_duration.as_millis(),
    )?;
    archivist_engine::lease::validate_operator_ms(
        "work-item TTL (--work-item-ttl-ms)",
        settings.work_item_ttl.as_millis(),
    )?;
    let identity = match &args.name {
        Some(n) => Identity::named("planner", n.clone()),
        None => Identity::new("planner"),
    };
    let db = crate::context::database(global).await?;
    archivist_planner::run(
        &config,
        &db,
        settings,
        identity,
        crate::shutdown::on_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> PlannerArgs {
        PlannerArgs {
            name: None,
            max_clips: None,
            lease_duration_ms: None,
            work_item_ttl_ms: None,
            tick_ms: None,
        }
    }

    #[test]
    fn flags_override_the_file_and_keep_the_rest() {
        let file = PlannerSettings::default().with_max_clips(7);
        let s = settings(file.clone(), &args());
        assert_eq!(s, file);
        let s = settings(
            file,
            &PlannerArgs {
                tick_ms: Some(250),
                work_item_ttl_ms: Some(1_000),
                ..args()
            },
        );
        assert_eq!(s.max_clips, 7);
        assert_eq!(s.tick, Duration::from_millis(250));
        assert_eq!(s.work_item_ttl, Duration::from_secs(1));
        assert_eq!(s.lease_duration, Duration::from_secs(600));
    }

    #[test]
    fn a_ttl_not_below_the_lease_is_refused() {
        let s = settings(
            PlannerSettings::default(),
            &PlannerArgs {
                lease_duration_ms: Some(1_000),
                work_item_ttl_ms: Some(1_000),
                ..args()
            },
        );
        assert!(s.validate().is_err());
    }
}
