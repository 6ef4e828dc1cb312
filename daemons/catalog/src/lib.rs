//! Curators: episodes and clips from RSS feeds, YAML manifests and local files (not built yet).
