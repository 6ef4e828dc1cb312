//! Catalog records: episodes, clips and the aliases that point at them (`/catalog/...`).

use super::*;

/// Fields shared by episodes and clips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogFields {
    /// Title shown to people.
    pub title: String,
    /// Longer description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the media is (http, https or file URL).
    pub media_url: String,
    /// MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Name of the curator that registered it.
    pub curator: String,
    /// Higher wins; absent means 0.
    #[serde(default)]
    pub priority: i64,
    /// First curation; never moves.
    #[serde(with = "time::serde::rfc3339")]
    pub initial_curated: OffsetDateTime,
    /// Latest curation; moves on every re-curation.
    #[serde(with = "time::serde::rfc3339")]
    pub last_curated: OffsetDateTime,
    /// Content hash (sha256 hex) once downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Duration in seconds once decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Feed GUID, for feed items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guid: Option<String>,
    /// Held by an operator: the planner leaves it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

/// `/catalog/episodes/{episode}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Episode id (`e` + number).
    pub id: String,
    /// Air date (`YYYY-MM-DD` or RFC 3339), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub air_date: Option<String>,
    /// Shared catalog fields.
    #[serde(flatten)]
    pub fields: CatalogFields,
}
record!(EpisodeRecord, "EpisodeRecord");

/// `/catalog/clips/{clip}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClipRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Clip id (`c` + number).
    pub id: String,
    /// Shared catalog fields.
    #[serde(flatten)]
    pub fields: CatalogFields,
}
record!(ClipRecord, "ClipRecord");

/// What an alias points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AliasTarget {
    /// An episode.
    Episode,
    /// A clip.
    Clip,
}

/// `/catalog/aliases/{alias}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AliasRecord {
    /// Record schema version.
    #[serde(default = "schema_version")]
    pub schema: u32,
    /// Episode or clip.
    pub target: AliasTarget,
    /// The record id.
    pub id: String,
    /// The normalized URL or GUID this alias stands for.
    pub key: String,
}
record!(AliasRecord, "AliasRecord");
