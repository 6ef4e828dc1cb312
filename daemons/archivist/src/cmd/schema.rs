//! `archivist init` and `archivist schema`.

use std::process::ExitCode;

use anyhow::Result;
use archivist_engine::schema::spec::Schema;
use archivist_engine::Session;
use clap::Subcommand;

use crate::cli::GlobalOpts;
use crate::context::zk_config;

/// `archivist schema ...`
#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Print the job state machine (or, with `--batches`, the batch state machine) as
    /// Graphviz DOT.
    Graph {
        /// The batch state machine instead of the job one.
        #[arg(long)]
        batches: bool,
    },
    /// Print the znode tree reference (paths, kinds, data types).
    Paths,
    /// Validate the embedded schema (always true for a released build).
    Check,
}

/// Arguments of `archivist init`.
#[derive(Debug, Default, clap::Args)]
pub struct InitArgs {
    /// Bind this database to this tree although their deployment ids say otherwise: the
    /// tree was made again after ZooKeeper's data was lost (it takes the database's id),
    /// or the database was restored from a backup without the tree's id (it takes the
    /// tree's). Never for two deployments (see docs/operations.md, "Backup and restore").
    #[arg(long)]
    pub adopt_database: bool,
}

/// `archivist init`: creates the tree and the database's schema and binds the two (the
/// deployment id, see [`crate::deployment`]); safe to run again.
pub async fn init(global: &GlobalOpts, args: InitArgs) -> Result<ExitCode> {
    let db = crate::context::open_database(global).await?;
    outln!(
        "database {} at schema version {}",
        db.shown_url(),
        db.schema_version().await?
    );
    // The research archive's highest job id: `init` never leaves the job counter behind
    // it (a counter re-created at 0 after the reaper deleted old jobs would re-issue them).
    let archived = archivist_engine::counter::Archived::from_highest_job(
        archivist_db::research::highest_job(&db).await?.as_deref(),
    );
    let deployment = archivist_db::deployment::get(&db).await?;
    let session = Session::connect(&zk_config(global)?).await?;
    let report = archivist_engine::tree::init_past(
        &session,
        concat!("archivist ", env!("CARGO_PKG_VERSION")),
        &archivist_engine::tree::FromDatabase {
            archived,
            deployment: deployment.as_deref(),
        },
    )
    .await?;
    let mode = if args.adopt_database {
        crate::deployment::Mode::Adopt
    } else {
        crate::deployment::Mode::Bind
    };
    crate::deployment::bind(&session, &db, mode).await?;
    if let Some(id) = archivist_db::deployment::get(&db).await? {
        outln!(
            "deployment {id} (kept in {}/meta and in the database)",
            session.chroot()
        );
    }
    db.close().await;
    if report.new_tree {
        outln!(
            "initialised a new tree under {} ({} nodes created)",
            session.chroot(),
            report.created.len()
        );
    } else if report.created.is_empty() {
        outln!("tree under {} is already initialised", session.chroot());
    } else {
        outln!(
            "tree under {} existed; created {} missing nodes",
            session.chroot(),
            report.created.len()
        );
    }
    if let Some(why) = &report.meta_rewritten {
        match &report.meta_kept_deployment {
            Some(id) => outln!(
                "/meta did not decode ({why}): rewritten with the database's deployment id {id}"
            ),
            None => outln!("/meta did not decode ({why}): rewritten"),
        }
    }
    for (counter, from, to) in &report.counters_moved {
        outln!("{counter} was behind the ids in use: moved from {from} to {to}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `archivist schema ...`
pub async fn run(_global: &GlobalOpts, command: SchemaCommand) -> Result<ExitCode> {
    let schema = Schema::parse(archivist_engine::schema::SCHEMA_YAML)?;
    match command {
        SchemaCommand::Graph { batches: false } => out!("{}", schema.machine.to_dot()),
        SchemaCommand::Graph { batches: true } => {
            out!("{}", schema.batch_machine.dot("batches"))
        }
        SchemaCommand::Paths => {
            for p in &schema.paths {
                outln!(
                    "{:<32} {:<22} {:<16} {}",
                    p.pattern,
                    format!("{:?}", p.kind),
                    p.data,
                    p.doc
                );
            }
        }
        SchemaCommand::Check => outln!(
            "schema version {}: {} paths, {} job states, {} job transitions, {} batch states, {} batch transitions: valid",
            schema.schema_version,
            schema.paths.len(),
            schema.machine.states.len(),
            schema.machine.transitions.len(),
            schema.batch_machine.states.len(),
            schema.batch_machine.transitions.len()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
