//! `schema.yml` parsed, validated and indexed.
//!
//! Loading follows smlang's order: parse the raw table, validate it (naming what to fix),
//! then index it for O(1) questions such as [`StateMachine::allows`].

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::state::TableState;
use crate::{BatchState, JobState};

/// A problem in the schema file, with what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The YAML does not parse into the schema's shape.
    #[error("schema.yml does not parse: {0}")]
    Parse(String),
    /// The table has no `start` or names a start that is not a state.
    #[error("start state {0:?} is not listed under states: add it or fix `start`")]
    BadStart(String),
    /// Two states share a name.
    #[error("state {0:?} is listed twice: remove one")]
    DuplicateState(String),
    /// A state in a table is not a variant of its enum ([`JobState`], [`BatchState`]),
    /// or the reverse.
    #[error("state {0:?} is in the table but not in the code (or the reverse): keep the state enum and schema.yml in step")]
    UnknownState(String),
    /// A transition or default names a state that does not exist.
    #[error("{context} names unknown state {state:?}: add the state or fix the name")]
    UnknownTarget {
        /// Where the bad name was found.
        context: String,
        /// The bad name.
        state: String,
    },
    /// The same (from, to) pair is listed twice.
    #[error("transition {from} -> {to} is listed twice: remove one")]
    DuplicateTransition {
        /// Source state.
        from: String,
        /// Target state.
        to: String,
    },
    /// A default next state (`on_success`, `on_failure`) has no matching transition.
    #[error(
        "state {from}: default {which} -> {to} is not a listed transition: add it to transitions"
    )]
    DefaultNotTransition {
        /// Source state.
        from: String,
        /// `on_success` or `on_failure`.
        which: &'static str,
        /// Target state.
        to: String,
    },
    /// A terminal state has outgoing transitions.
    #[error("terminal state {0} has outgoing transitions: remove them or drop `terminal`")]
    TerminalHasExit(String),
    /// Two path patterns are the same.
    #[error("path pattern {0:?} is listed twice")]
    DuplicatePath(String),
    /// A path pattern is malformed.
    #[error("path pattern {0:?} must start with '/' and have no empty segments")]
    BadPath(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    schema_version: u32,
    paths: Vec<RawPath>,
    queue_entry: BTreeMap<String, String>,
    job_state_machine: RawMachine,
    batch_state_machine: RawMachine,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    pattern: String,
    kind: NodeKind,
    data: String,
    doc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    start: String,
    #[serde(default)]
    resume_at_when_never_succeeded: Option<String>,
    states: Vec<RawState>,
    transitions: Vec<RawTransition>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    name: String,
    #[serde(default)]
    consumer: Option<String>,
    #[serde(default)]
    on_success: Option<String>,
    #[serde(default)]
    on_failure: Option<String>,
    #[serde(default)]
    resume_at: Option<String>,
    #[serde(default)]
    terminal: bool,
    doc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransition {
    from: String,
    to: String,
    by: String,
    event: String,
}

/// How ZooKeeper keeps a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Stays until deleted.
    Persistent,
    /// Deleted when its creator's session ends.
    Ephemeral,
    /// Ephemeral with a server-assigned sequence suffix.
    EphemeralSequential,
    /// Persistent with a server-assigned sequence suffix.
    PersistentSequential,
    /// Deleted by the server once its last child goes.
    Container,
}

/// One path pattern of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    /// Pattern with `{placeholders}`, relative to the chroot.
    pub pattern: String,
    /// Node kind.
    pub kind: NodeKind,
    /// Record type name stored in the node, `none` for empty nodes.
    pub data: String,
    /// What the node is for.
    pub doc: String,
}

impl PathSpec {
    /// Does a concrete path match this pattern? A placeholder matches one non-empty
    /// segment.
    pub fn matches(&self, path: &str) -> bool {
        let pattern: Vec<&str> = self.pattern.split('/').collect();
        let concrete: Vec<&str> = path.split('/').collect();
        pattern.len() == concrete.len()
            && pattern.iter().zip(&concrete).all(|(p, c)| {
                if p.starts_with('{') && p.ends_with('}') {
                    !c.is_empty()
                } else {
                    p == c
                }
            })
    }
}

/// One state row of a table (the job table unless `S` says otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSpec<S = JobState> {
    /// The state.
    pub state: S,
    /// Daemon role that consumes this state's queue, if any.
    pub consumer: Option<String>,
    /// Default next state when the consumer's step succeeds.
    pub on_success: Option<S>,
    /// Default next state when the consumer's step fails.
    pub on_failure: Option<S>,
    /// Where a retry sends a failed job whose last successful status is this state.
    pub resume_at: Option<S>,
    /// No transitions leave a terminal state.
    pub terminal: bool,
    /// What the state means.
    pub doc: String,
}

/// One allowed transition (of the job table unless `S` says otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionSpec<S = JobState> {
    /// Source state.
    pub from: S,
    /// Target state.
    pub to: S,
    /// The roles that may make it: one name, or several separated by commas.
    pub by: String,
    /// What happened.
    pub event: String,
}

/// A validated state machine: the job table (`StateMachine`) or the batch table
/// (`StateMachine<BatchState>`).
#[derive(Debug, Clone)]
pub struct StateMachine<S = JobState> {
    /// The state new jobs (batches) start in.
    pub start: S,
    /// Where a retry sends a job that failed before any success (the start state for
    /// tables that do not say).
    pub resume_when_never_succeeded: S,
    /// State rows in table order.
    pub states: Vec<StateSpec<S>>,
    /// Allowed transitions in table order.
    pub transitions: Vec<TransitionSpec<S>>,
    allowed: BTreeSet<(S, S)>,
}

impl<S: TableState> StateMachine<S> {
    /// Is `from -> to` in the table?
    pub fn allows(&self, from: S, to: S) -> bool {
        self.allowed.contains(&(from, to))
    }

    /// The row of the move `from -> to`, if the table lists it (its `by` says who may
    /// make it).
    pub fn transition(&self, from: S, to: S) -> Option<&TransitionSpec<S>> {
        if !self.allows(from, to) {
            return None;
        }
        self.transitions
            .iter()
            .find(|t| t.from == from && t.to == to)
    }

    /// The row for a state.
    pub fn state(&self, state: S) -> &StateSpec<S> {
        // Validation guarantees one row per state of the enum.
        self.states
            .iter()
            .find(|s| s.state == state)
            .unwrap_or_else(|| unreachable!("validated table has a row for {state}"))
    }

    /// The table as Graphviz DOT, for `archivist schema graph`.
    pub fn to_dot(&self) -> String {
        self.dot("jobs")
    }

    /// The table as a Graphviz DOT graph named `name`.
    pub fn dot(&self, name: &str) -> String {
        let mut out = format!("digraph {name} {{\n  rankdir=LR;\n");
        for s in &self.states {
            let shape = if s.terminal { "doublecircle" } else { "circle" };
            out.push_str(&format!("  \"{}\" [shape={shape}];\n", s.state));
        }
        for t in &self.transitions {
            out.push_str(&format!(
                "  \"{}\" -> \"{}\" [label=\"{} ({})\"];\n",
                t.from, t.to, t.event, t.by
            ));
        }
        out.push_str("}\n");
        out
    }
}

impl StateMachine<JobState> {
    /// Where `archivist retry` sends a failed job.
    pub fn resume_at(&self, last_successful: Option<JobState>) -> JobState {
        match last_successful {
            None => self.resume_when_never_succeeded,
            Some(state) => self
                .state(state)
                .resume_at
                .unwrap_or(self.resume_when_never_succeeded),
        }
    }
}

/// The whole validated schema.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Version of the records this schema describes.
    pub schema_version: u32,
    /// Every path pattern.
    pub paths: Vec<PathSpec>,
    /// Queue entry name format, as documented in the file.
    pub queue_entry: BTreeMap<String, String>,
    /// The job state machine.
    pub machine: StateMachine,
    /// The batch state machine.
    pub batch_machine: StateMachine<BatchState>,
}

impl Schema {
    /// The schema embedded in this build. It is validated by this crate's tests, so a
    /// failure here is a build defect, not an input error.
    pub fn embedded() -> Schema {
        match Schema::parse(crate::SCHEMA_YAML) {
            Ok(schema) => schema,
            Err(err) => panic!("embedded schema.yml is invalid: {err}"),
        }
    }

    /// Parses and validates a schema text.
    pub fn parse(text: &str) -> Result<Schema, SchemaError> {
        let raw: RawSchema =
            serde_yaml::from_str(text).map_err(|e| SchemaError::Parse(e.to_string()))?;
        let mut seen = BTreeSet::new();
        let mut paths = Vec::new();
        for p in raw.paths {
            if !p.pattern.starts_with('/') || p.pattern[1..].split('/').any(str::is_empty) {
                return Err(SchemaError::BadPath(p.pattern));
            }
            if !seen.insert(p.pattern.clone()) {
                return Err(SchemaError::DuplicatePath(p.pattern));
            }
            paths.push(PathSpec {
                pattern: p.pattern,
                kind: p.kind,
                data: p.data,
                doc: p.doc,
            });
        }
        if raw
            .job_state_machine
            .resume_at_when_never_succeeded
            .is_none()
        {
            return Err(SchemaError::UnknownTarget {
                context: "job_state_machine.resume_at_when_never_succeeded".into(),
                state: String::new(),
            });
        }
        let machine = validate_machine::<JobState>(raw.job_state_machine)?;
        let batch_machine = validate_machine::<BatchState>(raw.batch_state_machine)?;
        Ok(Schema {
            schema_version: raw.schema_version,
            paths,
            queue_entry: raw.queue_entry,
            machine,
            batch_machine,
        })
    }

    /// The pattern a concrete path belongs to, if any.
    pub fn path_spec(&self, path: &str) -> Option<&PathSpec> {
        self.paths.iter().find(|p| p.matches(path))
    }
}

fn state_named<S: TableState>(name: &str, context: &str) -> Result<S, SchemaError> {
    S::named(name).ok_or_else(|| SchemaError::UnknownTarget {
        context: context.to_string(),
        state: name.to_string(),
    })
}

fn optional_state<S: TableState>(
    name: &Option<String>,
    context: &str,
) -> Result<Option<S>, SchemaError> {
    name.as_deref().map(|n| state_named(n, context)).transpose()
}

fn validate_machine<S: TableState>(raw: RawMachine) -> Result<StateMachine<S>, SchemaError> {
    let mut names = BTreeSet::new();
    for s in &raw.states {
        if !names.insert(s.name.clone()) {
            return Err(SchemaError::DuplicateState(s.name.clone()));
        }
        if S::named(&s.name).is_none() {
            return Err(SchemaError::UnknownState(s.name.clone()));
        }
    }
    for state in S::all() {
        if !names.contains(state.name()) {
            return Err(SchemaError::UnknownState(state.name().to_string()));
        }
    }
    if !names.contains(&raw.start) {
        return Err(SchemaError::BadStart(raw.start));
    }
    let start: S = state_named(&raw.start, "start")?;
    let resume_when_never_succeeded = match &raw.resume_at_when_never_succeeded {
        Some(name) => state_named(name, "resume_at_when_never_succeeded")?,
        None => start,
    };

    let mut transitions = Vec::new();
    let mut allowed = BTreeSet::new();
    for t in &raw.transitions {
        let context = format!("transition {} -> {}", t.from, t.to);
        let from: S = state_named(&t.from, &context)?;
        let to: S = state_named(&t.to, &context)?;
        if !allowed.insert((from, to)) {
            return Err(SchemaError::DuplicateTransition {
                from: t.from.clone(),
                to: t.to.clone(),
            });
        }
        transitions.push(TransitionSpec {
            from,
            to,
            by: t.by.clone(),
            event: t.event.clone(),
        });
    }

    let mut states = Vec::new();
    for s in &raw.states {
        let state: S = state_named(&s.name, "states")?;
        let on_success = optional_state(&s.on_success, &format!("{}.on_success", s.name))?;
        let on_failure = optional_state(&s.on_failure, &format!("{}.on_failure", s.name))?;
        let resume_at = optional_state(&s.resume_at, &format!("{}.resume_at", s.name))?;
        for (which, target) in [("on_success", on_success), ("on_failure", on_failure)] {
            if let Some(to) = target {
                if !allowed.contains(&(state, to)) {
                    return Err(SchemaError::DefaultNotTransition {
                        from: s.name.clone(),
                        which,
                        to: to.to_string(),
                    });
                }
            }
        }
        if s.terminal && transitions.iter().any(|t| t.from == state) {
            return Err(SchemaError::TerminalHasExit(s.name.clone()));
        }
        states.push(StateSpec {
            state,
            consumer: s.consumer.clone(),
            on_success,
            on_failure,
            resume_at,
            terminal: s.terminal,
            doc: s.doc.clone(),
        });
    }
    Ok(StateMachine {
        start,
        resume_when_never_succeeded,
        states,
        transitions,
        allowed,
    })
}

impl Schema {
    /// The tree reference for `docs/znode-tree.md`, generated from this schema (a test
    /// keeps the committed file equal to this output).
    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("# The znode tree\n\n");
        out.push_str("<!-- Generated from znode-schema/schema.yml by `UPDATE_DOCS=1 cargo test -p znode-schema`; do not edit. -->\n\n");
        out.push_str(&format!(
            "Schema version {}. Every path is relative to the chroot (default `/archivist`). \
             Node data is YAML: `zkCli.sh get /archivist/<path>` shows it as text.\n\n",
            self.schema_version
        ));
        out.push_str("| path | kind | data | what it is |\n|---|---|---|---|\n");
        for p in &self.paths {
            out.push_str(&format!(
                "| `{}` | {:?} | {} | {} |\n",
                p.pattern,
                p.kind,
                p.data,
                p.doc.replace('|', "\\|")
            ));
        }
        out.push_str("\n## Queue entry names\n\n");
        for (k, v) in &self.queue_entry {
            out.push_str(&format!("- **{k}**: {v}\n"));
        }
        out.push_str("\n## Job states\n\n| state | consumer | on success | on failure | retry resumes at | terminal | meaning |\n|---|---|---|---|---|---|---|\n");
        let show = |s: Option<JobState>| s.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let show_batch =
            |s: Option<BatchState>| s.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        for s in &self.machine.states {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                s.state,
                s.consumer.as_deref().unwrap_or("-"),
                show(s.on_success),
                show(s.on_failure),
                show(s.resume_at),
                if s.terminal { "yes" } else { "" },
                s.doc
            ));
        }
        out.push_str("\n## Allowed transitions\n\nAny other transition is refused by the engine.\n\n| from | to | by | event |\n|---|---|---|---|\n");
        for t in &self.machine.transitions {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                t.from, t.to, t.by, t.event
            ));
        }
        out.push_str("\n## State diagram (Graphviz)\n\n```dot\n");
        out.push_str(&self.machine.to_dot());
        out.push_str("```\n");
        out.push_str("\n## Batch states\n\n| state | consumer | on success | on failure | terminal | meaning |\n|---|---|---|---|---|---|\n");
        for s in &self.batch_machine.states {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                s.state,
                s.consumer.as_deref().unwrap_or("-"),
                show_batch(s.on_success),
                show_batch(s.on_failure),
                if s.terminal { "yes" } else { "" },
                s.doc
            ));
        }
        out.push_str("\n## Allowed batch transitions\n\nEach is one multi writing the batch record at the version it was read.\n\n| from | to | by | event |\n|---|---|---|---|\n");
        for t in &self.batch_machine.transitions {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                t.from, t.to, t.by, t.event
            ));
        }
        out.push_str("\n## Batch state diagram (Graphviz)\n\n```dot\n");
        out.push_str(&self.batch_machine.dot("batches"));
        out.push_str("```\n");
        out
    }
}
