//! When to tell refused requests to come back, so that they do not all come
//! back at once: each policy's [`Cursor`] over its [`Schedule`] (the moments
//! its places free up) tells successive refusals successive moments, never
//! before a place really frees, at most one per place in any window. Pure:
//! `now_ms` is an argument. The rules: docs/algorithms.md, "When a refused
//! request is told to come back".

use super::gcra::Gcra;
use super::{FixedWindow, SlidingLog};

/// How far past the first moment a request could pass a refusal may be
/// told to come back, at most: beyond it the cursor wraps to the start.
pub const HORIZON_MS: u64 = 60 * 60 * 1000;

/// The most jitter ever added to a moment: a second, the granularity of
/// `Retry-After`.
pub const MAX_JITTER_MS: u64 = 1000;

/// The moments a policy's places free up, in order, each place counted
/// again each time it frees after being retaken at the moment it freed.
/// Unit `k` (from 1) is the k-th unit to free.
#[derive(Debug, Clone, Copy)]
pub enum Schedule<'a> {
    /// A sliding log: place `i` frees when the unit holding it leaves the
    /// window (a place free now frees at `now`), and again every lap after
    /// that. With `N` places, unit `k` is place `(k - 1) mod N + 1` in lap
    /// `(k - 1) / N`.
    Log { log: &'a SlidingLog, now_ms: u64 },
    /// A fixed window, full until `ends_ms`: the next window's `N` places
    /// spread evenly over it (`W / N` apart), the one after that one lap
    /// later, and so on. The later windows are an estimate: a window opens
    /// at its first admission, not exactly when the last one ended.
    Window {
        ends_ms: u64,
        limit: u64,
        window_ms: u64,
    },
    /// GCRA: unit `k` conforms at `base + k·T` (ns), one emission interval
    /// after the one before.
    Cell { base_ns: i128, interval_ns: i128 },
}

impl<'a> Schedule<'a> {
    /// A sliding log's schedule at `now_ms`, after expiring what no longer
    /// counts.
    pub fn log(log: &'a SlidingLog, now_ms: u64) -> Schedule<'a> {
        Schedule::Log { log, now_ms }
    }

    /// A fixed window's schedule at `now_ms`; `None` while no window is
    /// open (then nothing is refused but what can never pass).
    pub fn window(window: &FixedWindow, now_ms: u64) -> Option<Schedule<'static>> {
        let policy = window.policy();
        window.open_until(now_ms).map(|ends_ms| Schedule::Window {
            ends_ms,
            limit: u64::from(policy.limit()),
            window_ms: policy.window_ms(),
        })
    }

    /// A GCRA bucket's schedule; `None` while it holds nothing.
    pub fn cell(cell: &Gcra) -> Option<Schedule<'static>> {
        cell.unit_times_ns()
            .map(|(base_ns, interval_ns)| Schedule::Cell {
                base_ns,
                interval_ns,
            })
    }

    /// Units of the schedule that free at moments before `at_ms`.
    pub fn before(&self, at_ms: u64) -> u64 {
        match *self {
            Schedule::Log { log, now_ms } => {
                let (limit, window) = log_shape(log);
                let lap_ms = self.lap_ms();
                let last = self.moment(limit);
                // Whole laps before `at_ms`, then part of one: lap L holds
                // the places' moments plus L laps, and the places of one
                // lap span at most a window, less than a lap.
                let laps = match at_ms.checked_sub(last) {
                    Some(past) if past > 0 => past.div_ceil(lap_ms),
                    _ => 0,
                };
                let at = at_ms.saturating_sub(laps.saturating_mul(lap_ms));
                let free_now = limit.saturating_sub(log.held());
                let skipped = log.held().saturating_sub(limit);
                let free = if now_ms < at { free_now } else { 0 };
                let held = log
                    .logged_before(at.saturating_sub(window))
                    .saturating_sub(skipped)
                    .min(limit - free_now);
                laps.saturating_mul(limit).saturating_add(free + held)
            }
            Schedule::Window {
                ends_ms,
                limit,
                window_ms,
            } => {
                let Some(past) = at_ms.checked_sub(ends_ms) else {
                    return 0;
                };
                let lap_ms = self.lap_ms();
                let laps = past / lap_ms;
                let into = u128::from(past % lap_ms);
                let part = (into * u128::from(limit)).div_ceil(u128::from(window_ms));
                let part = u64::try_from(part).unwrap_or(u64::MAX).min(limit);
                laps.saturating_mul(limit).saturating_add(part)
            }
            Schedule::Cell {
                base_ns,
                interval_ns,
            } => {
                // Unit k frees before `at_ms` iff its moment, rounded up to
                // a whole ms, is before it: base + k·T ≤ (at_ms - 1) ms.
                let last_ns = (i128::from(at_ms) - 1) * NS_PER_MS;
                let units = (last_ns - base_ns).div_euclid(interval_ns);
                u64::try_from(units.max(0)).unwrap_or(u64::MAX)
            }
        }
    }

    /// The moment unit `k` (from 1) frees. Non-decreasing in `k`, unless a
    /// clock stepped back put a log's entries in the future; a caller
    /// never hands out a moment before `moment(cost)` anyway.
    pub fn moment(&self, k: u64) -> u64 {
        let k = k.max(1);
        match *self {
            Schedule::Log { log, now_ms } => {
                let (limit, _) = log_shape(log);
                let (lap, place) = ((k - 1) / limit, (k - 1) % limit + 1);
                let skipped = log.held().saturating_sub(limit);
                let free_now = limit.saturating_sub(log.held());
                let frees = match place.checked_sub(free_now) {
                    Some(unit @ 1..) => log.expiry_of(unit + skipped).unwrap_or(now_ms),
                    _ => now_ms,
                };
                frees.saturating_add(lap.saturating_mul(self.lap_ms()))
            }
            Schedule::Window {
                ends_ms,
                limit,
                window_ms,
            } => {
                let (lap, place) = ((k - 1) / limit, (k - 1) % limit);
                let into = u128::from(place) * u128::from(window_ms) / u128::from(limit);
                let into = u64::try_from(into).unwrap_or(u64::MAX);
                ends_ms
                    .saturating_add(lap.saturating_mul(self.lap_ms()))
                    .saturating_add(into)
            }
            Schedule::Cell {
                base_ns,
                interval_ns,
            } => {
                let at_ns = base_ns.saturating_add(interval_ns.saturating_mul(i128::from(k)));
                let ms = (at_ns + NS_PER_MS - 1).div_euclid(NS_PER_MS);
                u64::try_from(ms.max(0)).unwrap_or(u64::MAX)
            }
        }
    }

    /// The most [`jitter_ms`] adds: the average gap between two places
    /// freeing, at most [`MAX_JITTER_MS`]. None for GCRA, whose units
    /// already free one emission interval apart, never two at once.
    pub fn gap_ms(&self) -> u64 {
        let (limit, window) = match *self {
            Schedule::Log { log, .. } => log_shape(log),
            Schedule::Window {
                limit, window_ms, ..
            } => (limit, window_ms),
            Schedule::Cell { .. } => return 0,
        };
        (window / limit).min(MAX_JITTER_MS)
    }

    /// How long after a place frees it is counted to free again: a window
    /// (it is retaken, and the admission counts for a window), plus the
    /// jitter's reach, since the client told that moment may come back
    /// that much later and retake it then. So a client told a place's next
    /// lap never arrives before the client of the lap before could have
    /// freed it, and no interval of a window holds two invitations for one
    /// place.
    fn lap_ms(&self) -> u64 {
        let window = match *self {
            Schedule::Log { log, .. } => log_shape(log).1,
            Schedule::Window { window_ms, .. } => window_ms,
            Schedule::Cell { .. } => 0,
        };
        window.saturating_add(self.gap_ms())
    }
}

const NS_PER_MS: i128 = 1_000_000;

/// A log's `N` and `W`.
fn log_shape(log: &SlidingLog) -> (u64, u64) {
    let policy = log.policy();
    (u64::from(policy.limit()), policy.window_ms())
}

/// How far a policy's invitations have gone: the last moment handed out
/// (before jitter) and how many units were handed out at it. Memory only:
/// a refusal writes nothing, and an object that restarts starts afresh.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    last: Option<(u64, u64)>,
}

impl Cursor {
    /// The moments to tell `count` refusals of `cost` units at `now_ms`,
    /// in order, each with its jitter: the first for the request refused
    /// now, the others for refusals answered from a copy (the isolate's
    /// cache). Every one is at or after `schedule.moment(cost)`, the first
    /// moment the request could pass if nothing else were admitted.
    pub fn invite(
        &mut self,
        schedule: &Schedule<'_>,
        now_ms: u64,
        cost: u64,
        count: usize,
    ) -> Vec<u64> {
        let cost = cost.max(1);
        let first = schedule.moment(cost);
        let horizon = first.saturating_add(HORIZON_MS);
        let gap = schedule.gap_ms();
        let mut reached = match self.last {
            Some((at_ms, units)) if at_ms >= now_ms => schedule.before(at_ms).saturating_add(units),
            _ => 0,
        };
        let mut told = Vec::with_capacity(count);
        for _ in 0..count {
            let mut unit = reached.saturating_add(cost);
            let mut at = schedule.moment(unit).max(first);
            if at > horizon {
                unit = cost;
                at = first;
            }
            self.last = Some((at, unit.saturating_sub(schedule.before(at))));
            told.push(at.saturating_add(jitter_ms(unit, gap)));
            reached = unit;
        }
        told
    }
}

/// What is added to the moment handed out for unit `unit`: a fraction of
/// `gap_ms` from the golden-ratio sequence (`(unit - 1) · φ mod 1`, so
/// the first unit, the one a lone refusal is told, gets none), so that
/// clients told places that free in the same millisecond (a burst admitted
/// at once frees at once) come back spread over the gap to the next place,
/// evenly rather than in random clumps, and the same answer comes from the
/// same state. Always less than `gap_ms`, never negative: jitter only ever
/// makes a client later.
pub fn jitter_ms(unit: u64, gap_ms: u64) -> u64 {
    let fraction = u128::from(unit.wrapping_sub(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32);
    u64::try_from((fraction * u128::from(gap_ms)) >> 32).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::gcra::GcraPolicy;
    use crate::limit::Policy;

    /// What unit `unit` of a schedule whose places are `gap` apart is told
    /// when it frees at `moment`.
    fn told(moment: u64, unit: u64, gap: u64) -> u64 {
        moment + jitter_ms(unit, gap)
    }

    fn full_log(limit: u64, window: u64, admitted_at: &[u64]) -> SlidingLog {
        let mut log = SlidingLog::new(Policy::new(limit, window).unwrap());
        for &at in admitted_at {
            assert!(log.check(at, 1).allowed);
        }
        log
    }

    #[test]
    fn the_kth_refusal_is_told_when_the_kth_oldest_admission_leaves() {
        let log = full_log(3, 10_000, &[1_000, 1_500, 2_000]);
        let schedule = Schedule::log(&log, 2_100);
        let moments: Vec<u64> = (1..=7).map(|k| schedule.moment(k)).collect();
        assert_eq!(
            moments,
            [11_000, 11_500, 12_000, 22_000, 22_500, 23_000, 33_000],
            "laps of a window and the jitter's reach (a second)"
        );
        let mut cursor = Cursor::default();
        let invited = cursor.invite(&schedule, 2_100, 1, 7);
        for (at, moment) in invited.iter().zip(&moments) {
            assert!(*at >= *moment && *at < moment + 1000, "{at} for {moment}");
        }
    }

    #[test]
    fn a_burst_in_one_millisecond_is_spread_over_the_gap_after_it() {
        let log = full_log(10, 10_000, &[5_000; 10]);
        let mut cursor = Cursor::default();
        let invited = cursor.invite(&Schedule::log(&log, 5_000), 5_000, 1, 10);
        assert!(
            invited.iter().all(|&t| (15_000..16_000).contains(&t)),
            "{invited:?}"
        );
        let mut distinct = invited.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 10, "ten places, ten moments: {invited:?}");
        let next = cursor.invite(&Schedule::log(&log, 5_000), 5_000, 1, 1);
        assert!(
            (26_000..27_000).contains(&next[0]),
            "the next lap: {next:?}"
        );
    }

    #[test]
    fn successive_calls_continue_where_the_last_stopped() {
        let log = full_log(2, 1_000, &[0, 100]);
        let schedule = Schedule::log(&log, 200);
        let mut one_by_one = Cursor::default();
        let singles: Vec<u64> = (0..5)
            .flat_map(|_| one_by_one.invite(&schedule, 200, 1, 1))
            .collect();
        let batch = Cursor::default().invite(&schedule, 200, 1, 5);
        assert_eq!(singles, batch);
    }

    /// An admission takes the oldest freed place: the schedule loses it at
    /// its front and gains it a window later, and the cursor, an absolute
    /// moment, stays where it was.
    #[test]
    fn an_admission_of_an_invited_client_leaves_the_next_invitation_unchanged() {
        let mut log = full_log(3, 10_000, &[1_000, 1_500, 2_000]);
        let mut cursor = Cursor::default();
        cursor.invite(&Schedule::log(&log, 2_100), 2_100, 1, 2);
        let mut without = cursor;
        let expected = without.invite(&Schedule::log(&log, 2_100), 2_100, 1, 2);
        assert_eq!(expected, [told(12_000, 3, 1000), told(22_000, 4, 1000)]);
        // The first invitee comes back on time and is admitted: one unit
        // less stands before the cursor and the same place comes next;
        // then the retaken place, when it really frees (its client came
        // back without the jitter the lap leaves room for).
        assert!(log.check(11_000, 1).allowed);
        let after = cursor.invite(&Schedule::log(&log, 11_000), 11_000, 1, 2);
        assert_eq!(after, [told(12_000, 2, 1000), told(21_000, 3, 1000)]);
    }

    #[test]
    fn a_cursor_in_the_past_restarts_at_the_first_moment() {
        let log = full_log(1, 1_000, &[0]);
        let mut cursor = Cursor::default();
        assert_eq!(
            cursor.invite(&Schedule::log(&log, 10), 10, 1, 3),
            [
                told(1_000, 1, 1000),
                told(3_000, 2, 1000),
                told(5_000, 3, 1000)
            ]
        );
        let mut log = log;
        assert!(log.check(5_500, 1).allowed);
        assert_eq!(
            cursor.invite(&Schedule::log(&log, 5_501), 5_501, 1, 1),
            [told(6_500, 1, 1000)]
        );
    }

    #[test]
    fn past_the_horizon_the_cursor_wraps_to_the_first_moment() {
        let log = full_log(1, 20 * 60_000, &[0]);
        let mut cursor = Cursor::default();
        let invited = cursor.invite(&Schedule::log(&log, 1), 1, 1, 4);
        let (first, lap) = (20 * 60_000, 20 * 60_000 + 1_000);
        let laps: Vec<u64> = (0..3).map(|k| told(first + k * lap, k + 1, 1000)).collect();
        assert_eq!(invited[..3], laps);
        assert_eq!(
            invited[3], invited[0],
            "a 4th lap would be more than an hour after the 1st"
        );
    }

    #[test]
    fn a_request_of_several_units_is_told_when_its_last_place_frees() {
        let log = full_log(4, 1_000, &[0, 10, 20, 30]);
        let mut cursor = Cursor::default();
        let told_at = |moment, unit| told(moment, unit, 250);
        let invited = cursor.invite(&Schedule::log(&log, 40), 40, 2, 3);
        assert_eq!(
            invited,
            [told_at(1_010, 2), told_at(1_030, 4), told_at(2_260, 6)]
        );
    }

    #[test]
    fn a_lowered_limit_counts_only_the_places_that_free() {
        let mut log = full_log(4, 1_000, &[0, 10, 20, 30]);
        log.set_policy(Policy::new(2, 1_000).unwrap());
        let schedule = Schedule::log(&log, 40);
        // Three units must leave before one fits: the 3rd frees at 1 020.
        assert_eq!(schedule.moment(1), 1_020);
        assert_eq!(schedule.moment(2), 1_030);
        assert_eq!(schedule.moment(3), 1_020 + 1_500, "a lap: W + W / N");
        assert_eq!(schedule.before(1_030), 1);
    }

    #[test]
    fn a_fixed_window_spreads_the_next_window_evenly() {
        let mut window = FixedWindow::new(Policy::new(4, 1_000).unwrap());
        window.check(500, 4);
        let schedule = Schedule::window(&window, 600).unwrap();
        let moments: Vec<u64> = (1..=6).map(|k| schedule.moment(k)).collect();
        assert_eq!(moments, [1_500, 1_750, 2_000, 2_250, 2_750, 3_000]);
        assert_eq!(schedule.before(1_500), 0);
        assert_eq!(schedule.before(1_501), 1);
        assert_eq!(schedule.before(2_500), 4);
        assert!(
            Schedule::window(&window, 1_500).is_none(),
            "closed: nothing to spread"
        );
    }

    #[test]
    fn gcra_spreads_by_the_emission_interval() {
        let mut cell = Gcra::new(GcraPolicy::new(1, 1, 1_000).unwrap());
        cell.check(10_000, 2);
        let schedule = Schedule::cell(&cell).unwrap();
        let real = cell.decide(10_000, 1).retry_after_ms;
        assert_eq!(schedule.moment(1), 10_000 + u64::try_from(real).unwrap());
        assert_eq!(
            (1..=3).map(|k| schedule.moment(k)).collect::<Vec<_>>(),
            [11_000, 12_000, 13_000]
        );
        assert_eq!(schedule.before(11_000), 0);
        assert_eq!(schedule.before(11_001), 1);
    }

    #[test]
    fn jitter_is_below_the_gap_and_spread_evenly() {
        let offsets: Vec<u64> = (1..=10).map(|k| jitter_ms(k, 1000)).collect();
        assert!(offsets.iter().all(|&o| o < 1000));
        let mut sorted = offsets.clone();
        sorted.sort_unstable();
        let widest = sorted.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(
            widest < 250,
            "no clump leaves a quarter of the gap empty: {sorted:?}"
        );
        assert_eq!(
            jitter_ms(1, 1000),
            0,
            "a lone refusal is told the moment itself"
        );
        assert_eq!(jitter_ms(7, 0), 0);
        assert!(jitter_ms(u64::MAX, u64::MAX) < u64::MAX);
    }
}
