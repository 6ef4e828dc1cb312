//! The researcher against a real ZooKeeper and a local HTTP server.

mod affinity;
mod bodies;
mod child;
mod clip_cache;
mod failures;
mod flow;
mod hostile;
mod http;
mod lost_reply;
mod media_store;
mod politeness;
mod shutdown;
mod support;
mod unreadable;
