//! Engine tests against a real ZooKeeper (see `archivist-testkit`).

mod acl;
mod child;
mod claimer;
mod concurrency;
mod failures;
mod group;
mod leading;
mod lock_guard;
mod lost_reply;
mod order;
mod rules;
mod support;
mod transitions;
