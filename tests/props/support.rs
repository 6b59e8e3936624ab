//! What the property tests share: a key object's rows, kept the way its
//! SQL keeps them, so that a test can restart an object from them.

use sluice::control::Control;
use sluice::ledger::blocks::{Block, TimesRow};
use sluice::ledger::{Ask, Expired, Ledger, Outcome, Override, Reservation, Stock, Write};
use sluice::objects::protocol::CheckRequest;

/// A slot row: `(policy, encoded spec, (s1, s2))`, where `(s1, s2)` is a
/// log's first run or a one-row algorithm's state.
type SlotRow = (String, (u64, u64, u64, u64), (u64, u64));

/// The key object's rows, kept the way its SQL keeps them
/// (`edge/limiter/sql/write.rs`), and read back as a restarted object
/// reads them.
#[derive(Default, Clone)]
pub struct Rows {
    pub slots: Vec<SlotRow>,
    pub hits: Vec<(String, u64, u32)>,
    pub reservations: Vec<Reservation>,
    pub overridden: Option<Override>,
    pub control: Option<Control>,
    /// Admission blocks outstanding, one row each.
    pub blocks: Vec<Block>,
    /// Reported blocks' times, one row each.
    pub times: Vec<TimesRow>,
    /// A sold-out quota's part's stock, as its row's JSON.
    pub stock: Option<String>,
}

impl Rows {
    pub fn write(&mut self, writes: Vec<Write>) {
        for write in writes {
            match write {
                Write::Slot { name, spec, state } => {
                    match self.slots.iter_mut().find(|s| s.0 == name) {
                        Some(slot) => *slot = (name, spec.encode(), state),
                        None => self.slots.push((name, spec.encode(), state)),
                    }
                }
                Write::Respec { name, spec } => {
                    for slot in self.slots.iter_mut().filter(|s| s.0 == name) {
                        slot.1 = spec.encode();
                    }
                }
                Write::Hit { name, at_ms, count } => {
                    match self.hits.iter_mut().find(|h| h.0 == name && h.1 == at_ms) {
                        Some(hit) => hit.2 += count,
                        None => self.hits.push((name, at_ms, count)),
                    }
                }
                Write::Refund {
                    name,
                    at_ms,
                    count,
                    in_slot_row: true,
                } => {
                    for slot in self
                        .slots
                        .iter_mut()
                        .filter(|s| s.0 == name && s.2 .0 == at_ms)
                    {
                        slot.2 .1 -= slot.2 .1.min(u64::from(count));
                    }
                }
                Write::Refund {
                    name,
                    at_ms,
                    count,
                    in_slot_row: false,
                } => {
                    self.hits
                        .retain(|h| !(h.0 == name && h.1 == at_ms && h.2 <= count));
                    for hit in self.hits.iter_mut().filter(|h| h.0 == name && h.1 == at_ms) {
                        hit.2 -= count;
                    }
                }
                // INSERT OR REPLACE: a reservation another block's report
                // adds a run to is written again.
                Write::Reservation(r) => {
                    self.reservations.retain(|held| held.id != r.id);
                    self.reservations.push(r);
                }
                Write::Override(o) => self.overridden = Some(o),
                Write::Control(c) => self.control = Some(c),
                // UPDATE of the reported block's row, or INSERT.
                Write::Block { block, replaces } => {
                    let row = self
                        .blocks
                        .iter_mut()
                        .find(|b| replaces.is_some_and(|id| b.id == id));
                    match row {
                        Some(row) => *row = block,
                        None => self.blocks.push(block),
                    }
                }
                Write::Times(row) => self.times.push(row),
                Write::Stock(stock) => self.stock = Some(sluice::json::to_string(&stock)),
                other => panic!("not written by these tests: {other:?}"),
            }
        }
    }

    pub fn delete(&mut self, expired: Vec<Expired>) {
        for gone in expired {
            match gone {
                Expired::Slot { name } => {
                    self.slots.retain(|s| s.0 != name);
                    self.hits.retain(|h| h.0 != name);
                    self.times.retain(|t| t.policy != name);
                }
                Expired::Hits { name, cutoff_ms } => {
                    self.hits.retain(|h| !(h.0 == name && h.1 <= cutoff_ms));
                    self.times
                        .retain(|t| !(t.policy == name && t.newest_ms <= cutoff_ms));
                    for slot in self.slots.iter_mut().filter(|s| s.0 == name) {
                        if slot.2 .1 > 0 && slot.2 .0 <= cutoff_ms {
                            slot.2 = (0, 0);
                        }
                    }
                }
                Expired::Reservation { id } => self.reservations.retain(|r| r.id != id),
                Expired::Override => self.overridden = None,
                Expired::Control => self.control = None,
                Expired::Block { id } => self.blocks.retain(|b| b.id != id),
                other => panic!("not deleted by these tests: {other:?}"),
            }
        }
    }

    /// A reservation row goes through its column encoding, as it would.
    pub fn load(&self) -> Ledger {
        let mut ledger = Ledger::new();
        for (name, spec, state) in &self.slots {
            assert!(ledger.restore_slot(name, *spec, *state));
        }
        let mut hits = self.hits.clone();
        hits.sort();
        for (name, at_ms, count) in hits {
            ledger.restore_hit(&name, at_ms, count);
        }
        for r in &self.reservations {
            let runs = r.encode_runs();
            let row = Reservation::from_row(r.id.clone(), r.lapses_ms, r.cost, &runs).unwrap();
            assert_eq!(&row, r);
            ledger.restore_reservation(row);
        }
        for row in &self.times {
            assert!(ledger.restore_times(&row.policy, &row.times));
        }
        for block in &self.blocks {
            ledger.restore_block(block.clone());
        }
        if let Some(o) = &self.overridden {
            ledger.restore_override(o.clone());
        }
        if let Some(c) = &self.control {
            ledger.restore_control(c.clone());
        }
        if let Some(row) = &self.stock {
            ledger.restore_stock(Stock::decode(row).expect("a stock row reads back"));
        }
        ledger
    }
}

/// One key object: its ledger and its rows.
#[derive(Default)]
pub struct Object {
    pub ledger: Ledger,
    pub rows: Rows,
}

impl Object {
    /// What the object answers `request` at `now`, as a key object does:
    /// it decides and writes before it answers.
    pub fn answer(&mut self, request: &CheckRequest, now: u64) -> Outcome {
        let specs = request.policies().unwrap();
        let ask = Ask {
            specs: &specs,
            cost: request.cost,
            ban: None,
            lease: None,
        };
        let (outcome, writes) = match &request.reserve {
            Some(r) => self.ledger.reserve(&ask, &r.id, now + r.ttl_ms, now),
            None => self.ledger.check(&ask, now),
        };
        self.rows.write(writes);
        outcome
    }
}
