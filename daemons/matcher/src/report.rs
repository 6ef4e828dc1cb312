//! Rendering match results as a human table or JSON.
