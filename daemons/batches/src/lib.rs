//! Batches: research campaigns ("this new clip against every episode", "this feed's new
//! episodes") submitted as a YAML manifest, tracked pair by pair, and reported at the end
//! (Merritt's batches, `docs/batches.md`).
//!
//! A batch does not create jobs: the planner plans work for unresearched pairs by
//! itself. The batch curates what its submission names, fixes its (episode, clip)
//! pairs, and watches each pair get recorded in the research archive or its latest job
//! fail. Then it writes a report (and POSTs it to the submission's webhook); after
//! retries, an operator asks for an update report of what changed.
//!
//! Layout:
//! - [`submission`]: parsing and checking a submission, creating the batch (`pending`).
//! - [`transition`]: batch changes as one multi at the record's version, checked
//!   against the batch state table.
//! - [`curation`]: the `pending` step: curate what the submission names, fix the pairs.
//! - [`evaluate`]: where each pair is (pure), from what [`snapshot`] reads.
//! - [`report`]: first and update reports (pure), and reading them back.
//! - [`webhook`]: POSTing a report with retries and backoff.
//! - [`daemon`]: the batcher loop (lock per batch, any number of batchers).
//! - [`admin`]: list, show, release, delete, update-report, hold-all, release-all.
#![deny(missing_docs)]

pub mod admin;
pub mod curation;
pub mod daemon;
pub mod error;
pub mod evaluate;
pub mod report;
pub mod settings;
pub mod snapshot;
pub mod submission;
pub mod transition;
pub mod webhook;

pub use error::BatchError;
pub use settings::BatcherSettings;
