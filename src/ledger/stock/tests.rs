use super::*;
use crate::ledger::Override;
use crate::limit::split::share_spec;
use crate::limit::Policy;

const T0: u64 = 1_700_000_000_000;
const WINDOW: u64 = 60_000;

/// Part `part` of a quota of `whole` in `parts`, as the gate asks it.
struct Part {
    ledger: Ledger,
    part: u32,
    parts: u32,
    whole: u64,
    specs: Vec<(String, Spec)>,
}

impl Part {
    fn new(part: u32, parts: u32, whole: u64) -> Part {
        let spec = Spec::SlidingLog(Policy::new(whole, WINDOW).unwrap());
        let share = if parts == 1 {
            spec
        } else {
            share_spec(&spec, parts, part).unwrap()
        };
        Part {
            ledger: Ledger::new(),
            part,
            parts,
            whole,
            specs: vec![("sale".to_string(), share)],
        }
    }

    fn ask(&self) -> StockAsk {
        StockAsk {
            part: self.part,
            parts: self.parts,
            whole: self.whole,
        }
    }

    /// A call, then the stock judged as the object judges it.
    fn call<T>(&mut self, now: u64, f: impl FnOnce(&mut Ledger) -> T) -> T {
        let before = self.ledger.stock().cloned();
        let answer = f(&mut self.ledger);
        self.ledger.judge_stock(before.as_ref(), now);
        answer
    }

    fn buy(&mut self, now: u64) -> Outcome {
        let (ask, specs) = (self.ask(), self.specs.clone());
        self.call(now, |ledger| {
            ledger.ask_stock("rule:sale:*#0", ask, &specs[0]);
            let question = Ask {
                specs: &specs,
                cost: 1,
                ban: None,
                lease: None,
            };
            ledger.check(&question, now).0
        })
    }

    /// What it owes, taken as delivered.
    fn words(&mut self, now: u64) -> Vec<(u32, Told)> {
        let Some((to, told, _)) = self.ledger.stock().and_then(Stock::owed) else {
            return Vec::new();
        };
        let to = to.to_vec();
        for &part in &to {
            self.ledger.told(Some(part), told, now);
        }
        to.into_iter().map(|part| (part, told)).collect()
    }

    fn hear(&mut self, from: u32, told: Told, now: u64) {
        let ask = self.ask();
        self.call(now, |ledger| ledger.take_told("x", ask, from, told));
    }

    fn closed(&self) -> bool {
        self.ledger
            .control()
            .is_some_and(|c| c.state == RuleState::Closed && c.reason == SOLD_OUT)
    }
}

/// Every word owed, delivered, until none is.
fn gossip(parts: &mut [Part], now: u64) {
    loop {
        let mut said = Vec::new();
        for (from, part) in parts.iter_mut().enumerate() {
            said.extend(
                part.words(now)
                    .into_iter()
                    .map(|(to, told)| (from, to, told)),
            );
        }
        if said.is_empty() {
            return;
        }
        for (from, to, told) in said {
            parts[to as usize].hear(from as u32, told, now);
        }
    }
}

#[test]
fn one_part_closes_once_its_stock_is_used_and_an_override_that_adds_stock_opens_it() {
    let mut part = Part::new(0, 1, 3);
    for i in 0..3 {
        assert!(part.buy(T0 + i).allowed);
    }
    assert!(part.closed(), "sold out, with no sibling to hear from");
    let closed = part.buy(T0 + 10);
    assert_eq!(closed.halt.as_ref().unwrap().reason, SOLD_OUT);
    assert_eq!(closed.retry, Retry::Never);
    // An operator adds 2: open again, 2 more sold, closed again.
    part.call(T0 + 20, |ledger| {
        ledger.set_override(Some(Override {
            policies: vec![(
                "sale".into(),
                Spec::SlidingLog(Policy::new(5, WINDOW).unwrap()),
            )],
            until_ms: None,
            reason: "more stock".into(),
            set_ms: T0 + 20,
            whole: Some(("sale".into(), 5)),
        }))
    });
    assert!(!part.closed());
    assert!(part.buy(T0 + 21).allowed);
    assert!(!part.closed());
    assert!(part.buy(T0 + 22).allowed);
    assert!(part.closed());
}

#[test]
fn parts_close_only_once_every_share_is_used() {
    let mut parts: Vec<Part> = (0..3).map(|i| Part::new(i, 3, 6)).collect();
    for _ in 0..2 {
        assert!(parts[0].buy(T0).allowed);
        assert!(parts[1].buy(T0).allowed);
    }
    gossip(&mut parts, T0);
    assert!(parts.iter().all(|p| !p.closed()), "part 2 still has its 2");
    let refused = parts[0].buy(T0 + 1);
    assert!(!refused.allowed, "a used part refuses");
    assert_eq!(
        refused.earliest(),
        Retry::After(USED_HOLD_MS),
        "and is asked again within a second"
    );
    assert!(parts[2].buy(T0 + 2).allowed);
    assert!(!parts[2].closed());
    assert!(parts[2].buy(T0 + 3).allowed);
    assert!(
        parts[2].closed(),
        "the last to sell out knows the others did"
    );
    assert!(
        !parts[0].closed() && !parts[1].closed(),
        "until they hear it"
    );
    gossip(&mut parts, T0 + 4);
    assert!(parts.iter().all(Part::closed));
}

#[test]
fn a_word_overtaken_by_a_later_one_or_judged_under_another_limit_never_counts() {
    let mut parts: Vec<Part> = (0..2).map(|i| Part::new(i, 2, 2)).collect();
    assert!(parts[0].buy(T0).allowed);
    let used = parts[0].words(T0);
    // Part 0 is reset by an operator: no longer used, and says so.
    parts[0].call(T0 + 1, |ledger| ledger.reset(T0 + 1));
    let unused = parts[0].words(T0 + 1);
    assert!(!unused[0].1.used && unused[0].1.seq > used[0].1.seq);
    // Part 1 hears the later word first, then the earlier one.
    parts[1].hear(0, unused[0].1, T0 + 2);
    parts[1].hear(0, used[0].1, T0 + 2);
    assert!(parts[1].buy(T0 + 3).allowed);
    assert!(!parts[1].closed(), "part 0's share is not used");
    // A word judged under another limit (an override part 1 has not got).
    let other = Told {
        seq: 99,
        whole: 4,
        since: T0,
        used: true,
    };
    parts[1].hear(0, other, T0 + 4);
    assert!(!parts[1].closed());
}

#[test]
fn a_reservation_counts_as_used_only_once_kept() {
    let mut part = Part::new(0, 1, 1);
    let specs = part.specs.clone();
    let ask = part.ask();
    let reserved = part.call(T0, |ledger| {
        ledger.ask_stock("x", ask, &specs[0]);
        let question = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        ledger.reserve(&question, "r1", T0 + 60_000, T0).0
    });
    assert!(reserved.allowed);
    assert!(!part.closed(), "a refund may give it back");
    part.call(T0 + 1, |ledger| ledger.settle("r1", false, T0 + 1));
    assert!(!part.closed(), "refunded");
    assert!(part.buy(T0 + 2).allowed, "the refunded unit sells");
    assert!(part.closed());
}

#[test]
fn stock_sold_is_sold_even_as_it_leaves_the_window() {
    let mut parts: Vec<Part> = (0..2).map(|i| Part::new(i, 2, 2)).collect();
    assert!(parts[0].buy(T0).allowed);
    gossip(&mut parts, T0);
    let later = T0 + WINDOW + 1;
    let refused = parts[0].buy(later);
    assert!(
        !refused.allowed && refused.halt.is_none(),
        "used, not closed"
    );
    assert_eq!(refused.policies[0].decision.remaining, 0);
    assert!(parts[1].buy(later).allowed);
    assert!(parts[1].closed());
}

#[test]
fn an_operators_state_stands() {
    let mut part = Part::new(0, 1, 1);
    part.call(T0, |ledger| {
        ledger.set_control(Control {
            state: RuleState::Paused,
            reason: "count".into(),
            set_ms: T0,
        })
    });
    part.call(T0 + 1, |ledger| {
        ledger.set_control(Control {
            state: RuleState::Open,
            reason: String::new(),
            set_ms: T0 + 1,
        })
    });
    assert!(part.buy(T0 + 2).allowed);
    assert!(part.closed());
    // Opened by the operator: it stays open (and sold: 429 as ever).
    part.call(T0 + 3, |ledger| {
        ledger.set_control(Control {
            state: RuleState::Open,
            reason: String::new(),
            set_ms: T0 + 3,
        })
    });
    let refused = part.buy(T0 + 4);
    assert!(!refused.allowed && refused.halt.is_none());
    assert!(!part.closed());
}

#[test]
fn the_row_reads_back() {
    let mut parts: Vec<Part> = (0..2).map(|i| Part::new(i, 2, 2)).collect();
    assert!(parts[0].buy(T0).allowed);
    gossip(&mut parts, T0);
    assert!(parts[1].buy(T0).allowed);
    let stock = parts[0].ledger.stock().unwrap().clone();
    let row = crate::json::to_string(&stock);
    assert_eq!(Stock::decode(&row), Some(stock));
    assert!(Stock::decode("{}").is_none());
}

#[test]
fn a_row_keeps_its_bytes() {
    let row = r#"{"name":"rule:sale:*#0","ask":{"part":0,"parts":2,"whole":4},"share":["sale",[0,2,60000,0]],"mine":{"seq":2,"whole":4,"since":0,"used":true},"peers":[null,{"seq":1,"whole":4,"since":0,"used":false}],"all":false,"closed_ms":null,"owed":[1],"due_ms":5}"#;
    let stock = Stock::decode(row).unwrap();
    assert_eq!(crate::json::to_string(&stock), row);
}
