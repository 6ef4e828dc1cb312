//! `archivist curate feed|manifest|episode|clip` and the `archivist curator` daemon.
//!
//! The work is in `archivist-catalog`; this file maps arguments (each also settable from
//! an `ARCHIVIST_...` variable) to its settings and prints the outcome.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use archivist_catalog::local::{single_item, SingleOptions};
use archivist_catalog::{CurateSettings, CurationReport, CuratorSettings, FetchSettings, Kind};
use archivist_engine::member::Identity;
use clap::{Args, Subcommand};

use crate::cli::{GlobalOpts, OutputFormat};
use crate::cmd::admin::render::printable;
use crate::context::{connect_to_write, zk_config};

/// `archivist curate ...`
#[derive(Debug, Subcommand)]
pub enum CurateCommand {
    /// Register every episode with an audio enclosure of a podcast feed (RSS, Atom, JSON
    /// Feed).
    Feed {
        /// Feed URL.
        url: String,
        /// Priority of the feed's episodes (default: keep stored ones; 0 when new).
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        /// How to write.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Register the episodes and clips of a YAML manifest (format: docs/catalog.md).
    /// A manifest with any problem is refused whole.
    Manifest {
        /// The manifest file.
        file: PathBuf,
        /// How to write.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Register one episode: a path, a file:// URL or an http(s) URL.
    Episode(SingleArgs),
    /// Register one clip: a path, a file:// URL or an http(s) URL.
    Clip(SingleArgs),
}

/// Options of every curation.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Curator name stored in new records.
    #[arg(
        long,
        env = "ARCHIVIST_CURATOR_NAME",
        default_value = "archivist-curate"
    )]
    pub curator: String,
    /// Records per creating multi.
    #[arg(long, env = "ARCHIVIST_CURATE_CHUNK", default_value_t = 100)]
    pub chunk: usize,
    /// ZooKeeper requests in flight at once.
    #[arg(long, env = "ARCHIVIST_CURATE_IN_FLIGHT", default_value_t = 512)]
    pub in_flight: usize,
    /// HTTP timeout for feeds and URL checks, seconds.
    #[arg(long, env = "ARCHIVIST_HTTP_TIMEOUT_S", default_value_t = 30)]
    pub http_timeout_s: u64,
    /// Do not draw a progress bar on stderr.
    #[arg(long, env = "ARCHIVIST_NO_PROGRESS")]
    pub no_progress: bool,
}

impl CommonArgs {
    fn curate(&self) -> CurateSettings {
        CurateSettings::default()
            .with_curator(&self.curator)
            .with_chunk_records(self.chunk)
            .with_max_in_flight(self.in_flight)
            .with_progress(!self.no_progress)
    }

    fn fetch(&self) -> FetchSettings {
        FetchSettings::default().with_timeout(Duration::from_secs(self.http_timeout_s.max(1)))
    }
}

/// Arguments of `curate episode|clip`.
#[derive(Debug, Args)]
pub struct SingleArgs {
    /// A path, a file:// URL or an http(s) URL.
    pub target: String,
    /// Title (default: the file name without extension).
    #[arg(long)]
    pub title: Option<String>,
    /// Priority (default: keep the stored one; 0 when new). Higher wins.
    #[arg(long, allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Description.
    #[arg(long)]
    pub description: Option<String>,
    /// Air date, `YYYY-MM-DD` or RFC 3339 (episodes only).
    #[arg(long)]
    pub air_date: Option<String>,
    /// Do not check an http(s) URL with a HEAD request.
    #[arg(long)]
    pub no_probe: bool,
    /// How to write.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments of `archivist curator`.
#[derive(Debug, Args)]
pub struct CuratorArgs {
    /// Feed URL to poll (repeat the option; comma-separated in the variable).
    #[arg(
        long = "feed",
        env = "ARCHIVIST_CURATOR_FEEDS",
        value_delimiter = ',',
        required = true
    )]
    pub feeds: Vec<String>,
    /// Seconds between polls.
    #[arg(long, env = "ARCHIVIST_CURATOR_INTERVAL_S", default_value_t = 900)]
    pub interval_s: u64,
    /// Priority of the feeds' episodes (default: keep stored ones; 0 when new).
    #[arg(
        long,
        env = "ARCHIVIST_CURATOR_PRIORITY",
        allow_negative_numbers = true
    )]
    pub priority: Option<i64>,
    /// Daemon name under /daemons (default: curator-<host>-<pid>).
    #[arg(long, env = "ARCHIVIST_CURATOR_DAEMON_NAME")]
    pub name: Option<String>,
    /// How to write.
    #[command(flatten)]
    pub common: CommonArgs,
}

fn print_report(global: &GlobalOpts, report: &CurationReport) -> Result<()> {
    match global.output {
        OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(report)?),
        OutputFormat::Yaml => out!("{}", serde_yaml::to_string(report)?),
        OutputFormat::Table => {
            if report.items.len() <= 20 {
                for item in &report.items {
                    let change = match &item.change {
                        archivist_catalog::Change::Created => "created".to_string(),
                        archivist_catalog::Change::Updated { fields } => {
                            format!("updated {}", fields.join(", "))
                        }
                        archivist_catalog::Change::Refreshed => "unchanged".to_string(),
                    };
                    outln!("{:<9} {:<24} {}", item.id, change, printable(&item.label));
                }
            }
            for problem in &report.skipped {
                outln!("skipped   {}", printable(&problem.to_string()));
            }
            for warning in &report.warnings {
                outln!("warning   {}", printable(&warning.to_string()));
            }
            outln!("{}", report.summary());
        }
    }
    Ok(())
}

/// Runs `archivist curate ...`. Exits 2 when a manifest or single item was left out
/// (named in the output), 0 otherwise; a feed's non-audio items are listed but normal.
pub async fn run(global: &GlobalOpts, command: CurateCommand) -> Result<ExitCode> {
    let session = connect_to_write(global).await?;
    let db = crate::context::database(global).await?;
    let (report, strict) = match command {
        CurateCommand::Feed {
            url,
            priority,
            common,
        } => {
            let report = archivist_catalog::feed::curate_feed(
                &session,
                &db,
                &url,
                priority,
                &common.curate(),
                &common.fetch(),
            )
            .await?;
            (report, false)
        }
        CurateCommand::Manifest { file, common } => {
            let report = archivist_catalog::manifest::curate_manifest(
                &session,
                &db,
                &file,
                &common.curate(),
            )
            .await?;
            (report, true)
        }
        CurateCommand::Episode(args) => (single(&session, &db, Kind::Episode, args).await?, true),
        CurateCommand::Clip(args) => (single(&session, &db, Kind::Clip, args).await?, true),
    };
    print_report(global, &report)?;
    if strict && !report.skipped.is_empty() {
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

async fn single(
    session: &archivist_engine::Session,
    db: &archivist_db::Database,
    kind: Kind,
    args: SingleArgs,
) -> Result<CurationReport> {
    if kind == Kind::Clip && args.air_date.is_some() {
        bail!("--air-date is for episodes; clips have no air date");
    }
    let options = SingleOptions {
        title: args.title,
        priority: args.priority,
        description: args.description,
        air_date: args.air_date,
        no_probe: args.no_probe,
    };
    let item = single_item(kind, &args.target, &options, &args.common.fetch()).await?;
    Ok(archivist_catalog::curate(session, db, vec![item], &args.common.curate()).await?)
}

/// Runs the curator daemon until SIGTERM/SIGINT.
pub async fn run_daemon(global: &GlobalOpts, args: CuratorArgs) -> Result<ExitCode> {
    let config = zk_config(global)?;
    let identity = match args.name {
        Some(name) => Identity::named("curator", name),
        None => Identity::new("curator"),
    };
    let settings = CuratorSettings::default()
        .with_feeds(args.feeds)
        .with_interval(Duration::from_secs(args.interval_s.max(1)))
        .with_priority(args.priority)
        .with_curate(
            args.common
                .curate()
                .with_progress(false)
                .with_curator(&identity.name),
        )
        .with_fetch(args.common.fetch());
    let db = crate::context::database(global).await?;
    archivist_catalog::run(
        &config,
        &db,
        settings,
        identity,
        crate::shutdown::on_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}
