//! Admin operations (not built yet).
