//! `sold_out = "close"`: a global quota whose stock, once used, closes its
//! rule. The whole quota is used only when every part's share is, and no
//! part knows the others', so each part tells its siblings when its own
//! share is used (or no longer is), in the background (`edge::limiter`
//! sends what [`Stock::owed`] says from the part's alarm; no request waits
//! on it), and a part closes itself ("sold out") once it knows every
//! share is used: the last part to sell out closes at once, the others as
//! its word reaches them.
//!
//! Exact by construction:
//! - a share is **used** when its one policy has nothing left in force and
//!   nothing of it is pending (a reservation, an isolate's admission
//!   block): kept admissions only, which nothing gives back;
//! - used is **for good**: a used share admits nothing more, even as its
//!   admissions leave the window (stock sold is sold), until the limit in
//!   force changes (an operator's override of the whole quota, a
//!   redeploy) or an operator resets the part;
//! - what a part says carries the whole limit it judged its share under
//!   and a number that grows with each thing it says, so a word overtaken
//!   by a later one, or judged under another limit, never counts.
//!
//! So a part closes only while every part's share of the same limit is
//! used; an override that adds stock (another whole limit) opens what its
//! parts closed, and they close again only once that stock is used too.
//! An operator's own state is left alone: a part closes only when it
//! holds none, and an operator who opens a sold-out rule keeps it open.

use super::{Ask, Expired, Ledger, Outcome, Write};
use crate::control::{Control, RuleState};
use crate::input::scan::FromScan;
use crate::limit::{Retry, Spec};

/// The reason a part closes with.
pub const SOLD_OUT: &str = "sold out";

/// How long a part waits before it tells a sibling again after a call
/// that failed.
pub const RETELL_MS: u64 = 1_000;

/// How long an isolate may answer for a used part's refusal from its
/// cache: the rule may close any moment, and the isolate should then say
/// so (`crate::isolate::refusals`).
pub const USED_HOLD_MS: u64 = 1_000;

crate::wire! {
    /// What a check says of the quota its part belongs to: this part, how
    /// many there are, and the whole limit the config sets.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct StockAsk {
        pub part: u32,
        pub parts: u32,
        pub whole: u64,
    }
}

crate::wire! {
    /// What a part says of its share: the number of what it says (each
    /// later than the last), the limit it judged the share under (the whole
    /// quota's, and since when an operator's override of it holds, 0 for
    /// none: every part holds the same), and whether the share is used.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Told {
        pub seq: u64 => 0,
        pub whole: u64 => 0,
        pub since: u64 => 0,
        pub used: bool => false,
    }
}

impl Told {
    /// Whether both were judged under the same limit.
    fn same_limit(&self, other: &Told) -> bool {
        (self.whole, self.since) == (other.whole, other.since)
    }
}

/// A part's stock: what it is, what it last said, what each sibling last
/// said, and whether the close in force is its own. Stored as one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    /// This part's object, whose name names its siblings'.
    pub name: String,
    pub ask: StockAsk,
    /// The policy and the share of it the config gives this part, from
    /// the last check; `None` before one.
    share: Option<(String, Spec)>,
    mine: Told,
    /// Each part's last word, by part (this part's own unused).
    peers: Vec<Option<Told>>,
    /// Whether every part's share was used at the last judgement.
    all: bool,
    /// The close this part set (its `set_ms`), while it is in force.
    closed_ms: Option<u64>,
    /// The parts not told `mine` yet, and when to tell them.
    owed: Vec<u32>,
    due_ms: u64,
}

crate::wire! {
    /// A [`Stock`] as its row holds it: the share's spec in storage
    /// encoding ([`Spec::encode`]), four numbers.
    struct Row {
        name: String,
        ask: StockAsk,
        share: Option<(String, Vec<u64>)>,
        mine: Told => Told::default(),
        peers: Vec<Option<Told>> => Vec::new(),
        all: bool => false,
        closed_ms: Option<u64>,
        owed: Vec<u32> => Vec::new(),
        due_ms: u64 => 0,
    }
}

impl crate::json::Write for Stock {
    fn write(&self, out: &mut crate::json::Text) {
        let share = self.share.as_ref().map(|(name, spec)| {
            let (kind, a, b, c) = spec.encode();
            (name.clone(), vec![kind, a, b, c])
        });
        Row {
            name: self.name.clone(),
            ask: self.ask,
            share,
            mine: self.mine,
            peers: self.peers.clone(),
            all: self.all,
            closed_ms: self.closed_ms,
            owed: self.owed.clone(),
            due_ms: self.due_ms,
        }
        .write(out);
    }
}

impl Stock {
    fn new(name: &str, ask: StockAsk) -> Stock {
        Stock {
            name: name.to_string(),
            ask,
            share: None,
            mine: Told::default(),
            peers: vec![None; ask.parts as usize],
            all: false,
            closed_ms: None,
            owed: Vec::new(),
            due_ms: 0,
        }
    }

    /// A stored row, `None` if it no longer reads back or its share's
    /// spec no longer validates (the part then judges its stock afresh
    /// from its next check).
    pub fn decode(body: &str) -> Option<Stock> {
        let row = Row::from_json(body).ok()?;
        let share = match row.share {
            Some((name, spec)) => match spec[..] {
                [kind, a, b, c] => Some((name, Spec::decode(kind, a, b, c)?)),
                _ => return None,
            },
            None => None,
        };
        let mut peers = row.peers;
        peers.resize(row.ask.parts as usize, None);
        Some(Stock {
            name: row.name,
            ask: row.ask,
            share,
            mine: row.mine,
            peers,
            all: row.all,
            closed_ms: row.closed_ms,
            owed: row.owed,
            due_ms: row.due_ms,
        })
    }

    /// Says its share is `used` (or not) under `limit`'s, from now on:
    /// owed to every other part.
    fn say(&mut self, limit: Told, used: bool, now_ms: u64) {
        self.mine = Told {
            seq: self.mine.seq + 1,
            used,
            ..limit
        };
        self.owed = (0..self.ask.parts)
            .filter(|&p| p != self.ask.part)
            .collect();
        self.due_ms = now_ms;
    }

    /// What this part says of its share now.
    pub fn said(&self) -> Told {
        self.mine
    }

    /// Whether the close in force is this part's own (sold out).
    pub fn closed(&self) -> bool {
        self.closed_ms.is_some()
    }

    /// The parts to tell what this part says now, and when: `None` when
    /// every one was told.
    pub fn owed(&self) -> Option<(&[u32], Told, u64)> {
        (!self.owed.is_empty()).then_some((&self.owed, self.mine, self.due_ms))
    }
}

impl Ledger {
    /// What a check of object `name` says of the quota it is a part of,
    /// and its share as the config gives it.
    pub fn ask_stock(&mut self, name: &str, ask: StockAsk, share: &(String, Spec)) {
        let stock = self.stock.get_or_insert_with(|| Stock::new(name, ask));
        if stock.ask.parts != ask.parts {
            stock.peers = vec![None; ask.parts as usize];
        }
        stock.ask = ask;
        stock.share = Some(share.clone());
    }

    /// What part `from` said to object `name` (part `ask.part` of
    /// `ask.parts`).
    pub fn take_told(&mut self, name: &str, ask: StockAsk, from: u32, told: Told) {
        let stock = self.stock.get_or_insert_with(|| Stock::new(name, ask));
        if let Some(slot) = stock.peers.get_mut(from as usize) {
            if slot.is_none_or(|held| held.seq < told.seq) {
                *slot = Some(told);
            }
        }
    }

    /// Part `to` was told `told` (`None`: the call failed, so all are told
    /// again a while later).
    pub fn told(&mut self, to: Option<u32>, told: Told, now_ms: u64) {
        if let Some(stock) = self.stock.as_mut().filter(|s| s.mine == told) {
            match to {
                Some(to) => stock.owed.retain(|&p| p != to),
                None => stock.due_ms = now_ms.saturating_add(RETELL_MS),
            }
        }
    }

    /// An operator's reset: the share is no longer used.
    pub(super) fn restock(&mut self, now_ms: u64) {
        if let Some(stock) = self.stock.as_mut().filter(|s| s.mine.used) {
            let limit = stock.mine;
            stock.say(limit, false, now_ms);
        }
    }

    /// Judges the stock after a call (`before`: the stock as it was
    /// stored): whether this part's share is used under the limit in
    /// force, and whether every part's is, closing or opening the rule
    /// accordingly. Answers the rows to write and delete.
    pub fn judge_stock(
        &mut self,
        before: Option<&Stock>,
        now_ms: u64,
    ) -> (Vec<Write>, Vec<Expired>) {
        let Some(mut stock) = self.stock.take() else {
            return (Vec::new(), Vec::new());
        };
        let (mut writes, mut expired) = (Vec::new(), Vec::new());
        // Told by a sibling before its first check, it has nothing to judge.
        if stock.share.is_some() {
            self.judge(&mut stock, &mut writes, &mut expired, now_ms);
        }
        if before != Some(&stock) {
            writes.push(Write::Stock(stock.clone()));
        }
        self.stock = Some(stock);
        (writes, expired)
    }

    fn judge(
        &mut self,
        stock: &mut Stock,
        writes: &mut Vec<Write>,
        expired: &mut Vec<Expired>,
        now_ms: u64,
    ) {
        let policy = stock.share.as_ref().map(|(name, _)| name);
        let overridden = self
            .overridden
            .as_ref()
            .filter(|o| o.is_active(now_ms))
            .and_then(|o| {
                Some((
                    o.set_ms,
                    o.whole.clone().filter(|(n, _)| Some(n) == policy)?,
                ))
            });
        let limit = Told {
            whole: overridden
                .as_ref()
                .map_or(stock.ask.whole, |(_, (_, w))| *w),
            since: overridden.map_or(0, |(since, _)| since),
            ..stock.mine
        };
        if !limit.same_limit(&stock.mine) {
            stock.say(limit, false, now_ms);
        }
        if !stock.mine.used && self.used_up(stock, now_ms) {
            stock.say(limit, true, now_ms);
        }
        let mine = stock.mine;
        let all = mine.used
            && stock.peers.iter().enumerate().all(|(p, told)| {
                p == stock.ask.part as usize || told.is_some_and(|t| t.used && t.same_limit(&mine))
            });
        let ours = stock.closed_ms.filter(|&ms| {
            self.control
                .as_ref()
                .is_some_and(|c| c.set_ms == ms && c.reason == SOLD_OUT)
        });
        stock.closed_ms = ours;
        // An operator's state stands: the part judges the whole again once
        // it is open.
        if self.control.is_none() || ours.is_some() {
            if all && !stock.all && self.control.is_none() {
                let control = Control {
                    state: RuleState::Closed,
                    reason: SOLD_OUT.to_string(),
                    set_ms: now_ms,
                };
                self.control = Some(control.clone());
                writes.push(Write::Control(control));
                stock.closed_ms = Some(now_ms);
            } else if !all && ours.is_some() {
                self.control = None;
                expired.push(Expired::Control);
                stock.closed_ms = None;
            }
            stock.all = all;
        }
    }

    /// Whether the share is used: its policy in force has nothing left,
    /// and nothing of it is pending.
    fn used_up(&mut self, stock: &Stock, now_ms: u64) -> bool {
        let Some(share) = stock.share.clone() else {
            return false;
        };
        let Some((name, spec)) = self.policies(&[share], now_ms).into_iter().next() else {
            return false;
        };
        if !self.reservations.is_empty() || self.blocks.iter().any(|b| b.policy == name) {
            return false;
        }
        self.read_with(&name, spec, |l| l.decide(now_ms, 0).remaining) == 0
    }

    /// The refusal of a part whose share is used while its window has room
    /// again: stock sold is sold. Each policy as it stands, nothing left.
    pub(super) fn sold(&mut self, ask: &Ask<'_>, now_ms: u64) -> Option<Outcome> {
        let stock = self.stock.as_ref().filter(|s| s.mine.used)?;
        let window_ms = stock.share.as_ref()?.1.window_ms();
        let (mut outcome, _) = self.check_inviting(&Ask { cost: 0, ..*ask }, None, 0, now_ms);
        if outcome.policies.iter().all(|p| p.decision.remaining == 0) {
            return None;
        }
        for policy in &mut outcome.policies {
            policy.decision.allowed = false;
            policy.decision.remaining = 0;
            policy.decision.retry = Retry::After(window_ms);
        }
        Some(Outcome {
            allowed: false,
            retry: Retry::After(window_ms),
            ..outcome
        })
    }

    /// A used part's refusal is answered from an isolate's cache for a
    /// second at most, so that the rule's close reaches every isolate
    /// within a second.
    pub(super) fn hold_briefly(&self, outcome: &mut Outcome) {
        if outcome.allowed || !self.stock.as_ref().is_some_and(|s| s.mine.used) {
            return;
        }
        let spread = outcome.spread.get_or_insert_with(|| super::Spread {
            earliest: USED_HOLD_MS,
            next: Vec::new(),
        });
        spread.earliest = spread.earliest.min(USED_HOLD_MS);
    }

    pub fn stock(&self) -> Option<&Stock> {
        self.stock.as_ref()
    }

    pub fn restore_stock(&mut self, stock: Stock) {
        self.stock = Some(stock);
    }
}

#[cfg(test)]
mod tests;
