//! Batch tests against a real ZooKeeper (see `archivist-testkit`), each in its own
//! chroot. Research is recorded and jobs fail the way the engine and the recorder do it
//! (their public functions), so the batcher sees what it would see in production.

mod control;
mod lifecycle;
mod retries;
mod support;
mod webhooks;
