//! Engine tests against a real ZooKeeper (see `archivist-testkit`).

mod acl;
mod concurrency;
mod failures;
mod order;
mod support;
mod transitions;
