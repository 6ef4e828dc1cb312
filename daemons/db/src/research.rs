//! The research archive: per episode, the runs that researched it, the occurrences of
//! the clips found and per-clip errors (tables `research`, `research_runs`, `found`,
//! `clip_errors`).
