//! The planner: capacity check, work selection, leases (not built yet).
