//! Reservations and exactness: whatever the interleaving of reservations,
//! plain admissions, keeps, refunds, repeated settles, lapses and time,
//! the units that count (kept, pending, plain) never exceed the limit in
//! any window, a refund frees exactly its own units, settling twice
//! changes nothing, and a refusal is `pending` (a short wait, no strike)
//! exactly when the units kept alone would have left room.

use proptest::prelude::*;
use sluice::ledger::{Ask, Ledger, PENDING_RETRY_MS};
use sluice::limit::{Policy, Retry, Spec};

const LIMIT: u64 = 4;
const WINDOW: u64 = 100;

#[derive(Debug, Clone)]
enum Step {
    Reserve { gap_ms: u64 },
    Admit { gap_ms: u64 },
    Settle { pick: usize, keep: bool },
    SettleAgain { pick: usize },
    Lapse,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..30).prop_map(|gap_ms| Step::Reserve { gap_ms }),
        2 => (0u64..30).prop_map(|gap_ms| Step::Admit { gap_ms }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, keep)| Step::Settle { pick, keep }),
        1 => any::<usize>().prop_map(|pick| Step::SettleAgain { pick }),
        1 => Just(Step::Lapse),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pending,
    Kept,
    Refunded,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn counted_units_never_exceed_the_limit(
        steps in prop::collection::vec(step(), 1..200),
        algorithm in prop::sample::select(vec!["log", "window"]),
    ) {
        let policy = Policy::new(LIMIT, WINDOW).unwrap();
        let spec = if algorithm == "log" { Spec::SlidingLog(policy) } else { Spec::FixedWindow(policy) };
        let specs = [("p".to_string(), spec)];
        let ask = Ask { specs: &specs, cost: 1, ban: None, lease: None };
        let mut ledger = Ledger::new();
        let mut now = 0u64;
        // (time, fate) of each admission; plain admissions are kept.
        let mut units: Vec<(u64, Fate, Option<String>)> = Vec::new();
        let mut settled: Vec<(String, bool)> = Vec::new();
        let mut next = 0;
        for step in steps {
            match step {
                Step::Reserve { gap_ms } | Step::Admit { gap_ms } => {
                    now += gap_ms;
                    let reserving = matches!(step, Step::Reserve { .. });
                    let id = format!("r{next}");
                    next += 1;
                    let (outcome, writes) = if reserving {
                        ledger.reserve(&ask, &id, now + 50, now)
                    } else {
                        ledger.check(&ask, now)
                    };
                    if reserving {
                        prop_assert!(writes.is_empty(), "a reservation writes nothing");
                    }
                    if outcome.allowed {
                        units.push((now, if reserving { Fate::Pending } else { Fate::Kept }, reserving.then_some(id)));
                        if algorithm == "log" {
                            let counted = units.iter().filter(|(t, f, _)| *f != Fate::Refunded && t + WINDOW > now).count() as u64;
                            prop_assert!(counted <= LIMIT, "{} units count at {}", counted, now);
                        }
                    } else if algorithm == "log" {
                        // A refusal is pending exactly when the units kept
                        // alone leave room, and then it asks for a short wait.
                        let kept = units.iter().filter(|(t, f, _)| *f == Fate::Kept && t + WINDOW > now).count() as u64;
                        prop_assert_eq!(outcome.pending, kept < LIMIT, "at {}", now);
                        if outcome.pending {
                            prop_assert!(outcome.retry <= Retry::After(PENDING_RETRY_MS));
                        }
                    }
                }
                Step::Settle { pick, keep } => {
                    let pending: Vec<usize> = (0..units.len()).filter(|&i| units[i].1 == Fate::Pending).collect();
                    if pending.is_empty() {
                        continue;
                    }
                    let i = pending[pick % pending.len()];
                    let id = units[i].2.clone().unwrap();
                    let (answer, writes) = ledger.settle(&id, keep, now);
                    let answer = answer.expect("a pending reservation is known");
                    prop_assert!(!answer.repeated);
                    if !keep {
                        prop_assert!(writes.is_empty(), "a refund writes nothing");
                    }
                    units[i].1 = if keep { Fate::Kept } else { Fate::Refunded };
                    settled.push((id, keep));
                }
                Step::SettleAgain { pick } => {
                    if settled.is_empty() {
                        continue;
                    }
                    let (id, kept) = settled[pick % settled.len()].clone();
                    let before = ledger.peek(now);
                    let (answer, writes) = ledger.settle(&id, !kept, now);
                    let answer = answer.expect("a settled reservation is remembered");
                    prop_assert!(answer.repeated && answer.kept == kept);
                    prop_assert!(writes.is_empty());
                    prop_assert_eq!(ledger.peek(now), before, "a repeated settle changes nothing");
                }
                Step::Lapse => {
                    now += 60;
                    ledger.lapse(now);
                    for unit in units.iter_mut().filter(|u| u.1 == Fate::Pending && u.0 + 50 <= now) {
                        unit.1 = Fate::Kept;
                    }
                }
            }
        }
    }
}
