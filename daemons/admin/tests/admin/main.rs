//! Admin library tests against a real ZooKeeper (see `archivist-testkit`), each on a
//! tree prepared in its own chroot.

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod actions;
mod browse;
mod fsck;
mod reports;
mod rules;
