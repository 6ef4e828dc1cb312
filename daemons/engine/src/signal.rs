//! Wake-ups for changes committed to the database.
//!
//! The catalog and the research archive live in the database, which has no change
//! notifications both backends share; ZooKeeper has watches. So a writer, after its
//! database commit, sets a small node (`/signals/catalog`, `/signals/research`; a
//! [`SignalRecord`] saying who and when), and the planner, which watches it, wakes at
//! once and reads what changed from the database (rows after its watermark). The
//! node's data version counts the bumps. A bump lost to a crash between the commit and
//! the set is caught by the planner's slow safety re-read.

use crate::ops::{self, Mode, Op};
use crate::schema::paths;
use crate::schema::records::SignalRecord;
use crate::schema::SCHEMA_VERSION;
use crate::{clock, store, EngineError, Result, Session};

/// Which change a signal announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Catalog rows (episodes, clips, aliases) were committed.
    Catalog,
    /// Research was stored.
    Research,
}

impl Signal {
    /// The node of this signal.
    pub fn path(self) -> &'static str {
        match self {
            Signal::Catalog => paths::SIGNAL_CATALOG,
            Signal::Research => paths::SIGNAL_RESEARCH,
        }
    }

    /// The signal a watched path is, if any.
    pub fn of_path(path: &str) -> Option<Signal> {
        [Signal::Catalog, Signal::Research]
            .into_iter()
            .find(|s| s.path() == path)
    }
}

fn record(by: &str) -> SignalRecord {
    SignalRecord {
        schema: SCHEMA_VERSION,
        by: by.to_string(),
        at: clock::stamp_now(),
    }
}

/// The operation that bumps `signal`, to join a multi (the recorder bumps the research
/// signal in the multi that moves the job on).
pub fn op(signal: Signal, by: &str) -> Result<Op> {
    Ok(Op::SetData {
        path: signal.path().to_string(),
        data: store::encode(signal.path(), &record(by))?,
        version: None,
    })
}

/// Proves this session may bump `signal`, without bumping it: a write at a version the
/// node cannot have, which ZooKeeper checks against the node's ACL before its version
/// (`not authorized` for a read-only identity, a version mismatch for a writer). A
/// command that writes the database first and signals after calls it before its first
/// database write, so a read-only identity changes nothing (outside try 17p F1: the
/// reader's `curate` committed its rows, then failed at the signal, and the daemons
/// researched them).
pub async fn check_may_bump(session: &Session, signal: Signal) -> Result<()> {
    let probe = Op::SetData {
        path: signal.path().to_string(),
        data: Vec::new(),
        version: Some(i32::MAX),
    };
    match ops::commit(session, &[probe]).await {
        // Written at version 2^31-1: a node bumped two billion times (never).
        Ok(_)
        | Err(EngineError::Precondition {
            source: crate::zk::Error::BadVersion | crate::zk::Error::NoNode,
            ..
        }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Bumps `signal` on its own. A tree made before signals existed gets the node (and
/// `/signals`) created on the first bump.
pub async fn bump(session: &Session, signal: Signal, by: &str) -> Result<()> {
    match ops::commit(session, &[op(signal, by)?]).await {
        Ok(_) => Ok(()),
        Err(EngineError::Precondition {
            source: crate::zk::Error::NoNode,
            ..
        }) => {
            let data = store::encode(signal.path(), &record(by))?;
            for (path, data) in [(paths::SIGNALS, Vec::new()), (signal.path(), data)] {
                match ops::commit(
                    session,
                    &[Op::Create {
                        path: path.to_string(),
                        data,
                        mode: Mode::Persistent,
                    }],
                )
                .await
                {
                    Ok(_)
                    | Err(EngineError::Precondition {
                        source: crate::zk::Error::NodeExists,
                        ..
                    }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}
