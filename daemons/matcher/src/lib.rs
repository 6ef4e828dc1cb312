//! Placeholder: the clip matcher.
