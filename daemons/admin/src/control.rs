//! Holds on catalog records (`/control/hold/{id}`: the planner plans nothing for a held
//! episode or clip) and
//! pauses of a state's queue (Merritt's queue hold: consumers claim nothing new).

use archivist_db::catalog;
use archivist_db::Database;
use archivist_engine::consumer::PAUSABLE_STATES;
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::records::PauseRecord;
use archivist_engine::schema::{paths, JobState, SCHEMA_VERSION};
use archivist_engine::{store, zk, EngineError, Session};
use serde::Serialize;

use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

/// A catalog record an operator can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogTarget {
    /// An episode id.
    Episode(String),
    /// A clip id.
    Clip(String),
}

/// The result of a hold or release of a catalog record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogHoldReport {
    /// `episode` or `clip`.
    pub kind: &'static str,
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Held now?
    pub held: bool,
    /// Did this call change it?
    pub changed: bool,
}

/// Sets or clears the hold of an episode or clip: `/control/hold/{id}` in ZooKeeper
/// (holds are coordination; the catalog itself is in the database, and a curator never
/// touches a hold). The record must exist in the catalog. The planner watches
/// `/control/hold` and plans nothing for a held record; jobs already planned are not
/// touched.
pub async fn set_catalog_hold(
    session: &Session,
    db: &Database,
    target: &CatalogTarget,
    held: bool,
    by: &str,
) -> Result<CatalogHoldReport> {
    let (kind, id) = match target {
        CatalogTarget::Episode(id) => ("episode", id),
        CatalogTarget::Clip(id) => ("clip", id),
    };
    let title = match target {
        CatalogTarget::Episode(id) => catalog::episode(db, id).await?.map(|r| r.fields.title),
        CatalogTarget::Clip(id) => catalog::clip(db, id).await?.map(|r| r.fields.title),
    };
    let Some(title) = title else {
        return Err(AdminError::NotFound {
            what: kind,
            id: id.to_string(),
            path: format!("the {kind}s of the catalog ({})", db.shown_url()),
        });
    };
    let path = paths::hold(id);
    let changed = if held {
        let record = PauseRecord {
            schema: SCHEMA_VERSION,
            by: by.to_string(),
            reason: String::new(),
            at: Some(archivist_engine::clock::stamp_now()),
        };
        match ops::commit(
            session,
            &[Op::Create {
                data: store::encode(&path, &record)?,
                path: path.clone(),
                mode: Mode::Persistent,
            }],
        )
        .await
        {
            Ok(_) => true,
            Err(EngineError::Precondition {
                source: zk::Error::NodeExists,
                ..
            }) => false,
            // A tree made before holds moved here has no `/control/hold`.
            Err(EngineError::Precondition {
                source: zk::Error::NoNode,
                ..
            }) => {
                let dir = Op::Create {
                    path: paths::HOLDS.to_string(),
                    data: Vec::new(),
                    mode: Mode::Persistent,
                };
                match ops::commit(session, &[dir]).await {
                    Ok(_)
                    | Err(EngineError::Precondition {
                        source: zk::Error::NodeExists,
                        ..
                    }) => {}
                    Err(e) => return Err(AdminError::from_commit(paths::HOLDS, e)),
                }
                store::create_if_absent(session, &path, &record).await?
            }
            Err(e) => return Err(AdminError::from_commit(&path, e)),
        }
    } else {
        store::delete_if_present(session, &path).await?
    };
    if changed {
        tracing::info!(kind, id, held, "catalog hold changed");
        metrics::counter!("archivist_admin_catalog_holds_total", "held" => if held { "true" } else { "false" }).increment(1);
    }
    Ok(CatalogHoldReport {
        kind,
        id: id.to_string(),
        title,
        held,
        changed,
    })
}

/// Whether an episode or clip is held (`/control/hold/{id}` exists).
pub async fn is_held(session: &Session, id: &str) -> Result<bool> {
    Ok(store::exists(session, &paths::hold(id)).await?.is_some())
}

/// A state's pause, as `pause`/`resume` report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PauseReport {
    /// The state whose queue is paused.
    pub state: JobState,
    /// Paused now?
    pub paused: bool,
    /// Did this call change it?
    pub changed: bool,
    /// The pause record, while paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<PauseRecord>,
}

/// `pause STATE`: creates `/control/pause/{state}`; consumers of the state's queue claim
/// nothing new until `resume`. Jobs in flight finish. Only states a daemon claims from
/// can be paused ([`PAUSABLE_STATES`]); any other is refused, since its pause would stop
/// nothing.
pub async fn pause(
    session: &Session,
    settings: &AdminSettings,
    state: JobState,
    reason: &str,
) -> Result<PauseReport> {
    if !PAUSABLE_STATES.contains(&state) {
        return Err(AdminError::Invalid(format!(
            "cannot pause {state}: no daemon claims jobs from that queue, so a pause would stop nothing; pause pending to stop new research, or reported to stop recording{}",
            match state {
                JobState::Leased | JobState::Researching =>
                    " (jobs in leased or researching are held by a researcher: hold or cancel them one by one)",
                _ => "",
            }
        )));
    }
    let path = paths::pause(state);
    let record = PauseRecord {
        schema: SCHEMA_VERSION,
        by: settings.actor.clone(),
        reason: reason.to_string(),
        at: Some(archivist_engine::clock::stamp_now()),
    };
    match ops::commit(
        session,
        &[Op::Create {
            data: store::encode(&path, &record)?,
            path: path.clone(),
            mode: Mode::Persistent,
        }],
    )
    .await
    {
        Ok(_) => {
            tracing::info!(%state, reason, "queue paused");
            Ok(PauseReport {
                state,
                paused: true,
                changed: true,
                record: Some(record),
            })
        }
        Err(EngineError::Precondition {
            source: zk::Error::NodeExists,
            ..
        }) => {
            let existing = store::read::<PauseRecord>(session, &path)
                .await?
                .map(|(r, _)| r);
            Ok(PauseReport {
                state,
                paused: true,
                changed: false,
                record: existing,
            })
        }
        // The parent `/control/pause` is gone (deleted by hand): say what fixes it, not
        // "precondition failed".
        Err(EngineError::Precondition {
            source: zk::Error::NoNode,
            ..
        }) => Err(AdminError::Engine(EngineError::NotInitialised {
            chroot: session.chroot().to_string(),
            missing: format!(
                "{} (deleted by hand?; `init` re-creates the tree's missing nodes and changes nothing else; then pause {state} again)",
                paths::PAUSES
            ),
        })),
        Err(e) => Err(e.into()),
    }
}

/// `resume STATE`: deletes the pause.
pub async fn resume(session: &Session, state: JobState) -> Result<PauseReport> {
    let changed = store::delete_if_present(session, &paths::pause(state)).await?;
    if changed {
        tracing::info!(%state, "queue resumed");
    }
    Ok(PauseReport {
        state,
        paused: false,
        changed,
        record: None,
    })
}

/// Every paused state and its record (an unreadable record still counts as a pause).
pub async fn pauses(session: &Session) -> Result<Vec<PauseReport>> {
    let mut out = Vec::new();
    for name in store::children(session, paths::PAUSES).await? {
        let Some(state) = pausable(&name) else {
            continue;
        };
        let record = match store::read::<PauseRecord>(session, &paths::pause(state)).await {
            Ok(found) => found.map(|(r, _)| r),
            Err(EngineError::Record(_)) => None,
            Err(e) => return Err(e.into()),
        };
        out.push(PauseReport {
            state,
            paused: true,
            changed: false,
            record,
        });
    }
    Ok(out)
}

/// The state a `/control/pause/{name}` node pauses, if it pauses one: the name must be a
/// state that daemons claim from ([`PAUSABLE_STATES`]). Any other node (made by hand:
/// `researching`, `bogus`) pauses nothing and is not shown as a pause.
pub fn pausable(name: &str) -> Option<JobState> {
    name.parse::<JobState>()
        .ok()
        .filter(|state| PAUSABLE_STATES.contains(state))
}

/// Nodes under `/control/pause` that pause nothing (see [`pausable`]): `status` names
/// them and `fsck` flags them (`pause_ignored`).
pub async fn ignored_pauses(session: &Session) -> Result<Vec<String>> {
    Ok(store::children(session, paths::PAUSES)
        .await?
        .into_iter()
        .filter(|name| pausable(name).is_none())
        .collect())
}
