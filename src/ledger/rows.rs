//! What the ledger tells storage to write and delete: it decides, and the
//! object's glue runs these as SQL.

use super::ban::Ban;
use super::blocks::{Block, TimesRow};
use super::{Override, Reservation};
use crate::control::Control;
use crate::limit::lease::Lease;
use crate::limit::Spec;

/// A row the caller must write for the state to survive a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// The slot's spec and, for one-row algorithms, its whole state; for
    /// a sliding log, the log's first run (`(at_ms, count)`), written with
    /// the slot so that a new key's first admission is one row.
    Slot {
        name: String,
        spec: Spec,
        state: (u64, u64),
    },
    /// A sliding log's spec changed (its limit): update the slot row and
    /// keep the run it carries.
    Respec { name: String, spec: Spec },
    /// `count` more units admitted at `at_ms` into a sliding log; rows with
    /// the same slot and timestamp add up.
    Hit {
        name: String,
        at_ms: u64,
        count: u32,
    },
    /// A refunded reservation's `count` units at `at_ms` taken back out of
    /// a sliding log's rows: the run its slot row carries (`in_slot_row`,
    /// when the reservation was the slot's first admission) or its hit row.
    Refund {
        name: String,
        at_ms: u64,
        count: u32,
        in_slot_row: bool,
    },
    /// A pending reservation, whose units are written beside it.
    Reservation(Reservation),
    /// The key's ban record, to insert or overwrite.
    Ban(Ban),
    /// The key's override, to insert or overwrite.
    Override(Override),
    /// The paused or closed state of the rule the object is a part of, to
    /// insert or overwrite.
    Control(Control),
    /// A lease, new or with changed holds or expiry, and the limit the
    /// key's leases are held under.
    Lease { lease: Lease, limit: Option<u32> },
    /// An admission block granted to an isolate, one row until it is
    /// reported or lapses ([`super::blocks`]); written over the row of
    /// block `replaces`, reported by the same call, when there is one, so
    /// that a hot key's report and next grant cost one block row, not an
    /// insert and a delete.
    Block { block: Block, replaces: Option<u64> },
    /// A reported block's real times, one row for the whole report.
    Times(TimesRow),
    /// A sold-out quota's part's stock ([`super::stock`]), to insert or
    /// overwrite.
    Stock(super::Stock),
}

/// What a sweep or reset removed, for the caller to delete from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expired {
    /// Delete the slot's log rows at or before `cutoff_ms` (a reported
    /// block's times row once its newest time is), and the run its slot
    /// row carries if that is as old.
    Hits { name: String, cutoff_ms: u64 },
    /// The slot is empty: delete its row and every log row (times rows
    /// too).
    Slot { name: String },
    /// The key's ban is over and its offences forgiven.
    Ban,
    /// The key's override lapsed or was lifted.
    Override,
    /// The rule the object is a part of was opened again.
    Control,
    /// A lease was released or lapsed. When `floor` is set, a fence could
    /// still repeat: keep it as the key's fence floor before the lease row
    /// (which held it) goes.
    Lease { id: String, floor: Option<u64> },
    /// The key's fence floor is needed no longer.
    Floor,
    /// A reservation was kept, refunded or lapsed (kept): it is pending no
    /// longer.
    Reservation { id: String },
    /// A block was reported (its times are written instead) or lapsed.
    Block { id: u64 },
}
