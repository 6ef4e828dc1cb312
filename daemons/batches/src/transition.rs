//! Batch changes: the engine's one transition builder ([`Change`]) on batch records.
//!
//! A change writes the batch record at the version it was read (so a batch that moved
//! meanwhile, e.g. an operator deleted it, is never overwritten), optionally checks or
//! releases the batch lock, and carries extra operations (a report node) in the same
//! multi. A status change must be in the batch state table of `schema.yml` and made by a
//! role its `by` column lists: the batcher builds its changes as [`Role::Batcher`],
//! operator commands as [`Role::Admin`]. Its errors become [`BatchError`]s through
//! `From<EngineError>` (a failed precondition on the batch's nodes is
//! [`BatchError::Moved`], a move not in the table [`BatchError::IllegalTransition`]).

use archivist_engine::schema::paths;
use archivist_engine::schema::records::BatchRecord;
use archivist_engine::schema::spec::StateMachine;
use archivist_engine::schema::BatchState;
use archivist_engine::transition::Change;
#[cfg(doc)]
use archivist_engine::transition::Role;
use archivist_engine::{store, Session};

use crate::error::BatchError;

/// The batch state table embedded in this build.
pub fn machine() -> &'static StateMachine<BatchState> {
    archivist_engine::transition::batch_machine()
}

/// A change of a batch record being built: start one with
/// `BatchChange::edit_of(role, &record, version)`.
pub type BatchChange = Change<BatchRecord>;

/// Reads a batch and its data version.
///
/// # Errors
/// [`BatchError::NotFound`] when there is no such batch.
pub async fn read(session: &Session, id: &str) -> Result<(BatchRecord, i32), BatchError> {
    match store::read::<BatchRecord>(session, &paths::batch(id)).await? {
        Some((record, stat)) => Ok((record, stat.version)),
        None => Err(BatchError::NotFound(id.to_string())),
    }
}
