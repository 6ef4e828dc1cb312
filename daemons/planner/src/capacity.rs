//! The seed's capacity check, as pure functions.
//!
//! 1. count researchers (a researcher running N jobs at once counts N);
//! 2. count work items waiting in the pending queue;
//! 3. none and none: add one work item;
//! 4. no researchers but waiting items: stop;
//! 5. position = researchers - pending;
//! 6. negative: stop;
//! 7. add one work item, then go back to 1.
//!
//! So with researchers the loop ends with one more waiting item than researchers (the
//! first negative position), and with none it ends with exactly one waiting item.

/// What the capacity check says to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// Add one work item, then check again.
    Add,
    /// Stop: researchers are gone and work is waiting for them.
    NoResearchers,
    /// Stop: more work waits than researchers can take (position is negative).
    Surplus,
}

/// The seed's "current position": researchers minus waiting work items.
pub fn position(researchers: u64, pending: u64) -> i64 {
    let r = i64::try_from(researchers).unwrap_or(i64::MAX);
    let p = i64::try_from(pending).unwrap_or(i64::MAX);
    r.saturating_sub(p)
}

/// One pass of the capacity check (steps 1-7).
pub fn check(researchers: u64, pending: u64) -> Capacity {
    if researchers == 0 && pending == 0 {
        return Capacity::Add;
    }
    if researchers == 0 {
        return Capacity::NoResearchers;
    }
    if position(researchers, pending) < 0 {
        Capacity::Surplus
    } else {
        Capacity::Add
    }
}

/// Runs the loop with nothing else changing the counts: how many items it adds and why
/// it stops. The daemon runs the same loop against the live counts.
pub fn run_to_end(researchers: u64, pending: u64) -> (u64, Capacity) {
    let mut pending_now = pending;
    loop {
        match check(researchers, pending_now) {
            Capacity::Add => pending_now += 1,
            stop => return (pending_now - pending, stop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_examples() {
        assert_eq!(position(3, 4), -1);
        assert_eq!(position(1, 1), 0);
        assert_eq!(position(5, 2), 3);
        assert_eq!(check(3, 4), Capacity::Surplus);
        assert_eq!(check(1, 1), Capacity::Add);
        assert_eq!(check(5, 2), Capacity::Add);
    }

    #[test]
    fn none_and_none_adds_exactly_one() {
        assert_eq!(check(0, 0), Capacity::Add);
        assert_eq!(run_to_end(0, 0), (1, Capacity::NoResearchers));
    }

    #[test]
    fn no_researchers_with_waiting_work_stops_at_once() {
        assert_eq!(run_to_end(0, 3), (0, Capacity::NoResearchers));
    }

    #[test]
    fn the_loop_ends_one_item_past_the_researchers() {
        assert_eq!(run_to_end(3, 4), (0, Capacity::Surplus));
        assert_eq!(run_to_end(1, 1), (1, Capacity::Surplus));
        assert_eq!(run_to_end(5, 2), (4, Capacity::Surplus));
        for r in 1..20u64 {
            for p in 0..25u64 {
                let (added, stop) = run_to_end(r, p);
                assert_eq!(stop, Capacity::Surplus);
                assert_eq!(p + added, p.max(r + 1), "r={r} p={p}");
            }
        }
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        assert_eq!(position(u64::MAX, 0), i64::MAX);
        assert_eq!(check(1, u64::MAX), Capacity::Surplus);
    }
}
