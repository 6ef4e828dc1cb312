//! Admin operations on an Archivist tree: what an ops team uses every day.
//!
//! Every operation is a function over a [`Session`](archivist_engine::Session) that
//! returns a serde-serialisable report, so the `archivist` binary (tables, JSON, YAML)
//! and the tests share one implementation.
//!
//! - [`status`]: researchers and their load, jobs per state, leases, catalog size,
//!   research progress, the oldest waiting job.
//! - [`jobs`]: `jobs list` and `jobs show`.
//! - [`browse`]: bounded pages of jobs and failures by reason (the web console).
//! - [`actions`]: compare-and-set actions on a job (`retry`, `hold`, `release`,
//!   `cancel`, `delete`): a job that moved since it was read is refused, never changed
//!   blindly (see `docs/protocol.md`, Admin).
//! - [`control`]: holds on catalog episodes and clips, pauses of a state's queue.
//! - [`results`]: the research archive by episode, by clip, and as an export.
//! - [`tree`]: the raw tree with decoded data.
//! - [`fsck`]: invariant checks and safe repairs.
//! - [`text`]: the rule for an id, and which characters are shown as escapes.
//!
//! Long scans report to a [`Progress`]; the library draws nothing and reads no
//! environment.
#![deny(missing_docs)]

pub mod actions;
pub mod browse;
pub mod control;
pub mod error;
pub mod export;
pub mod fsck;
pub mod jobs;
pub mod results;
pub mod scan;
pub mod settings;
pub mod spool;
pub mod status;
pub mod text;
pub mod tree;

pub use error::{AdminError, Result};
pub use settings::{AdminSettings, Progress, Silent};
