//! The recorder (the seed's completed-work archivist) and the reaper.
//!
//! - [`store`]: one report batch = one multi that writes the episode's research record,
//!   deletes the reports and extends the job's lease (only if it exists, names the job
//!   and has not expired). Idempotent: a clip already researched is never stored again.
//! - [`archive`]: the pure merge rule and the record's compact, bounded shape.
//! - [`watcher`]: the `/reports` consumer (children watch + poll), safe in parallel.
//! - [`finish`]: the `reported` state consumer: stores leftovers, then
//!   `reported -> recorded` with the lock released and the lease revoked in one multi.
//! - [`daemon::run`]: the recorder daemon (both consumers, reconnecting).
//! - [`reaper`]: expired leases, stale work items and finished jobs, by one leader;
//!   [`reaper::run`] runs alone or inside another daemon's process.
//! - [`settings`], [`error`]: settings with documented defaults; errors naming the node.
//!
//! Metrics (via the `metrics` facade): `archivist_recorder_clips_stored_total`,
//! `archivist_recorder_clips_already_stored_total`,
//! `archivist_recorder_lease_extensions_total`, `archivist_recorder_store_conflicts_total`,
//! `archivist_recorder_bad_reports_total`, `archivist_recorder_jobs_recorded_total`,
//! `archivist_reaper_sweeps_total`,
//! `archivist_reaper_sweep_seconds`, `archivist_reaper_jobs_expired_total{reason}`,
//! `archivist_reaper_leases_deleted_total`, `archivist_reaper_jobs_deleted_total`.
#![deny(missing_docs)]

pub mod archive;
pub mod backoff;
pub mod daemon;
pub mod error;
pub mod finish;
pub mod reaper;
pub mod settings;
pub mod store;
pub mod watcher;

pub use daemon::run;
pub use error::{ReaperError, RecorderError, SettingsError};
pub use settings::{ReaperSettings, RecorderSettings};
