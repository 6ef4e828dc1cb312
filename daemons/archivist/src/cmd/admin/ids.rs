//! Ids given on the command line. A job, episode or clip id names one znode
//! (`/jobs/{id}`, `/control/hold/{id}`), so it must be one path segment: before,
//! `delete --force j0000000001/lock2` deleted a node under a job, and `../x` or an empty
//! id reached ZooKeeper's own errors (outside try of #17, finding F4). Refused here, as a
//! usage error (exit 2), before anything connects.

/// Parses an id argument with the library's rule ([`archivist_admin::text::node_name`],
/// which the web console applies to its addresses too): one name, not empty, without
/// `/`, not `.` or `..`, no control characters.
pub(crate) fn node_name(s: &str) -> Result<String, String> {
    archivist_admin::text::node_name(s)
        .map(str::to_string)
        .map_err(|e| match e {
            archivist_admin::AdminError::Invalid(why) => why,
            other => other.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::node_name;

    #[test]
    fn the_library_rule_is_a_usage_error_without_its_prefix() {
        assert_eq!(node_name("j0000000001").as_deref(), Ok("j0000000001"));
        let why = node_name("../x").unwrap_err();
        assert!(why.starts_with("\"../x\" is not an id"), "{why}");
    }
}
