//! Creating and checking the tree that `znode-schema` describes.

use znode_schema::records::{RecordError, TreeMeta};
use znode_schema::{paths, SCHEMA_VERSION};
use zookeeper_client as zk;

use crate::error::{EngineError, Result};
use crate::session::Session;
use crate::store;

/// What `init` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitReport {
    /// Directories created now.
    pub created: Vec<String>,
    /// Whether `/meta` was written now (false: the tree already existed).
    pub new_tree: bool,
    /// Counters that were behind the ids in use and were moved past them:
    /// (counter, version before, version after). `init` never moves a counter back.
    pub counters_moved: Vec<(String, i32, i32)>,
    /// Why `/meta` was rewritten: it existed but did not decode (garbage written by hand;
    /// every admin command refused with the decode error and `init` changed nothing:
    /// outside 17i G6). A `/meta` of a newer schema is never rewritten.
    pub meta_rewritten: Option<String>,
    /// The deployment id the rewritten (or, on a tree that existed, re-made) `/meta`
    /// took from the database, when the database holds one (a rewrite with a new id turned one small damage into "two
    /// deployments" everywhere: outside 17k N1).
    pub meta_kept_deployment: Option<String>,
}

/// What `init` knows from the database before it touches the tree.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromDatabase<'a> {
    /// The research archive's highest job: counters are moved past it.
    pub archived: crate::counter::Archived,
    /// The deployment id the database holds: a damaged `/meta` is rewritten with it, so
    /// the tree stays bound to its database. A *new* tree never takes it: that is
    /// `init --adopt-database`'s decision, made knowingly.
    pub deployment: Option<&'a str>,
}

/// Creates every persistent directory and `/meta`, and moves any counter that is behind
/// the ids in use past them (a counter re-created at version 0 must not hand out ids
/// that exist). Idempotent: safe to run again and concurrently from several daemons.
/// Knows no archive: `archivist init` uses [`init_past`].
pub async fn init(session: &Session, created_by: &str) -> Result<InitReport> {
    init_past(session, created_by, &FromDatabase::default()).await
}

/// [`init`], also moving the job counter past the ids the research archive holds, and
/// rewriting a damaged `/meta` with the database's deployment id (both from `known`).
pub async fn init_past(
    session: &Session,
    created_by: &str,
    known: &FromDatabase<'_>,
) -> Result<InitReport> {
    let mut report = InitReport::default();
    let options = session.create_options(zk::CreateMode::Persistent);
    // Issue every create at once (ZooKeeper keeps per-session order, parents first).
    let dirs = paths::directories();
    let pending: Vec<_> = dirs
        .iter()
        .map(|dir| session.client().create(dir, b"", &options))
        .collect();
    for (dir, result) in dirs.iter().zip(crate::ops::await_all(pending).await) {
        match result {
            Ok(_) => report.created.push(dir.clone()),
            Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(EngineError::zk("create", dir, e)),
        }
    }
    // Directories that were there before this run: the tree existed, and a missing
    // `/meta` was deleted from it (outside 17m M1), not never made.
    let existed = report.created.len() < dirs.len();
    let meta = match known.deployment {
        // Only `/meta` is gone from a tree that exists: it keeps the id of the database
        // it is bound to, instead of a new one that every command then refuses as a
        // second deployment. A tree made anew (ZooKeeper's data lost) gets a new id, and
        // binding it to an existing database stays `init --adopt-database`'s decision.
        Some(id) if existed => TreeMeta {
            schema: SCHEMA_VERSION,
            created: crate::clock::stamp_now(),
            created_by: created_by.to_string(),
            deployment: Some(id.to_string()),
            database_bound: true,
        },
        _ => TreeMeta {
            schema: SCHEMA_VERSION,
            created: crate::clock::stamp_now(),
            created_by: created_by.to_string(),
            deployment: Some(new_deployment_id()),
            database_bound: false,
        },
    };
    report.new_tree = store::create_if_absent(session, paths::META, &meta).await?;
    if report.new_tree && existed && known.deployment.is_some() {
        report.meta_kept_deployment = meta.deployment.clone();
    }
    if !report.new_tree {
        let meta = TreeMeta {
            deployment: Some(new_deployment_id()),
            database_bound: false,
            ..meta
        };
        let repaired = match known.deployment {
            Some(id) => TreeMeta {
                deployment: Some(id.to_string()),
                database_bound: true,
                ..meta
            },
            None => meta,
        };
        report.meta_rewritten = rewrite_damaged_meta(session, &repaired).await?;
        if report.meta_rewritten.is_some() {
            report.meta_kept_deployment = known.deployment.map(str::to_string);
        }
    }
    for counter in crate::counter::ALL {
        if let Some((from, to)) =
            crate::counter::catch_up(session, &counter, &known.archived).await?
        {
            tracing::warn!(
                counter = counter.path,
                from,
                to,
                "counter was behind the ids in use; moved past them"
            );
            report
                .counters_moved
                .push((counter.path.to_string(), from, to));
        }
    }
    Ok(report)
}

/// Names a failure caused by a node `init` makes having been deleted (a queue
/// directory, `/clock`, a counter) as [`EngineError::NotInitialised`] ("run `archivist
/// init`"), and returns any other error as it is. A write into a deleted directory fails
/// with "node not exists" on the path written, which read as a passing race ("the tree
/// changed meanwhile") while every later round failed the same way. The one rule for
/// daemons' loops and `fsck --repair`: the path written and its ancestors are checked,
/// nearest first, against the nodes `init` makes.
pub async fn explain_missing(session: &Session, error: EngineError) -> EngineError {
    let path = match &error {
        EngineError::Precondition {
            path,
            source: zk::Error::NoNode,
            ..
        }
        | EngineError::Zk {
            path,
            source: zk::Error::NoNode,
            ..
        } => path.clone(),
        _ => return error,
    };
    let made_by_init = paths::directories();
    let mut candidate = path.as_str();
    loop {
        if made_by_init.iter().any(|d| d == candidate) {
            if let Ok(None) = store::exists(session, candidate).await {
                return EngineError::NotInitialised {
                    chroot: session.chroot().to_string(),
                    missing: candidate.to_string(),
                };
            }
        }
        match candidate.rfind('/') {
            Some(0) | None => return error,
            Some(i) => candidate = &candidate[..i],
        }
    }
}

/// Is this error a damaged `/meta` ([`damaged`])? Read-only checks let such a tree
/// through, so `fsck` can name it and `init` repair it.
pub fn is_damaged_meta(error: &EngineError) -> bool {
    matches!(error, EngineError::Record(e) if damaged(e))
}

/// Is `/meta`'s decode failure damage (bytes that are no `TreeMeta`, or too many), not a
/// newer schema (which only an upgrade of archivist reads)?
fn damaged(error: &RecordError) -> bool {
    matches!(
        error,
        RecordError::Malformed { .. } | RecordError::TooLarge { .. }
    )
}

/// Rewrites a `/meta` that exists but is damaged ([`damaged`]) with `meta`, at the
/// version read (a concurrent repair wins alone). Returns why it was rewritten.
async fn rewrite_damaged_meta(session: &Session, meta: &TreeMeta) -> Result<Option<String>> {
    let Some((bytes, stat)) = store::read_raw(session, paths::META).await? else {
        return Ok(None);
    };
    let error = match znode_schema::records::decode::<TreeMeta>(paths::META, &bytes) {
        Err(e) if damaged(&e) => e,
        _ => return Ok(None),
    };
    match session
        .client()
        .set_data(
            paths::META,
            &store::encode(paths::META, meta)?,
            Some(stat.version),
        )
        .await
    {
        Ok(_) => {
            tracing::warn!(%error, "/meta did not decode; rewritten");
            Ok(Some(error.to_string()))
        }
        Err(zk::Error::BadVersion) => Ok(None),
        Err(e) => Err(EngineError::zk("set", paths::META, e)),
    }
}

/// Like [`check_initialised`], but lets a damaged `/meta` through (garbage, not a newer
/// schema): `fsck` must still run on such a tree and name it (`unparsable`; before, it
/// stopped with the decode error like every other command: outside 17i G6). A missing
/// `/meta` or a newer schema still refuses.
pub async fn check_present(session: &Session) -> Result<()> {
    match check_initialised(session).await {
        Ok(_) => Ok(()),
        Err(EngineError::Record(e)) if damaged(&e) => {
            tracing::warn!(error = %e, "/meta does not decode: `archivist init` rewrites it");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Fails with [`EngineError::NotInitialised`] unless `init` has run on this tree.
pub async fn check_initialised(session: &Session) -> Result<TreeMeta> {
    match store::read_patiently::<TreeMeta>(session, paths::META).await? {
        Some((meta, _)) => Ok(meta),
        None => Err(EngineError::NotInitialised {
            chroot: session.chroot().to_string(),
            missing: paths::META.to_string(),
        }),
    }
}

/// A fresh deployment id (128 random bits in hex): made by `init` for a new tree, kept in
/// `/meta` and in the database, so the two can tell they belong together.
pub fn new_deployment_id() -> String {
    use rand::Rng;
    let bits: u128 = rand::thread_rng().gen();
    format!("{bits:032x}")
}

/// Replaces `/meta` if it is still at `version`: `false` when another process changed it
/// meanwhile (read it again). Only the deployment binding changes `/meta` after `init`.
pub async fn replace_meta(session: &Session, meta: &TreeMeta, version: i32) -> Result<bool> {
    let data = store::encode(paths::META, meta)?;
    match session
        .client()
        .set_data(paths::META, &data, Some(version))
        .await
    {
        Ok(_) => Ok(true),
        Err(zk::Error::BadVersion) => Ok(false),
        Err(e) => Err(EngineError::zk("set", paths::META, e)),
    }
}
