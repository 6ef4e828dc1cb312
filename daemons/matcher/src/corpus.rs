//! Test corpus generator.
