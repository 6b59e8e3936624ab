//! One policy's state, whichever algorithm enforces it, behind one
//! interface: the key object holds an `Algorithm` per (key, policy) and does not
//! care which algorithm is inside.

use super::gcra::{Gcra, GcraPolicy, Throttle};
use super::spread::Schedule;
use super::{Decision, FixedWindow, Policy, PolicyError, Retry, SlidingLog};

/// Which algorithm, with what parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// Exact: at most `limit` in any window. O(limit) memory.
    SlidingLog(Policy),
    /// `INCR` + `EXPIRE`: at most `limit` per window, up to 2x across a
    /// boundary. One counter.
    FixedWindow(Policy),
    /// redis-cell's `CL.THROTTLE`: a rate with a burst. One timestamp.
    Gcra(GcraPolicy),
}

/// Why [`Spec::named`] made no spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unnamed {
    /// No algorithm has that name.
    Algorithm,
    /// GCRA's burst, out of range.
    Burst(u64),
}

impl Spec {
    /// The spec an algorithm's name makes of `policy`, as the config and
    /// the decision API spell it (the sliding log when none is named), with
    /// GCRA's `burst` (the limit less one when none is given).
    pub fn named(
        algorithm: Option<&str>,
        policy: Policy,
        burst: Option<u64>,
    ) -> Result<Spec, Unnamed> {
        match algorithm {
            None | Some("sliding_log") => Ok(Spec::SlidingLog(policy)),
            Some("fixed_window") => Ok(Spec::FixedWindow(policy)),
            Some("gcra") => {
                let limit = u64::from(policy.limit());
                let max_burst = burst.unwrap_or(limit - 1);
                GcraPolicy::new(max_burst, limit, policy.window_ms())
                    .map(Spec::Gcra)
                    .map_err(|_| Unnamed::Burst(max_burst))
            }
            Some(_) => Err(Unnamed::Algorithm),
        }
    }

    pub fn limit(&self) -> u64 {
        match self {
            Spec::SlidingLog(p) | Spec::FixedWindow(p) => u64::from(p.limit()),
            Spec::Gcra(p) => p.limit(),
        }
    }

    /// The window the RateLimit-Policy `w` parameter announces. For GCRA,
    /// the time an empty bucket takes to earn its whole burst back, rounded
    /// up to a whole millisecond so that it is never 0.
    pub fn window_ms(&self) -> u64 {
        match self {
            Spec::SlidingLog(p) | Spec::FixedWindow(p) => p.window_ms(),
            Spec::Gcra(p) => {
                let refill = (u128::from(p.period_ms()) * u128::from(p.limit()))
                    .div_ceil(u128::from(p.count()));
                u64::try_from(refill).unwrap_or(u64::MAX)
            }
        }
    }

    /// The spec as the config writes it: its algorithm's name, `limit`,
    /// `window` (GCRA's period, not the refill time its limit and burst
    /// make) and GCRA's `burst`.
    pub fn written(&self) -> (&'static str, u64, u64, Option<u64>) {
        match self {
            Spec::Gcra(g) => ("gcra", g.count(), g.period_ms(), Some(g.max_burst())),
            _ => (self.algorithm(), self.limit(), self.window_ms(), None),
        }
    }

    /// The same algorithm and window with another limit; `None` for one
    /// whose limit is a rate with a burst (GCRA), which no limit replaces
    /// and no share divides.
    pub fn with_limit(&self, limit: u64) -> Option<Result<Spec, PolicyError>> {
        match self {
            Spec::SlidingLog(p) => Some(Policy::new(limit, p.window_ms()).map(Spec::SlidingLog)),
            Spec::FixedWindow(p) => Some(Policy::new(limit, p.window_ms()).map(Spec::FixedWindow)),
            Spec::Gcra(_) => None,
        }
    }

    /// Whether a unit it admitted can be given back (a refund, a settle
    /// that does not keep it): GCRA holds one timestamp, not its units,
    /// so it cannot. A layer that reserves, or counts by answer, needs it.
    pub fn refunds(&self) -> bool {
        !matches!(self, Spec::Gcra(_))
    }

    /// The algorithm's name, as the config spells it.
    pub fn algorithm(&self) -> &'static str {
        match self {
            Spec::SlidingLog(_) => "sliding_log",
            Spec::FixedWindow(_) => "fixed_window",
            Spec::Gcra(_) => "gcra",
        }
    }

    /// `(kind, a, b, c)` for a storage row.
    pub fn encode(&self) -> (u64, u64, u64, u64) {
        match self {
            Spec::SlidingLog(p) => (0, u64::from(p.limit()), p.window_ms(), 0),
            Spec::FixedWindow(p) => (1, u64::from(p.limit()), p.window_ms(), 0),
            Spec::Gcra(p) => (2, p.max_burst(), p.count(), p.period_ms()),
        }
    }

    /// The spec a storage row holds, if it still validates.
    pub fn decode(kind: u64, a: u64, b: u64, c: u64) -> Option<Spec> {
        match kind {
            0 => Policy::new(a, b).ok().map(Spec::SlidingLog),
            1 => Policy::new(a, b).ok().map(Spec::FixedWindow),
            2 => GcraPolicy::new(a, b, c).ok().map(Spec::Gcra),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Algorithm {
    Log(SlidingLog),
    Window(FixedWindow),
    Cell(Gcra),
}

/// What an admission must write for storage to match memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A sliding-log entry: `count` more units at `at_ms`.
    Hit { at_ms: u64, count: u32 },
    /// The whole state of a one-row algorithm, to overwrite.
    State(u64, u64),
}

impl Algorithm {
    pub fn new(spec: Spec) -> Algorithm {
        match spec {
            Spec::SlidingLog(p) => Algorithm::Log(SlidingLog::new(p)),
            Spec::FixedWindow(p) => Algorithm::Window(FixedWindow::new(p)),
            Spec::Gcra(p) => Algorithm::Cell(Gcra::new(p)),
        }
    }

    pub fn spec(&self) -> Spec {
        match self {
            Algorithm::Log(log) => Spec::SlidingLog(log.policy()),
            Algorithm::Window(window) => Spec::FixedWindow(window.policy()),
            Algorithm::Cell(cell) => Spec::Gcra(cell.policy()),
        }
    }

    /// Applies new parameters. The same algorithm keeps what it counted, so
    /// a changed limit applies to past admissions too; another algorithm
    /// starts afresh, having nothing it could carry over.
    pub fn set_spec(&mut self, spec: Spec) {
        match (self, spec) {
            (Algorithm::Log(log), Spec::SlidingLog(p)) => log.set_policy(p),
            (Algorithm::Window(window), Spec::FixedWindow(p)) => window.set_policy(p),
            (Algorithm::Cell(cell), Spec::Gcra(p)) => cell.set_policy(p),
            (this, spec) => *this = Algorithm::new(spec),
        }
    }

    /// The decision for `cost` units at `now_ms`, recording nothing.
    pub fn decide(&mut self, now_ms: u64, cost: u32) -> Decision {
        match self {
            Algorithm::Log(log) => log.decide(now_ms, cost),
            Algorithm::Window(window) => window.decide(now_ms, cost),
            Algorithm::Cell(cell) => {
                let (throttle, unit_ms) = cell.decide_unit(now_ms, u64::from(cost));
                from_throttle(throttle, unit_ms)
            }
        }
    }

    /// redis-cell's own answer, with its whole-second rounding, for a GCRA
    /// limiter; `None` for the other algorithms.
    pub fn throttle(&self, now_ms: u64, quantity: u64) -> Option<Throttle> {
        match self {
            Algorithm::Cell(cell) => Some(cell.decide(now_ms, quantity)),
            Algorithm::Log(_) | Algorithm::Window(_) => None,
        }
    }

    /// Records `cost` units that [`decide`](Self::decide) allowed.
    pub fn admit(&mut self, now_ms: u64, cost: u32) -> Recorded {
        match self {
            Algorithm::Log(log) => Recorded::Hit {
                at_ms: log.admit(now_ms, cost),
                count: cost,
            },
            Algorithm::Window(window) => {
                window.admit(now_ms, cost);
                let (opened, count) = window.state();
                Recorded::State(opened, count)
            }
            Algorithm::Cell(cell) => {
                cell.check(now_ms, u64::from(cost));
                let (ms, ns) = split_ns(cell.tat_ns().unwrap_or(0));
                Recorded::State(ms, ns)
            }
        }
    }

    /// Takes back `cost` units admitted at `at_ms` (as [`admit`](Self::admit)
    /// recorded them), for a reservation that was not kept; answers how
    /// many were still there to take. GCRA has no refund: a rule that counts
    /// by response takes only the other two.
    pub fn refund(&mut self, at_ms: u64, cost: u32) -> u32 {
        match self {
            Algorithm::Log(log) => log.remove(at_ms, cost),
            Algorithm::Window(window) => window.refund(at_ms, cost),
            Algorithm::Cell(_) => 0,
        }
    }

    /// The one-row state storage holds ([`Recorded::State`]); `None` for a
    /// sliding log, whose admissions are rows of their own.
    pub fn state(&self) -> Option<(u64, u64)> {
        match self {
            Algorithm::Log(_) => None,
            Algorithm::Window(window) => Some(window.state()),
            Algorithm::Cell(cell) => Some(split_ns(cell.tat_ns().unwrap_or(0))),
        }
    }

    /// Restores a one-row state written as [`Recorded::State`].
    pub fn restore_state(&mut self, a: u64, b: u64) {
        match self {
            Algorithm::Log(_) => {}
            Algorithm::Window(window) => *window = FixedWindow::restored(window.policy(), a, b),
            Algorithm::Cell(cell) => cell.restore(a.saturating_mul(1_000_000).saturating_add(b)),
        }
    }

    /// Restores a sliding-log entry written as [`Recorded::Hit`].
    pub fn restore_hit(&mut self, at_ms: u64, count: u32) {
        if let Algorithm::Log(log) = self {
            log.record(at_ms, count);
        }
    }

    /// Drops what no longer counts at `now_ms`.
    pub fn expire(&mut self, now_ms: u64) {
        if let Algorithm::Log(log) = self {
            log.expire(now_ms);
        }
    }

    /// Whether nothing counts any more, so the slot can be forgotten. A
    /// log is idle once its newest unit expired: its oldest may have
    /// expired with newer ones still counting when nothing was decided
    /// since (a refund, a report).
    pub fn is_idle(&self, now_ms: u64) -> bool {
        match self {
            Algorithm::Log(log) => log
                .newest()
                .is_none_or(|newest| newest.saturating_add(log.policy().window_ms()) <= now_ms),
            Algorithm::Window(window) => window.is_idle(now_ms),
            Algorithm::Cell(cell) => cell.is_idle(now_ms),
        }
    }

    /// When the next part of the state expires: the oldest log entry, the
    /// window's end, or the moment the bucket is full again.
    pub fn next_expiry(&self) -> Option<u64> {
        match self {
            Algorithm::Log(log) => log.oldest_expiry(),
            Algorithm::Window(window) => window.expiry(),
            Algorithm::Cell(cell) => cell.idle_at_ms(),
        }
    }

    /// The moments places free up at `now_ms`, for spreading refusals'
    /// retry times ([`crate::limit::spread`]); `None` when nothing is held,
    /// so nothing is refused but what can never pass. Read after a
    /// [`decide`](Self::decide) at `now_ms`, which expires what no longer
    /// counts.
    pub fn schedule(&self, now_ms: u64) -> Option<Schedule<'_>> {
        match self {
            Algorithm::Log(log) => (!log.is_empty()).then(|| Schedule::log(log, now_ms)),
            Algorithm::Window(window) => Schedule::window(window, now_ms),
            Algorithm::Cell(cell) => Schedule::cell(cell),
        }
    }

    /// Whether admissions write one row each (a log) rather than overwrite
    /// one state row.
    pub fn is_log(&self) -> bool {
        matches!(self, Algorithm::Log(_))
    }
}

/// A GCRA answer in the shape every algorithm shares: `reset_ms` is when
/// one more unit is free (`unit_ms`), as for the other algorithms, not
/// redis-cell's time until the bucket is full.
fn from_throttle(t: Throttle, unit_ms: u64) -> Decision {
    Decision {
        allowed: !t.limited,
        limit: t.limit,
        remaining: t.remaining,
        reset_ms: unit_ms,
        retry: match (t.limited, u64::try_from(t.retry_after_ms)) {
            (false, _) => Retry::NOW,
            (true, Ok(ms)) => Retry::After(ms),
            (true, Err(_)) => Retry::Never,
        },
    }
}

/// Nanoseconds as `(ms, ns below the ms)`: each part fits a JS-safe
/// integer, which a whole epoch in ns does not.
fn split_ns(ns: u64) -> (u64, u64) {
    (ns / 1_000_000, ns % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> [Spec; 3] {
        [
            Spec::SlidingLog(Policy::new(3, 1000).unwrap()),
            Spec::FixedWindow(Policy::new(3, 1000).unwrap()),
            Spec::Gcra(GcraPolicy::new(2, 3, 1000).unwrap()),
        ]
    }

    #[test]
    fn specs_round_trip_through_storage() {
        for spec in specs() {
            let (kind, a, b, c) = spec.encode();
            assert_eq!(Spec::decode(kind, a, b, c), Some(spec));
        }
        assert_eq!(Spec::decode(9, 1, 1, 1), None);
        assert_eq!(Spec::decode(0, 0, 1, 0), None);
    }

    #[test]
    fn reset_is_the_time_until_one_more_unit_for_every_algorithm() {
        let mut specs = specs().to_vec();
        specs.push(Spec::Gcra(GcraPolicy::new(4, 1, 1000).unwrap()));
        for spec in specs {
            let mut limiter = Algorithm::new(spec);
            assert_eq!(
                limiter.decide(1_000, 0).reset_ms,
                0,
                "{spec:?}: nothing held"
            );
            while limiter.decide(1_000, 1).allowed {
                limiter.admit(1_000, 1);
            }
            let refused = limiter.decide(1_000, 1);
            assert!(refused.reset_ms > 0, "{spec:?}");
            assert_eq!(Retry::After(refused.reset_ms), refused.retry, "{spec:?}");
            let later = limiter.decide(1_000 + refused.reset_ms, 1);
            assert!(later.allowed, "{spec:?}: a unit is free at reset");
        }
        // 5 units a second back at 1 per second: one unit in 1 s, not 5 s.
        let mut gcra = Algorithm::new(Spec::Gcra(GcraPolicy::new(4, 1, 1000).unwrap()));
        for _ in 0..5 {
            gcra.admit(0, 1);
        }
        assert_eq!(gcra.decide(0, 1).reset_ms, 1000);
        assert_eq!(gcra.decide(2500, 0).reset_ms, 500);
    }

    #[test]
    fn a_gcra_window_is_never_announced_as_zero() {
        let fast = Spec::Gcra(GcraPolicy::new(0, 2000, 1000).unwrap());
        assert_eq!((fast.limit(), fast.window_ms()), (1, 1));
    }

    #[test]
    fn every_algorithm_admits_its_limit_at_once_then_refuses() {
        for spec in specs() {
            let mut limiter = Algorithm::new(spec);
            for _ in 0..3 {
                let d = limiter.decide(1_000, 1);
                assert!(d.allowed, "{spec:?}");
                limiter.admit(1_000, 1);
            }
            let refused = limiter.decide(1_000, 1);
            assert!(!refused.allowed, "{spec:?}");
            assert!(
                refused.retry > Retry::NOW && refused.retry <= Retry::After(1000),
                "{spec:?}"
            );
            assert!(!limiter.is_idle(1_000));
            assert!(limiter.is_idle(3_000), "{spec:?}");
        }
    }

    #[test]
    fn one_row_state_survives_a_restore() {
        for spec in specs().into_iter().skip(1) {
            let mut limiter = Algorithm::new(spec);
            limiter.admit(1_000, 1);
            let Recorded::State(a, b) = limiter.admit(1_200, 1) else {
                panic!("{spec:?} records its state");
            };
            let mut restored = Algorithm::new(spec);
            restored.restore_state(a, b);
            assert_eq!(
                restored.decide(1_300, 1),
                limiter.decide(1_300, 1),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn changing_the_algorithm_starts_afresh() {
        let mut limiter = Algorithm::new(specs()[0]);
        limiter.admit(0, 3);
        limiter.set_spec(specs()[1]);
        assert!(limiter.decide(1, 3).allowed);
        limiter.set_spec(Spec::FixedWindow(Policy::new(5, 1000).unwrap()));
        assert_eq!(limiter.spec().limit(), 5);
    }

    #[test]
    fn gcra_announces_its_refill_time_as_the_window() {
        assert_eq!(specs()[2].window_ms(), 1000);
        let spec = Spec::Gcra(GcraPolicy::new(15, 30, 60_000).unwrap());
        assert_eq!(spec.window_ms(), 32_000);
    }
}
