//! The fixed-window counter (`INCR` + `EXPIRE`): the first admission opens a
//! window of length W that counts admissions until it expires. One counter per
//! key; up to 2N pass across a window's boundary, the gap the sliding log
//! closes. Refusals are not counted: a full window stays full either way.

use super::{Decision, Policy, Retry};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedWindow {
    policy: Policy,
    opened_ms: u64,
    count: u64,
}

impl FixedWindow {
    pub fn new(policy: Policy) -> FixedWindow {
        FixedWindow {
            policy,
            opened_ms: 0,
            count: 0,
        }
    }

    /// Restores a window from storage.
    pub fn restored(policy: Policy, opened_ms: u64, count: u64) -> FixedWindow {
        FixedWindow {
            policy,
            opened_ms,
            count,
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    pub fn check(&mut self, now_ms: u64, cost: u32) -> Decision {
        let decision = self.decide(now_ms, cost);
        if decision.allowed {
            self.admit(now_ms, cost);
        }
        decision
    }

    /// What `check` would answer, without counting anything.
    pub fn decide(&self, now_ms: u64, cost: u32) -> Decision {
        let limit = u64::from(self.policy.limit());
        let cost = u64::from(cost);
        let open = self.is_open(now_ms);
        let count = if open { self.count } else { 0 };
        let allowed = count + cost <= limit;
        let counted = if allowed { count + cost } else { count };
        let ends_at = if open {
            Some(self.ends_ms())
        } else if allowed && cost > 0 {
            Some(now_ms.saturating_add(self.policy.window_ms()))
        } else {
            None
        };
        let reset_ms = ends_at.map_or(0, |end| end.saturating_sub(now_ms));
        Decision {
            allowed,
            limit,
            remaining: limit.saturating_sub(counted),
            reset_ms,
            retry: match (allowed, cost > limit) {
                (true, _) => Retry::NOW,
                (false, true) => Retry::Never,
                (false, false) => Retry::After(reset_ms),
            },
        }
    }

    /// Counts `cost` more, opening a new window if the last one expired.
    pub fn admit(&mut self, now_ms: u64, cost: u32) {
        if !self.is_open(now_ms) {
            self.opened_ms = now_ms;
            self.count = 0;
        }
        self.count += u64::from(cost);
    }

    /// Takes back `cost` units counted at `at_ms` (a refunded reservation),
    /// if the window they were counted in is still the current one; after
    /// it they count for nothing anyway. Answers how many it took.
    pub fn refund(&mut self, at_ms: u64, cost: u32) -> u32 {
        if at_ms >= self.opened_ms && at_ms < self.ends_ms() {
            let taken = self.count.min(u64::from(cost));
            self.count -= taken;
            // At most `cost`, a u32.
            taken as u32
        } else {
            0
        }
    }

    /// `(opened_ms, count)`, for storage.
    pub fn state(&self) -> (u64, u64) {
        (self.opened_ms, self.count)
    }

    /// When the current window expires; `None` when nothing is counted.
    pub fn expiry(&self) -> Option<u64> {
        (self.count > 0).then(|| self.ends_ms())
    }

    /// When the window open at `now_ms` ends; `None` when none is open.
    pub fn open_until(&self, now_ms: u64) -> Option<u64> {
        self.is_open(now_ms).then(|| self.ends_ms())
    }

    pub fn is_idle(&self, now_ms: u64) -> bool {
        !self.is_open(now_ms)
    }

    fn is_open(&self, now_ms: u64) -> bool {
        self.count > 0 && now_ms < self.ends_ms()
    }

    fn ends_ms(&self) -> u64 {
        self.opened_ms.saturating_add(self.policy.window_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::SlidingLog;

    fn window(limit: u64, window_ms: u64) -> FixedWindow {
        FixedWindow::new(Policy::new(limit, window_ms).unwrap())
    }

    #[test]
    fn the_first_admission_opens_the_window() {
        let mut w = window(2, 1000);
        let first = w.check(500, 1);
        assert_eq!(
            (first.allowed, first.remaining, first.reset_ms),
            (true, 1, 1000)
        );
        assert!(w.check(900, 1).allowed);
        let refused = w.check(1499, 1);
        assert!(!refused.allowed);
        assert_eq!(refused.retry, Retry::After(1));
        assert!(w.check(1500, 1).allowed, "a new window opens at 500 + 1000");
    }

    #[test]
    fn refusals_are_not_counted_and_oversized_costs_never_pass() {
        let mut w = window(3, 1000);
        w.check(0, 3);
        for t in 1..10 {
            assert!(!w.check(t, 1).allowed);
        }
        assert_eq!(w.state(), (0, 3));
        assert_eq!(w.check(1000, 4).retry, Retry::Never);
        assert!(w.is_idle(1000));
        assert_eq!(w.expiry(), Some(1000));
    }

    #[test]
    fn peeks_count_nothing() {
        let mut w = window(1, 1000);
        let peek = w.check(0, 0);
        assert_eq!((peek.allowed, peek.remaining, peek.reset_ms), (true, 1, 0));
        assert_eq!(w.expiry(), None);
    }

    /// The case from the design documents: limit 10 per second; 3 requests
    /// in [0, 0.5 s), 7 in [0.5, 1 s), 7 in [1, 1.5 s), 3 in [1.5, 2 s). The
    /// fixed window admits all 14 of [0.5, 1.5 s); the sliding log, 10.
    #[test]
    fn the_window_boundary_case_admits_14_in_one_second() {
        let schedule: Vec<u64> = [(0, 3, 150), (500, 7, 70), (1000, 7, 70), (1500, 3, 150)]
            .iter()
            .flat_map(|&(start, n, step)| (0..n).map(move |i| start + i * step))
            .collect();
        let policy = Policy::new(10, 1000).unwrap();
        let mut fixed = FixedWindow::new(policy);
        let mut log = SlidingLog::new(policy);
        let in_middle = |admitted: &[u64]| {
            admitted
                .iter()
                .filter(|&&t| (500..1500).contains(&t))
                .count()
        };
        let fixed_admitted: Vec<u64> = schedule
            .iter()
            .copied()
            .filter(|&t| fixed.check(t, 1).allowed)
            .collect();
        let log_admitted: Vec<u64> = schedule
            .iter()
            .copied()
            .filter(|&t| log.check(t, 1).allowed)
            .collect();
        assert_eq!(in_middle(&fixed_admitted), 14);
        assert_eq!(in_middle(&log_admitted), 10);
    }
}
