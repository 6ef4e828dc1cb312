//! The recorder and the reaper (not built yet).
