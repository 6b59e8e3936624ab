//! Live control of a global quota, as its parts hold it: whatever the
//! interleaving of decisions (a random part, then one other, as the gate
//! routes them), states written to the parts one at a time (as the admin
//! API writes them), overrides of the whole limit set and lifted, sweeps,
//! restarts (each part read back from its rows) and time:
//!
//! - a part admits nothing while it is paused or closed;
//! - nothing admitted is lost: each part holds exactly the admissions the
//!   model counts in its window, across changes of state and override and
//!   restarts, and a restart keeps each part's state and override;
//! - every admission respected its part's share of the limit in force;
//! - the whole quota never holds more, in any window, than the largest
//!   whole limit in force during that window: raising a limit admits up to
//!   the new one at once, and lowering it never lets the parts together
//!   hold more than the old one, and exactly the new one a window later.

use crate::support::Rows;
use proptest::prelude::*;
use sluice::control::{Control, RuleState};
use sluice::ledger::{Ask, Ledger, Override};
use sluice::limit::split::{route, share_spec};
use sluice::limit::{Policy, Spec};

const PARTS: u32 = 3;
const LIMIT: u64 = 6;
const WINDOW: u64 = 100;

/// Part `i`'s policies for a whole limit of `limit`.
fn share(limit: u64, i: u32) -> Vec<(String, Spec)> {
    let whole = Spec::SlidingLog(Policy::new(limit, WINDOW).unwrap());
    vec![("sale".to_string(), share_spec(&whole, PARTS, i).unwrap())]
}

#[derive(Debug, Clone)]
enum Step {
    Decide {
        gap_ms: u64,
        first: u32,
        second: u32,
    },
    /// A state written to the first `parts` parts (the rest keep theirs
    /// until the next write), as a write under way leaves them.
    State {
        state: u8,
        parts: u32,
    },
    Override {
        limit: u64,
    },
    Lift,
    Sweep {
        gap_ms: u64,
    },
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0u64..30, any::<u32>(), any::<u32>())
            .prop_map(|(gap_ms, first, second)| Step::Decide { gap_ms, first, second }),
        2 => (0u8..3, 1u32..=PARTS).prop_map(|(state, parts)| Step::State { state, parts }),
        2 => (u64::from(PARTS)..=12).prop_map(|limit| Step::Override { limit }),
        1 => Just(Step::Lift),
        1 => (0u64..150).prop_map(|gap_ms| Step::Sweep { gap_ms }),
        1 => Just(Step::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn parts_hold_their_state_and_never_admit_past_the_limit_in_force(
        steps in prop::collection::vec(step(), 1..250),
    ) {
        let rule: Vec<Vec<(String, Spec)>> = (0..PARTS).map(|i| share(LIMIT, i)).collect();
        let mut ledgers: Vec<Ledger> = (0..PARTS).map(|_| Ledger::new()).collect();
        let mut rows: Vec<Rows> = vec![Rows::default(); PARTS as usize];
        // The model: each part's state, and the whole limit in force with
        // when it was set; each admission's time, part, and its share then.
        let mut halted = [false; PARTS as usize];
        let mut whole = LIMIT;
        let mut limits: Vec<(u64, u64)> = vec![(0, LIMIT)];
        let mut admitted: Vec<(u64, u32, u64)> = Vec::new();
        let mut now = 1_000u64;
        for step in steps {
            match step {
                Step::Decide { gap_ms, first, second } => {
                    now += gap_ms;
                    let (a, b) = route(PARTS, first, second);
                    for part in [Some(a), b].into_iter().flatten() {
                        let i = part as usize;
                        let ask = Ask { specs: &rule[i], cost: 1, ban: None, lease: None };
                        let (outcome, writes) = ledgers[i].check(&ask, now);
                        rows[i].write(writes);
                        prop_assert_eq!(outcome.halt.is_some(), halted[i]);
                        if outcome.allowed {
                            prop_assert!(!halted[i], "part {} admitted while halted", i);
                            admitted.push((now, part, share(whole, part)[0].1.limit()));
                            break;
                        }
                        if outcome.halt.is_some() {
                            break;
                        }
                    }
                }
                Step::State { state, parts } => {
                    let state = [RuleState::Open, RuleState::Paused, RuleState::Closed][usize::from(state)];
                    for i in 0..parts as usize {
                        let control = Control { state, reason: "test".into(), set_ms: now };
                        let (_, writes, expired) = ledgers[i].set_control(control);
                        rows[i].write(writes);
                        rows[i].delete(expired);
                        halted[i] = state != RuleState::Open;
                    }
                }
                Step::Override { limit } => {
                    for i in 0..PARTS {
                        let o = Override { policies: share(limit, i), until_ms: None, reason: String::new(), set_ms: now, whole: None };
                        let (_, writes, expired) = ledgers[i as usize].set_override(Some(o));
                        rows[i as usize].write(writes);
                        rows[i as usize].delete(expired);
                    }
                    whole = limit;
                    limits.push((now, limit));
                }
                Step::Lift => {
                    for i in 0..PARTS as usize {
                        let (_, writes, expired) = ledgers[i].set_override(None);
                        rows[i].write(writes);
                        rows[i].delete(expired);
                    }
                    whole = LIMIT;
                    limits.push((now, LIMIT));
                }
                Step::Sweep { gap_ms } => {
                    now += gap_ms;
                    for i in 0..PARTS as usize {
                        let expired = ledgers[i].sweep(now);
                        rows[i].delete(expired);
                    }
                }
                Step::Restart => {
                    for i in 0..PARTS as usize {
                        ledgers[i] = rows[i].load();
                    }
                }
            }
            // Nothing admitted is lost, and the state is what was set.
            for i in 0..PARTS {
                let held = admitted.iter().filter(|(t, p, _)| *p == i && t + WINDOW > now).count() as u64;
                let ledger = &mut ledgers[i as usize];
                let used = ledger.peek(now).0.iter().map(|s| s.used).sum::<u64>();
                prop_assert_eq!(used, held, "part {} at {}", i, now);
                prop_assert_eq!(ledger.control().is_some(), halted[i as usize]);
            }
        }
        for (n, &(at, part, share)) in admitted.iter().enumerate() {
            let window = admitted[..=n].iter().filter(|(t, _, _)| t + WINDOW > at);
            let in_part = window.clone().filter(|(_, p, _)| *p == part).count() as u64;
            prop_assert!(in_part <= share, "admission {} in part {} holds {} of its share {}", n, part, in_part, share);
            // The largest whole limit in force at any time in the window.
            let largest = limits
                .iter()
                .enumerate()
                .filter(|(k, (set, _))| *set <= at && limits.get(k + 1).is_none_or(|(next, _)| next + WINDOW > at))
                .map(|(_, (_, limit))| *limit)
                .max()
                .unwrap_or(LIMIT);
            prop_assert!(window.count() as u64 <= largest, "admission {} at {}: more than {}", n, at, largest);
        }
    }
}
