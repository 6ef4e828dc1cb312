//! Engine tests against a real ZooKeeper (see `archivist-testkit`).

mod acl;
mod claimer;
mod concurrency;
mod failures;
mod group;
mod order;
mod rules;
mod support;
mod transitions;
