//! `sold_out = "close"`: a split quota's parts judge their stock and tell
//! each other, whatever the interleaving of sales (kept at once, or as
//! reservations kept, refunded or lapsed later), words sent, lost, sent
//! again, duplicated and delivered in any order, overrides of the whole
//! limit (and their lifts) reaching the parts one at a time, restarts
//! (each part read back from its rows), sweeps and time:
//!
//! - a part closes only when every part's share of the same limit has
//!   been used (kept admissions filling it, nothing pending), as a model
//!   counting the sales says;
//! - a used share admits nothing more under that limit, even once its
//!   sales leave the window;
//! - no part ever holds more than its share in a window;
//! - once every part's share is used and every word is delivered, every
//!   part holds the close.

use std::collections::HashSet;

use crate::support::Rows;
use proptest::prelude::*;
use sluice::control::RuleState;
use sluice::ledger::stock::SOLD_OUT;
use sluice::ledger::{Ask, Ledger, Override, StockAsk, Told};
use sluice::limit::split::share_spec;
use sluice::limit::{Policy, Spec};

const WINDOW: u64 = 200;

#[derive(Debug, Clone)]
enum Step {
    Buy {
        part: u32,
        reserve: bool,
        gap: u64,
    },
    Settle {
        pick: usize,
        keep: bool,
    },
    /// The part's alarm: what it owes goes out.
    Say {
        part: u32,
    },
    /// A call of its alarm failed: all told again later.
    Fail {
        part: u32,
    },
    Deliver {
        pick: usize,
        copy: bool,
    },
    Override {
        limit: u64,
    },
    Lift,
    /// The latest override (or lift) reaches a part.
    Reach {
        part: u32,
    },
    Sweep {
        part: u32,
        gap: u64,
    },
    Restart {
        part: u32,
    },
}

fn step(parts: u32) -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0..parts, any::<bool>(), 0u64..40)
            .prop_map(|(part, reserve, gap)| Step::Buy { part, reserve, gap }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(pick, keep)| Step::Settle { pick, keep }),
        4 => (0..parts).prop_map(|part| Step::Say { part }),
        1 => (0..parts).prop_map(|part| Step::Fail { part }),
        6 => (any::<usize>(), any::<bool>()).prop_map(|(pick, copy)| Step::Deliver { pick, copy }),
        1 => (3u64..10).prop_map(|limit| Step::Override { limit }),
        1 => Just(Step::Lift),
        2 => (0..parts).prop_map(|part| Step::Reach { part }),
        2 => (0..parts, 0u64..150).prop_map(|(part, gap)| Step::Sweep { part, gap }),
        1 => (0..parts).prop_map(|part| Step::Restart { part }),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Sale {
    Kept,
    Pending { id: String, lapses_ms: u64 },
    Refunded,
}

struct Model {
    parts: u32,
    whole: u64,
    now: u64,
    ledgers: Vec<Ledger>,
    rows: Vec<Rows>,
    /// The latest override an operator set (`None`: lifted), and what
    /// reached each part: `(whole, since)`.
    latest: Option<(u64, u64)>,
    reached: Vec<Option<(u64, u64)>>,
    sales: Vec<(u32, u64, Sale)>,
    /// `(part, whole, since)` under which the model saw a share used, and
    /// those of them that still hold: a part's change of limit (an
    /// override reaching it, or its lift) starts its stock afresh.
    used: HashSet<(u32, u64, u64)>,
    used_now: HashSet<(u32, u64, u64)>,
    network: Vec<(u32, u32, Told)>,
    ids: u64,
}

impl Model {
    fn new(parts: u32, whole: u64) -> Model {
        Model {
            parts,
            whole,
            now: 1_000,
            ledgers: (0..parts).map(|_| Ledger::new()).collect(),
            rows: vec![Rows::default(); parts as usize],
            latest: None,
            reached: vec![None; parts as usize],
            sales: Vec::new(),
            used: HashSet::new(),
            used_now: HashSet::new(),
            network: Vec::new(),
            ids: 0,
        }
    }

    fn share(&self, whole: u64, part: u32) -> Vec<(String, Spec)> {
        let spec = Spec::SlidingLog(Policy::new(whole, WINDOW).unwrap());
        let share = if self.parts == 1 {
            spec
        } else {
            share_spec(&spec, self.parts, part).unwrap()
        };
        vec![("sale".to_string(), share)]
    }

    /// The limit part `part` holds: `(whole, since)`.
    fn limit(&self, part: u32) -> (u64, u64) {
        self.reached[part as usize].unwrap_or((self.whole, 0))
    }

    fn name(part: u32) -> String {
        format!("rule:sale:*#{part}")
    }

    /// A call to part `part`, then its stock judged and its rows written,
    /// as the object does.
    fn call<T>(
        &mut self,
        part: u32,
        f: impl FnOnce(
            &mut Ledger,
            u64,
        ) -> (T, Vec<sluice::ledger::Write>, Vec<sluice::ledger::Expired>),
    ) -> T {
        let i = part as usize;
        let before = self.ledgers[i].stock().cloned();
        let (answer, writes, expired) = f(&mut self.ledgers[i], self.now);
        self.rows[i].write(writes);
        self.rows[i].delete(expired);
        let (writes, expired) = self.ledgers[i].judge_stock(before.as_ref(), self.now);
        self.rows[i].write(writes);
        self.rows[i].delete(expired);
        answer
    }

    fn kept_in_window(&self, part: u32) -> u64 {
        let now = self.now;
        self.sales
            .iter()
            .filter(|(p, t, sale)| *p == part && *sale == Sale::Kept && t + WINDOW > now)
            .count() as u64
    }

    /// Reservations of part `part` pending, those whose units are still
    /// in the window only when `in_window`.
    fn pending(&self, part: u32, in_window: bool) -> u64 {
        let now = self.now;
        let pending = |s: &&(u32, u64, Sale)| {
            s.0 == part && matches!(s.2, Sale::Pending { .. }) && (!in_window || s.1 + WINDOW > now)
        };
        self.sales.iter().filter(pending).count() as u64
    }

    fn share_limit(&self, part: u32) -> u64 {
        self.share(self.limit(part).0, part)[0].1.limit()
    }

    /// Records the shares used now.
    fn observe(&mut self) {
        for part in 0..self.parts {
            if self.pending(part, false) == 0 && self.kept_in_window(part) >= self.share_limit(part)
            {
                let (whole, since) = self.limit(part);
                self.used.insert((part, whole, since));
                self.used_now.insert((part, whole, since));
            }
        }
    }

    fn closed(&self, part: u32) -> bool {
        self.ledgers[part as usize]
            .control()
            .is_some_and(|c| c.state == RuleState::Closed && c.reason == SOLD_OUT)
    }

    fn buy(&mut self, part: u32, reserve: bool) -> bool {
        let specs = self.share(self.whole, part);
        let ask = StockAsk {
            part,
            parts: self.parts,
            whole: self.whole,
        };
        self.ids += 1;
        let id = format!("r{}", self.ids);
        let lapses_ms = self.now + 300;
        let reserved = reserve.then(|| id.clone());
        let allowed = self.call(part, |ledger, now| {
            ledger.ask_stock(&Model::name(part), ask, &specs[0]);
            let question = Ask {
                specs: &specs,
                cost: 1,
                ban: None,
                lease: None,
            };
            let (outcome, writes) = match &reserved {
                Some(id) => ledger.reserve(&question, id, lapses_ms, now),
                None => ledger.check(&question, now),
            };
            (outcome.allowed, writes, Vec::new())
        });
        if allowed {
            let sale = match reserved {
                Some(id) => Sale::Pending { id, lapses_ms },
                None => Sale::Kept,
            };
            self.sales.push((part, self.now, sale));
        }
        allowed
    }

    /// Part `part`'s alarm: its owed words go out, all told.
    fn say(&mut self, part: u32) {
        let i = part as usize;
        let Some((to, told, _)) = self.ledgers[i].stock().and_then(|s| s.owed()) else {
            return;
        };
        let to = to.to_vec();
        for &sibling in &to {
            self.network.push((part, sibling, told));
        }
        self.call(part, |ledger, now| {
            for &sibling in &to {
                ledger.told(Some(sibling), told, now);
            }
            ((), Vec::new(), Vec::new())
        });
    }

    fn deliver(&mut self, at: usize, copy: bool) {
        let (from, to, told) = if copy {
            self.network[at]
        } else {
            self.network.swap_remove(at)
        };
        let ask = StockAsk {
            part: to,
            parts: self.parts,
            whole: told.whole,
        };
        self.call(to, |ledger, _| {
            ledger.take_told(&Model::name(to), ask, from, told);
            ((), Vec::new(), Vec::new())
        });
    }

    fn reach(&mut self, part: u32) {
        let i = part as usize;
        if self.reached[i] == self.latest {
            return;
        }
        self.reached[i] = self.latest;
        self.used_now.retain(|u| u.0 != part);
        let next = self.latest.map(|(whole, since)| Override {
            policies: self.share(whole, part),
            until_ms: None,
            reason: String::new(),
            set_ms: since,
            whole: Some(("sale".to_string(), whole)),
        });
        self.call(part, |ledger, _| {
            let (_, writes, expired) = ledger.set_override(next);
            ((), writes, expired)
        });
    }

    /// Part `part`'s reservations past their lapse are kept, as its
    /// sweep and its settles keep them.
    fn lapse(&mut self, part: u32) {
        let now = self.now;
        for sale in self.sales.iter_mut().filter(|s| s.0 == part) {
            if matches!(sale.2, Sale::Pending { lapses_ms, .. } if lapses_ms <= now) {
                sale.2 = Sale::Kept;
            }
        }
    }

    fn sweep(&mut self, part: u32) {
        self.lapse(part);
        self.call(part, |ledger, now| ((), Vec::new(), ledger.sweep(now)));
    }

    fn settle(&mut self, pick: usize, keep: bool) {
        let pending: Vec<usize> = (0..self.sales.len())
            .filter(|&i| matches!(self.sales[i].2, Sale::Pending { .. }))
            .collect();
        let Some(&at) = pending.get(pick % pending.len().max(1)) else {
            return;
        };
        let (part, _, Sale::Pending { id, lapses_ms }) = self.sales[at].clone() else {
            return;
        };
        let settled = self.call(part, |ledger, now| {
            let (settled, writes, expired) = ledger.settle(&id, keep, now);
            (settled.is_some(), writes, expired)
        });
        // A reservation past its lapse is kept, whatever comes after.
        let lapsed = lapses_ms <= self.now;
        assert_eq!(settled, !lapsed, "a pending reservation is settled");
        self.lapse(part);
        if !lapsed {
            self.sales[at].2 = if keep { Sale::Kept } else { Sale::Refunded };
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn parts_close_only_once_every_share_of_one_limit_is_used(
        parts in 1u32..4,
        extra in 0u64..4,
        steps in prop::collection::vec(step(3), 1..200),
    ) {
        let mut model = Model::new(parts, u64::from(parts) + extra);
        for step in steps {
            let closed: Vec<bool> = (0..parts).map(|p| model.closed(p)).collect();
            match step {
                Step::Buy { part, reserve, gap } => {
                    let part = part % parts;
                    model.now += gap;
                    let limit = model.limit(part);
                    let used = model.used_now.contains(&(part, limit.0, limit.1));
                    let allowed = model.buy(part, reserve);
                    prop_assert!(!(allowed && used), "part {} sold again under a used limit", part);
                    if allowed {
                        let held = model.kept_in_window(part) + model.pending(part, true);
                        prop_assert!(held <= model.share_limit(part), "part {} holds {} of its share", part, held);
                    }
                }
                Step::Settle { pick, keep } => model.settle(pick, keep),
                Step::Say { part } => model.say(part % parts),
                Step::Fail { part } => {
                    let part = part % parts;
                    if let Some((_, told, _)) = model.ledgers[part as usize].stock().and_then(|s| s.owed()) {
                        model.call(part, |ledger, now| { ledger.told(None, told, now); ((), Vec::new(), Vec::new()) });
                    }
                }
                Step::Deliver { pick, copy } => {
                    if !model.network.is_empty() {
                        let at = pick % model.network.len();
                        model.deliver(at, copy);
                    }
                }
                Step::Override { limit } => {
                    let limit = limit.max(u64::from(parts));
                    model.now += 1;
                    model.latest = Some((limit, model.now));
                }
                Step::Lift => model.latest = None,
                Step::Reach { part } => model.reach(part % parts),
                Step::Sweep { part, gap } => {
                    model.now += gap;
                    model.sweep(part % parts);
                }
                Step::Restart { part } => {
                    let i = (part % parts) as usize;
                    model.ledgers[i] = model.rows[i].load();
                }
            }
            model.observe();
            for part in 0..parts {
                let i = part as usize;
                if model.closed(part) && !closed[i] {
                    let limit = model.limit(part);
                    for other in 0..parts {
                        prop_assert!(
                            model.used.contains(&(other, limit.0, limit.1)),
                            "part {} closed under {:?} while part {}'s share of it was never used",
                            part, limit, other
                        );
                    }
                }
            }
        }
        // Every override reaches every part, every sale settles, every
        // share sells out, every word is delivered: all closed.
        for part in 0..parts {
            model.reach(part);
        }
        while !model.network.is_empty() {
            model.deliver(0, false);
        }
        for pick in 0..model.sales.len() {
            model.settle(pick, true);
        }
        for part in 0..parts {
            model.sweep(part);
            for _ in 0..32 {
                if !model.buy(part, false) {
                    break;
                }
            }
        }
        model.observe();
        for _ in 0..4 {
            for part in 0..parts {
                model.say(part);
            }
            while !model.network.is_empty() {
                model.deliver(0, false);
            }
        }
        for part in 0..parts {
            let limit = model.limit(part);
            prop_assert!(model.used.contains(&(part, limit.0, limit.1)), "part {} sold out", part);
            prop_assert!(model.closed(part), "part {} holds the close", part);
        }
    }
}
