//! The scale benchmark's synthetic archive (issue 22; `scripts/scale-bench.sh`,
//! docs/benchmarks.md "Scale").
//!
//! `generate` writes a catalog of N episodes x M clips and the research archive of a
//! fraction of the episodes into a ZooKeeper-only tree (the layout before issue 22), the
//! way the daemons wrote it: with `--catalog curate` the catalog goes through the
//! curators' own `archivist_catalog::curate` (so its time is the curation rate), with
//! `--catalog nodes` the same records are created directly; the research records are
//! `ResearchRecord`s encoded by the schema's encoder with occurrences compacted by the
//! recorder's `archive::compact` (one create per record, as the recorder's first store of
//! an episode). The shapes are in `synth.rs`.
//!
//! `listing` prints, for every persistent directory of the tree, the bytes of its child
//! list as ZooKeeper sends it (4-byte count, then a 4-byte length and the name of each
//! child), largest first: what a client's buffer must hold to list it.
//!
//! It is an example of the `archivist` package (not a subcommand): a benchmark tool, not
//! something an operator runs; as an example it links the daemons' own crates without
//! adding a dependency to any of them.
//!
//! ```text
//! cargo run --release -p archivist --example synth_archive -- \
//!     --zk 127.0.0.1:2193 --chroot /archivist generate --episodes 1000 --clips 2000
//! ```

mod synth;

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use archivist_catalog::{curate, CatalogItem, CurateSettings};
use archivist_engine::schema::paths;
use archivist_engine::{store, Session, ZkConfig};
use clap::{Parser, Subcommand, ValueEnum};

/// Command line.
#[derive(Debug, Parser)]
struct Cli {
    /// ZooKeeper connect string.
    #[arg(long, default_value = "127.0.0.1:2181")]
    zk: String,
    /// Chroot of the tree.
    #[arg(long, default_value = "/archivist")]
    chroot: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the synthetic catalog and research archive.
    Generate(GenerateArgs),
    /// Print the bytes of every persistent directory's child list, largest first.
    Listing,
}

/// How the catalog is written.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum CatalogWriter {
    /// Through `archivist_catalog::curate` into the database named by `--database-url`
    /// (measures curation; the curators write the catalog to the database since issue
    /// 22, so this writes no `/catalog` nodes).
    Curate,
    /// Created directly as nodes under `/catalog` (the layout before issue 22, what
    /// `archivist migrate` reads).
    Nodes,
}

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// Episodes in the catalog.
    #[arg(long, default_value_t = 1000)]
    episodes: usize,
    /// Clips in the catalog.
    #[arg(long, default_value_t = 2000)]
    clips: usize,
    /// Fraction of the episodes researched (every clip of each).
    #[arg(long, default_value_t = 0.9)]
    researched: f64,
    /// Fraction of the episodes that come from feeds (they get a GUID alias too).
    #[arg(long, default_value_t = 0.5)]
    from_feeds: f64,
    /// How the catalog is written.
    #[arg(long, value_enum, default_value_t = CatalogWriter::Nodes)]
    catalog: CatalogWriter,
    /// The database `--catalog curate` curates into.
    #[arg(long)]
    database_url: Option<String>,
    /// Items per `curate` call.
    #[arg(long, default_value_t = 10_000)]
    curate_batch: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 256)]
    in_flight: usize,
    /// Seed of the shapes.
    #[arg(long, default_value_t = 22)]
    seed: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let config = ZkConfig::new(cli.zk.clone())
        .with_chroot(&cli.chroot)
        .with_session_timeout(Duration::from_secs(30));
    let session = Session::connect(&config)
        .await
        .with_context(|| format!("connecting to {} (chroot {})", cli.zk, cli.chroot))?;
    match cli.command {
        Command::Generate(args) => generate(&session, &args).await,
        Command::Listing => listing(&session).await,
    }
}

async fn curate_catalog(
    session: &Session,
    shape: &synth::Shape,
    args: &GenerateArgs,
) -> Result<usize> {
    let Some(url) = args.database_url.as_deref() else {
        bail!("--catalog curate needs --database-url (the curators write the database)");
    };
    let db = archivist_db::Database::connect(url)
        .await
        .with_context(|| format!("opening {}", archivist_db::redact(url)))?;
    let settings = CurateSettings::default()
        .with_curator(synth::CURATOR)
        .with_chunk_records(100)
        .with_max_in_flight(512);
    let started = Instant::now();
    let mut curated = 0;
    let clips: Vec<CatalogItem> = (0..args.clips)
        .map(synth::clip_item)
        .collect::<Result<_>>()?;
    for chunk in clips.chunks(args.curate_batch.max(1)) {
        curated += curate(session, &db, chunk.to_vec(), &settings)
            .await?
            .created();
    }
    let mut next = 0;
    while next < args.episodes {
        let end = (next + args.curate_batch.max(1)).min(args.episodes);
        let items: Vec<CatalogItem> = (next..end)
            .map(|i| synth::episode_item(shape, i))
            .collect::<Result<_>>()?;
        curated += curate(session, &db, items, &settings).await?.created();
        next = end;
        eprintln!(
            "synth_archive: curated {next}/{} episodes ({:.0} s)",
            args.episodes,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(curated)
}

async fn generate(session: &Session, args: &GenerateArgs) -> Result<()> {
    archivist_engine::tree::init(session, "synth_archive").await?;
    let shape = synth::Shape {
        episodes: args.episodes,
        clips: args.clips,
        researched: args.researched,
        from_feeds: args.from_feeds,
        seed: args.seed,
    };
    let started = Instant::now();
    match args.catalog {
        CatalogWriter::Curate => {
            let curated = curate_catalog(session, &shape, args).await?;
            if curated != args.clips + args.episodes {
                bail!(
                    "curated {curated} new records, expected {} (the chroot must start empty)",
                    args.clips + args.episodes
                );
            }
            let took = started.elapsed().as_secs_f64();
            println!(
                "summary: curation {curated} records in {took:.1} s = {:.0} records/s",
                curated as f64 / took
            );
        }
        CatalogWriter::Nodes => {
            let nodes = synth::write_catalog_nodes(session, &shape, args.in_flight).await?;
            println!(
                "summary: catalog {nodes} nodes written directly in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let started = Instant::now();
    let w = synth::write_research(session, &shape, args.in_flight).await?;
    let took = started.elapsed().as_secs_f64();
    println!(
        "summary: research {} records ({:.1} MB, {:.0} bytes mean) in {took:.1} s = {:.0} records/s; {} researched pairs, {} found, {} errors",
        w.research,
        w.research_bytes as f64 / 1e6,
        w.research_bytes as f64 / w.research.max(1) as f64,
        w.research as f64 / took,
        w.pairs,
        w.found,
        w.errors
    );
    if let Some(first) = &w.first {
        println!("first researched: {first}");
    }
    Ok(())
}

async fn listing(session: &Session) -> Result<()> {
    let mut dirs = vec!["/".to_string(), "/catalog".to_string()];
    dirs.extend(paths::directories());
    let mut sizes = Vec::new();
    for dir in dirs {
        let names = store::children(session, &dir).await?;
        sizes.push((synth::listing_bytes(&names), names.len(), dir));
    }
    sizes.sort_by(|a, b| b.cmp(a));
    for (bytes, count, dir) in sizes.iter().take(8) {
        println!("listing: {dir} {count} children {bytes} bytes");
    }
    if let Some((bytes, count, dir)) = sizes.first() {
        println!("summary: largest listing {dir}: {count} children, {bytes} bytes");
    }
    Ok(())
}
