//! The generic cell rate algorithm (GCRA), with the semantics of redis-cell's
//! `CL.THROTTLE key max_burst count period quantity`: one timestamp per key
//! (the theoretical arrival time), a rate with a burst rather than "at most N
//! in any window". Integer nanoseconds widened to `i128`, so no input
//! overflows. Where it follows redis-cell and the two edges where it does not:
//! docs/algorithms.md ("How it works": GCRA).

use std::fmt;

/// The largest `max_burst` accepted; matches the largest limit the other
/// algorithms accept, so a policy can move between them.
pub const MAX_BURST: u64 = 1_000_000;

/// The largest `count` accepted. With a period of at least 1 ms it keeps the
/// emission interval at 1 ns or more, so no policy degenerates into a zero
/// rate (which redis-cell rejects at request time).
pub const MAX_COUNT: u64 = 1_000_000;

/// The longest period accepted: 30 days, as for the other algorithms' windows.
pub const MAX_PERIOD_MS: u64 = 30 * 24 * 60 * 60 * 1000;

const NS_PER_MS: i128 = 1_000_000;
const NS_PER_S: i128 = 1_000_000_000;

/// A validated `max_burst`, `count` and `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraPolicy {
    max_burst: u64,
    count: u64,
    period_ms: u64,
}

/// Which parameter is out of range. The field name lets the config loader and
/// the HTTP API report it without parsing the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcraError {
    field: &'static str,
    message: String,
}

impl GcraError {
    /// `"max_burst"`, `"count"` or `"period"`.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

impl fmt::Display for GcraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GcraError {}

impl GcraPolicy {
    pub fn new(max_burst: u64, count: u64, period_ms: u64) -> Result<GcraPolicy, GcraError> {
        if max_burst > MAX_BURST {
            return Err(GcraError {
                field: "max_burst",
                message: format!(
                    "max_burst must be an integer from 0 to {MAX_BURST}, got {max_burst}"
                ),
            });
        }
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(GcraError {
                field: "count",
                message: format!("count must be an integer from 1 to {MAX_COUNT}, got {count}"),
            });
        }
        if !(1..=MAX_PERIOD_MS).contains(&period_ms) {
            return Err(GcraError {
                field: "period",
                message: format!(
                    "period must be from 1 ms to 30 days ({MAX_PERIOD_MS} ms), got {period_ms} ms"
                ),
            });
        }
        Ok(GcraPolicy {
            max_burst,
            count,
            period_ms,
        })
    }

    pub fn max_burst(&self) -> u64 {
        self.max_burst
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// The most units admissible at one instant: the burst plus the unit the
    /// schedule itself allows, as redis-cell reports it.
    pub fn limit(&self) -> u64 {
        self.max_burst + 1
    }

    /// `T`, truncated to whole nanoseconds as redis-cell truncates it (its
    /// float division floors to the same integer below 2^53 ns). At least
    /// 1 ns because validation caps `count` at 10^6 per millisecond.
    pub fn emission_interval_ns(&self) -> i128 {
        i128::from(self.period_ms) * NS_PER_MS / i128::from(self.count)
    }

    /// `τ`, a whole multiple of `T` so that exactly `limit` units fit.
    fn tolerance_ns(&self) -> i128 {
        self.emission_interval_ns() * i128::from(self.limit())
    }
}

/// One key's GCRA state: the policy and the TAT, absent while nothing has
/// been admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gcra {
    policy: GcraPolicy,
    tat_ns: Option<u64>,
}

crate::wire! {
    /// The answer to one `CL.THROTTLE`, in milliseconds for the HTTP headers and
    /// in redis-cell's whole seconds for callers that compare against it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Throttle {
        pub limited: bool,
        pub limit: u64,
        pub remaining: u64,
        /// -1 when allowed, as redis-cell. Otherwise milliseconds (rounded up,
        /// so retrying that much later succeeds if nothing else is admitted)
        /// until the same request could succeed; also -1 when it never can
        /// because it costs more than `limit`.
        pub retry_after_ms: i64,
        /// Milliseconds, rounded up, until the key is back to full capacity.
        pub reset_after_ms: u64,
        /// `retry_after` as redis-cell replies it: whole seconds, plus one when a
        /// whole millisecond or more is left over (a sub-millisecond remainder is
        /// dropped, as redis-cell drops it).
        pub retry_after_s: i64,
        /// `reset_after` in whole seconds, rounded as `retry_after_s`.
        pub reset_after_s: u64,
    }
}

impl Gcra {
    pub fn new(policy: GcraPolicy) -> Gcra {
        Gcra {
            policy,
            tat_ns: None,
        }
    }

    pub fn policy(&self) -> GcraPolicy {
        self.policy
    }

    /// Applies a new policy from the next check on. The TAT is kept, so a
    /// tighter policy may refuse, and report `remaining` 0, until the backlog
    /// already admitted has drained.
    pub fn set_policy(&mut self, policy: GcraPolicy) {
        self.policy = policy;
    }

    /// Decides, and records the admission when the request is allowed and
    /// costs something; a quantity of 0 only peeks.
    pub fn check(&mut self, now_ms: u64, quantity: u64) -> Throttle {
        let (throttle, new_tat, _) = self.evaluate(now_ms, quantity);
        if new_tat.is_some() {
            self.tat_ns = new_tat;
        }
        throttle
    }

    /// What `check` would answer, without recording anything.
    pub fn decide(&self, now_ms: u64, quantity: u64) -> Throttle {
        self.evaluate(now_ms, quantity).0
    }

    /// [`decide`](Self::decide)'s answer, and the milliseconds (rounded up)
    /// from `now` until at least one more unit is free than `remaining`
    /// says: one emission interval's worth of the bucket draining, or 0 when
    /// it is full. This is the RateLimit `t` every algorithm shares, where
    /// redis-cell's `reset_after` is the time until the bucket is full.
    pub fn decide_unit(&self, now_ms: u64, quantity: u64) -> (Throttle, u64) {
        let (throttle, _, unit_ns) = self.evaluate(now_ms, quantity);
        (throttle, saturate_u64(ceil_ms(unit_ns)))
    }

    /// The TAT in nanoseconds since the epoch, to persist; `None` while
    /// nothing has been admitted.
    pub fn tat_ns(&self) -> Option<u64> {
        self.tat_ns
    }

    /// When the units the bucket holds conform again, as `(base, T)` in
    /// ns: unit `k` (from 1) at `base + k·T`, where `base` is the TAT less
    /// the tolerance; `None` while nothing has been admitted.
    pub fn unit_times_ns(&self) -> Option<(i128, i128)> {
        let tat = i128::from(self.tat_ns?);
        Some((
            tat - self.policy.tolerance_ns(),
            self.policy.emission_interval_ns(),
        ))
    }

    /// Reinstates a TAT read back from storage.
    pub fn restore(&mut self, tat_ns: u64) {
        self.tat_ns = Some(tat_ns);
    }

    /// Once the TAT is at or before `now`, every answer is the one an empty
    /// bucket gives (redis-cell lets the key expire at that moment), so the
    /// state can be dropped.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.tat_ns
            .is_none_or(|tat| i128::from(tat) <= i128::from(now_ms) * NS_PER_MS)
    }

    /// The first millisecond at which `is_idle` holds, for scheduling a sweep;
    /// `None` when it already holds for any `now`.
    pub fn idle_at_ms(&self) -> Option<u64> {
        self.tat_ns.map(|tat| tat.div_ceil(1_000_000))
    }

    /// The answer, the TAT to store if the request is admitted and costs
    /// something, and the ns until one more unit is free. All arithmetic is `i128`: `now` is below 2^84 ns, an
    /// increment below 2^64 · 2^52 ns, so nothing approaches 2^127.
    fn evaluate(&self, now_ms: u64, quantity: u64) -> (Throttle, Option<u64>, i128) {
        let emission_interval = self.policy.emission_interval_ns();
        let tolerance = self.policy.tolerance_ns();
        let now = i128::from(now_ms) * NS_PER_MS;
        // A TAT in the past reads as `now`, as a missing (expired) key does in
        // redis-cell.
        let tat = self.tat_ns.map_or(now, |t| i128::from(t).max(now));
        let increment = emission_interval * i128::from(quantity);
        let new_tat = tat + increment;
        let diff = now - (new_tat - tolerance);

        let stored = if diff < 0 || quantity == 0 {
            None
        } else {
            u64::try_from(new_tat).ok()
        };
        let admitted = diff >= 0 && (quantity == 0 || stored.is_some());
        let (ttl, retry_after) = if admitted {
            (new_tat - now, None)
        } else if diff < 0 && increment <= tolerance {
            (tat - now, Some(-diff))
        } else {
            (tat - now, None)
        };

        let next = tolerance - ttl;
        let remaining = if next > 0 {
            next / emission_interval
        } else {
            0
        };
        // `remaining` grows once `next` reaches the following multiple of
        // the emission interval (the first one while it is negative), and
        // everything is free once the TAT is reached.
        let unit = if next >= 0 {
            emission_interval - next % emission_interval
        } else {
            emission_interval - next
        };
        let unit = unit.min(ttl.max(0));
        let throttle = Throttle {
            limited: !admitted,
            limit: self.policy.limit(),
            remaining: saturate_u64(remaining),
            retry_after_ms: retry_after.map_or(-1, |ns| saturate_i64(ceil_ms(ns))),
            reset_after_ms: saturate_u64(ceil_ms(ttl)),
            retry_after_s: retry_after.map_or(-1, |ns| saturate_i64(redis_seconds(ns))),
            reset_after_s: saturate_u64(redis_seconds(ttl)),
        };
        (throttle, stored, unit)
    }
}

/// Whole milliseconds, rounded up: `now` only moves in whole milliseconds, so
/// anything less would name an instant at which the request still fails.
fn ceil_ms(ns: i128) -> i128 {
    (ns + NS_PER_MS - 1).div_euclid(NS_PER_MS)
}

/// redis-cell's reply rounding: `whole_seconds()`, plus one when
/// `subsec_milliseconds() > 0`. Both truncate towards zero, so a remainder
/// under a millisecond is dropped.
fn redis_seconds(ns: i128) -> i128 {
    let whole = ns / NS_PER_S;
    if (ns % NS_PER_S) / NS_PER_MS > 0 {
        whole + 1
    } else {
        whole
    }
}

fn saturate_u64(n: i128) -> u64 {
    u64::try_from(n.max(0)).unwrap_or(u64::MAX)
}

fn saturate_i64(n: i128) -> i64 {
    i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const START: u64 = 1_700_000_000_000;

    fn gcra(max_burst: u64, count: u64, period_ms: u64) -> Gcra {
        Gcra::new(GcraPolicy::new(max_burst, count, period_ms).unwrap())
    }

    /// One step of a scenario: at `START + at_ms`, apply `quantity`, expect
    /// `(limited, remaining, retry_after_ms, reset_after_ms, retry_after_s,
    /// reset_after_s)`.
    type Step = (u64, u64, (bool, u64, i64, u64, i64, u64));

    fn run(g: &mut Gcra, steps: &[Step]) {
        for (i, &(at_ms, quantity, expected)) in steps.iter().enumerate() {
            let t = g.check(START + at_ms, quantity);
            let got = (
                t.limited,
                t.remaining,
                t.retry_after_ms,
                t.reset_after_ms,
                t.retry_after_s,
                t.reset_after_s,
            );
            assert_eq!(got, expected, "step {i}: {quantity} at +{at_ms} ms");
            assert_eq!(t.limit, g.policy().limit(), "step {i}");
        }
    }

    #[test]
    fn matches_the_redis_cell_readme_example() {
        // `CL.THROTTLE user123 15 30 60` replies 0, 16, 15, -1, 2.
        let mut g = gcra(15, 30, 60_000);
        let t = g.check(START, 1);
        assert_eq!(
            (
                t.limited,
                t.limit,
                t.remaining,
                t.retry_after_s,
                t.reset_after_s
            ),
            (false, 16, 15, -1, 2)
        );
        assert_eq!((t.retry_after_ms, t.reset_after_ms), (-1, 2000));
    }

    /// redis-cell's own `it_rate_limits` table: burst 4, one per second.
    #[rustfmt::skip]
    #[test]
    fn matches_the_redis_cell_test_table() {
        let mut g = gcra(4, 1, 1000);
        run(&mut g, &[
            // A request larger than the limit can never pass.
            (0, 6, (true, 5, -1, 0, -1, 0)),
            // The burst.
            (0, 1, (false, 4, -1, 1000, -1, 1)),
            (0, 1, (false, 3, -1, 2000, -1, 2)),
            (0, 1, (false, 2, -1, 3000, -1, 3)),
            (0, 1, (false, 1, -1, 4000, -1, 4)),
            (0, 1, (false, 0, -1, 5000, -1, 5)),
            (0, 1, (true, 0, 1000, 5000, 1, 5)),
            // Partial recovery.
            (3000, 1, (false, 2, -1, 3000, -1, 3)),
            (3100, 1, (false, 1, -1, 3900, -1, 4)),
            (4000, 1, (false, 1, -1, 4000, -1, 4)),
            (8000, 1, (false, 4, -1, 1000, -1, 1)),
            (9500, 1, (false, 4, -1, 1000, -1, 1)),
            // A peek.
            (9500, 0, (false, 4, -1, 1000, -1, 1)),
            // Quantity above one.
            (9500, 2, (false, 2, -1, 3000, -1, 3)),
            (9500, 5, (true, 2, 3000, 3000, 3, 3)),
        ]);
    }

    /// Three per second with a burst of 2: `T` = 333_333_333 ns and
    /// `τ` = 999_999_999 ns, so figures carry sub-millisecond parts and the
    /// two roundings part ways. Times and nanoseconds below are relative to
    /// `START`.
    #[rustfmt::skip]
    #[test]
    fn walks_a_scenario_with_a_fractional_emission_interval() {
        let mut g = gcra(2, 3, 1000);
        run(&mut g, &[
            // An empty bucket: a peek sees the full limit and nothing to reset.
            (0, 0, (false, 3, -1, 0, -1, 0)),
            // The whole burst. TAT 333_333_333, 666_666_666, 999_999_999.
            (0, 1, (false, 2, -1, 334, -1, 1)),
            (0, 1, (false, 1, -1, 667, -1, 1)),
            (0, 1, (false, 0, -1, 1000, -1, 1)),
            // New TAT would be 1_333_333_332, allowed from 333_333_333.
            (0, 1, (true, 0, 334, 1000, 1, 1)),
            // 333_333 ns short: redis-cell's rounding says retry in 0 s.
            (333, 1, (true, 0, 1, 667, 0, 1)),
            // 666_667 ns to spare. TAT 1_333_333_332.
            (334, 1, (false, 0, -1, 1000, -1, 1)),
            // A peek answers as the admission it follows, and stores nothing.
            (334, 0, (false, 0, -1, 1000, -1, 1)),
            // Four units cost more than the tolerance: never.
            (334, 4, (true, 0, -1, 1000, -1, 1)),
            // Partial recovery. TAT 1_666_666_665.
            (1000, 1, (false, 1, -1, 667, -1, 1)),
            // Two units: allowed from 1_333_333_332, 333_333_332 ns away.
            (1000, 2, (true, 1, 334, 667, 1, 1)),
            (1334, 2, (false, 0, -1, 1000, -1, 1)),
            // Full recovery: the same as an empty bucket.
            (5000, 1, (false, 2, -1, 334, -1, 1)),
            // The full limit at once needs a full bucket again.
            (5000, 3, (true, 2, 334, 334, 1, 1)),
            (5334, 3, (false, 0, -1, 1000, -1, 1)),
        ]);
        assert_eq!(g.tat_ns(), Some((START + 5334) * 1_000_000 + 999_999_999));
    }

    #[test]
    fn rounds_seconds_as_redis_cell_replies() {
        assert_eq!(redis_seconds(-NS_PER_S), -1);
        assert_eq!(redis_seconds(0), 0);
        assert_eq!(redis_seconds(999_999), 0);
        assert_eq!(redis_seconds(1_000_000), 1);
        assert_eq!(redis_seconds(NS_PER_S), 1);
        assert_eq!(redis_seconds(NS_PER_S + 999_999), 1);
        assert_eq!(redis_seconds(NS_PER_S + 1_000_000), 2);
        assert_eq!(ceil_ms(0), 0);
        assert_eq!(ceil_ms(1), 1);
        assert_eq!(ceil_ms(1_000_000), 1);
        assert_eq!(ceil_ms(1_000_001), 2);
    }

    #[test]
    fn validates_each_field_by_name() {
        assert!(GcraPolicy::new(0, 1, 1).is_ok());
        assert!(GcraPolicy::new(MAX_BURST, MAX_COUNT, MAX_PERIOD_MS).is_ok());
        let err = GcraPolicy::new(MAX_BURST + 1, 1, 1000).unwrap_err();
        assert_eq!(err.field(), "max_burst");
        assert_eq!(
            err.to_string(),
            "max_burst must be an integer from 0 to 1000000, got 1000001"
        );
        let err = GcraPolicy::new(0, 0, 1000).unwrap_err();
        assert_eq!(err.field(), "count");
        assert_eq!(
            err.to_string(),
            "count must be an integer from 1 to 1000000, got 0"
        );
        assert_eq!(
            GcraPolicy::new(0, u64::MAX, 1000).unwrap_err().field(),
            "count"
        );
        assert_eq!(GcraPolicy::new(0, 1, 0).unwrap_err().field(), "period");
        let err = GcraPolicy::new(0, 1, MAX_PERIOD_MS + 1).unwrap_err();
        assert_eq!(err.field(), "period");
        assert!(err.to_string().contains("30 days"));
    }

    #[test]
    fn reports_idleness_and_round_trips_through_storage() {
        let mut g = gcra(2, 3, 1000);
        assert!(g.is_idle(0));
        assert_eq!((g.tat_ns(), g.idle_at_ms()), (None, None));
        g.check(START, 1);
        assert_eq!(g.tat_ns(), Some(START * 1_000_000 + 333_333_333));
        assert_eq!(g.idle_at_ms(), Some(START + 334));
        assert!(!g.is_idle(START + 333));
        assert!(g.is_idle(START + 334));

        let mut restored = Gcra::new(g.policy());
        restored.restore(g.tat_ns().unwrap());
        assert_eq!(restored, g);
        assert_eq!(restored.check(START + 10, 2), g.check(START + 10, 2));

        let idle = g.idle_at_ms().unwrap();
        assert_eq!(g.decide(idle, 1), Gcra::new(g.policy()).decide(idle, 1));
    }

    #[test]
    fn a_new_policy_keeps_the_backlog() {
        let mut g = gcra(4, 1, 1000);
        for _ in 0..5 {
            assert!(!g.check(START, 1).limited);
        }
        let tat = g.tat_ns();
        g.set_policy(GcraPolicy::new(1, 1, 1000).unwrap());
        assert_eq!(g.tat_ns(), tat);
        let t = g.check(START, 0);
        // Five seconds of backlog against a two-second tolerance.
        assert_eq!((t.limited, t.remaining, t.retry_after_ms), (true, 0, 3000));
        assert!(g.check(START + 3999, 1).limited);
        assert!(!g.check(START + 4000, 1).limited);
    }

    #[test]
    fn refuses_rather_than_store_a_tat_past_u64() {
        let mut g = gcra(MAX_BURST, 1, MAX_PERIOD_MS);
        g.restore(u64::MAX - 1);
        let t = g.check(START, 1);
        assert_eq!((t.limited, t.retry_after_ms), (true, -1));
        assert_eq!(g.tat_ns(), Some(u64::MAX - 1));

        let mut g = gcra(MAX_BURST, 1, MAX_PERIOD_MS);
        let t = g.check(u64::MAX, 1);
        assert_eq!((t.limited, t.retry_after_ms), (true, -1));
        assert_eq!(g.tat_ns(), None);
        assert!(!g.check(u64::MAX, 0).limited);
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let policies = [(0, 1, 1), (0, MAX_COUNT, 1), (MAX_BURST, 1, MAX_PERIOD_MS)];
        for (b, c, p) in policies {
            for tat in [None, Some(0), Some(u64::MAX)] {
                for now in [0, 1, START, u64::MAX] {
                    for q in [0, 1, MAX_BURST + 1, u64::MAX] {
                        let mut g = gcra(b, c, p);
                        if let Some(tat) = tat {
                            g.restore(tat);
                        }
                        let t = g.check(now, q);
                        assert!(t.remaining <= t.limit);
                        g.is_idle(now);
                        g.idle_at_ms();
                    }
                }
            }
        }
    }

    #[test]
    fn never_admits_more_than_the_limit_at_one_instant() {
        for (b, c, p) in [(0, 1, 1000), (4, 1, 1000), (2, 3, 1000), (9, 7, 60_000)] {
            let limit = b + 1;
            for q in 1..=limit + 1 {
                let mut g = gcra(b, c, p);
                let admitted: u64 = (0..2 * limit)
                    .filter(|_| !g.check(START, q).limited)
                    .map(|_| q)
                    .sum();
                assert_eq!(admitted, limit / q * q, "burst {b}, {c}/{p} ms, q {q}");
            }
        }
    }

    #[test]
    fn a_steady_flood_converges_to_the_rate() {
        for (b, c, p, step_ms) in [(4, 10, 1000, 1), (2, 3, 1000, 7), (9, 7, 60_000, 100)] {
            let mut g = gcra(b, c, p);
            let periods = 200;
            let admitted = (0..periods * p)
                .step_by(step_ms)
                .filter(|&t| !g.check(START + t, 1).limited)
                .count() as u64;
            let expected = c * periods;
            assert!(
                admitted >= expected && admitted <= expected + b + 1,
                "burst {b}, {c}/{p} ms: {admitted} admitted, rate allows {expected}"
            );
        }
    }

    fn policy_strategy() -> impl Strategy<Value = GcraPolicy> {
        (0u64..20, 1u64..50, 1u64..120_000).prop_map(|(b, c, p)| GcraPolicy::new(b, c, p).unwrap())
    }

    proptest! {
        #[test]
        fn decide_is_check_without_mutation(
            policy in policy_strategy(),
            steps in proptest::collection::vec((0u64..5_000, 0u64..25), 1..60),
        ) {
            let mut g = Gcra::new(policy);
            let mut now = START;
            for (dt, q) in steps {
                now += dt;
                let before = g.clone();
                let decided = g.decide(now, q);
                prop_assert_eq!(&g, &before);
                let checked = g.check(now, q);
                prop_assert_eq!(decided, checked);
                if checked.limited || q == 0 {
                    prop_assert_eq!(&g, &before);
                }
            }
        }

        #[test]
        fn a_peek_changes_nothing(
            policy in policy_strategy(),
            steps in proptest::collection::vec((0u64..5_000, 0u64..25), 1..60),
        ) {
            let mut g = Gcra::new(policy);
            let mut now = START;
            for (dt, q) in steps {
                now += dt;
                let mut peeked = g.clone();
                peeked.check(now, 0);
                prop_assert_eq!(&peeked, &g);
                prop_assert_eq!(peeked.check(now, q), g.check(now, q));
                prop_assert_eq!(&peeked, &g);
            }
        }
    }
}
