//! Reservations and exactness: whatever the interleaving of reservations,
//! plain admissions, keeps, refunds, repeated settles, lapses, sweeps,
//! restarts and time, the units that count (kept, pending, plain) never
//! exceed the limit in any window, a refund frees exactly its own units,
//! settling twice changes nothing, a refusal is `pending` (a short wait, no
//! strike) exactly when the units kept alone would have left room, and the
//! rows the ledger wrote always read back into the same state: a restart
//! forgets no reservation and no admission.

use crate::support::Rows;
use proptest::prelude::*;
use sluice::ledger::{Ask, Ledger, SlotReport, Write, PENDING_RETRY_MS};
use sluice::limit::{Policy, Retry, Spec};

const LIMIT: u64 = 4;
const WINDOW: u64 = 100;
const LAPSE: u64 = 50;

/// What a peek reports, in a fixed order.
fn state(ledger: &mut Ledger, now: u64) -> Vec<SlotReport> {
    let mut slots = ledger.peek(now).0;
    slots.sort_by(|a, b| a.policy.cmp(&b.policy));
    slots
}

#[derive(Debug, Clone)]
enum Step {
    Reserve { gap_ms: u64 },
    Admit { gap_ms: u64 },
    Settle { pick: usize, keep: bool },
    SettleAgain { pick: usize },
    Lapse,
    Sweep { gap_ms: u64 },
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..30).prop_map(|gap_ms| Step::Reserve { gap_ms }),
        2 => (0u64..30).prop_map(|gap_ms| Step::Admit { gap_ms }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, keep)| Step::Settle { pick, keep }),
        1 => any::<usize>().prop_map(|pick| Step::SettleAgain { pick }),
        1 => Just(Step::Lapse),
        1 => (0u64..120).prop_map(|gap_ms| Step::Sweep { gap_ms }),
        1 => Just(Step::Restart),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pending,
    Kept,
    Refunded,
}

/// Marks every pending unit whose lapse is due as kept, as the ledger
/// keeps it when it next lapses reservations.
fn lapse(units: &mut [(u64, Fate, Option<String>)], now: u64) {
    for unit in units
        .iter_mut()
        .filter(|u| u.1 == Fate::Pending && u.0 + LAPSE <= now)
    {
        unit.1 = Fate::Kept;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn counted_units_never_exceed_the_limit_and_survive_restarts(
        steps in prop::collection::vec(step(), 1..200),
        algorithm in prop::sample::select(vec!["log", "window"]),
    ) {
        let policy = Policy::new(LIMIT, WINDOW).unwrap();
        let spec = if algorithm == "log" { Spec::SlidingLog(policy) } else { Spec::FixedWindow(policy) };
        let specs = [("p".to_string(), spec)];
        let ask = Ask { specs: &specs, cost: 1, ban: None, lease: None };
        let mut ledger = Ledger::new();
        let mut rows = Rows::default();
        // Late enough that a sweep's cutoff (now - window) never saturates at 0.
        let mut now = 1_000u64;
        // (time, fate) of each admission; plain admissions are kept.
        let mut units: Vec<(u64, Fate, Option<String>)> = Vec::new();
        // Settles this instance of the object remembers.
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
                        ledger.reserve(&ask, &id, now + LAPSE, now)
                    } else {
                        ledger.check(&ask, now)
                    };
                    let row = writes.iter().any(|w| matches!(w, Write::Reservation(r) if r.id == id));
                    prop_assert_eq!(row, reserving && outcome.allowed, "a reservation writes its row");
                    rows.write(writes);
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
                    let lapsed = units[i].0 + LAPSE <= now;
                    let (answer, writes, expired) = ledger.settle(&id, keep, now);
                    rows.write(writes);
                    rows.delete(expired);
                    // A settle first keeps whatever lapsed.
                    lapse(&mut units, now);
                    if lapsed {
                        prop_assert_eq!(answer, None, "a lapsed reservation was kept");
                        continue;
                    }
                    let answer = answer.expect("a pending reservation is known");
                    prop_assert!(!answer.repeated);
                    units[i].1 = if keep { Fate::Kept } else { Fate::Refunded };
                    settled.push((id, keep));
                }
                Step::SettleAgain { pick } => {
                    if settled.is_empty() {
                        continue;
                    }
                    let (id, kept) = settled[pick % settled.len()].clone();
                    let before = ledger.peek(now);
                    let (answer, writes, expired) = ledger.settle(&id, !kept, now);
                    let answer = answer.expect("a settled reservation is remembered");
                    prop_assert!(answer.repeated && answer.kept == kept);
                    prop_assert!(writes.is_empty() && expired.is_empty());
                    prop_assert_eq!(ledger.peek(now), before, "a repeated settle changes nothing");
                }
                Step::Lapse => {
                    now += LAPSE + 10;
                    rows.delete(ledger.lapse(now));
                    lapse(&mut units, now);
                }
                Step::Sweep { gap_ms } => {
                    now += gap_ms;
                    rows.delete(ledger.sweep(now));
                    lapse(&mut units, now);
                }
                Step::Restart => {
                    ledger = rows.load();
                    settled.clear();
                }
            }
            prop_assert_eq!(state(&mut rows.load(), now), state(&mut ledger, now), "the rows read back as the state");
        }
    }
}

fn log(name: &str, limit: u64, window_ms: u64) -> (String, Spec) {
    (
        name.to_string(),
        Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
    )
}

fn fixed(name: &str, limit: u64, window_ms: u64) -> (String, Spec) {
    (
        name.to_string(),
        Spec::FixedWindow(Policy::new(limit, window_ms).unwrap()),
    )
}

/// Every place a reservation's units can be stored, each settled both ways
/// by an object restarted from the rows: the log's first run (the slot was
/// new) or a hit row beside a plain admission's run, and a fixed window's
/// state.
#[test]
fn a_restarted_object_refunds_or_keeps_a_reservation_exactly() {
    for (first, keep) in [(true, false), (false, false), (true, true), (false, true)] {
        let mut rows = Rows::default();
        let mut ledger = Ledger::new();
        let p = [log("login", 3, 900_000), fixed("day", 5, 86_400_000)];
        let ask = Ask {
            specs: &p,
            cost: 1,
            ban: None,
            lease: None,
        };
        if !first {
            rows.write(ledger.check(&ask, 10).1);
        }
        let (reserved, writes) = ledger.reserve(&ask, "r1", 60_000, 10);
        assert!(reserved.allowed);
        rows.write(writes);
        let mut restarted = rows.load();
        assert_eq!(
            state(&mut restarted, 20),
            state(&mut ledger, 20),
            "nothing is forgotten"
        );
        let (settled, writes, expired) = restarted.settle("r1", keep, 20);
        assert_eq!(settled.map(|s| s.kept), Some(keep));
        rows.write(writes);
        rows.delete(expired);
        assert!(rows.reservations.is_empty());
        let used = |ledger: &mut Ledger| -> Vec<u64> {
            state(ledger, 30).iter().map(|s| s.used).collect()
        };
        let plain = u64::from(!first);
        let expected = if keep || plain > 0 {
            vec![plain + u64::from(keep); 2]
        } else {
            vec![]
        };
        assert_eq!(
            used(&mut restarted),
            expected,
            "first: {first}, keep: {keep}"
        );
        assert_eq!(
            used(&mut rows.load()),
            expected,
            "the rows say the same, first: {first}, keep: {keep}"
        );
    }
}
