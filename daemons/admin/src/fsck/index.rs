//! The tree as fsck reads it: every node once, indexed by kind (jobs with their decoded
//! records, locks, queue entries, leases, catalog ids).

use std::collections::{BTreeMap, BTreeSet};

use archivist_engine::schema::records::{self, JobRecord};
use archivist_engine::schema::JobState;

use crate::tree::RawNode;

pub(super) fn parts(path: &str) -> Vec<&str> {
    path.split('/').skip(1).collect()
}

pub(super) struct Index<'a> {
    pub(super) nodes: &'a [RawNode],
    pub(super) jobs: BTreeMap<&'a str, (&'a RawNode, Option<JobRecord>)>,
    pub(super) locks: Vec<(&'a str, &'a RawNode)>,
    pub(super) entries: Vec<(JobState, &'a str, &'a RawNode)>,
    pub(super) leases: Vec<(&'a str, &'a RawNode)>,
    pub(super) reports: Vec<(&'a str, &'a RawNode)>,
    pub(super) episodes: BTreeSet<&'a str>,
    pub(super) clips: BTreeSet<&'a str>,
}

pub(super) fn index(nodes: &[RawNode]) -> Index<'_> {
    let mut ix = Index {
        nodes,
        jobs: BTreeMap::new(),
        locks: Vec::new(),
        entries: Vec::new(),
        leases: Vec::new(),
        reports: Vec::new(),
        episodes: BTreeSet::new(),
        clips: BTreeSet::new(),
    };
    for node in nodes {
        match parts(&node.path).as_slice() {
            ["jobs", id] => {
                ix.jobs.insert(
                    id,
                    (
                        node,
                        records::decode::<JobRecord>(&node.path, &node.data).ok(),
                    ),
                );
            }
            ["jobs", id, "lock"] => ix.locks.push((id, node)),
            ["queues", state, name] => {
                if let Ok(state) = state.parse::<JobState>() {
                    ix.entries.push((state, name, node));
                }
            }
            ["leases", id] => ix.leases.push((id, node)),
            ["reports", name] => ix.reports.push((name, node)),
            ["catalog", "episodes", id] => {
                ix.episodes.insert(id);
            }
            ["catalog", "clips", id] => {
                ix.clips.insert(id);
            }
            _ => {}
        }
    }
    ix
}
