//! `archivist hold`, `release`, `pause` and `resume`.

use std::process::ExitCode;

use anyhow::Result;
use archivist_admin::actions;
use archivist_admin::control::{self, CatalogHoldReport, CatalogTarget, PauseReport};
use archivist_engine::schema::JobState;
use clap::Args;

use super::actions::render_action;
use super::render::{emit, table};
use super::ActorOpts;
use crate::cli::GlobalOpts;

/// What `hold`/`release` act on: exactly one of a job, an episode or a clip.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// A job.
    #[arg(long, value_parser = super::ids::node_name)]
    pub job: Option<String>,
    /// An episode (the planner plans nothing for it while held).
    #[arg(long, value_parser = super::ids::node_name)]
    pub episode: Option<String>,
    /// A clip (the planner plans nothing for it while held).
    #[arg(long, value_parser = super::ids::node_name)]
    pub clip: Option<String>,
}

impl Target {
    fn catalog(&self) -> Option<CatalogTarget> {
        match (&self.episode, &self.clip) {
            (Some(e), _) => Some(CatalogTarget::Episode(e.clone())),
            (_, Some(c)) => Some(CatalogTarget::Clip(c.clone())),
            _ => None,
        }
    }
}

/// Arguments of `hold`.
#[derive(Debug, Args)]
pub struct HoldArgs {
    #[command(flatten)]
    pub target: Target,
    /// Why (stored as a held job's message).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub target: Target,
    /// Duration of a released job's fresh lease, in seconds (up to 2,592,000: 30 days);
    /// it must be longer than the work-item TTL (planner.work_item_ttl_ms, 300 s by default).
    #[arg(long, env = "ARCHIVIST_LEASE_DURATION_S", default_value_t = 600,
        value_parser = clap::value_parser!(u64).range(1..=archivist_engine::lease::MAX_DURATION_S))]
    pub lease_duration_s: u64,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `pause`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The state whose queue is paused (e.g. `pending` stops researchers claiming).
    pub state: JobState,
    /// Why.
    #[arg(long, default_value = "")]
    pub reason: String,
    #[command(flatten)]
    pub actor: ActorOpts,
}

/// Arguments of `resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The paused state.
    pub state: JobState,
}

fn render_catalog(r: &CatalogHoldReport) -> String {
    table(
        &["kind", "id", "title", "held", "changed"],
        [vec![
            r.kind.to_string(),
            r.id.clone(),
            r.title.clone(),
            r.held.to_string(),
            r.changed.to_string(),
        ]],
    )
}

fn render_pause(r: &PauseReport) -> String {
    let what = match (r.paused, r.changed) {
        (true, true) => "paused now",
        (true, false) => "was already paused",
        (false, true) => "resumed",
        (false, false) => "was not paused",
    };
    let by = r
        .record
        .as_ref()
        .map(|p| {
            let at = p.at.map(|t| format!(" at {t}")).unwrap_or_default();
            // escape_debug: a reason with a newline stays on one line.
            format!(" (by {}{at}: {})", p.by, p.reason.escape_debug())
        })
        .unwrap_or_default();
    format!("{}: {what}{by}\n", r.state)
}

/// Runs `hold`.
pub async fn hold(global: &GlobalOpts, args: HoldArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    match (&args.target.job, args.target.catalog()) {
        (Some(job), _) => {
            let report = actions::hold(
                &session,
                &args.actor.settings(),
                job,
                args.reason.as_deref(),
            )
            .await?;
            emit(global.output, &report, render_action)?;
        }
        (None, Some(target)) => {
            let db = crate::context::database(global).await?;
            let actor = args.actor.settings().actor;
            let report = control::set_catalog_hold(&session, &db, &target, true, &actor).await?;
            emit(global.output, &report, render_catalog)?;
        }
        (None, None) => anyhow::bail!("name a target: --job, --episode or --clip"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `release`.
pub async fn release(global: &GlobalOpts, args: ReleaseArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    match (&args.target.job, args.target.catalog()) {
        (Some(job), _) => {
            let settings = args
                .actor
                .settings()
                .with_lease_duration(std::time::Duration::from_secs(args.lease_duration_s))
                .with_work_item_ttl(crate::context::file_config(global)?.planner.work_item_ttl);
            let report = actions::release(&session, &settings, job).await?;
            emit(global.output, &report, render_action)?;
        }
        (None, Some(target)) => {
            let db = crate::context::database(global).await?;
            let actor = args.actor.settings().actor;
            let report = control::set_catalog_hold(&session, &db, &target, false, &actor).await?;
            emit(global.output, &report, render_catalog)?;
        }
        (None, None) => anyhow::bail!("name a target: --job, --episode or --clip"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `pause`.
pub async fn pause(global: &GlobalOpts, args: PauseArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    let report = control::pause(&session, &args.actor.settings(), args.state, &args.reason).await?;
    emit(global.output, &report, render_pause)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `resume`.
pub async fn resume(global: &GlobalOpts, args: ResumeArgs) -> Result<ExitCode> {
    let session = crate::context::connect_to_write(global).await?;
    let report = control::resume(&session, args.state).await?;
    emit(global.output, &report, render_pause)?;
    Ok(ExitCode::SUCCESS)
}
