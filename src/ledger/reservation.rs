//! Reservations: admissions whose request's answer decides whether they
//! count, kept or refunded by a settle and kept when none comes in time.
//! Admitted and written before they are answered, with a row of their own,
//! so a restart forgets none and a lost row keeps units (the strict side).

use super::slot::record;
use super::{Ask, Expired, Ledger, Outcome, Write};
use crate::input::scan::FromScan;
use crate::limit::{Decision, Recorded, Retry};

/// An admission made for a request whose answer decides whether it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    /// When it is kept if nobody settled it.
    pub lapses_ms: u64,
    pub cost: u32,
    /// Each slot it was admitted into.
    pub runs: Vec<Run>,
}

/// A reservation's units in one slot, and where storage holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub slot: String,
    /// The time they were logged at.
    pub at_ms: u64,
    /// Whether they are the log's first run, which the slot row carries
    /// (the slot was new), rather than a hit row. One-row algorithms keep
    /// them in their state.
    pub in_slot_row: bool,
}

impl Reservation {
    /// The runs as the reservation row's `runs` column holds them (JSON):
    /// `[slot, at_ms, in_slot_row]` each.
    pub fn encode_runs(&self) -> String {
        let runs: Vec<(&str, u64, bool)> = self
            .runs
            .iter()
            .map(|r| (r.slot.as_str(), r.at_ms, r.in_slot_row))
            .collect();
        crate::json::to_string(&runs)
    }

    /// A reservation from its row; `None` if its runs no longer read back.
    pub fn from_row(id: String, lapses_ms: u64, cost: u32, runs: &str) -> Option<Reservation> {
        let runs = Vec::<(String, u64, bool)>::from_json(runs).ok()?;
        Some(Reservation {
            id,
            lapses_ms,
            cost,
            runs: runs
                .into_iter()
                .map(|(slot, at_ms, in_slot_row)| Run {
                    slot,
                    at_ms,
                    in_slot_row,
                })
                .collect(),
        })
    }
}

/// How soon a request refused only because of pending reservations is
/// told to retry, unless its window has room sooner: a pending attempt
/// usually settles within the origin's answer time, and whether it is kept
/// or refunded cannot be foreseen, so the window's end is only the worst
/// case, and telling a user who logs in successfully to wait for it would
/// lock them out for nothing.
pub const PENDING_RETRY_MS: u64 = 1_000;

/// How many settled reservations an object remembers, for repeated
/// settles.
const SETTLED_MEMORY: usize = 256;

/// The answer to a settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub kept: bool,
    /// The reservation was settled before; nothing changed this time.
    pub repeated: bool,
}

impl Ledger {
    /// Like [`check`](Self::check), but an admission is a reservation: it
    /// counts against every policy at once, so concurrent requests cannot
    /// slip past the limit, until [`settle`](Self::settle) keeps or refunds
    /// it. One not settled by `lapses_ms` is kept: a failed login whose
    /// answer was lost must not be free. It writes what an admission writes
    /// and its own row ([`Write::Reservation`]), so that a restart keeps it.
    pub fn reserve(
        &mut self,
        ask: &Ask<'_>,
        reservation: &str,
        lapses_ms: u64,
        now_ms: u64,
    ) -> (Outcome, Vec<Write>) {
        self.check_inviting(ask, Some((reservation, lapses_ms)), 1, now_ms)
    }

    /// Admits `cost` units into the slots `indices` as reservation `id`.
    pub(super) fn admit_reserved(
        &mut self,
        indices: &[usize],
        (id, lapses_ms): (&str, u64),
        cost: u32,
        now_ms: u64,
        writes: &mut Vec<Write>,
    ) {
        let runs = indices
            .iter()
            .map(|&i| {
                let slot = &mut self.slots[i];
                let in_slot_row = slot.stored.is_none();
                let recorded = slot.limiter.admit(now_ms, cost);
                let at_ms = match recorded {
                    Recorded::Hit { at_ms, .. } => at_ms,
                    Recorded::State(..) => now_ms,
                };
                record(slot, recorded, writes);
                Run {
                    slot: slot.name.clone(),
                    at_ms,
                    in_slot_row,
                }
            })
            .collect();
        let reservation = Reservation {
            id: id.to_string(),
            lapses_ms,
            cost,
            runs,
        };
        writes.push(Write::Reservation(reservation.clone()));
        self.reservations.push(reservation);
    }

    /// Keeps or refunds reservation `id`. Keeping deletes its row (its
    /// units were written when it was admitted); refunding takes back
    /// exactly its own units, from memory and from the rows. `None` for a
    /// reservation this key never had or that lapsed, even if the alarm
    /// has not kept it yet; a repeated settle answers as the first did and
    /// changes nothing.
    pub fn settle(
        &mut self,
        id: &str,
        keep: bool,
        now_ms: u64,
    ) -> (Option<Settled>, Vec<Write>, Vec<Expired>) {
        if let Some(&(_, kept)) = self.settled.iter().find(|(s, _)| s == id) {
            let repeated = Settled {
                kept,
                repeated: true,
            };
            return (Some(repeated), Vec::new(), Vec::new());
        }
        let mut expired = self.lapse(now_ms);
        let Some(at) = self.reservations.iter().position(|r| r.id == id) else {
            return (None, Vec::new(), expired);
        };
        let reservation = self.reservations.remove(at);
        let mut writes = Vec::new();
        if !keep {
            self.refund(&reservation, now_ms, &mut writes, &mut expired);
        }
        expired.push(Expired::Reservation {
            id: reservation.id.clone(),
        });
        self.forget_idle_slots(now_ms);
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back((reservation.id, keep));
        let settled = Settled {
            kept: keep,
            repeated: false,
        };
        (Some(settled), writes, expired)
    }

    /// Keeps every reservation whose answer never came by its lapse time:
    /// its units are written already, so only its row goes.
    pub fn lapse(&mut self, now_ms: u64) -> Vec<Expired> {
        let (lapsed, pending) = std::mem::take(&mut self.reservations)
            .into_iter()
            .partition::<Vec<_>, _>(|r| r.lapses_ms <= now_ms);
        self.reservations = pending;
        lapsed
            .into_iter()
            .map(|r| Expired::Reservation { id: r.id })
            .collect()
    }

    /// Restores a reservation row (after the slots and hits hold its units).
    pub fn restore_reservation(&mut self, reservation: Reservation) {
        self.reservations.push(reservation);
    }

    /// Forgets every pending reservation (an operator's reset), saying
    /// which rows to delete.
    pub(super) fn forget_reservations(&mut self) -> impl Iterator<Item = Expired> {
        std::mem::take(&mut self.reservations)
            .into_iter()
            .map(|r| Expired::Reservation { id: r.id })
    }

    /// Takes one reservation's units back. A slot that then holds nothing
    /// that counts is forgotten, rows and all; otherwise the rows lose
    /// exactly what memory lost (nothing, for units that expired meanwhile).
    fn refund(
        &mut self,
        reservation: &Reservation,
        now_ms: u64,
        writes: &mut Vec<Write>,
        expired: &mut Vec<Expired>,
    ) {
        for run in &reservation.runs {
            let Some(at) = self.slots.iter().position(|s| s.name == run.slot) else {
                continue;
            };
            let slot = &mut self.slots[at];
            let taken = slot.limiter.refund(run.at_ms, reservation.cost);
            if slot.limiter.is_idle(now_ms) {
                let slot = self.slots.remove(at);
                expired.push(Expired::Slot { name: slot.name });
                continue;
            }
            match slot.limiter.state() {
                _ if taken == 0 => {}
                Some((a, b)) => record(slot, Recorded::State(a, b), writes),
                None => writes.push(Write::Refund {
                    name: slot.name.clone(),
                    at_ms: run.at_ms,
                    count: taken,
                    in_slot_row: run.in_slot_row,
                }),
            }
        }
    }

    /// Whether a refusal only pending reservations caused: every refusing
    /// policy (`decisions[n]` for the slot `indices[n]`) would admit `cost`
    /// units with every pending reservation's units given back.
    pub(super) fn refused_for_pending(
        &self,
        indices: &[usize],
        decisions: &[Decision],
        cost: u32,
        now_ms: u64,
    ) -> bool {
        if self.reservations.is_empty() {
            return false;
        }
        indices
            .iter()
            .zip(decisions)
            .filter(|(_, d)| !d.allowed)
            .all(|(&i, _)| {
                let slot = &self.slots[i];
                let mut freed = slot.limiter.clone();
                for reservation in &self.reservations {
                    for run in reservation.runs.iter().filter(|r| r.slot == slot.name) {
                        freed.refund(run.at_ms, reservation.cost);
                    }
                }
                freed.decide(now_ms, cost).allowed
            })
    }
}

/// A pending refusal's decision: a refusing policy is told to retry in
/// [`PENDING_RETRY_MS`], or sooner if its window has room sooner, and that
/// a unit may free up as soon (`reset_ms`, the RateLimit field's `t`): a
/// refund may come at any moment, and a refused request's `t` is its
/// `Retry-After`.
pub(super) fn pending_retry(mut decision: Decision) -> Decision {
    if !decision.allowed {
        decision.retry = decision.retry.min(Retry::After(PENDING_RETRY_MS));
        decision.reset_ms = decision.reset_ms.min(PENDING_RETRY_MS);
    }
    decision
}
