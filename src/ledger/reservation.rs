//! Reservations: admissions made for a request whose answer decides
//! whether they count, kept or refunded by a settle, and kept when no
//! settle comes in time.

use super::slot::record;
use super::{Ask, Ledger, Outcome, Write};
use crate::limit::{Decision, Recorded, Retry};

/// An admission made for a request whose answer decides whether it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reservation {
    pub(super) id: String,
    /// When it is kept if nobody settled it.
    pub(super) lapses_ms: u64,
    pub(super) cost: u32,
    /// Each slot it was admitted into, and the time it was logged at.
    pub(super) runs: Vec<(String, u64)>,
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
    /// slip past the limit, and writes nothing until
    /// [`settle`](Self::settle) keeps it (or refunds it, writing nothing at
    /// all). One not settled by `lapses_ms` is kept: a failed login whose
    /// answer was lost must not be free. Reservations live in memory: an
    /// object restarted before settling has forgotten them.
    pub fn reserve(
        &mut self,
        ask: &Ask<'_>,
        reservation: &str,
        lapses_ms: u64,
        now_ms: u64,
    ) -> (Outcome, Vec<Write>) {
        self.decide(ask, Some((reservation, lapses_ms)), now_ms)
    }

    /// Keeps or refunds reservation `id`. Keeping writes what an admission
    /// writes; refunding takes back exactly its own units and writes
    /// nothing. `None` for a reservation this key never had or that lapsed;
    /// a repeated settle answers as the first did and changes nothing.
    pub fn settle(&mut self, id: &str, keep: bool, now_ms: u64) -> (Option<Settled>, Vec<Write>) {
        if let Some(&(_, kept)) = self.settled.iter().find(|(s, _)| s == id) {
            return (
                Some(Settled {
                    kept,
                    repeated: true,
                }),
                Vec::new(),
            );
        }
        let Some(at) = self.reservations.iter().position(|r| r.id == id) else {
            return (None, Vec::new());
        };
        let reservation = self.reservations.remove(at);
        let mut writes = Vec::new();
        self.settle_one(&reservation, keep, &mut writes);
        self.forget_idle_slots(now_ms);
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back((reservation.id, keep));
        (
            Some(Settled {
                kept: keep,
                repeated: false,
            }),
            writes,
        )
    }

    /// Keeps every reservation whose answer never came by its lapse time.
    pub fn lapse(&mut self, now_ms: u64) -> Vec<Write> {
        let mut writes = Vec::new();
        let (lapsed, pending) = std::mem::take(&mut self.reservations)
            .into_iter()
            .partition::<Vec<_>, _>(|r| r.lapses_ms <= now_ms);
        self.reservations = pending;
        for reservation in &lapsed {
            self.settle_one(reservation, true, &mut writes);
        }
        writes
    }

    /// Keeps (writing what its admission would have written) or refunds one
    /// reservation.
    fn settle_one(&mut self, reservation: &Reservation, keep: bool, writes: &mut Vec<Write>) {
        for (name, at_ms) in &reservation.runs {
            let Some(slot) = self.slots.iter_mut().find(|s| s.name == *name) else {
                continue;
            };
            if !keep {
                slot.limiter.refund(*at_ms, reservation.cost);
                continue;
            }
            let recorded = match slot.limiter.state() {
                Some((a, b)) => Recorded::State(a, b),
                None => Recorded::Hit {
                    at_ms: *at_ms,
                    count: reservation.cost,
                },
            };
            record(slot, recorded, writes);
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
                    for (name, at_ms) in &reservation.runs {
                        if *name == slot.name {
                            freed.refund(*at_ms, reservation.cost);
                        }
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
