//! Ids given on the command line. A job, episode or clip id names one znode
//! (`/jobs/{id}`, `/control/hold/{id}`), so it must be one path segment: before,
//! `delete --force j0000000001/lock2` deleted a node under a job, and `../x` or an empty
//! id reached ZooKeeper's own errors (outside try of #17, finding F4). Refused here, as a
//! usage error (exit 2), before anything connects.

/// Parses an id argument: one name, not empty, without `/`, not `.` or `..`, no control
/// characters.
pub(crate) fn node_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an id cannot be empty".into());
    }
    if s == "." || s == ".." || s.contains('/') || s.chars().any(char::is_control) {
        return Err(format!(
            "{s:?} is not an id: an id is one name without '/' or control characters \
             (for example j0000000001, e0000001, c000001)"
        ));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::node_name;

    #[test]
    fn one_segment_names_pass_and_paths_do_not() {
        for ok in ["j0000000001", "e0000001", "c000001", "foo"] {
            assert_eq!(node_name(ok).as_deref(), Ok(ok));
        }
        for bad in ["", ".", "..", "../x", "j0000000001/lock2", "a\nb"] {
            assert!(node_name(bad).is_err(), "{bad:?}");
        }
    }
}
