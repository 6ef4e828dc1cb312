//! The audio researcher daemon (not built yet).
