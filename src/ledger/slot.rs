//! A slot: one policy's limiter in a key's ledger, what storage holds of
//! it, and the rows an admission into it writes.

use super::{Ledger, PolicyDecision, Write};
use crate::limit::spread::Cursor;
use crate::limit::{Algorithm, Decision, Recorded, Spec};

#[derive(Debug)]
pub(super) struct Slot {
    pub(super) name: String,
    pub(super) limiter: Algorithm,
    /// The spec storage holds for this slot, if it holds any rows: a spec
    /// changed by a refused request is written with the next admission, and
    /// a slot with rows stays until the sweep deletes them.
    pub(super) stored: Option<Spec>,
    /// How far its refusals' invitations have gone (memory only: a
    /// refusal writes nothing).
    pub(super) invited: Cursor,
}

crate::wire! {
    /// A slot's state as an operator sees it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SlotReport {
        pub policy: String,
        pub limit: u64,
        pub window_ms: u64,
        /// Units that count now (limit minus remaining).
        pub used: u64,
        pub remaining: u64,
        pub reset_ms: u64,
    }
}

impl SlotReport {
    /// A policy's state as an operator reads it from its limiter.
    pub(super) fn of(name: &str, spec: Spec, limiter: &mut Algorithm, now_ms: u64) -> SlotReport {
        let d = limiter.decide(now_ms, 0);
        // A log counts what it holds: after an override lowered its limit,
        // that may be more than the limit.
        let used = match limiter {
            Algorithm::Log(log) => log.held(),
            _ => d.limit.saturating_sub(d.remaining),
        };
        SlotReport {
            policy: name.to_string(),
            limit: d.limit,
            window_ms: spec.window_ms(),
            used,
            remaining: d.remaining,
            reset_ms: d.reset_ms,
        }
    }
}

impl Ledger {
    /// Restores a slot from its storage row (before its hit rows). Returns
    /// false (and keeps nothing) for a row that no longer validates.
    pub fn restore_slot(
        &mut self,
        name: &str,
        encoded: (u64, u64, u64, u64),
        state: (u64, u64),
    ) -> bool {
        let (kind, a, b, c) = encoded;
        let Some(spec) = Spec::decode(kind, a, b, c) else {
            return false;
        };
        let i = slot_for(&mut self.slots, name, spec);
        let slot = &mut self.slots[i];
        if slot.limiter.is_log() {
            // The log's first run, older than any of its hit rows.
            if let Ok(count @ 1..) = u32::try_from(state.1) {
                slot.limiter.restore_hit(state.0, count);
            }
        } else {
            slot.limiter.restore_state(state.0, state.1);
        }
        slot.stored = Some(spec);
        true
    }

    /// Restores a sliding-log row; rows must come in time order per slot.
    /// Rows of a slot without a slot row are ignored.
    pub fn restore_hit(&mut self, name: &str, at_ms: u64, count: u32) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.name == name) {
            slot.limiter.restore_hit(at_ms, count);
        }
    }

    /// Forgets the slots that hold nothing: no admission that still counts
    /// and no row. A slot with rows stays until the sweep deletes them.
    pub(super) fn forget_idle_slots(&mut self, now_ms: u64) {
        self.slots
            .retain(|slot| slot.stored.is_some() || !slot.limiter.is_idle(now_ms));
    }
}

/// The index of the slot named `name`, created or updated to `spec`.
pub(super) fn slot_for(slots: &mut Vec<Slot>, name: &str, spec: Spec) -> usize {
    match slots.iter().position(|slot| slot.name == name) {
        Some(i) => {
            if slots[i].limiter.spec() != spec {
                slots[i].limiter.set_spec(spec);
            }
            i
        }
        None => {
            slots.push(Slot {
                name: name.to_string(),
                limiter: Algorithm::new(spec),
                stored: None,
                invited: Cursor::default(),
            });
            slots.len() - 1
        }
    }
}

/// Each requested policy's decision: `kept(n)` for the n-th when it is to be
/// reported as decided, otherwise the state it holds (a peek).
pub(super) fn report(
    slots: &mut [Slot],
    indices: &[usize],
    now_ms: u64,
    kept: impl Fn(usize) -> Option<Decision>,
) -> Vec<PolicyDecision> {
    indices
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let slot = &mut slots[i];
            PolicyDecision {
                name: slot.name.clone(),
                window_ms: slot.limiter.spec().window_ms(),
                decision: kept(n).unwrap_or_else(|| slot.limiter.decide(now_ms, 0)),
            }
        })
        .collect()
}

pub(super) fn admit(slot: &mut Slot, now_ms: u64, cost: u32, writes: &mut Vec<Write>) {
    let recorded = slot.limiter.admit(now_ms, cost);
    record(slot, recorded, writes);
}

/// The rows an admission into `slot` writes.
pub(super) fn record(slot: &mut Slot, recorded: Recorded, writes: &mut Vec<Write>) {
    let spec = slot.limiter.spec();
    let name = slot.name.clone();
    match (recorded, slot.stored) {
        // A log's slot row carries its first run, so that a new key's first
        // admission is one row.
        (Recorded::Hit { at_ms, count }, None) => writes.push(Write::Slot {
            name,
            spec,
            state: (at_ms, u64::from(count)),
        }),
        (Recorded::Hit { at_ms, count }, Some(stored)) => {
            if stored != spec {
                writes.push(Write::Respec {
                    name: name.clone(),
                    spec,
                });
            }
            writes.push(Write::Hit { name, at_ms, count });
        }
        (Recorded::State(a, b), _) => writes.push(Write::Slot {
            name,
            spec,
            state: (a, b),
        }),
    }
    slot.stored = Some(spec);
}
