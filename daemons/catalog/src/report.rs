//! What a curation did, item by item, for the command's output and for tests.

use serde::Serialize;

use crate::error::ItemProblem;
use crate::item::Kind;

/// What happened to one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "change")]
pub enum Change {
    /// A new record (and its aliases) was created.
    Created,
    /// An existing record had fields changed (listed) and `last_curated` moved.
    Updated {
        /// Names of the changed fields.
        fields: Vec<String>,
    },
    /// Nothing changed but `last_curated`.
    Refreshed,
}

/// One item's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemOutcome {
    /// Where the item came from.
    pub label: String,
    /// Episode or clip.
    pub kind: Kind,
    /// The record id.
    pub id: String,
    /// What happened.
    #[serde(flatten)]
    pub change: Change,
}

/// The outcome of a curation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CurationReport {
    /// Records written, in no particular order.
    pub items: Vec<ItemOutcome>,
    /// Items left out, with the reason (e.g. a non-audio enclosure).
    pub skipped: Vec<ItemProblem>,
    /// Items registered with something to look at (e.g. a manifest URL that looks cut
    /// by a YAML comment), with the warning.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<ItemProblem>,
    /// Pending jobs re-ordered because their episode's priority changed.
    pub reprioritized_jobs: usize,
    /// Rounds of read-and-write it took (more than 1: it raced other writers).
    pub attempts: u32,
    /// Wall time, milliseconds.
    pub elapsed_ms: u64,
}

impl CurationReport {
    fn count(&self, pick: impl Fn(&Change) -> bool) -> usize {
        self.items.iter().filter(|i| pick(&i.change)).count()
    }

    /// New records.
    pub fn created(&self) -> usize {
        self.count(|c| matches!(c, Change::Created))
    }

    /// Records with changed fields.
    pub fn updated(&self) -> usize {
        self.count(|c| matches!(c, Change::Updated { .. }))
    }

    /// Records where only `last_curated` moved.
    pub fn refreshed(&self) -> usize {
        self.count(|c| matches!(c, Change::Refreshed))
    }

    /// The outcome of the item with this label.
    pub fn outcome(&self, label: &str) -> Option<&ItemOutcome> {
        self.items.iter().find(|i| i.label == label)
    }

    /// A one-line summary.
    pub fn summary(&self) -> String {
        format!(
            "{} created, {} updated, {} unchanged (last_curated moved), {} skipped, {} warning(s), {} pending job(s) re-ordered, {} ms",
            self.created(),
            self.updated(),
            self.refreshed(),
            self.skipped.len(),
            self.warnings.len(),
            self.reprioritized_jobs,
            self.elapsed_ms
        )
    }
}
