//! The one definition of Archivist's ZooKeeper tree.
//!
//! `schema.yml` (beside this crate's `Cargo.toml`) lists every znode path pattern, its
//! node kind and data type, the queue-entry name format, and the job state machine as a
//! table. This crate embeds that file and offers:
//!
//! - [`spec`]: the parsed and validated schema ([`spec::Schema::embedded`]); validation
//!   rejects a table with a missing start state, duplicate or unknown states, or
//!   transitions to unknown states, and says how to fix it.
//! - [`JobState`]: the Rust enum of job states, checked against the table by tests.
//! - [`paths`]: builders for every path, checked against the patterns by tests.
//! - [`records`]: the YAML data stored in each node, every record carrying a schema
//!   version.
//! - [`queue_key`]: queue entry names whose lexicographic order is processing order.
//! - [`clipset`]: compact sets of clip numbers (`"1-50,52"`) for research records.
//! - [`occurrences`]: compact YAML for the occurrences of found clips.
//!
//! ```
//! use znode_schema::{spec::Schema, JobState};
//! let schema = Schema::embedded();
//! assert!(schema.machine.allows(JobState::Pending, JobState::Leased));
//! assert!(!schema.machine.allows(JobState::Recorded, JobState::Pending));
//! ```
#![deny(missing_docs)]

pub mod clipset;
pub mod occurrences;
pub mod paths;
pub mod queue_key;
pub mod records;
pub mod spec;
mod state;

pub use state::{BatchState, JobState, TableState, UnknownBatchState};

/// The version written into every record this build produces. A reader refuses records
/// with a newer version instead of misreading them.
pub const SCHEMA_VERSION: u32 = 1;

/// The raw text of `schema.yml`, embedded at build time.
pub const SCHEMA_YAML: &str = include_str!("../schema.yml");
