//! The state of the one key a key object holds, whatever stores it: one
//! limiter per named policy (a "slot"), its ban, leases, override and
//! reservations. The ledger decides, says which rows to write and when the
//! next sweep is due, so persistence and sweeping are tested on the host
//! (`edge::limiter` only runs what it returns).

pub mod ban;
pub mod blocks;
mod halt;
mod invitations;
mod leases;
mod outcome;
pub mod override_row;
pub mod overrides;
mod reservation;
mod rows;
mod slot;
pub mod stock;

use std::collections::VecDeque;

use crate::control::Control;
use crate::limit::gcra::{GcraPolicy, Throttle};
use crate::limit::lease::{Grant, LeaseTable};
use crate::limit::{Algorithm, Decision, Recorded, Retry, SlidingLog, Spec};
pub use ban::{Ban, BanNotice, BanPolicy};
pub use invitations::MAX_INVITATIONS;
pub use leases::LeaseAsk;
pub use outcome::{LeaseOutcome, Outcome, PolicyDecision, Spread, LEASE_RETRY_MS};
pub use overrides::Override;
pub use reservation::{Reservation, Run, Settled, PENDING_RETRY_MS};
pub use rows::{Expired, Write};
pub use slot::SlotReport;
pub use stock::{Stock, StockAsk, Told};

use leases::lease_report;
use reservation::pending_retry;
use slot::{admit, report, slot_for, Slot};

/// What a request asks of its key: units under rate policies, optionally a
/// lease under a concurrency limit, and the ban policy refusals count toward.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub specs: &'a [(String, Spec)],
    pub cost: u32,
    pub ban: Option<&'a BanPolicy>,
    pub lease: Option<&'a LeaseAsk>,
}

/// Everything one key object holds. An object holds exactly one key (its
/// name is the key's, [`crate::objects::name`]), so nothing here is keyed
/// by it: neither these fields nor the rows they become.
#[derive(Debug, Default)]
pub struct Ledger {
    slots: Vec<Slot>,
    ban: Option<Ban>,
    /// Recent refusals, counted toward a ban (memory only).
    strikes: Option<SlidingLog>,
    leases: LeaseTable,
    overridden: Option<Override>,
    /// Admissions not yet kept or refunded, each with its row.
    reservations: Vec<Reservation>,
    /// The last reservations settled, `(id, kept)`, so that a settle sent
    /// twice answers the same (memory only, bounded: a settle repeated
    /// after the object restarted finds no reservation).
    settled: VecDeque<(String, bool)>,
    /// An operator's state for the rule, when it is paused or closed.
    control: Option<Control>,
    /// Blocks granted and not yet reported or lapsed ([`blocks`]).
    blocks: Vec<blocks::Block>,
    /// The id the next block gets.
    next_block: u64,
    /// A part of a quota that closes once sold out: its stock.
    stock: Option<Stock>,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Checks `ask.cost` units against every policy and, when asked, takes a
    /// lease; admits into all of them or into none. A refusal and a peek
    /// (cost 0) write nothing and leave no new state behind, except that a
    /// refusal counts toward `ask.ban`, and the refusal that completes the
    /// count starts a ban. A refusal over quota is told when to come back
    /// spread over the moments places free up, one invitation each
    /// ([`invitations`]).
    pub fn check(&mut self, ask: &Ask<'_>, now_ms: u64) -> (Outcome, Vec<Write>) {
        self.check_inviting(ask, None, 1, now_ms)
    }

    /// [`check`](Self::check), or [`reserve`](Self::reserve) with
    /// `reserve` = (id, lapse time), whose refusal over quota hands out
    /// `invitations` moments (at most [`MAX_INVITATIONS`]): its own, and
    /// the rest for a copy of the refusal to tell the refusals that follow
    /// (`Outcome::spread`). With 0 it is told the moment it could really
    /// pass and moves no cursor.
    pub fn check_inviting(
        &mut self,
        ask: &Ask<'_>,
        reserve: Option<(&str, u64)>,
        invitations: u32,
        now_ms: u64,
    ) -> (Outcome, Vec<Write>) {
        if ask.cost == 0 {
            return (self.peek_ask(ask, now_ms), Vec::new());
        }
        if let Some(halted) = self.halted(ask, now_ms) {
            return (halted, Vec::new());
        }
        if let Some(mut sold) = self.sold(ask, now_ms) {
            self.hold_briefly(&mut sold);
            return (sold, Vec::new());
        }
        let specs = self.policies(ask.specs, now_ms);
        let indices: Vec<usize> = specs
            .iter()
            .map(|(name, spec)| slot_for(&mut self.slots, name, *spec))
            .collect();
        let mut writes = Vec::new();
        let outcome = match self.ban.as_ref().filter(|b| b.is_active(now_ms)) {
            Some(active) => {
                // When a request can pass again: the ban's end, or later if
                // a window is still full then (windows only free up while
                // nothing is admitted), so that a client that waits as told
                // is not refused again, which would count toward the next
                // offence.
                let pass = indices
                    .iter()
                    .map(|&i| self.slots[i].limiter.decide(now_ms, ask.cost).retry)
                    .max()
                    .unwrap_or(Retry::NOW);
                let notice = BanNotice::of(active, false);
                let policies = report(&mut self.slots, &indices, now_ms, |_| None);
                let lease = ask
                    .lease
                    .map(|l| lease_report(&self.leases, l, None, now_ms));
                let mut outcome = Outcome::new(false, policies, Some(notice), lease, now_ms);
                outcome.retry = outcome.retry.max(pass);
                outcome
            }
            None => {
                let mut outcome = self.decide_unbanned(ask, &indices, reserve, now_ms, &mut writes);
                let over_quota =
                    !outcome.allowed && outcome.lease.as_ref().is_none_or(|l| !l.refused);
                if over_quota && !outcome.pending && outcome.ban.is_none() {
                    self.invite(&mut outcome, &indices, ask.cost, invitations, now_ms);
                }
                outcome
            }
        };
        self.forget_idle_slots(now_ms);
        let mut outcome = Outcome {
            whole: self.whole(now_ms),
            ..outcome
        };
        self.hold_briefly(&mut outcome);
        (outcome, writes)
    }

    /// A decision for a key no ban holds: every policy, then the lease, then
    /// the admission (or reservation), and a refusal counted toward a ban.
    fn decide_unbanned(
        &mut self,
        ask: &Ask<'_>,
        indices: &[usize],
        reserve: Option<(&str, u64)>,
        now_ms: u64,
        writes: &mut Vec<Write>,
    ) -> Outcome {
        let (mut decisions, for_blocks): (Vec<Decision>, Vec<bool>) = indices
            .iter()
            .map(|&i| self.decide_counting_blocks(i, now_ms, ask.cost))
            .unzip();
        let rates_allow = decisions.iter().all(|d| d.allowed);
        // Refused only for outstanding blocks (whose unused rest a report
        // may give back any moment) or reservations in flight: pending.
        let only_blocks = decisions
            .iter()
            .zip(&for_blocks)
            .all(|(d, &blocked)| d.allowed || blocked);
        let pending = !rates_allow
            && (only_blocks || self.refused_for_pending(indices, &decisions, ask.cost, now_ms));
        if pending {
            decisions = decisions.into_iter().map(pending_retry).collect();
        }
        let grant = match ask.lease {
            Some(lease) if rates_allow => {
                let grant = self
                    .leases
                    .acquire(now_ms, &lease.acquire(), || lease.new_id.clone());
                if let Ok(Grant {
                    granted: true,
                    lease: Some(granted),
                    ..
                }) = &grant
                {
                    writes.push(Write::Lease {
                        lease: granted.clone(),
                        limit: self.leases.limit(),
                    });
                }
                Some(grant)
            }
            _ => None,
        };
        let allowed = rates_allow
            && grant
                .as_ref()
                .is_none_or(|g| g.as_ref().is_ok_and(|g| g.granted));
        match reserve {
            _ if !allowed => {}
            None => {
                for &i in indices {
                    admit(&mut self.slots[i], now_ms, ask.cost, writes);
                }
            }
            Some(reservation) => {
                self.admit_reserved(indices, reservation, ask.cost, now_ms, writes);
            }
        }
        // A refused request is logged in no policy, so policies that had
        // room report the state they keep.
        let policies = report(&mut self.slots, indices, now_ms, |n| {
            let d = decisions[n];
            (allowed || !d.allowed).then_some(d)
        });
        let lease = ask
            .lease
            .map(|l| lease_report(&self.leases, l, grant, now_ms));
        // Only rate refusals count toward a ban: a request refused (or
        // queued) for want of a lease did nothing wrong, and neither did
        // one refused only for attempts still in flight.
        let started = match ask.ban {
            Some(policy) if !rates_allow && !pending => self.strike(policy, now_ms, writes),
            _ => None,
        };
        Outcome {
            pending,
            ..Outcome::new(allowed, policies, started, lease, now_ms)
        }
    }

    /// What [`check`](Self::check) with cost 0 answers: each policy's
    /// state as the asked spec reads it ([`read`](Self::read)).
    fn peek_ask(&mut self, ask: &Ask<'_>, now_ms: u64) -> Outcome {
        let specs = self.policies(ask.specs, now_ms);
        let policies = specs
            .iter()
            .map(|(name, spec)| {
                let decision = self.read_with(name, *spec, |l| l.decide(now_ms, 0));
                PolicyDecision {
                    name: name.clone(),
                    window_ms: spec.window_ms(),
                    decision,
                }
            })
            .collect();
        let ban = self.active_ban(now_ms);
        let lease = ask
            .lease
            .map(|l| lease_report(&self.leases, l, None, now_ms));
        Outcome::new(ban.is_none(), policies, ban, lease, now_ms)
    }

    /// Reads policy `name`'s state as `spec` reads it, changing nothing: a slot
    /// held under another spec is read through a copy, so that a peek
    /// never changes a limit, an algorithm or a window, and never drops an
    /// admission; no slot reads as empty.
    fn read_with<T>(
        &mut self,
        name: &str,
        spec: Spec,
        read: impl FnOnce(&mut Algorithm) -> T,
    ) -> T {
        match self.slots.iter_mut().find(|s| s.name == name) {
            Some(slot) if slot.limiter.spec() == spec => read(&mut slot.limiter),
            Some(slot) => {
                let mut copy = slot.limiter.clone();
                copy.set_spec(spec);
                read(&mut copy)
            }
            None => read(&mut Algorithm::new(spec)),
        }
    }

    /// The first of `specs` whose slot holds admissions that still count
    /// under another algorithm or window. Taking such a request would
    /// replace (or re-read) the slot and drop or recount admissions, so
    /// the decision API refuses it rather than let one caller undo another's
    /// limit; a changed `limit` alone is no conflict.
    pub fn conflict<'s>(&self, specs: &'s [(String, Spec)], now_ms: u64) -> Option<&'s str> {
        specs.iter().find_map(|(name, spec)| {
            let slot = self.slots.iter().find(|s| s.name == *name)?;
            let held = slot.limiter.spec();
            let differs = std::mem::discriminant(&held) != std::mem::discriminant(spec)
                || held.window_ms() != spec.window_ms();
            (differs && !slot.limiter.is_idle(now_ms)).then_some(name.as_str())
        })
    }

    /// `CL.THROTTLE`: a GCRA check of `quantity` units in the slot `name`,
    /// answered as redis-cell answers it; admitted units are recorded as by
    /// [`check`](Self::check).
    pub fn throttle(
        &mut self,
        name: &str,
        policy: GcraPolicy,
        now_ms: u64,
        quantity: u32,
    ) -> Option<(Throttle, Vec<Write>)> {
        let spec = Spec::Gcra(policy);
        let i = slot_for(&mut self.slots, name, spec);
        let answer = self.slots[i].limiter.throttle(now_ms, u64::from(quantity));
        let specs = [(name.to_string(), spec)];
        let ask = Ask {
            specs: &specs,
            cost: quantity,
            ban: None,
            lease: None,
        };
        // Told as redis-cell tells it, not spread: no cursor to move.
        let (_, writes) = self.check_inviting(&ask, None, 0, now_ms);
        answer.map(|throttle| (throttle, writes))
    }

    /// Keeps lapsed reservations, expires what no longer counts, forgets
    /// empty slots and forgiven bans, and says which stored rows to delete.
    /// Running it twice at the same time changes nothing the second time,
    /// so an alarm that fires twice is harmless.
    pub fn sweep(&mut self, now_ms: u64) -> Vec<Expired> {
        let mut expired = self.lapse(now_ms);
        let lapsed = self.lapse_blocks(now_ms).into_iter();
        expired.extend(lapsed.map(|id| Expired::Block { id }));
        for slot in &mut self.slots {
            slot.limiter.expire(now_ms);
            let name = slot.name.clone();
            if slot.limiter.is_idle(now_ms) {
                expired.push(Expired::Slot { name });
            } else if slot.limiter.is_log() {
                let cutoff_ms = now_ms.saturating_sub(slot.limiter.spec().window_ms());
                expired.push(Expired::Hits { name, cutoff_ms });
            }
        }
        self.slots.retain(|slot| !slot.limiter.is_idle(now_ms));
        for lapsed in self.leases.expire(now_ms) {
            expired.push(self.lease_gone(lapsed.id, now_ms));
        }
        if self.leases.forget_unneeded(now_ms) {
            expired.push(Expired::Floor);
        }
        if self.ban.as_ref().is_some_and(|ban| now_ms >= ban.forget_ms) {
            self.ban = None;
            expired.push(Expired::Ban);
        }
        if self
            .overridden
            .as_ref()
            .is_some_and(|o| !o.is_active(now_ms))
        {
            self.overridden = None;
            expired.push(Expired::Override);
        }
        expired
    }

    /// When the next sweep is due, if anything is held. A block is due when
    /// it lapses ([`lapse_blocks`](Self::lapse_blocks)). A slot is due when
    /// its oldest state expires, but at most once per window: under steady
    /// traffic that batches a window's rows into one delete, and an idle
    /// slot is empty by its second sweep. A ban is due when it ends (the
    /// sweep lifts it) and when its offences are forgiven; a lease, exactly
    /// when it lapses, so its slot is reclaimed on time.
    pub fn next_sweep(&self, now_ms: u64) -> Option<u64> {
        let slots = self.slots.iter().filter_map(|slot| {
            let window = slot.limiter.spec().window_ms();
            let expiry = slot.limiter.next_expiry()?;
            Some(expiry.max(now_ms.saturating_add(window)))
        });
        let ban = self.ban.as_ref().map(|ban| {
            if ban.is_active(now_ms) {
                ban.until_ms
            } else {
                ban.forget_ms
            }
        });
        let lease = self.leases.next_expiry();
        let overridden = self.overridden.as_ref().and_then(|o| o.until_ms);
        let reservations = self.reservations.iter().map(|r| r.lapses_ms);
        let blocks = self.blocks.iter().map(|b| b.lapses_ms());
        let owed = self.stock.as_ref().and_then(|s| s.owed()).map(|o| o.2);
        slots
            .chain(owed)
            .chain(ban)
            .chain(lease)
            .chain(overridden)
            .chain(reservations)
            .chain(blocks)
            .min()
    }

    /// Forgets the key's state (an operator's reset) and says which rows to
    /// write and delete. The floor of a lock's fences stays while a repeat
    /// is possible, since a lock's fences must grow even across a reset,
    /// and an operator's override and state (configuration, not state)
    /// stay too. Admission blocks still out stay counted: a log counts
    /// them beside itself, and a fixed window or a GCRA starts afresh but
    /// for their charge ([`blocks`]).
    pub fn reset(&mut self, now_ms: u64) -> (Vec<Write>, Vec<Expired>) {
        let mut writes = Vec::new();
        let mut expired = Vec::new();
        for slot in std::mem::take(&mut self.slots) {
            match self.recharged(&slot, now_ms) {
                Some(mut kept) => {
                    let (a, b) = kept.limiter.state().unwrap_or_default();
                    slot::record(&mut kept, Recorded::State(a, b), &mut writes);
                    self.slots.push(kept);
                }
                None => expired.push(Expired::Slot { name: slot.name }),
            }
        }
        if self.ban.take().is_some() {
            expired.push(Expired::Ban);
        }
        for lease in self.leases.expire(u64::MAX) {
            expired.push(self.lease_gone(lease.id, now_ms));
        }
        self.strikes = None;
        self.restock(now_ms);
        expired.extend(self.forget_reservations());
        self.forget_idle_leases(now_ms);
        (writes, expired)
    }

    /// The key's slots and ban at `now_ms` as it stored them, changing
    /// nothing.
    pub fn peek(&mut self, now_ms: u64) -> (Vec<SlotReport>, Option<BanNotice>) {
        let slots = self
            .slots
            .iter_mut()
            .map(|slot| {
                let spec = slot.limiter.spec();
                SlotReport::of(&slot.name, spec, &mut slot.limiter, now_ms)
            })
            .collect();
        (self.with_blocks(slots, now_ms), self.active_ban(now_ms))
    }

    /// The key's policies in force for a rule that asks `asked` of it now
    /// (under an active override) and its ban, changing nothing: each as a
    /// decision would read it, its slot through the limit in force rather
    /// than the one it stored at its last decision, and one with no slot
    /// as empty.
    pub fn peek_in_force(
        &mut self,
        asked: &[(String, Spec)],
        now_ms: u64,
    ) -> (Vec<SlotReport>, Option<BanNotice>) {
        let slots = self
            .policies(asked, now_ms)
            .into_iter()
            .map(|(name, spec)| {
                self.read_with(&name, spec, |limiter| {
                    SlotReport::of(&name, spec, limiter, now_ms)
                })
            })
            .collect();
        (self.with_blocks(slots, now_ms), self.active_ban(now_ms))
    }

    /// The admissions the key's sliding log with the longest window holds,
    /// `(at_ms, count)` oldest first, with that window: exact, and stored.
    pub fn admissions(&self) -> Option<(u64, Vec<(u64, u32)>)> {
        let log = self
            .slots
            .iter()
            .filter_map(|slot| match &slot.limiter {
                Algorithm::Log(log) => Some(log),
                _ => None,
            })
            .max_by_key(|log| log.policy().window_ms())?;
        Some((log.policy().window_ms(), log.entries().collect()))
    }

    /// Whether the key holds nothing, so that its storage can be freed. A
    /// stored fence floor is held until the sweep deletes that row. Strikes
    /// and the memory of settled reservations are left out: they live in
    /// memory only, so no row waits for them.
    pub fn is_empty(&self, now_ms: u64) -> bool {
        self.slots.is_empty()
            && self.ban.is_none()
            && self.overridden.is_none()
            && self.control.is_none()
            && self.stock.is_none()
            && self.reservations.is_empty()
            && self.blocks.is_empty()
            && self.leases.is_idle(now_ms)
            && !self.leases.floor_stored()
    }
}

#[cfg(test)]
mod tests;
