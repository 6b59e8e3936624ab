//! Admission blocks (issue 30): a key's object hands an isolate that asks
//! `b` admissions it may make itself, with no call, from `granted` until
//! `e` (its lease); the isolate reports the real times later, and the
//! object replaces the block by them.
//!
//! **Exactness.** Until its report, a block counts as `b` admissions that
//! may fall anywhere in `[granted, e]`: in every window its lease overlaps,
//! for every later decision and every later grant (`worst` for the sliding
//! log; the fixed window and GCRA charge their state at the grant,
//! `charge`). A grant is made only if, with every admission of every
//! outstanding block at its worst moment, no window could hold more than
//! the limit; and a report is accepted only with at most `b` times, each
//! within `[granted, e]`, so the real times are one of the placements the
//! object already allowed for. Replacing a block by its real times can
//! therefore only lower what counts to what really happened. A block never
//! reported (its isolate died) stays counted until `e` + W, when no window
//! it could touch is decided any more, and then is dropped: refusals are
//! possible, over-admission never.
//!
//! **Remaining.** A request an isolate admits from a block is told the
//! block's unused admissions as its RateLimit `r` (the least of them over
//! its policies): the object counts them as taken by that isolate and
//! nobody else, so at least that many remain whatever the others do, a
//! lower bound of the truth (`isolate::blocks`).
//!
//! **Storage.** A grant is one row (the block), plus the slot's state for
//! the algorithms it charges; a report deletes the block's row and writes
//! one: the real times, delta-encoded together (`times`), or the slot's
//! state; and for each reservation it carries still pending (`pending`)
//! what a reservation taken by a call writes. All read back exactly after
//! a restart.

mod calls;
mod charge;
mod pending;
pub mod size;
pub mod times;
mod worst;

pub use calls::Taken;
pub use pending::Pending;

use super::ban::{BanNotice, BanPolicy};
use super::slot::{record, slot_for, Slot, SlotReport};
use super::{Ledger, Write};
use crate::limit::{Algorithm, Decision, Recorded, Retry, Spec};
use size::{Size, Sizing, MAX_LEASE_MS};

/// Block ids per millisecond of the grant's clock: more grants than this
/// in one millisecond borrow the next millisecond's ids. Ids stay below
/// 2^53 (a JavaScript number) until the year 2248.
pub const ID_PER_MS: u64 = 1024;

/// A block as the object keeps it and stores it, one row each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Never given twice by the key's object: the grant's millisecond
    /// times [`ID_PER_MS`], plus a sequence.
    pub id: u64,
    /// The isolate that holds it; only it may report.
    pub holder: String,
    pub policy: String,
    /// The policy's spec at the grant, which its charge was made under.
    pub spec: Spec,
    pub admissions: u32,
    pub granted_ms: u64,
    /// `e`: the last millisecond an admission may fall in.
    pub until_ms: u64,
    /// GCRA: the TAT before the grant and the TAT it set (ns).
    pub tat: Option<(u64, u64)>,
}

crate::wire! {
    /// What an isolate is told of a block it was granted: all it needs to
    /// admit from it and report it (the spec and charge stay with the object).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BlockGrant {
        pub id: u64,
        pub policy: String,
        pub admissions: u32,
        pub granted_ms: u64,
        pub until_ms: u64,
    }
}

impl Block {
    /// What its holder is told.
    pub fn grant(&self) -> BlockGrant {
        BlockGrant {
            id: self.id,
            policy: self.policy.clone(),
            admissions: self.admissions,
            granted_ms: self.granted_ms,
            until_ms: self.until_ms,
        }
    }

    /// When an unreported block stops counting: no window that could hold
    /// one of its admissions is decided from then on.
    pub fn lapses_ms(&self) -> u64 {
        self.until_ms.saturating_add(self.spec.window_ms())
    }
}

/// An isolate's ask for a block of one policy.
#[derive(Debug, Clone, Copy)]
pub struct BlockAsk<'a> {
    pub policy: &'a str,
    pub spec: Spec,
    pub holder: &'a str,
    /// Decisions for the key the isolate saw in the last second.
    pub rate: u32,
}

/// What a holder reports: the real times of the admissions it made from
/// block `id`, the reservations it admitted from it and has not settled
/// yet, and the refusals it answered for the key meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReport {
    pub id: u64,
    pub holder: String,
    pub policy: String,
    pub times: Vec<u64>,
    /// Reservations still waiting for their settle ([`pending`]).
    pub pending: Vec<Pending>,
    /// Refusals the isolate answered for the key, counted toward a ban.
    pub strikes: u32,
}

impl BlockReport {
    /// The units it admitted, pending reservations' included.
    pub fn units(&self) -> u64 {
        let pending: u64 = self.pending.iter().map(|p| u64::from(p.cost)).sum();
        self.times.len() as u64 + pending
    }
}

/// Why a report was refused. The block it names (if any) stays counted
/// until it lapses, so a refused report costs refusals, never exactness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// No such block: never granted, lapsed, or reported already.
    Unknown,
    /// Another isolate holds it.
    Holder,
    /// More times than the block's admissions.
    TooMany,
    /// A time outside `[granted, e]`.
    OutsideLease,
}

/// One row of real times a report writes, for a sliding log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimesRow {
    pub policy: String,
    /// Its newest time: the row can go once that no longer counts.
    pub newest_ms: u64,
    /// [`times::encode`]d.
    pub times: String,
}

/// What an accepted report changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    /// Rows to write besides the times: a slot's state or spec, a ban.
    pub writes: Vec<Write>,
    pub times: Option<TimesRow>,
    /// The ban the report's strikes started, if they did.
    pub ban: Option<BanNotice>,
}

impl Ledger {
    /// Grants `ask.holder` a block of `ask.policy` if the size rule gives
    /// one ([`size`]): the block to store and hand over, and the rows its
    /// charge writes. None to a key that is banned, paused or closed.
    pub fn grant_block(&mut self, ask: &BlockAsk<'_>, now_ms: u64) -> Option<(Block, Vec<Write>)> {
        if self.active_ban(now_ms).is_some() || self.control.is_some() {
            return None;
        }
        let asked = [(ask.policy.to_string(), ask.spec)];
        // None under an unlimited override: nothing counts, no block.
        let (name, spec) = self.policies(&asked, now_ms).into_iter().next()?;
        let i = slot_for(&mut self.slots, &name, spec);
        let holders = self.other_holders(&name, ask.holder, now_ms);
        let granted = self.charge(i, ask.rate, holders, now_ms);
        self.forget_idle_slots(now_ms);
        let Charged {
            size,
            until_ms,
            tat,
            writes,
        } = granted?;
        // From the clock, so that a restarted object, which remembers only
        // the blocks it still holds, never gives an id twice: a report of a
        // lapsed block must not be taken for a newer one's.
        self.next_block = self.next_block.max(now_ms.saturating_mul(ID_PER_MS));
        let block = Block {
            id: self.next_block,
            holder: ask.holder.to_string(),
            policy: name,
            spec,
            admissions: size.admissions,
            granted_ms: now_ms,
            until_ms,
            tat,
        };
        self.next_block += 1;
        self.blocks.push(block.clone());
        Some((block, writes))
    }

    /// Sizes a block of slot `i` and charges the slot for it.
    fn charge(&mut self, i: usize, rate: u32, holders: u32, now_ms: u64) -> Option<Charged> {
        let name = self.slots[i].name.clone();
        let spec = self.slots[i].limiter.spec();
        let limit = spec.limit();
        let window = spec.window_ms();
        self.slots[i].limiter.expire(now_ms);
        let (headroom, cap_ms) = match &self.slots[i].limiter {
            Algorithm::Log(log) => {
                let newest = log.newest().unwrap_or(now_ms).max(now_ms);
                let lo = (now_ms + 1).saturating_sub(window);
                let hi = newest.max(now_ms.saturating_add(MAX_LEASE_MS));
                let held = self.blocks.iter().filter(|b| b.policy == name);
                let worst = worst::most_in_a_window(log, held, lo, hi);
                (limit.saturating_sub(worst), window / 2)
            }
            // The lease ends with the window open now (or opened by the
            // grant), so its admissions fall in the window it took from.
            Algorithm::Window(w) => {
                let ends = w
                    .open_until(now_ms)
                    .unwrap_or(now_ms.saturating_add(window));
                (w.decide(now_ms, 0).remaining, ends - now_ms)
            }
            Algorithm::Cell(cell) => (cell.decide(now_ms, 0).remaining, window / 2),
        };
        let size = size::size(Sizing {
            rate,
            limit,
            headroom,
            holders,
            cap_ms,
        })?;
        let until_ms = now_ms.saturating_add(size.lease_ms - 1);
        let slot = &mut self.slots[i];
        let mut writes = Vec::new();
        let tat = match &mut slot.limiter {
            Algorithm::Log(_) => None,
            Algorithm::Window(w) => {
                w.admit(now_ms, size.admissions);
                None
            }
            Algorithm::Cell(cell) => {
                Some(charge::charge_schedule(cell, size.admissions, until_ms)?)
            }
        };
        if let Some((a, b)) = slot.limiter.state() {
            record(slot, Recorded::State(a, b), &mut writes);
        }
        Some(Charged {
            size,
            until_ms,
            tat,
            writes,
        })
    }

    /// Replaces block `report.id` by its real times, giving back what it
    /// did not use as its algorithm allows (`charge`), holds its pending
    /// reservations as reservations of the key ([`pending`]), and counts
    /// the report's strikes toward `ban`. `spec` is the policy as the caller
    /// asks it now. Anything but a valid report of a block the reporter
    /// holds is refused, and changes nothing.
    pub fn report_block(
        &mut self,
        report: &BlockReport,
        spec: Spec,
        ban: Option<&BanPolicy>,
        now_ms: u64,
    ) -> Result<Reported, BlockError> {
        let at = self
            .blocks
            .iter()
            .position(|b| b.id == report.id && b.policy == report.policy)
            .ok_or(BlockError::Unknown)?;
        let block = &self.blocks[at];
        if block.holder != report.holder {
            return Err(BlockError::Holder);
        }
        if report.units() > u64::from(block.admissions) {
            return Err(BlockError::TooMany);
        }
        let lease = block.granted_ms..=block.until_ms;
        let pending = report.pending.iter().map(|p| &p.at_ms);
        if !report
            .times
            .iter()
            .chain(pending)
            .all(|t| lease.contains(t))
        {
            return Err(BlockError::OutsideLease);
        }
        let block = self.blocks.swap_remove(at);
        let mut times = report.times.clone();
        times.sort_unstable();
        let asked = [(block.policy.clone(), spec)];
        // Under an unlimited override the times go to the policy the block
        // was granted under: they were admitted under its limit.
        let (name, spec) = self
            .policies(&asked, now_ms)
            .into_iter()
            .next()
            .unwrap_or((block.policy.clone(), block.spec));
        let i = slot_for(&mut self.slots, &name, spec);
        let mut writes = Vec::new();
        let same_algorithm = std::mem::discriminant(&block.spec) == std::mem::discriminant(&spec);
        let used = usize::try_from(report.units()).unwrap_or(usize::MAX);
        let changed = match &mut self.slots[i].limiter {
            _ if !same_algorithm => Changed::Nothing,
            Algorithm::Log(log) => {
                for &t in &times {
                    log.insert(t, 1);
                }
                Changed::Log
            }
            Algorithm::Window(w) => Changed::state(charge::return_tokens(w, &block, used) > 0),
            Algorithm::Cell(cell) => {
                let mut all = times.clone();
                for p in &report.pending {
                    all.extend(std::iter::repeat_n(p.at_ms, p.cost as usize));
                }
                all.sort_unstable();
                Changed::state(charge::replay_schedule(cell, &block, &all))
            }
        };
        let slot = &mut self.slots[i];
        let times_row = match changed {
            Changed::Log => {
                store_spec(slot, &mut writes);
                times.last().map(|&newest_ms| TimesRow {
                    policy: name,
                    newest_ms,
                    times: times::encode(&times),
                })
            }
            Changed::State => {
                let (a, b) = slot.limiter.state().unwrap_or_default();
                record(slot, Recorded::State(a, b), &mut writes);
                None
            }
            Changed::Nothing => None,
        };
        // A slot restarted under another algorithm counts none of the
        // block's units: nothing to hold, a settle finds nothing.
        if same_algorithm {
            self.hold_pending(i, &report.pending, &mut writes);
        }
        let ban = ban.and_then(|policy| {
            (0..report.strikes).find_map(|_| self.strike(policy, now_ms, &mut writes))
        });
        self.forget_idle_slots(now_ms);
        Ok(Reported {
            writes,
            times: times_row,
            ban,
        })
    }

    /// Drops the blocks that stopped counting (never reported), and says
    /// which block rows to delete. What a fixed window or a GCRA was
    /// charged stays in its state, which frees itself.
    pub fn lapse_blocks(&mut self, now_ms: u64) -> Vec<u64> {
        let (lapsed, held) = std::mem::take(&mut self.blocks)
            .into_iter()
            .partition::<Vec<_>, _>(|b| b.lapses_ms() <= now_ms);
        self.blocks = held;
        lapsed.into_iter().map(|b| b.id).collect()
    }

    /// Restores a block row.
    pub fn restore_block(&mut self, block: Block) {
        self.next_block = self.next_block.max(block.id + 1);
        self.blocks.push(block);
    }

    /// Restores a row of a report's times into its slot (after the slot's
    /// row); false for a row that does not read back or has no slot.
    pub fn restore_times(&mut self, policy: &str, encoded: &str) -> bool {
        let Some(times) = times::decode(encoded) else {
            return false;
        };
        let Some(slot) = self.slots.iter_mut().find(|s| s.name == policy) else {
            return false;
        };
        let Algorithm::Log(log) = &mut slot.limiter else {
            return false;
        };
        for t in times {
            log.insert(t, 1);
        }
        true
    }

    /// The blocks outstanding, oldest grant first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// `slots` as an operator reads them with the sliding logs' outstanding
    /// blocks counted in full (`used` up, `remaining` down): every
    /// admission an isolate made from one is counted, whatever it used.
    /// (A fixed window's and a GCRA's blocks are in their state already.)
    pub(super) fn with_blocks(&self, mut slots: Vec<SlotReport>, now_ms: u64) -> Vec<SlotReport> {
        for slot in &mut slots {
            let held: u64 = self
                .blocks
                .iter()
                .filter(|b| b.policy == slot.policy && b.lapses_ms() > now_ms)
                .filter(|b| matches!(b.spec, Spec::SlidingLog(_)))
                .map(|b| u64::from(b.admissions))
                .sum();
            slot.used += held;
            slot.remaining = slot.remaining.saturating_sub(held);
        }
        slots
    }

    /// `slot` after a reset, holding only what the blocks still out were
    /// charged to it (`charge::recharge`); `None` when that is nothing.
    pub(super) fn recharged(&self, slot: &Slot, now_ms: u64) -> Option<Slot> {
        let out = self
            .blocks
            .iter()
            .filter(|b| b.policy == slot.name && b.lapses_ms() > now_ms);
        Some(Slot {
            name: slot.name.clone(),
            limiter: charge::recharge(&slot.limiter, out, now_ms)?,
            stored: slot.stored,
            invited: Default::default(),
        })
    }

    /// How many isolates other than `holder` hold a block of `policy`.
    fn other_holders(&self, policy: &str, holder: &str, now_ms: u64) -> u32 {
        let mut others: Vec<&str> = self
            .blocks
            .iter()
            .filter(|b| b.policy == policy && b.holder != holder && b.lapses_ms() > now_ms)
            .map(|b| b.holder.as_str())
            .collect();
        others.sort_unstable();
        others.dedup();
        others.len() as u32
    }

    /// Slot `i`'s decision for `cost` units with the outstanding blocks of
    /// a sliding log counted at their worst ([`worst`]), and whether they
    /// alone refuse it. Its `remaining` is then a lower bound: what the
    /// worst window leaves. The fixed window and GCRA carry their blocks
    /// in their state, so their own decision is already exact.
    pub(super) fn decide_counting_blocks(
        &mut self,
        i: usize,
        now_ms: u64,
        cost: u32,
    ) -> (Decision, bool) {
        let slot = &mut self.slots[i];
        let decision = slot.limiter.decide(now_ms, cost);
        let Algorithm::Log(log) = &slot.limiter else {
            return (decision, false);
        };
        let mut held = self
            .blocks
            .iter()
            .filter(|b| b.policy == slot.name)
            .peekable();
        if !decision.allowed || held.peek().is_none() {
            return (decision, false);
        }
        // The windows that hold `now`, where this admission falls: a
        // report stamped in the object's future must not move them on.
        let lo = (now_ms + 1).saturating_sub(log.policy().window_ms());
        let worst = worst::most_in_a_window(log, held.clone(), lo, now_ms) + u64::from(cost);
        let limit = decision.limit;
        if worst <= limit {
            let remaining = decision.remaining.min(limit - worst);
            return (
                Decision {
                    remaining,
                    ..decision
                },
                false,
            );
        }
        // Refused for blocks: one may be reported (its unused rest back)
        // any time up to its lease's end.
        let wait = held
            .map(|b| b.until_ms.saturating_sub(now_ms).max(1))
            .min()
            .unwrap_or(1);
        let refused = Decision {
            allowed: false,
            remaining: 0,
            reset_ms: wait,
            retry: Retry::After(wait),
            ..decision
        };
        (refused, true)
    }
}

/// A grant's charge: the block's size, its lease's end, a GCRA's TATs,
/// and the rows to write.
struct Charged {
    size: Size,
    until_ms: u64,
    tat: Option<(u64, u64)>,
    writes: Vec<Write>,
}

/// What a report changed in its slot.
enum Changed {
    /// Times inserted into a log.
    Log,
    /// A one-row state given back.
    State,
    Nothing,
}

impl Changed {
    fn state(given_back: bool) -> Changed {
        if given_back {
            Changed::State
        } else {
            Changed::Nothing
        }
    }
}

/// Makes sure storage holds the slot's spec before rows of its times.
fn store_spec(slot: &mut Slot, writes: &mut Vec<Write>) {
    let spec = slot.limiter.spec();
    match slot.stored {
        None => writes.push(Write::Slot {
            name: slot.name.clone(),
            spec,
            state: (0, 0),
        }),
        Some(stored) if stored != spec => writes.push(Write::Respec {
            name: slot.name.clone(),
            spec,
        }),
        Some(_) => {}
    }
    slot.stored = Some(spec);
}

#[cfg(test)]
mod tests;
