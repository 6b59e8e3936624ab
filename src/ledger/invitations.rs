//! A refusal's invitations: each refusing policy tells the request the next
//! moment one of its places frees that no earlier refusal was told
//! ([`crate::limit::spread`]), and it is told the latest of them. Only
//! refusals over quota are spread (docs/algorithms.md); the cursors are
//! memory only, so a refusal still writes nothing.

use super::slot::Slot;
use super::{Ledger, Outcome, Spread};
use crate::limit::Retry;

/// The most moments one refusal hands out: its own and those the isolate
/// keeps for the refusals it answers next from its cache.
pub const MAX_INVITATIONS: u32 = 128;

impl Ledger {
    /// Tells the refusal `outcome` (of `cost` units, decided at `now_ms`
    /// for the slots `indices`, one per policy) when to come back, and
    /// hands out `count - 1` more moments for copies of it to tell the
    /// refusals that follow. Each refusing policy's cursor moves on by
    /// `count`; its `retry` and `reset_ms` (the RateLimit `t`) become its
    /// first moment, and the whole request's `retry` the latest of them.
    pub(super) fn invite(
        &mut self,
        outcome: &mut Outcome,
        indices: &[usize],
        cost: u32,
        count: u32,
        now_ms: u64,
    ) {
        let Retry::After(earliest) = outcome.retry else {
            return;
        };
        let count = count.min(MAX_INVITATIONS) as usize;
        if count == 0 {
            return;
        }
        let mut latest = vec![now_ms; count];
        for (policy, &i) in outcome.policies.iter_mut().zip(indices) {
            let decision = &mut policy.decision;
            if decision.allowed || decision.retry == Retry::Never {
                continue;
            }
            let Slot {
                limiter, invited, ..
            } = &mut self.slots[i];
            let Some(schedule) = limiter.schedule(now_ms) else {
                continue;
            };
            let told = invited.invite(&schedule, now_ms, u64::from(cost), count);
            let wait = told[0].saturating_sub(now_ms);
            decision.retry = Retry::After(wait);
            decision.reset_ms = wait;
            for (latest, at) in latest.iter_mut().zip(told) {
                *latest = (*latest).max(at);
            }
        }
        let waits: Vec<u64> = latest
            .iter()
            .map(|at| at.saturating_sub(now_ms).max(earliest))
            .collect();
        outcome.retry = Retry::After(waits[0]);
        outcome.spread = Some(Spread {
            earliest,
            next: waits[1..].to_vec(),
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::ledger::{
        Ask, BanPolicy, LeaseAsk, Ledger, Outcome, LEASE_RETRY_MS, MAX_INVITATIONS,
    };
    use crate::limit::gcra::GcraPolicy;
    use crate::limit::spread::jitter_ms;
    use crate::limit::{Policy, Retry, Spec};

    fn log(name: &str, limit: u64, window_ms: u64) -> (String, Spec) {
        let policy = Policy::new(limit, window_ms).unwrap();
        (name.to_string(), Spec::SlidingLog(policy))
    }

    fn ask(specs: &[(String, Spec)]) -> Ask<'_> {
        Ask {
            specs,
            cost: 1,
            ban: None,
            lease: None,
        }
    }

    fn refuse(ledger: &mut Ledger, specs: &[(String, Spec)], count: u32, now: u64) -> Outcome {
        let (outcome, writes) = ledger.check_inviting(&ask(specs), None, count, now);
        assert!(!outcome.allowed);
        assert!(writes.is_empty(), "a refusal writes nothing");
        outcome
    }

    /// The case: 300 refusals on a full key of 10 per 10 s, the
    /// ten admissions made over a second.
    #[test]
    fn three_hundred_refusals_are_told_at_most_ten_a_second() {
        let mut ledger = Ledger::new();
        let p = [log("api", 10, 10_000)];
        for i in 0..10 {
            assert!(ledger.check(&ask(&p), 1_000 + i * 100).0.allowed);
        }
        let mut moments = Vec::new();
        for i in 0..300 {
            let now = 2_000 + i * 3;
            let outcome = refuse(&mut ledger, &p, 1, now);
            let wait = outcome.retry.ms().unwrap();
            // Never earlier than a place frees: the first at 11 000.
            assert!(now + wait >= 11_000);
            assert_eq!(
                outcome.policies[0].decision.reset_ms, wait,
                "t is Retry-After"
            );
            // Retry-After is whole seconds, rounded up.
            moments.push((now + wait.div_ceil(1000) * 1000) / 1000);
        }
        let mut per_second = std::collections::BTreeMap::new();
        for second in moments {
            *per_second.entry(second).or_insert(0) += 1;
        }
        let busiest = per_second.values().max().unwrap();
        assert!(
            *busiest <= 10,
            "{busiest} told the same second: {per_second:?}"
        );
        assert!(
            per_second.len() >= 30,
            "spread over {} seconds",
            per_second.len()
        );
    }

    #[test]
    fn a_batch_is_what_one_by_one_refusals_would_have_been_told() {
        let p = [log("api", 3, 1_000)];
        let mut one_by_one = Ledger::new();
        let mut batched = Ledger::new();
        for ledger in [&mut one_by_one, &mut batched] {
            for t in [0, 10, 20] {
                ledger.check(&ask(&p), t);
            }
        }
        let singles: Vec<u64> = (0..5)
            .map(|_| refuse(&mut one_by_one, &p, 1, 50).retry.ms().unwrap())
            .collect();
        let batch = refuse(&mut batched, &p, 5, 50);
        let spread = batch.spread.unwrap();
        assert_eq!(spread.earliest, 950);
        let mut waits = vec![batch.retry.ms().unwrap()];
        waits.extend(spread.next);
        assert_eq!(waits, singles);
        // The batch moved the cursor on: the next refusal is the 6th.
        let sixth = refuse(&mut batched, &p, 1, 50).retry.ms().unwrap();
        assert_eq!(
            sixth,
            refuse(&mut one_by_one, &p, 1, 50).retry.ms().unwrap()
        );
    }

    #[test]
    fn a_request_waits_for_the_latest_of_its_refusing_policies() {
        let mut ledger = Ledger::new();
        let p = [log("second", 2, 1_000), log("minute", 3, 60_000)];
        for t in [0, 100, 200] {
            ledger.check(&ask(&p[1..]), t);
        }
        ledger.check(&ask(&p[..1]), 300);
        ledger.check(&ask(&p[..1]), 300);
        let outcome = refuse(&mut ledger, &p, 1, 400);
        let [second, minute] = &outcome.policies[..] else {
            panic!("two policies");
        };
        assert_eq!(second.decision.retry, Retry::After(900));
        assert_eq!(minute.decision.retry, Retry::After(59_600));
        assert_eq!(outcome.retry, Retry::After(59_600));
        assert_eq!(outcome.spread.unwrap().earliest, 59_600);
        // The second refusal: each policy's next place, the latest wins.
        let next = refuse(&mut ledger, &p, 1, 400);
        let gap = 1_000;
        assert_eq!(next.retry, Retry::After(59_700 + jitter_ms(2, gap)));
    }

    #[test]
    fn a_policy_with_room_is_not_moved_on() {
        let mut ledger = Ledger::new();
        let p = [log("tight", 1, 1_000), log("loose", 100, 1_000)];
        ledger.check(&ask(&p), 0);
        let outcome = refuse(&mut ledger, &p, 4, 10);
        assert!(outcome.policies[1].decision.allowed);
        assert_eq!(outcome.policies[1].decision.retry, Retry::NOW);
        assert_eq!(outcome.retry, Retry::After(990));
    }

    #[test]
    fn bans_pending_refusals_refused_leases_and_what_never_passes_are_not_spread() {
        let p = [log("api", 1, 60_000)];
        let ban = BanPolicy::new(2, 60_000, 10_000, 1, 10_000).unwrap();
        let banned = Ask {
            ban: Some(&ban),
            ..ask(&p)
        };
        let mut ledger = Ledger::new();
        ledger.check(&banned, 0);
        let first = ledger.check_inviting(&banned, None, 8, 10).0;
        assert!(first.spread.is_some(), "a plain refusal under a ban policy");
        let started = ledger.check_inviting(&banned, None, 8, 20).0;
        assert!(started.ban.is_some_and(|b| b.started));
        assert_eq!(started.spread, None, "told the ban's end (or the window's)");
        let during = ledger.check_inviting(&banned, None, 8, 30).0;
        assert_eq!(during.spread, None);

        let mut ledger = Ledger::new();
        let costly = Ask { cost: 2, ..ask(&p) };
        let never = ledger.check_inviting(&costly, None, 8, 0).0;
        assert_eq!((never.retry, never.spread), (Retry::Never, None));

        let mut ledger = Ledger::new();
        ledger.reserve(&ask(&p), "r1", 30_000, 0);
        let pending = ledger.check_inviting(&ask(&p), None, 8, 10).0;
        assert!(pending.pending);
        assert_eq!(pending.spread, None);
        assert_eq!(pending.retry, Retry::After(1_000));

        let lease = |id: &str| LeaseAsk {
            name: "api.concurrency".into(),
            limit: 1,
            ttl_ms: 60_000,
            owner: None,
            reenter: None,
            strict_limit: false,
            new_id: id.into(),
        };
        let roomy = [log("api", 100, 60_000)];
        let mut ledger = Ledger::new();
        let (first, second) = (lease("l1"), lease("l2"));
        let leased = |lease| Ask {
            lease: Some(lease),
            ..ask(&roomy)
        };
        assert!(ledger.check(&leased(&first), 0).0.allowed);
        for _ in 0..3 {
            let busy = ledger.check_inviting(&leased(&second), None, 8, 10).0;
            assert!(busy.lease.as_ref().is_some_and(|l| l.refused));
            assert_eq!(
                (busy.retry, busy.spread),
                (Retry::After(LEASE_RETRY_MS), None)
            );
        }
    }

    #[test]
    fn no_invitation_asked_for_tells_the_real_moment_and_moves_nothing() {
        let p = [log("api", 1, 1_000)];
        let mut ledger = Ledger::new();
        ledger.check(&ask(&p), 0);
        for _ in 0..3 {
            let outcome = refuse(&mut ledger, &p, 0, 10);
            assert_eq!((outcome.retry, outcome.spread), (Retry::After(990), None));
        }
        assert_eq!(refuse(&mut ledger, &p, 1, 10).retry, Retry::After(990));
    }

    #[test]
    fn a_batch_is_bounded() {
        let p = [log("api", 1, 1_000)];
        let mut ledger = Ledger::new();
        ledger.check(&ask(&p), 0);
        let outcome = refuse(&mut ledger, &p, u32::MAX, 10);
        assert_eq!(
            outcome.spread.unwrap().next.len() + 1,
            MAX_INVITATIONS as usize
        );
    }

    #[test]
    fn every_algorithm_spreads_and_a_reset_forgets_the_cursor() {
        let specs = [
            log("log", 2, 10_000),
            (
                "window".to_string(),
                Spec::FixedWindow(Policy::new(2, 10_000).unwrap()),
            ),
            (
                "cell".to_string(),
                Spec::Gcra(GcraPolicy::new(1, 2, 10_000).unwrap()),
            ),
        ];
        for spec in specs {
            let p = [spec];
            let mut ledger = Ledger::new();
            ledger.check(&ask(&p), 0);
            ledger.check(&ask(&p), 0);
            let first = refuse(&mut ledger, &p, 1, 10).retry;
            let second = refuse(&mut ledger, &p, 1, 10).retry;
            assert!(second > first, "{p:?}: {first:?} then {second:?}");
            ledger.reset(20);
            ledger.check(&ask(&p), 30);
            ledger.check(&ask(&p), 30);
            let again = refuse(&mut ledger, &p, 1, 40).retry;
            assert_eq!(again, first, "{p:?}: invited from the start after a reset");
        }
    }
}
