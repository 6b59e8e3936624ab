//! Property tests of the spread of refusals' retry times
//! (`limit::spread`), with an injected clock: random states of each
//! algorithm, random sequences of admissions and refusals, and batches of
//! invitations as the isolate's cache asks for them. What must hold:
//!
//! - every moment a refusal is told is at or after the moment the request
//!   could really pass if nothing else were admitted (never earlier than a
//!   place really frees);
//! - a schedule's `before` and `moment` agree, and moments never go down;
//! - invitations handed out while a key stays full land at most N in any
//!   interval of a window (its places, each once), jitter included;
//! - clients that come back when told are admitted, and what they are told
//!   stays spread, as the admissions they make move the schedule.

use proptest::prelude::*;
use sluice::limit::gcra::GcraPolicy;
use sluice::limit::spread::{Cursor, HORIZON_MS};
use sluice::limit::{Algorithm, Policy, Retry, Spec};

fn spec() -> impl Strategy<Value = Spec> {
    let limit = 1u64..12;
    let window = prop_oneof![1u64..50, 50u64..5_000, 5_000u64..60_000];
    (limit, window, 0u8..3).prop_map(|(limit, window, kind)| match kind {
        0 => Spec::SlidingLog(Policy::new(limit, window).unwrap()),
        1 => Spec::FixedWindow(Policy::new(limit, window).unwrap()),
        _ => Spec::Gcra(GcraPolicy::new(limit - 1, limit, window).unwrap()),
    })
}

/// Requests as `(gap before it, cost, invitations asked for if refused)`.
fn requests(window: u64) -> impl Strategy<Value = Vec<(u64, u32, usize)>> {
    let gap = prop_oneof![
        4 => Just(0u64),
        3 => 0..window.max(2) / 4 + 1,
        1 => Just(window),
        1 => 0..3 * window,
    ];
    let cost = prop_oneof![8 => Just(1u32), 1 => 2u32..4];
    let batch = prop_oneof![4 => Just(1usize), 1 => 2usize..40];
    prop::collection::vec((gap, cost, batch), 1..150)
}

fn scenario() -> impl Strategy<Value = (Spec, Vec<(u64, u32, usize)>)> {
    spec().prop_flat_map(|spec| (Just(spec), requests(spec.window_ms())))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn no_refusal_is_told_a_moment_before_it_could_pass((spec, requests) in scenario()) {
        let mut limiter = Algorithm::new(spec);
        let mut cursor = Cursor::default();
        let mut now = 1_700_000_000_000u64;
        for (gap, cost, batch) in requests {
            now += gap;
            let decision = limiter.decide(now, cost);
            if decision.allowed {
                limiter.admit(now, cost);
                continue;
            }
            let Retry::After(wait) = decision.retry else { continue };
            let schedule = limiter.schedule(now);
            prop_assert!(schedule.is_some(), "a refusal with a wait has a schedule");
            let schedule = schedule.unwrap();
            // The schedule's first moment is the real retry, or later for a
            // fixed window, whose next window's places are spread over it.
            let first = schedule.moment(u64::from(cost));
            prop_assert!(first >= now + wait);
            if !matches!(spec, Spec::FixedWindow(_)) {
                prop_assert_eq!(first, now + wait);
            }
            for told in cursor.invite(&schedule, now, u64::from(cost), batch) {
                prop_assert!(told >= now + wait, "told {} before it could pass at {}", told, now + wait);
                prop_assert!(told <= now + wait + HORIZON_MS + 1_000 + spec.window_ms(),
                    "told {} past the horizon", told);
            }
        }
    }

    #[test]
    fn before_and_moment_agree((spec, requests) in scenario()) {
        let mut limiter = Algorithm::new(spec);
        let mut now = 1_700_000_000_000u64;
        for (gap, cost, _) in requests {
            now += gap;
            if limiter.decide(now, cost).allowed {
                limiter.admit(now, cost);
            }
            let Some(schedule) = limiter.schedule(now) else { continue };
            let mut last = 0;
            for k in 1..=3 * spec.limit() + 2 {
                let at = schedule.moment(k);
                prop_assert!(at >= last, "moment {} of unit {} went down from {}", at, k, last);
                prop_assert!(schedule.before(at) < k, "unit {} at {}: {} before", k, at, schedule.before(at));
                prop_assert!(schedule.before(at + 1) >= k, "unit {} at {}", k, at);
                last = at;
            }
        }
    }

    /// A key filled at random, then refused many times without anything
    /// admitted: each place is handed out once per lap, and a lap is a
    /// window plus the jitter's reach, so any interval of a window holds
    /// at most N invitations.
    #[test]
    fn a_full_key_invites_at_most_n_per_window(
        (spec, requests) in scenario().prop_filter("log or window", |(spec, _)| !matches!(spec, Spec::Gcra(_))),
        refusals in 1usize..400,
        batch in 1usize..20,
    ) {
        let (limit, window) = (spec.limit(), spec.window_ms());
        let refusals = refusals.min(usize::try_from(HORIZON_MS / window * limit / 2).unwrap_or(usize::MAX)).max(1);
        let mut limiter = Algorithm::new(spec);
        let mut now = 1_700_000_000_000u64;
        for (gap, cost, _) in requests {
            now += gap % window.max(1);
            if limiter.decide(now, cost).allowed {
                limiter.admit(now, cost);
            }
        }
        while limiter.decide(now, 1).allowed {
            limiter.admit(now, 1);
        }
        let schedule = limiter.schedule(now).unwrap();
        let mut cursor = Cursor::default();
        let mut told = Vec::new();
        while told.len() < refusals {
            told.extend(cursor.invite(&schedule, now, 1, batch.min(refusals - told.len())));
        }
        told.sort_unstable();
        for (i, &start) in told.iter().enumerate() {
            let inside = told[i..].iter().take_while(|&&t| t < start + window).count() as u64;
            prop_assert!(inside <= limit, "{} invited in [{}, +{})", inside, start, window);
        }
    }

    /// GCRA's places free one emission interval apart: an interval of
    /// length L holds at most L / T + 1 invitations, jitter included.
    #[test]
    fn gcra_invites_one_per_emission_interval(
        limit in 1u64..12,
        period in 1_000u64..60_000,
        refusals in 1usize..300,
    ) {
        prop_assume!((refusals as u64 + 1) * period / limit < HORIZON_MS);
        let mut limiter = Algorithm::new(Spec::Gcra(GcraPolicy::new(limit - 1, limit, period).unwrap()));
        let now = 1_700_000_000_000u64;
        limiter.admit(now, u32::try_from(limit).unwrap());
        prop_assert!(!limiter.decide(now, 1).allowed);
        let schedule = limiter.schedule(now).unwrap();
        let mut told = Cursor::default().invite(&schedule, now, 1, refusals);
        told.sort_unstable();
        let interval = period / limit;
        for (i, &start) in told.iter().enumerate() {
            let inside = told[i..].iter().take_while(|&&t| t < start + interval).count();
            prop_assert!(inside <= 2, "{} invited within one emission interval", inside);
        }
    }
}

/// Clients refused from a full key come back exactly when told (refused
/// again, they are told again), while the cursor meets the admissions they
/// make. Returns every moment told, and how many were refused on coming
/// back.
fn simulate(spec: Spec, arrivals: &[u64]) -> (Vec<u64>, usize) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut limiter = Algorithm::new(spec);
    let mut cursor = Cursor::default();
    let start = 1_700_000_000_000u64;
    while limiter.decide(start, 1).allowed {
        limiter.admit(start, 1);
    }
    let mut queue: BinaryHeap<Reverse<(u64, bool)>> = arrivals
        .iter()
        .map(|&gap| Reverse((start + gap, false)))
        .collect();
    let (mut told, mut refused_again) = (Vec::new(), 0);
    while let Some(Reverse((now, returning))) = queue.pop() {
        let decision = limiter.decide(now, 1);
        if decision.allowed {
            limiter.admit(now, 1);
            continue;
        }
        refused_again += usize::from(returning);
        let Retry::After(wait) = decision.retry else {
            unreachable!("cost 1 fits")
        };
        let schedule = limiter.schedule(now).unwrap();
        let at = cursor.invite(&schedule, now, 1, 1)[0];
        assert!(
            at >= now + wait,
            "told {at} before it could pass at {}",
            now + wait
        );
        told.push(at);
        if told.len() < 4 * arrivals.len() {
            queue.push(Reverse((at, true)));
        }
    }
    (told, refused_again)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// A crowd refused while the key is full, then only the clients coming
    /// back as told: every one is admitted when it comes back, and at
    /// most N are told any window of time.
    #[test]
    fn clients_that_come_back_when_told_are_admitted_and_spread(
        spec in spec(),
        arrivals in prop::collection::vec(0u64..u64::MAX, 1..300),
    ) {
        let (limit, window) = (spec.limit(), spec.window_ms());
        prop_assume!((arrivals.len() as u64 / limit + 2) * (window + 1_000) < HORIZON_MS);
        let first_free = match spec {
            Spec::Gcra(_) => (window / limit).max(1),
            _ => window,
        };
        let arrivals: Vec<u64> = arrivals.iter().map(|a| a % first_free).collect();
        let (mut told, refused_again) = simulate(spec, &arrivals);
        told.sort_unstable();
        for (i, &start) in told.iter().enumerate() {
            let inside = told[i..].iter().take_while(|&&t| t < start + window).count() as u64;
            prop_assert!(inside <= limit, "{} invited in [{}, +{})", inside, start, window);
        }
        prop_assert_eq!(refused_again, 0, "refused on coming back when told");
    }
}
