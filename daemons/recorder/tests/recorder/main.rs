//! Recorder and reaper tests against a real ZooKeeper (see `archivist-testkit`).

mod child;
mod closing;
mod parallel;
mod reaping;
mod sigkill;
mod storing;
mod support;
