//! The catalog and its curators: episodes and clips registered in the database from RSS/Atom
//! feeds, YAML manifests and local files or single URLs.
//!
//! Every source turns its input into [`CatalogItem`]s; [`curate`] writes them in chunks,
//! one database transaction each, each record created with its aliases and its number, and re-curation updating `last_curated` and changed fields (never
//! `initial_curated`). The format of manifests, the feed behaviour and the choices made
//! for bad input are in `docs/catalog.md`.
//!
//! Layout:
//! - [`item`]: what a curator wants registered; [`identity`]: URL normalization and
//!   alias names.
//! - [`upsert`]: the chunked writes; [`merge`] builds and merges records; [`reprioritize`]: re-ordering pending work on priority changes.
//! - [`manifest`], [`feed`], [`local`]: the sources; [`charset`] and `xml_prep` read
//!   real-world feeds for `feed-rs`.
//! - [`daemon`]: the curator daemon polling feeds.
#![deny(missing_docs)]

pub mod charset;
pub mod daemon;
pub mod dates;
pub mod error;
pub mod feed;
pub mod identity;
pub mod item;
mod json_feed;
pub mod local;
pub mod manifest;
pub mod merge;
mod pipeline;
pub mod report;
pub mod reprioritize;
mod resolve;
pub mod settings;
pub mod upsert;
mod xml_prep;

pub use daemon::{run, FeedPoller, PollOutcome};
pub use error::{CatalogError, ItemProblem};
pub use item::{CatalogItem, FeedGuid, Kind};
pub use report::{Change, CurationReport, ItemOutcome};
pub use settings::{CurateSettings, CuratorSettings, FetchSettings};
pub use upsert::curate;
