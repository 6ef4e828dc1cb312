//! What `fsck --repair` does about a fault: a plan carried out by one compare-and-set
//! write, re-checked first.

use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::paths;
use archivist_engine::{counter, store, EngineError, Session};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// Delete a node, if `unless` does not exist (re-checked just before).
    Delete {
        path: String,
        version: Option<i32>,
        unless: Option<String>,
    },
    /// Move an id counter past the ids in use, the archive's included
    /// (`archivist_engine::counter::catch_up`).
    CatchUp {
        counter: &'static str,
        archived: counter::Archived,
    },
    /// Re-create a missing id counter past the ids in use
    /// (`archivist_engine::counter::recreate`).
    Recreate {
        counter: &'static str,
        archived: counter::Archived,
    },
    /// Put a job in the queue of its status only, at the job's version.
    Requeue {
        job: String,
        version: i32,
        delete: Vec<String>,
        create: Option<String>,
    },
}

pub(super) async fn apply(session: &Session, plan: &Plan) -> std::result::Result<(), String> {
    match plan {
        Plan::CatchUp {
            counter: path,
            archived,
        } => {
            let c = counter::ALL
                .into_iter()
                .find(|c| c.path == *path)
                .ok_or_else(|| format!("{path} is not a counter"))?;
            counter::catch_up(session, &c, archived)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Plan::Recreate {
            counter: path,
            archived,
        } => {
            let c = counter::ALL
                .into_iter()
                .find(|c| c.path == *path)
                .ok_or_else(|| format!("{path} is not a counter"))?;
            counter::recreate(session, &c, archived)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Plan::Delete {
            path,
            version,
            unless,
        } => {
            if let Some(other) = unless {
                if store::exists(session, other)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some()
                {
                    return Err(format!("{other} exists now; left alone"));
                }
            }
            match ops::commit(
                session,
                &[Op::Delete {
                    path: path.clone(),
                    version: *version,
                }],
            )
            .await
            {
                Ok(_) => Ok(()),
                Err(EngineError::Precondition {
                    source: archivist_engine::zk::Error::NoNode,
                    ..
                }) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Plan::Requeue {
            job,
            version,
            delete,
            create,
        } => {
            let mut batch = vec![Op::Check {
                path: paths::job(job),
                version: *version,
            }];
            batch.extend(delete.iter().map(|p| Op::Delete {
                path: p.clone(),
                version: None,
            }));
            batch.extend(create.iter().map(|p| Op::Create {
                path: p.clone(),
                data: Vec::new(),
                mode: Mode::Persistent,
            }));
            ops::commit(session, &batch)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    EngineError::Precondition { op, .. } => {
                        format!("{op} failed: the job moved meanwhile; run fsck again")
                    }
                    other => other.to_string(),
                })
        }
    }
}
