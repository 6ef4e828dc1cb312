//! The researcher against a real ZooKeeper and a local HTTP server.

mod child;
mod failures;
mod flow;
mod hostile;
mod http;
mod shutdown;
mod support;
mod unreadable;
