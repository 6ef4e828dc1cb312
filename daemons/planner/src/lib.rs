//! The planner (the seed's pending-work archivist): keeps exactly enough work queued for
//! the live researchers, picks the episode and clips, leases them and publishes the job.
//!
//! Layout:
//! - [`capacity`]: the seed's capacity check as pure functions.
//! - [`index`]: the in-memory index of catalog, research state, leases and blocking
//!   jobs, and the pick (episode and clip selection) on it.
//! - [`load`]: filling the index from ZooKeeper and applying watch events to it.
//! - [`watch`]: the persistent recursive watches that keep the index current.
//! - [`plan`]: one planning round on a session ([`Planner`]).
//! - [`expire`]: expiring work items that waited past their TTL.
//! - [`daemon`]: leader election and the wake/tick loop ([`run`]).
//! - [`settings`]: [`PlannerSettings`] and their defaults.
//!
//! Lease time is ZooKeeper's clock: a lease expires at its node's `mtime` plus
//! `duration_ms`, compared with [`archivist_engine::clock::zk_now_ms`].
#![deny(missing_docs)]

pub mod capacity;
pub mod daemon;
pub mod error;
pub mod expire;
pub mod index;
pub mod load;
pub mod plan;
pub mod settings;
pub mod watch;

pub use daemon::run;
pub use error::PlannerError;
pub use plan::{Planner, RoundReport, Stop};
pub use settings::PlannerSettings;
