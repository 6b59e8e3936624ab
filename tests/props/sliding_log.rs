//! Property tests of the sliding log against a naive model, with an injected
//! clock: random arrival schedules with bursts at one timestamp, arrivals at
//! exactly `t + W`, and costs above one.

use proptest::prelude::*;
use sluice::limit::{Policy, Retry, SlidingLog};

/// Every admission as `(timestamp, cost)`; the model recounts from scratch.
struct Model {
    limit: u64,
    window: u64,
    admitted: Vec<(u64, u64)>,
}

impl Model {
    /// Units that count at `now`: admitted at `t` with `now` in `[t, t + W)`.
    fn held(&self, now: u64) -> u64 {
        self.admitted
            .iter()
            .filter(|&&(t, _)| t <= now && now < t + self.window)
            .map(|&(_, c)| c)
            .sum()
    }

    fn oldest_live(&self, now: u64) -> Option<u64> {
        self.admitted
            .iter()
            .map(|&(t, _)| t)
            .find(|&t| now < t + self.window)
    }
}

fn arrivals(window: u64) -> impl Strategy<Value = Vec<(u64, u32)>> {
    let gap = prop_oneof![
        4 => Just(0u64),
        2 => 1..window.max(2),
        1 => Just(window),
        1 => Just(window - 1),
        1 => Just(window + 1),
        1 => 0..3 * window,
    ];
    let cost = prop_oneof![8 => Just(1u32), 1 => Just(0u32), 1 => 2u32..6];
    prop::collection::vec((gap, cost), 1..120)
}

fn scenario() -> impl Strategy<Value = (u64, u64, Vec<(u64, u32)>)> {
    (1u64..12, 1u64..500)
        .prop_flat_map(|(limit, window)| (Just(limit), Just(window), arrivals(window)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn admits_exactly_what_the_window_has_room_for((limit, window, gaps) in scenario()) {
        let mut log = SlidingLog::new(Policy::new(limit, window).unwrap());
        let mut model = Model { limit, window, admitted: Vec::new() };
        let mut now = 1_000_000u64;
        for (gap, cost) in gaps {
            now += gap;
            let before = model.held(now);
            let d = log.check(now, cost);
            let fits = before + u64::from(cost) <= model.limit;
            // Not lenient and not over-strict: admitted iff the window has room.
            prop_assert_eq!(d.allowed, fits, "at {} held {} cost {}", now, before, cost);
            if d.allowed && cost > 0 {
                model.admitted.push((now, u64::from(cost)));
            }
            let held = model.held(now);
            prop_assert_eq!(d.remaining, limit.saturating_sub(held));
            let oldest = model.oldest_live(now);
            prop_assert_eq!(d.reset_ms, oldest.map_or(0, |t| t + window - now));
            if d.allowed {
                prop_assert_eq!(d.retry, Retry::NOW);
            } else if u64::from(cost) > limit {
                prop_assert_eq!(d.retry, Retry::Never);
            } else {
                // Exactly the first moment the same request would fit.
                let wait = d.retry.ms().unwrap_or_default();
                prop_assert!(wait > 0, "a finite wait: {:?}", d.retry);
                let at = now + wait;
                prop_assert!(model.held(at) + u64::from(cost) <= limit);
                prop_assert!(model.held(at - 1) + u64::from(cost) > limit);
            }
        }
        // No half-open interval of length W holds more than N: the fullest
        // interval starts at an admission, so checking those suffices.
        for &(start, _) in &model.admitted {
            let inside: u64 = model.admitted.iter()
                .filter(|&&(t, _)| start <= t && t < start + window)
                .map(|&(_, c)| c)
                .sum();
            prop_assert!(inside <= limit, "{} admitted in [{}, {})", inside, start, start + window);
        }
    }

    #[test]
    fn a_restored_log_decides_like_the_original((limit, window, gaps) in scenario()) {
        let policy = Policy::new(limit, window).unwrap();
        let mut original = SlidingLog::new(policy);
        let mut now = 0u64;
        let (first, second) = gaps.split_at(gaps.len() / 2);
        for &(gap, cost) in first {
            now += gap;
            original.check(now, cost);
        }
        let mut restored = SlidingLog::new(policy);
        for (at, count) in original.entries() {
            restored.record(at, count);
        }
        for &(gap, cost) in second {
            now += gap;
            prop_assert_eq!(original.check(now, cost), restored.check(now, cost));
        }
    }

    #[test]
    fn memory_is_bounded_by_the_limit((limit, window, gaps) in scenario()) {
        let mut log = SlidingLog::new(Policy::new(limit, window).unwrap());
        let mut now = 0u64;
        for (gap, cost) in gaps {
            now += gap;
            log.check(now, cost);
            prop_assert!(log.held() <= limit);
            prop_assert!(log.entries().count() as u64 <= limit);
        }
    }

    /// The cumulative counts behind the binary searches agree with a walk
    /// of the runs, through admissions, expiry and refunds from the middle.
    #[test]
    fn counting_by_time_and_by_rank_agrees_with_a_walk(
        (limit, window, gaps) in scenario(),
        refunds in prop::collection::vec((0usize..200, 1u32..4), 0..20),
    ) {
        let mut log = SlidingLog::new(Policy::new(limit, window).unwrap());
        let mut now = 0u64;
        let mut refunds = refunds.into_iter();
        for (i, (gap, cost)) in gaps.into_iter().enumerate() {
            now += gap;
            log.check(now, cost);
            if i % 5 == 4 {
                if let Some((pick, count)) = refunds.next() {
                    let entries: Vec<(u64, u32)> = log.entries().collect();
                    if let Some(&(at, _)) = entries.get(pick % entries.len().max(1)) {
                        log.remove(at, count);
                    }
                }
            }
            let entries: Vec<(u64, u32)> = log.entries().collect();
            let held: u64 = entries.iter().map(|&(_, c)| u64::from(c)).sum();
            prop_assert_eq!(log.held(), held);
            prop_assert!(entries.iter().all(|&(_, c)| c > 0), "no empty run: {:?}", entries);
            for probe in [0, now.saturating_sub(window), now.saturating_sub(1), now, now + 1] {
                let before: u64 = entries.iter().filter(|&&(t, _)| t < probe).map(|&(_, c)| u64::from(c)).sum();
                prop_assert_eq!(log.logged_before(probe), before, "before {}", probe);
            }
            let mut rank = 0u64;
            for &(t, c) in &entries {
                for _ in 0..c {
                    rank += 1;
                    prop_assert_eq!(log.expiry_of(rank), Some(t + window), "rank {}", rank);
                }
            }
            prop_assert_eq!(log.expiry_of(rank + 1), None);
            prop_assert_eq!(log.expiry_of(0), None);
        }
    }
}
