//! The planner against a real ZooKeeper (archivist-testkit gives each test its chroot).

mod capacity;
mod child;
mod concurrency;
mod expiry;
mod kill;
mod rules;
mod selection;
mod support;
