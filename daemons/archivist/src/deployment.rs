//! Binding a database to its ZooKeeper tree (outside 22 finding 8). `init` gives each
//! tree a deployment id in `/meta`; the database keeps the same id in its `deployment`
//! table. Every command and daemon that opens the database compares the two and refuses
//! a pair that does not belong together, naming both, instead of mixing two deployments:
//! a SQLite file deleted and silently re-created empty (ids handed out again), two
//! recorders of one deployment writing to different files, two chroots on one
//! PostgreSQL database. The one rule of which pairs bind lives in [`decide`].

use anyhow::{bail, Result};
use archivist_db::Database;
use archivist_engine::schema::records::TreeMeta;
use archivist_engine::Session;

/// What the caller may write to bind the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Check only (read-only commands): refuse a mismatch, write nothing.
    Check,
    /// Bind a tree and a database that have not been bound yet (daemons and commands
    /// that write).
    Bind,
    /// `archivist init --adopt-database`: the operator says this database is the
    /// deployment's, knowingly (a tree re-made after ZooKeeper's data was lost, a
    /// database restored from a backup older than deployment ids).
    Adopt,
}

/// What to do for one reading of `/meta` and the database's row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// They agree (or there is nothing to check yet).
    Done,
    /// Give the tree this id (and the flag) at its read version.
    SetTree { id: String, bound: bool },
    /// Store this id in the database.
    ClaimDb(String),
    /// Refuse, with this message.
    Refuse(String),
}

/// The one rule (pure, so its table is tested without ZooKeeper or a database).
fn decide(meta: &TreeMeta, in_db: Option<&str>, mode: Mode, chroot: &str, url: &str) -> Step {
    let restore = "see docs/operations.md, \"Backup and restore\"";
    match (meta.deployment.as_deref(), in_db) {
        (Some(tree), Some(db)) if tree == db => {
            if meta.database_bound || mode == Mode::Check {
                Step::Done
            } else {
                Step::SetTree {
                    id: tree.to_string(),
                    bound: true,
                }
            }
        }
        (Some(tree), Some(db)) => {
            if mode == Mode::Adopt && !meta.database_bound {
                return Step::SetTree {
                    id: db.to_string(),
                    bound: true,
                };
            }
            Step::Refuse(format!(
                "the database {url} belongs to deployment {db}, but the tree {chroot} to \
                 deployment {tree}: they are two deployments. Point every daemon of this tree \
                 at its own database{hint}",
                hint = if meta.database_bound {
                    format!(" ({restore})")
                } else {
                    format!(
                        "; if this tree replaces that deployment's lost tree, run `archivist \
                         init --adopt-database` ({restore})"
                    )
                }
            ))
        }
        (Some(tree), None) => {
            if !meta.database_bound || mode == Mode::Adopt {
                if mode == Mode::Check {
                    return Step::Done;
                }
                return Step::ClaimDb(tree.to_string());
            }
            Step::Refuse(format!(
                "the tree {chroot} belongs to deployment {tree} and was bound to its database, \
                 but the database {url} holds no deployment id: it is not that database (deleted \
                 and created again empty? a wrong URL or path?). Point every daemon at the \
                 deployment's database or restore its backup; to go on with this database \
                 knowingly, run `archivist init --adopt-database` ({restore})"
            ))
        }
        (None, Some(db)) => {
            if mode == Mode::Adopt {
                return Step::SetTree {
                    id: db.to_string(),
                    bound: true,
                };
            }
            Step::Refuse(format!(
                "the database {url} belongs to deployment {db}, but the tree {chroot} has no \
                 deployment id (made by an archivist before deployment ids): it is another \
                 deployment's database. Point this tree's daemons at its own database; if this \
                 tree is that deployment's, run `archivist init --adopt-database` ({restore})"
            ))
        }
        // A tree and a database from before deployment ids (or `migrate`'s first run):
        // the first process that may write binds them.
        (None, None) => match mode {
            Mode::Check => Step::Done,
            Mode::Bind | Mode::Adopt => Step::SetTree {
                id: archivist_engine::tree::new_deployment_id(),
                bound: false,
            },
        },
    }
}

/// Whether the tree the configuration names has been bound to a database (false for a
/// tree not initialised, or not reachable in its chroot).
pub async fn tree_is_bound(zk: &archivist_engine::ZkConfig) -> Result<bool> {
    let session = match Session::connect_existing(zk).await {
        Ok(session) => session,
        Err(archivist_engine::EngineError::NotInitialised { .. }) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let meta = archivist_engine::store::read_patiently::<TreeMeta>(
        &session,
        archivist_engine::schema::paths::META,
    )
    .await;
    session.close(std::time::Duration::from_secs(2)).await;
    Ok(meta?.is_some_and(|(meta, _)| meta.database_bound))
}

/// Checks (and, as `mode` allows, binds) the database against the tree. A tree without
/// `/meta` (not initialised) is left to the caller's own check. Safe to run from many
/// processes at once: `/meta` is replaced only at the version read, the database row
/// only inserted if absent, and each step is followed by reading both again.
pub async fn bind(session: &Session, db: &Database, mode: Mode) -> Result<()> {
    for _ in 0..20 {
        let read = archivist_engine::store::read_patiently::<TreeMeta>(
            session,
            archivist_engine::schema::paths::META,
        )
        .await;
        let Some((meta, stat)) = (match read {
            // A read-only command (fsck above all) goes on and names the damage; only
            // `init` repairs it, with the database's id (outside 17k N1).
            Err(e) if mode == Mode::Check && archivist_engine::tree::is_damaged_meta(&e) => {
                return Ok(());
            }
            read => read?,
        }) else {
            return Ok(());
        };
        let in_db = archivist_db::deployment::get(db).await?;
        match decide(
            &meta,
            in_db.as_deref(),
            mode,
            session.chroot(),
            db.shown_url(),
        ) {
            Step::Done => return Ok(()),
            Step::Refuse(message) => bail!(message),
            Step::ClaimDb(id) => {
                archivist_db::deployment::claim(db, &id).await?;
            }
            Step::SetTree { id, bound } => {
                let next = TreeMeta {
                    deployment: Some(id.clone()),
                    database_bound: bound,
                    ..meta
                };
                if archivist_engine::tree::replace_meta(session, &next, stat.version).await? {
                    tracing::info!(deployment = %id, chroot = session.chroot(), database = db.shown_url(), bound, "tree bound to its database");
                }
            }
        }
    }
    bail!(
        "binding the database {} to the tree {}: /meta kept changing; try again",
        db.shown_url(),
        session.chroot()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: Option<&str>, bound: bool) -> TreeMeta {
        TreeMeta {
            schema: 1,
            created: time::OffsetDateTime::UNIX_EPOCH,
            created_by: "t".into(),
            deployment: id.map(str::to_string),
            database_bound: bound,
        }
    }

    fn step(m: &TreeMeta, db: Option<&str>, mode: Mode) -> Step {
        decide(m, db, mode, "/c", "sqlite:///x.db")
    }

    #[test]
    fn agreeing_pairs_pass_and_are_marked_bound() {
        assert_eq!(
            step(&meta(Some("a"), true), Some("a"), Mode::Bind),
            Step::Done
        );
        assert_eq!(
            step(&meta(Some("a"), false), Some("a"), Mode::Check),
            Step::Done
        );
        assert_eq!(
            step(&meta(Some("a"), false), Some("a"), Mode::Bind),
            Step::SetTree {
                id: "a".into(),
                bound: true
            }
        );
    }

    #[test]
    fn a_fresh_tree_claims_its_database_and_a_bound_tree_refuses_an_empty_one() {
        assert_eq!(
            step(&meta(Some("a"), false), None, Mode::Bind),
            Step::ClaimDb("a".into())
        );
        assert_eq!(step(&meta(Some("a"), false), None, Mode::Check), Step::Done);
        for mode in [Mode::Bind, Mode::Check] {
            let Step::Refuse(m) = step(&meta(Some("a"), true), None, mode) else {
                panic!("not refused");
            };
            assert!(
                m.contains("/c")
                    && m.contains("sqlite:///x.db")
                    && m.contains("holds no deployment id")
                    && m.contains("--adopt-database"),
                "{m}"
            );
        }
        assert_eq!(
            step(&meta(Some("a"), true), None, Mode::Adopt),
            Step::ClaimDb("a".into())
        );
    }

    #[test]
    fn two_deployments_are_refused_naming_both() {
        for bound in [false, true] {
            for mode in [Mode::Bind, Mode::Check] {
                let Step::Refuse(m) = step(&meta(Some("a"), bound), Some("b"), mode) else {
                    panic!("not refused");
                };
                assert!(
                    m.contains("deployment a") && m.contains("deployment b"),
                    "{m}"
                );
            }
        }
        let Step::Refuse(_) = step(&meta(None, false), Some("b"), Mode::Bind) else {
            panic!("an id-less tree took another deployment's database");
        };
        assert_eq!(
            step(&meta(Some("a"), false), Some("b"), Mode::Adopt),
            Step::SetTree {
                id: "b".into(),
                bound: true
            }
        );
        let Step::Refuse(_) = step(&meta(Some("a"), true), Some("b"), Mode::Adopt) else {
            panic!("a bound tree was moved to another database");
        };
    }

    #[test]
    fn trees_and_databases_from_before_ids_are_bound_by_a_writer_only() {
        assert_eq!(step(&meta(None, false), None, Mode::Check), Step::Done);
        let Step::SetTree { id, bound: false } = step(&meta(None, false), None, Mode::Bind) else {
            panic!("not bound");
        };
        assert_eq!(id.len(), 32);
    }
}
