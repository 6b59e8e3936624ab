//! Overrides and exactness: after any interleaving of decisions and
//! override changes (set, lifted, lapsing), every admission respected the
//! policy in force when it was made: counting every admission in that
//! policy's window up to and including it gives at most its limit.
//!
//! An override may change a policy's limit, not its window or algorithm
//! (the admin API refuses that): a log re-read through a shorter window
//! forgets what a longer one would count again. Policies an override adds
//! under new names are slots of their own; the rule's policies it does not
//! name stay in force with the rule's limits.

use proptest::prelude::*;
use sluice::ledger::{Ask, Ledger, Override};
use sluice::limit::{Policy, Spec};

#[derive(Debug, Clone)]
enum Step {
    Decide {
        gap_ms: u64,
    },
    /// `limit` for the rule's policy, or `None` to leave it to the rule;
    /// at least one of `limit` and `extra` is set (neither would be the
    /// unlimited override, which logs nothing).
    Override {
        limit: Option<u64>,
        extra: Option<u64>,
        for_ms: Option<u64>,
    },
    Lift,
    Sweep,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u64..40).prop_map(|gap_ms| Step::Decide { gap_ms }),
        1 => (prop::option::of(1u64..6), prop::option::of(1u64..4), prop::option::of(1u64..300))
            .prop_map(|(limit, extra, for_ms)| Step::Override {
                limit: limit.or(if extra.is_none() { Some(1) } else { None }),
                extra,
                for_ms,
            }),
        1 => Just(Step::Lift),
        1 => Just(Step::Sweep),
    ]
}

fn log(limit: u64, window_ms: u64) -> Vec<(String, Spec)> {
    vec![(
        "api".to_string(),
        Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
    )]
}

/// The rule's policy with another limit (or left to the rule), and maybe a
/// tighter policy of its own over 30 ms.
fn overriding(limit: Option<u64>, extra: Option<u64>) -> Vec<(String, Spec)> {
    let mut policies = limit.map(|limit| log(limit, 100)).unwrap_or_default();
    if let Some(extra) = extra {
        policies.push((
            "api.burst".to_string(),
            Spec::SlidingLog(Policy::new(extra, 30).unwrap()),
        ));
    }
    policies
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn every_admission_respects_the_limit_in_force(steps in prop::collection::vec(step(), 1..200)) {
        let rule = log(3, 100);
        let mut ledger = Ledger::new();
        let mut now = 0u64;
        // Admission times, and the (limit, window) pairs in force for each.
        let mut admitted: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
        let mut in_force: Option<(Option<u64>, Option<u64>, Option<u64>)> = None;
        for step in steps {
            match step {
                Step::Decide { gap_ms } => {
                    now += gap_ms;
                    let ask = Ask { specs: &rule, cost: 1, ban: None, lease: None };
                    let (outcome, _) = ledger.check(&ask, now);
                    if outcome.allowed {
                        let policies = match in_force {
                            Some((limit, extra, until)) if until.is_none_or(|u| now < u) => {
                                let mut policies = vec![(limit.unwrap_or(3), 100)];
                                policies.extend(extra.map(|e| (e, 30)));
                                policies
                            }
                            _ => vec![(3, 100)],
                        };
                        admitted.push((now, policies));
                    }
                }
                Step::Override { limit, extra, for_ms } => {
                    let until_ms = for_ms.map(|f| now + f);
                    let next = Override { policies: overriding(limit, extra), until_ms, reason: String::new(), set_ms: now, whole: None };
                    ledger.set_override(Some(next));
                    in_force = Some((limit, extra, until_ms));
                }
                Step::Lift => {
                    ledger.set_override(None);
                    in_force = None;
                }
                Step::Sweep => {
                    ledger.sweep(now);
                }
            }
        }
        for (i, (at, policies)) in admitted.iter().enumerate() {
            for &(limit, window) in policies {
                // The rule's policy counts every admission; the burst policy
                // only those made while it was in force.
                let counted = admitted[..=i]
                    .iter()
                    .filter(|(t, p)| *t + window > *at && (window == 100 || p.iter().any(|&(_, w)| w == window)))
                    .count() as u64;
                prop_assert!(counted <= limit, "admission {} at {} counts {} in its {} ms window, limit {}", i, at, counted, window, limit);
            }
        }
    }
}
