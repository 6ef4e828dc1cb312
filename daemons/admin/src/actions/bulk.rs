//! Actions on many jobs (`retry --all-failed`), each with its own compare-and-set.

use archivist_engine::schema::JobState;
use archivist_engine::Session;
use serde::Serialize;

use super::{look, retry_seen, ActionReport};
use crate::error::{AdminError, Result};
use crate::settings::AdminSettings;

/// One job's result in a bulk action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkItem {
    /// Job id.
    pub job: String,
    /// The report, when the action ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<ActionReport>,
    /// Why not, when it was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Was it a refusal (the job moved or is in the wrong state)?
    pub refused: bool,
    /// Was the reply lost with the job unreadable, so it may have been done
    /// ([`AdminError::Unconfirmed`])?
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unconfirmed: bool,
}

/// Does `message` match the operator's pattern? A pattern with `*` is a glob over the
/// whole message; otherwise it is a substring. Both ignore case.
pub fn message_matches(pattern: &str, message: &str) -> bool {
    let pattern = pattern.to_lowercase();
    let message = message.to_lowercase();
    if !pattern.contains('*') {
        return message.contains(&pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = message.as_str();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// `retry --all-failed [--reason PATTERN]`: retries every failed job (whose message
/// matches the pattern), each with its own compare-and-set.
pub async fn retry_all_failed(
    session: &Session,
    settings: &AdminSettings,
    reason: Option<&str>,
) -> Result<Vec<BulkItem>> {
    let (entries, _) = archivist_engine::queue::list(session, JobState::Failed).await?;
    let mut out = Vec::new();
    for entry in entries {
        let seen = match look(session, &entry.job).await {
            Ok(seen) => seen,
            Err(e) => {
                out.push(BulkItem {
                    job: entry.job.clone(),
                    report: None,
                    refused: e.is_refusal() || matches!(e, AdminError::NotFound { .. }),
                    unconfirmed: false,
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
        if let Some(pattern) = reason {
            if !message_matches(pattern, seen.job.message.as_deref().unwrap_or("")) {
                continue;
            }
        }
        match retry_seen(session, settings, &seen).await {
            Ok(r) => out.push(BulkItem {
                job: entry.job,
                report: Some(r),
                error: None,
                refused: false,
                unconfirmed: false,
            }),
            Err(e) => out.push(BulkItem {
                job: entry.job,
                report: None,
                refused: e.is_refusal(),
                unconfirmed: matches!(e, AdminError::Unconfirmed { .. }),
                error: Some(e.to_string()),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::message_matches;

    #[test]
    fn patterns_match_substrings_and_globs() {
        assert!(message_matches("404", "download failed: HTTP 404"));
        assert!(message_matches("DOWNLOAD*404", "download failed: HTTP 404"));
        assert!(!message_matches(
            "download*500",
            "download failed: HTTP 404"
        ));
        assert!(message_matches("*not audio", "file is not audio"));
        assert!(!message_matches("not audio*", "file is not audio!x"));
        assert!(message_matches("not audio*", "not audio at all"));
    }
}
