//! The command line: global options and the subcommand tree. Each subcommand's own
//! arguments live beside its code in `cmd/`.

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cmd;

/// Archivist: find where known short audio clips occur inside long podcast episodes,
/// coordinated through ZooKeeper.
#[derive(Debug, Parser)]
#[command(name = "archivist", version, about, propagate_version = true)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output format of admin commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// Human-readable tables.
    #[default]
    Table,
    /// JSON, for scripts.
    Json,
    /// YAML, for scripts.
    Yaml,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// Options shared by every command.
#[derive(Debug, Clone, Args)]
pub struct GlobalOpts {
    /// Configuration file (YAML; see docs/configuration.md).
    #[arg(long, global = true, env = "ARCHIVIST_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// ZooKeeper connect string (`host:port[,host:port...][/chroot]`) [default: 127.0.0.1:2181].
    #[arg(long, global = true, env = "ARCHIVIST_ZK")]
    pub zk: Option<String>,
    /// Chroot under which the tree lives, when `--zk` names none [default: /archivist].
    #[arg(long, global = true, env = "ARCHIVIST_CHROOT")]
    pub chroot: Option<String>,
    /// ZooKeeper session timeout, in milliseconds [default: 20000]; must outlast a leader
    /// election (docs/operations.md, "Failover").
    #[arg(long, global = true, env = "ARCHIVIST_SESSION_TIMEOUT_MS")]
    pub session_timeout_ms: Option<u64>,
    /// Refused: digest credentials carry a password, and a command line is readable by
    /// every user of the host (`ps`). Use ARCHIVIST_ZK_AUTH or `zookeeper.auth`.
    #[arg(long, global = true, hide = true, value_name = "REFUSED")]
    pub zk_auth: Option<String>,
    /// Refused like --zk-auth. Use ARCHIVIST_ZK_READER or `zookeeper.reader`.
    #[arg(long, global = true, hide = true, value_name = "REFUSED")]
    pub zk_reader: Option<String>,
    /// Refused like --zk-auth. Use ARCHIVIST_ZK_SASL_PASSWORD or a password file.
    #[arg(long, global = true, hide = true, value_name = "REFUSED")]
    pub zk_sasl_password: Option<String>,
    /// CA certificate (PEM) to trust: connect over TLS (the servers' secureClientPort).
    #[arg(long, global = true, env = "ARCHIVIST_ZK_TLS_CA")]
    pub zk_tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for servers that require one (with --zk-tls-key).
    #[arg(long, global = true, env = "ARCHIVIST_ZK_TLS_CERT")]
    pub zk_tls_cert: Option<std::path::PathBuf>,
    /// Private key (PEM) of the client certificate.
    #[arg(long, global = true, env = "ARCHIVIST_ZK_TLS_KEY")]
    pub zk_tls_key: Option<std::path::PathBuf>,
    /// SASL (DIGEST-MD5) user; the password comes from --zk-sasl-password-file or the
    /// ARCHIVIST_ZK_SASL_PASSWORD variable, never from a flag.
    #[arg(long, global = true, env = "ARCHIVIST_ZK_SASL_USER")]
    pub zk_sasl_user: Option<String>,
    /// File holding the SASL password.
    #[arg(long, global = true, env = "ARCHIVIST_ZK_SASL_PASSWORD_FILE")]
    pub zk_sasl_password_file: Option<std::path::PathBuf>,
    /// SASL user granted READ (only) on the nodes this process creates.
    #[arg(long, global = true, env = "ARCHIVIST_ZK_SASL_READER")]
    pub zk_sasl_reader: Option<String>,
    /// Database of the catalog and the research archive: `sqlite://PATH` or
    /// `postgres://USER@HOST:PORT/DB` [default: sqlite://<data dir>/archivist.db]. A URL
    /// with a password is refused here (`ps` shows it): use ARCHIVIST_DATABASE_URL or
    /// `database.url`.
    #[arg(long, global = true)]
    pub database_url: Option<String>,
    /// Log format.
    #[arg(long, global = true, env = "ARCHIVIST_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
    /// Serve /metrics, /healthz and /readyz on this address (daemon commands and
    /// serve-files only).
    #[arg(long, global = true, env = "ARCHIVIST_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Output format of admin commands.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the tree in ZooKeeper and the database's schema, and bind them (idempotent).
    Init(cmd::schema::InitArgs),
    /// Show or check the znode schema and state machine.
    #[command(subcommand)]
    Schema(cmd::schema::SchemaCommand),
    /// Find where clips occur in an episode (files or URLs), without ZooKeeper.
    #[command(after_help = cmd::matching::settings_help())]
    Match(cmd::matching::MatchArgs),
    /// Register episodes and clips in the catalog.
    #[command(subcommand)]
    Curate(cmd::curate::CurateCommand),
    /// Run the curator daemon (polls configured feeds).
    Curator(cmd::curate::CuratorArgs),
    /// Run the planner daemon.
    Planner(cmd::planner::PlannerArgs),
    /// Run the audio researcher daemon.
    Researcher(cmd::researcher::ResearcherArgs),
    /// Run the recorder daemon.
    Recorder(cmd::recorder::RecorderArgs),
    /// Run the reaper daemon.
    Reaper(cmd::recorder::ReaperArgs),
    /// Batches: research campaigns with a report at the end (submit, list, show, report,
    /// release, delete, update-report, hold-all, release-all).
    #[command(subcommand)]
    Batch(cmd::batch::BatchCommand),
    /// Run the batcher daemon (curates, watches and reports batches).
    Batcher(cmd::batch::BatcherArgs),
    /// Run several daemons in one process (`--all` for a single machine).
    Run(cmd::run::RunArgs),
    /// Check a configuration file.
    #[command(subcommand)]
    Config(cmd::config::ConfigCommand),
    /// Serve a directory over HTTP (sample media for the quickstart and tests).
    ServeFiles(cmd::serve::ServeArgs),
    /// Generate a sample catalog (episodes with known clips) and check the results.
    #[command(subcommand)]
    Sample(cmd::sample::SampleCommand),
    /// Serve the web console (read-only): overview, jobs, and where clips occur
    /// (docs/console.md).
    Console(cmd::console::ConsoleArgs),
    /// Admin commands.
    #[command(flatten)]
    Admin(cmd::admin::AdminCommand),
    /// Move a ZooKeeper-only tree's catalog and research archive into the database and
    /// verify the counts (`--delete-zk` then deletes the moved nodes).
    Migrate(cmd::migrate::MigrateArgs),
}

impl Command {
    /// Does this command run a daemon (and so serve metrics when asked)?
    pub fn is_daemon(&self) -> bool {
        matches!(
            self,
            Command::Curator(_)
                | Command::Planner(_)
                | Command::Researcher(_)
                | Command::Recorder(_)
                | Command::Reaper(_)
                | Command::Batcher(_)
                | Command::Run(_)
        )
    }
}
