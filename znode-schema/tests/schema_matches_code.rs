//! The code and `schema.yml` describe the same tree and state machine.

use std::collections::BTreeSet;

use znode_schema::paths::EXAMPLES;
use znode_schema::spec::{Schema, SchemaError};
use znode_schema::JobState;

#[test]
fn every_path_builder_matches_its_pattern_and_every_pattern_has_a_builder() {
    let schema = Schema::embedded();
    let mut covered = BTreeSet::new();
    for (pattern, build) in EXAMPLES {
        let path = build();
        let spec = schema
            .path_spec(&path)
            .unwrap_or_else(|| panic!("{path} (from builder for {pattern}) matches no pattern"));
        assert_eq!(&spec.pattern, pattern, "{path} matched the wrong pattern");
        covered.insert(spec.pattern.clone());
    }
    for spec in &schema.paths {
        assert!(
            covered.contains(&spec.pattern),
            "no builder for {}",
            spec.pattern
        );
    }
}

#[test]
fn every_job_state_has_a_row_and_a_queue_directory() {
    let schema = Schema::embedded();
    let table: Vec<JobState> = schema.machine.states.iter().map(|s| s.state).collect();
    assert_eq!(table, JobState::ALL.to_vec());
    let dirs = znode_schema::paths::directories();
    for state in JobState::ALL {
        assert!(dirs.contains(&znode_schema::paths::queue(state)));
    }
}

#[test]
fn every_batch_state_has_a_row_and_the_merritt_transitions_are_allowed() {
    use znode_schema::BatchState::*;
    let m = Schema::embedded().batch_machine;
    let table: Vec<_> = m.states.iter().map(|s| s.state).collect();
    assert_eq!(table, znode_schema::BatchState::ALL.to_vec());
    assert_eq!(m.start, Pending);
    for (from, to) in [
        (Pending, Processing),
        (Pending, Held),
        (Held, Pending),
        (Processing, Reporting),
        (Reporting, Completed),
        (Reporting, Failed),
        (Failed, UpdateReporting),
        (UpdateReporting, Completed),
        (UpdateReporting, Failed),
        (Failed, Deleted),
        (Held, Deleted),
    ] {
        assert!(m.allows(from, to), "{from} -> {to}");
    }
    assert!(!m.allows(Pending, Completed));
    assert!(!m.allows(Deleted, Pending));
    assert!(m.state(Deleted).terminal);
    assert_eq!(m.state(Reporting).on_failure, Some(Failed));
}

#[test]
fn invalid_batch_tables_are_refused() {
    let text = znode_schema::SCHEMA_YAML;
    let batch_at = text.find("batch_state_machine:").unwrap();
    let (head, tail) = text.split_at(batch_at);
    let broken =
        |from: &str, to: &str| Schema::parse(&format!("{head}{}", tail.replacen(from, to, 1)));
    assert!(matches!(
        broken("    - name: update-reporting\n", "    - name: updating\n"),
        Err(SchemaError::UnknownState(_))
    ));
    assert!(matches!(
        broken("{from: held, to: pending,", "{from: held, to: limbo,"),
        Err(SchemaError::UnknownTarget { .. })
    ));
    assert!(matches!(
        broken(
            "    - {from: processing, to: reporting, by: batcher, event: every pair settled}\n",
            ""
        ),
        Err(SchemaError::DefaultNotTransition { .. })
    ));
    assert!(broken(
        "    - name: deleted\n      terminal: true\n",
        "    - name: deleted\n"
    )
    .is_ok());
    assert!(matches!(
        broken(
            "    - name: completed\n",
            "    - name: completed\n      terminal: true\n"
        ),
        Err(SchemaError::TerminalHasExit(_))
    ));
}

#[test]
fn defaults_and_resume_points_follow_the_table() {
    let m = Schema::embedded().machine;
    assert_eq!(m.start, JobState::Pending);
    assert_eq!(
        m.state(JobState::Pending).on_success,
        Some(JobState::Leased)
    );
    assert_eq!(
        m.state(JobState::Reported).on_success,
        Some(JobState::Recorded)
    );
    assert_eq!(m.resume_at(None), JobState::Pending);
    assert_eq!(m.resume_at(Some(JobState::Leased)), JobState::Pending);
    assert_eq!(m.resume_at(Some(JobState::Researching)), JobState::Reported);
    assert!(m.allows(JobState::Failed, JobState::Pending));
    assert!(!m.allows(JobState::Recorded, JobState::Pending));
    assert!(!m.allows(JobState::Pending, JobState::Recorded));
    for t in &m.transitions {
        assert!(!m.state(t.from).terminal, "{} is terminal", t.from);
    }
}

#[test]
fn dot_graph_names_every_transition() {
    let m = Schema::embedded().machine;
    let dot = m.to_dot();
    assert_eq!(dot.matches(" -> ").count(), m.transitions.len());
}

fn broken(from: &str, to: &str) -> Result<Schema, SchemaError> {
    Schema::parse(&znode_schema::SCHEMA_YAML.replacen(from, to, 1))
}

#[test]
fn invalid_tables_are_refused_with_what_to_fix() {
    assert!(matches!(
        broken("start: pending", "start: limbo"),
        Err(SchemaError::BadStart(_))
    ));
    assert!(matches!(
        broken("{from: pending, to: leased,", "{from: pending, to: limbo,"),
        Err(SchemaError::UnknownTarget { .. })
    ));
    assert!(matches!(
        broken("{from: pending, to: failed,", "{from: pending, to: leased,"),
        Err(SchemaError::DuplicateTransition { .. })
    ));
    assert!(matches!(
        broken("    - name: held\n", "    - name: pending\n"),
        Err(SchemaError::DuplicateState(_))
    ));
    assert!(matches!(
        broken(
            "    - {from: pending, to: leased, by: researcher, event: claim}\n",
            ""
        ),
        Err(SchemaError::DefaultNotTransition { .. })
    ));
    assert!(matches!(
        broken(
            "    - name: held\n",
            "    - name: held\n      terminal: true\n"
        ),
        Err(SchemaError::TerminalHasExit(_))
    ));
    assert!(matches!(
        broken("schema_version: 1", "schema_version: [1"),
        Err(SchemaError::Parse(_))
    ));
}

#[test]
fn docs_znode_tree_is_generated_from_the_schema() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/znode-tree.md");
    let expected = Schema::embedded().render_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/znode-tree.md is out of date: run `UPDATE_DOCS=1 cargo test -p znode-schema`"
    );
}

#[test]
fn every_data_type_in_the_schema_is_a_record_of_the_code() {
    use znode_schema::records::*;
    let known = [
        "none",
        TreeMeta::KIND,
        EpisodeRecord::KIND,
        ClipRecord::KIND,
        AliasRecord::KIND,
        ResearchRecord::KIND,
        JobRecord::KIND,
        LockRecord::KIND,
        LeaseRecord::KIND,
        ReportRecord::KIND,
        MemberRecord::KIND,
        ConsumerRecord::KIND,
        PauseRecord::KIND,
        SignalRecord::KIND,
        BatchRecord::KIND,
        BatchReport::KIND,
        WebhookSecret::KIND,
    ];
    for p in &Schema::embedded().paths {
        assert!(
            known.contains(&p.data.as_str()),
            "{} stores unknown type {}",
            p.pattern,
            p.data
        );
    }
}
