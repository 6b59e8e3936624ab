//! Reservations an isolate admitted from a block and had not settled when
//! it reported the block: the object takes each as a reservation of its
//! own, at its real time, as if it had admitted it by a call. A later
//! settle is then a normal settle at the object, and one that never comes
//! lapses into a kept admission, as any reservation does.

use super::super::reservation::{Reservation, Run};
use super::super::slot::record;
use super::super::{Ledger, Write};
use crate::bounds::MAX_RESERVATION_TTL_MS;
use crate::limit::{Algorithm, Recorded};

crate::wire! {
    /// A reservation admitted from a block and not settled yet: its id, its
    /// time and when it is kept unless settled (the object's clock), and its
    /// units.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Pending {
        pub id: String,
        pub at_ms: u64,
        pub cost: u32,
        pub lapses_ms: u64,
    }
}

impl Ledger {
    /// Holds `pending`, reported by a block of slot `i` whose algorithm
    /// the slot still runs: a log's units are logged at their times (one
    /// hit row each, which a refund takes back), a fixed window's and a
    /// GCRA's are in its state already (the report did not give them
    /// back). Each is a reservation, or one more run of one another block
    /// of the key reported (a key with several policies).
    pub(super) fn hold_pending(&mut self, i: usize, pending: &[Pending], writes: &mut Vec<Write>) {
        for p in pending {
            let slot = &mut self.slots[i];
            let in_slot_row = slot.stored.is_none();
            if let Algorithm::Log(log) = &mut slot.limiter {
                log.insert(p.at_ms, p.cost);
                let hit = Recorded::Hit {
                    at_ms: p.at_ms,
                    count: p.cost,
                };
                record(slot, hit, writes);
            }
            let run = Run {
                slot: slot.name.clone(),
                at_ms: p.at_ms,
                in_slot_row,
            };
            let reservation = match self.reservations.iter_mut().find(|r| r.id == p.id) {
                Some(held) => {
                    held.runs.push(run);
                    held.clone()
                }
                None => {
                    let longest = p.at_ms.saturating_add(MAX_RESERVATION_TTL_MS);
                    let held = Reservation {
                        id: p.id.clone(),
                        lapses_ms: p.lapses_ms.min(longest),
                        cost: p.cost,
                        runs: vec![run],
                    };
                    self.reservations.push(held.clone());
                    held
                }
            };
            writes.push(Write::Reservation(reservation));
        }
    }
}
