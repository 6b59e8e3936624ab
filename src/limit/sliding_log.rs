//! The exact sliding-window log: in every interval of length W, at most N
//! units admitted. An admission at `t` counts for every `now` in `[t, t + W)`;
//! only admissions are logged, as runs of one millisecond in a ring buffer
//! (8 bytes a run). How it is kept and why a clock that steps back errs on the
//! strict side: docs/algorithms.md, "How it works".

use std::collections::VecDeque;

use super::{Decision, Policy, Retry};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    offset: u32,
    /// Units logged up to and including this run, from an arbitrary
    /// origin, wrapping: fewer than 2^32 units are ever held, so
    /// differences are exact.
    end: u32,
}

#[derive(Debug, Clone)]
pub struct SlidingLog {
    policy: Policy,
    base: u64,
    runs: VecDeque<Run>,
    /// The `end` of the run before the first: the origin the units held
    /// are counted from.
    start: u32,
}

impl SlidingLog {
    pub fn new(policy: Policy) -> SlidingLog {
        SlidingLog {
            policy,
            base: 0,
            runs: VecDeque::new(),
            start: 0,
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Applies a new limit or window from the next check on. Admissions
    /// already logged keep counting under the new policy, so shrinking a limit
    /// refuses until enough of them expire.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Admits `cost` units at `now_ms` if the window has room, logging them;
    /// a refused request logs nothing. A cost of 0 only reports the state.
    pub fn check(&mut self, now_ms: u64, cost: u32) -> Decision {
        let decision = self.decide(now_ms, cost);
        if decision.allowed {
            self.admit(now_ms, cost);
        }
        decision
    }

    /// What `check` would answer, without logging anything: for an allowed
    /// request, the state as it will be once [`admit`](Self::admit) logs it.
    /// Splitting the two lets several logs admit all together or not at all.
    pub fn decide(&mut self, now_ms: u64, cost: u32) -> Decision {
        self.expire(now_ms);
        let limit = u64::from(self.policy.limit());
        let cost = u64::from(cost);
        let held = self.held();
        let allowed = held + cost <= limit;
        let after = if allowed { held + cost } else { held };
        let oldest = match self.runs.front() {
            Some(&run) => Some(self.at(run)),
            None if allowed && cost > 0 => Some(now_ms),
            None => None,
        };
        Decision {
            allowed,
            limit,
            remaining: limit.saturating_sub(after),
            reset_ms: oldest.map_or(0, |at| {
                (at.saturating_add(self.policy.window_ms())).saturating_sub(now_ms)
            }),
            retry: if allowed {
                Retry::NOW
            } else {
                self.retry_after(now_ms, cost)
            },
        }
    }

    /// Logs `cost` units at `now_ms`, after [`decide`](Self::decide) allowed
    /// them, and returns the timestamp they were logged at (see the note on
    /// clocks that step backwards).
    pub fn admit(&mut self, now_ms: u64, cost: u32) -> u64 {
        self.record(now_ms, cost)
    }

    /// Drops every admission that no longer counts at `now_ms`.
    pub fn expire(&mut self, now_ms: u64) {
        let window = self.policy.window_ms();
        while let Some(&run) = self.runs.front() {
            if self.at(run).saturating_add(window) > now_ms {
                break;
            }
            self.start = run.end;
            self.runs.pop_front();
        }
    }

    /// Appends `count` units admitted at `at_ms`. Used by `check` and to
    /// restore a log from storage; entries must come in time order (a
    /// timestamp older than the newest held is recorded at the newest, and
    /// that is the timestamp returned). Units beyond 2^32 - 1 held at once
    /// (only a corrupt store could hold them: a limit is at most 10^6) are
    /// not logged.
    pub fn record(&mut self, at_ms: u64, count: u32) -> u64 {
        let at_ms = self.newest().map_or(at_ms, |newest| newest.max(at_ms));
        let count = count.min(u32::MAX - self.end().wrapping_sub(self.start));
        if count == 0 {
            return at_ms;
        }
        let end = self.end().wrapping_add(count);
        if let Some(back) = self.runs.back_mut() {
            if self.base + u64::from(back.offset) == at_ms {
                back.end = end;
                return at_ms;
            }
        } else {
            self.base = at_ms;
        }
        if at_ms - self.base > u64::from(u32::MAX) {
            self.rebase(at_ms);
        }
        self.runs.push_back(Run {
            offset: (at_ms - self.base) as u32,
            end,
        });
        at_ms
    }

    /// Logs `count` units at `at_ms` in their place in time, however much
    /// newer the log already is: a block's report (`ledger::blocks`)
    /// brings admissions made in an isolate, older than what the object
    /// admitted meanwhile, and recording them at the newest time as
    /// [`record`](Self::record) does would keep no exact copy of them to
    /// read back after a restart. O(runs), once per report. A time more
    /// than 2^32 ms before the newest (never within a window) is not
    /// logged.
    pub fn insert(&mut self, at_ms: u64, count: u32) {
        let Some(newest) = self.newest() else {
            self.record(at_ms, count);
            return;
        };
        if at_ms >= newest {
            self.record(at_ms, count);
            return;
        }
        if newest - at_ms > u64::from(u32::MAX) {
            return;
        }
        let count = count.min(u32::MAX - self.end().wrapping_sub(self.start));
        if count == 0 {
            return;
        }
        if at_ms < self.base {
            let shift = (self.base - at_ms) as u32;
            for run in &mut self.runs {
                run.offset += shift;
            }
            self.base = at_ms;
        }
        let i = self.runs.partition_point(|&run| self.at(run) < at_ms);
        let before = match i.checked_sub(1) {
            Some(prev) => self.runs[prev].end,
            None => self.start,
        };
        if self.at(self.runs[i]) != at_ms {
            let offset = (at_ms - self.base) as u32;
            self.runs.insert(
                i,
                Run {
                    offset,
                    end: before,
                },
            );
        }
        for run in self.runs.range_mut(i..) {
            run.end = run.end.wrapping_add(count);
        }
    }

    /// Takes back up to `count` units logged at `at_ms` (a refunded
    /// reservation); answers how many were there to take. Runs elsewhere
    /// are untouched, so a refund frees exactly its own units.
    pub fn remove(&mut self, at_ms: u64, count: u32) -> u32 {
        let Some(i) = self.runs.iter().position(|&run| self.at(run) == at_ms) else {
            return 0;
        };
        let taken = self.count(i).min(count);
        for run in self.runs.range_mut(i..) {
            run.end = run.end.wrapping_sub(taken);
        }
        if self.count(i) == 0 {
            self.runs.remove(i);
        }
        taken
    }

    /// Units currently logged (including any not yet expired by a check).
    pub fn held(&self) -> u64 {
        u64::from(self.end().wrapping_sub(self.start))
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// When the oldest logged admission stops counting.
    pub fn oldest_expiry(&self) -> Option<u64> {
        self.runs
            .front()
            .map(|&run| self.at(run).saturating_add(self.policy.window_ms()))
    }

    /// The log's runs, oldest first, as `(timestamp_ms, count)`.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0..self.runs.len()).map(|i| (self.at(self.runs[i]), self.count(i)))
    }

    /// How many of the units held were logged before `at_ms`. A binary
    /// search: O(log runs).
    pub fn logged_before(&self, at_ms: u64) -> u64 {
        let i = self.runs.partition_point(|&run| self.at(run) < at_ms);
        match i.checked_sub(1) {
            Some(last) => u64::from(self.runs[last].end.wrapping_sub(self.start)),
            None => 0,
        }
    }

    /// When the `k`-th oldest unit held (from 1) stops counting; `None`
    /// past the units held. A binary search: O(log runs).
    pub fn expiry_of(&self, k: u64) -> Option<u64> {
        if k == 0 || k > self.held() {
            return None;
        }
        let i = self
            .runs
            .partition_point(|&run| u64::from(run.end.wrapping_sub(self.start)) < k);
        let run = self.runs.get(i)?;
        Some(self.at(*run).saturating_add(self.policy.window_ms()))
    }

    /// Bytes of heap this log holds for its runs.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }

    fn at(&self, run: Run) -> u64 {
        self.base + u64::from(run.offset)
    }

    /// The units of the `i`-th run.
    fn count(&self, i: usize) -> u32 {
        let before = match i.checked_sub(1) {
            Some(prev) => self.runs[prev].end,
            None => self.start,
        };
        self.runs[i].end.wrapping_sub(before)
    }

    /// The `end` of the newest run: what the next run counts from.
    fn end(&self) -> u32 {
        self.runs.back().map_or(self.start, |run| run.end)
    }

    /// The newest timestamp held.
    pub fn newest(&self) -> Option<u64> {
        self.runs.back().map(|&run| self.at(run))
    }

    /// Milliseconds until enough units expire for `cost` more to fit.
    fn retry_after(&self, now_ms: u64, cost: u64) -> Retry {
        let limit = u64::from(self.policy.limit());
        if cost > limit {
            return Retry::Never;
        }
        match self.expiry_of(self.held() + cost - limit) {
            Some(frees_at) => Retry::After(frees_at.saturating_sub(now_ms)),
            None => Retry::NOW,
        }
    }

    /// Moves the base up to the oldest run so that `at_ms` fits in a `u32`
    /// offset. Live runs span at most one window (30 days < 2^32 ms), so this
    /// only has to drop runs when the clock has stepped back by more than
    /// about 19 days; those runs are then older than any window can reach.
    fn rebase(&mut self, at_ms: u64) {
        while let Some(&run) = self.runs.front() {
            if at_ms - self.at(run) <= u64::from(u32::MAX) {
                break;
            }
            self.start = run.end;
            self.runs.pop_front();
        }
        let new_base = self.runs.front().map_or(at_ms, |&run| self.at(run));
        let shift = new_base - self.base;
        for run in &mut self.runs {
            run.offset -= shift as u32;
        }
        self.base = new_base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(limit: u64, window_ms: u64) -> SlidingLog {
        SlidingLog::new(Policy::new(limit, window_ms).unwrap())
    }

    #[test]
    fn removing_takes_back_only_the_units_at_that_time() {
        let mut log = log(4, 1000);
        log.admit(10, 1);
        log.admit(20, 2);
        log.admit(30, 1);
        assert_eq!(log.remove(20, 1), 1);
        assert_eq!(log.held(), 3);
        assert_eq!(log.remove(20, 5), 1, "only what is there");
        assert_eq!(log.remove(25, 1), 0);
        assert_eq!(log.entries().collect::<Vec<_>>(), [(10, 1), (30, 1)]);
        assert!(log.check(40, 2).allowed);
        assert!(!log.check(40, 1).allowed);
    }

    #[test]
    fn inserting_puts_units_in_their_place_in_time() {
        let mut log = log(10, 1000);
        log.insert(50, 1);
        log.admit(100, 2);
        log.admit(300, 1);
        log.insert(200, 2);
        log.insert(100, 1);
        log.insert(20, 1);
        assert_eq!(
            log.entries().collect::<Vec<_>>(),
            [(20, 1), (50, 1), (100, 3), (200, 2), (300, 1)]
        );
        assert_eq!(
            (log.held(), log.logged_before(100), log.logged_before(101)),
            (8, 2, 5)
        );
        assert_eq!(log.expiry_of(1), Some(1020));
        log.expire(1100);
        assert_eq!(log.entries().collect::<Vec<_>>(), [(200, 2), (300, 1)]);
        log.insert(u64::from(u32::MAX) + 1000, 1);
        log.insert(0, 1);
        assert_eq!(
            log.entries().collect::<Vec<_>>(),
            [(u64::from(u32::MAX) + 1000, 1)],
            "more than 2^32 ms older than the newest: not logged"
        );
    }

    #[test]
    fn an_entry_at_t_stops_counting_at_exactly_t_plus_w() {
        let mut log = log(1, 1000);
        assert!(log.check(5_000, 1).allowed);
        let refused = log.check(5_999, 1);
        assert!(!refused.allowed);
        assert_eq!(refused.retry, Retry::After(1));
        assert_eq!(refused.reset_ms, 1);
        assert!(log.check(6_000, 1).allowed);
    }

    #[test]
    fn equal_timestamps_form_a_multiset() {
        let mut log = log(3, 1000);
        for remaining in [2, 1, 0] {
            let d = log.check(42, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, remaining);
        }
        assert!(!log.check(42, 1).allowed);
        assert_eq!(log.entries().collect::<Vec<_>>(), vec![(42, 3)]);
        assert!(log.check(1042, 3).allowed);
    }

    #[test]
    fn refusals_are_not_logged() {
        let mut log = log(2, 1000);
        log.check(0, 1);
        log.check(10, 1);
        for t in 20..1000 {
            assert!(!log.check(t, 1).allowed);
        }
        assert_eq!(log.held(), 2);
        assert!(log.check(1000, 1).allowed);
    }

    #[test]
    fn a_decision_reports_reset_and_retry() {
        let mut log = log(3, 1000);
        let first = log.check(100, 1);
        assert_eq!((first.remaining, first.reset_ms), (2, 1000));
        log.check(300, 1);
        log.check(600, 1);
        let refused = log.check(700, 2);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.reset_ms, 400);
        // Two units must free up: the entries at 100 and 300, so at 1300.
        assert_eq!(refused.retry, Retry::After(600));
        assert!(!log.check(1299, 2).allowed);
        assert!(log.check(1300, 2).allowed);
    }

    #[test]
    fn cost_above_the_limit_never_succeeds() {
        let mut log = log(3, 1000);
        let d = log.check(0, 4);
        assert!(!d.allowed);
        assert_eq!(d.retry, Retry::Never);
        assert!(log.is_empty());
    }

    #[test]
    fn cost_zero_peeks_without_logging() {
        let mut log = log(1, 1000);
        assert!(log.check(0, 0).allowed);
        assert!(log.is_empty());
        log.check(0, 1);
        let peek = log.check(10, 0);
        assert!(peek.allowed);
        assert_eq!(peek.remaining, 0);
        assert_eq!(log.held(), 1);
    }

    /// The case from the design documents: limit 10 per second; 3 requests in
    /// [0, 0.5 s), 7 in [0.5, 1 s), 7 in [1, 1.5 s), 3 in [1.5, 2 s). A fixed
    /// window admits all 14 of [0.5, 1.5 s); the log admits at most 10.
    #[test]
    fn the_window_boundary_case() {
        let mut log = log(10, 1000);
        let schedule: Vec<u64> = [(0, 3, 150), (500, 7, 70), (1000, 7, 70), (1500, 3, 150)]
            .iter()
            .flat_map(|&(start, n, step)| (0..n).map(move |i| start + i * step))
            .collect();
        let admitted: Vec<u64> = schedule
            .iter()
            .copied()
            .filter(|&t| log.check(t, 1).allowed)
            .collect();
        let in_middle = admitted
            .iter()
            .filter(|&&t| (500..1500).contains(&t))
            .count();
        assert_eq!(in_middle, 10);
        for &start in &admitted {
            let held = admitted
                .iter()
                .filter(|&&t| t >= start && t < start + 1000)
                .count();
            assert!(held <= 10, "{held} admitted in [{start}, {start}+1000)");
        }
        // The three slots of [0, 0.5 s) free up during [1, 1.5 s); the last
        // three requests find the slots of [0.5, 1 s) free again.
        assert_eq!(admitted.len(), 16);
    }

    #[test]
    fn a_backwards_clock_errs_on_the_strict_side() {
        let mut log = log(2, 1000);
        log.check(10_000, 1);
        let d = log.check(9_000, 1);
        assert!(d.allowed);
        assert_eq!(log.entries().collect::<Vec<_>>(), vec![(10_000, 2)]);
        assert!(!log.check(10_999, 1).allowed);
        assert!(log.check(11_000, 1).allowed);
    }

    #[test]
    fn offsets_are_rebased_over_long_lifetimes() {
        let mut log = log(2, 1000);
        let step = u64::from(u32::MAX) / 3;
        for i in 0..20 {
            let now = 1_000 + i * step;
            assert!(log.check(now, 1).allowed);
            assert!(log.check(now + 1, 1).allowed);
            assert!(!log.check(now + 2, 1).allowed);
            assert_eq!(
                log.entries().collect::<Vec<_>>(),
                vec![(now, 1), (now + 1, 1)]
            );
        }
    }

    #[test]
    fn restoring_out_of_range_history_keeps_the_recent_part() {
        let mut log = log(5, 1000);
        log.record(0, 1);
        log.record(u64::from(u32::MAX) + 10, 1);
        assert_eq!(
            log.entries().collect::<Vec<_>>(),
            vec![(u64::from(u32::MAX) + 10, 1)]
        );
        assert_eq!(log.held(), 1);
    }

    #[test]
    fn a_smaller_limit_applies_to_what_is_already_logged() {
        let mut log = log(5, 1000);
        for t in 0..5 {
            log.check(t, 1);
        }
        log.set_policy(Policy::new(2, 1000).unwrap());
        let d = log.check(10, 1);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        // Four of the five must expire: the one at t = 3 goes at 1003.
        assert_eq!(d.retry, Retry::After(993));
    }
}
