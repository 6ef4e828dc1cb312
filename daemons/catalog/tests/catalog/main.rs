//! Catalog tests against a real ZooKeeper (archivist-testkit), one chroot per test.

mod corpus;
mod daemon;
mod feeds;
mod fuzz;
mod local;
mod manifests;
mod scale;
mod support;
mod upsert;
