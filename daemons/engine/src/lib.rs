//! The state-machine engine: ZooKeeper session, locks, priority state queues, atomic
//! transitions and the consumer loop. It knows nothing about audio.
//!
//! Layout:
//! - [`config`]: where ZooKeeper is and how to talk to it ([`ZkConfig`]).
//! - [`secure`]: TLS and SASL on the connection, and why a secured connect failed.
//! - [`session`]: a connected session whose [`Session::lost`] token fires when the
//!   session expires or is closed, so work guarded by its locks stops.
//! - [`ops`]: owned multi operations; [`ops::commit`] runs them as one ZooKeeper `multi`
//!   and says which operation failed and whether it was a precondition.
//! - [`tree`]: creating and checking the tree described by `znode-schema`.
//! - [`store`]: typed reads and writes of YAML records.
//! - [`lock`]: the per-job ephemeral lock, and [`lock::LockGuard`], which releases it on
//!   every exit path.
//! - [`queue`]: state queues in processing order.
//! - [`transition`]: job and batch transitions, validated against the state tables
//!   (the move and the role making it), as one multi.
//! - [`leader`]: leader election for roles where one acts at a time, and
//!   [`leader::run_while_leading`], the one "run this role while leading" loop.
//! - [`consumer`]: the loop that claims jobs from a state's queue and runs a step
//!   (researcher and recorder).
//! - [`clock`]: ZooKeeper's own time, for leases.
//! - [`lease`]: the lease-and-TTL recipe (create, claim, extend, revoke, expire, and the
//!   expiry formulas) every daemon and admin command uses.
//! - [`counter`]: id counters, and moving one past the ids in use.
//! - [`signal`]: wake-ups for changes committed to the database (`/signals/*`).
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod consumer;
pub mod counter;
pub mod daemon;
pub mod durations;
pub mod error;
pub mod group;
pub mod health;
pub mod jobs;
pub mod leader;
pub mod lease;
pub mod lock;
pub mod logs;
pub mod member;
pub mod ops;
pub mod queue;
pub mod secure;
pub mod session;
pub mod signal;
pub mod store;
pub mod transition;
pub mod tree;

pub use config::ZkConfig;
pub use error::{EngineError, Result};
pub use session::Session;
pub use znode_schema as schema;
pub use zookeeper_client as zk;
