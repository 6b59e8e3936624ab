//! Reading the key object's tables back into a ledger when an instance
//! starts.

use worker::{Result, SqlStorage};

use super::{rows_if, Table, Tables};
use crate::control::Control;
use crate::edge::storage::{row, BodyRow};
use crate::input::scan::FromScan;
use crate::ledger::blocks::Block;
use crate::ledger::{override_row, Ban, Ledger, Reservation, Stock};
use crate::limit::lease::Lease;
use crate::limit::Spec;

row! {
    struct SlotRow {
        policy: String,
        kind: u64,
        a: u64,
        b: u64,
        c: u64,
        s1: u64,
        s2: u64,
    }
}

row! {
    struct HitRow {
        policy: String,
        at: u64,
        n: u32,
    }
}

row! { Ban { until_ms, offences, forget_ms, reason } }

row! {
    struct LeaseRow {
        id: String,
        owner: Option<String>,
        fence: u64,
        expires_ms: u64,
        holds: u32,
        lim: Option<u32>,
    }
}

row! {
    struct ReservationRow {
        id: String,
        lapses_ms: u64,
        cost: u32,
        runs: String,
    }
}

row! {
    struct BlockRow {
        id: u64,
        holder: String,
        policy: String,
        kind: u64,
        a: u64,
        b: u64,
        c: u64,
        admissions: u32,
        granted_ms: u64,
        until_ms: u64,
        tat_before: Option<u64>,
        tat_after: Option<u64>,
    }
}

row! {
    struct TimesRowRead {
        policy: String,
        times: String,
    }
}

row! {
    struct FloorRow {
        fence: u64,
    }
}

/// The ledger as storage holds it, from the tables that exist.
pub fn load(sql: &SqlStorage, tables: Tables) -> Result<Ledger> {
    let mut ledger = Ledger::new();
    load_limits(sql, tables, &mut ledger)?;
    load_blocks(sql, tables, &mut ledger)?;
    load_bans(sql, tables, &mut ledger)?;
    load_leases(sql, tables, &mut ledger)?;
    load_overrides(sql, tables, &mut ledger)?;
    load_reservations(sql, tables, &mut ledger)?;
    load_control(sql, tables, &mut ledger)?;
    for row in rows_if::<BodyRow>(sql, tables, Table::Stocks, "SELECT body FROM stocks")? {
        // A row that no longer reads back is dropped: the part judges its
        // stock afresh from its next check.
        if let Some(stock) = Stock::decode(&row.body) {
            ledger.restore_stock(stock);
        }
    }
    Ok(ledger)
}

/// Each policy's slot and a log's hits.
fn load_limits(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<SlotRow>(
        sql,
        tables,
        Table::Slots,
        "SELECT policy, kind, a, b, c, s1, s2 FROM slots",
    )? {
        ledger.restore_slot(
            &row.policy,
            (row.kind, row.a, row.b, row.c),
            (row.s1, row.s2),
        );
    }
    for row in rows_if::<HitRow>(
        sql,
        tables,
        Table::Hits,
        "SELECT policy, at, n FROM hits ORDER BY policy, at",
    )? {
        ledger.restore_hit(&row.policy, row.at, row.n);
    }
    Ok(())
}

/// Reported blocks' times into their logs (after the slots and hits), then
/// the blocks outstanding.
fn load_blocks(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in
        rows_if::<TimesRowRead>(sql, tables, Table::Times, "SELECT policy, times FROM times")?
    {
        // A row that does not read back, or whose slot is gone, counts
        // nothing: its slot's sweep deletes it.
        ledger.restore_times(&row.policy, &row.times);
    }
    for row in rows_if::<BlockRow>(
        sql,
        tables,
        Table::Blocks,
        "SELECT id, holder, policy, kind, a, b, c, admissions, granted_ms, until_ms, tat_before, tat_after FROM blocks",
    )? {
        // Written from a valid spec, so it reads back; a row damaged some
        // other way has no window to be counted in.
        let Some(spec) = Spec::decode(row.kind, row.a, row.b, row.c) else {
            continue;
        };
        ledger.restore_block(Block {
            id: row.id,
            holder: row.holder,
            policy: row.policy,
            spec,
            admissions: row.admissions,
            granted_ms: row.granted_ms,
            until_ms: row.until_ms,
            tat: row.tat_before.zip(row.tat_after),
        });
    }
    Ok(())
}

fn load_bans(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    let query = "SELECT until_ms, offences, forget_ms, reason FROM bans";
    for ban in rows_if::<Ban>(sql, tables, Table::Bans, query)? {
        ledger.restore_ban(ban);
    }
    Ok(())
}

/// Leases held, and the fence floor that outlives them.
fn load_leases(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<LeaseRow>(
        sql,
        tables,
        Table::Leases,
        "SELECT id, owner, fence, expires_ms, holds, lim FROM leases",
    )? {
        let lease = Lease {
            id: row.id,
            owner: row.owner,
            fence: row.fence,
            expires_ms: row.expires_ms,
            holds: row.holds,
        };
        ledger.restore_lease(lease, row.lim);
    }
    for row in rows_if::<FloorRow>(
        sql,
        tables,
        Table::FenceFloors,
        "SELECT fence FROM fence_floors",
    )? {
        ledger.restore_floor(row.fence);
    }
    Ok(())
}

fn load_overrides(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<BodyRow>(sql, tables, Table::Overrides, "SELECT body FROM overrides")? {
        // A row that no longer reads back is dropped, not fatal: the key
        // falls back to its rule's policies.
        if let Some(overridden) = override_row::decode(&row.body) {
            ledger.restore_override(overridden);
        }
    }
    Ok(())
}

/// Reservations still pending; their units are in the slots' rows.
fn load_reservations(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<ReservationRow>(
        sql,
        tables,
        Table::Reservations,
        "SELECT id, lapses_ms, cost, runs FROM reservations",
    )? {
        // A row that no longer reads back is dropped: its units stay
        // admitted, so the reservation counts as kept (the strict side).
        if let Some(reservation) = Reservation::from_row(row.id, row.lapses_ms, row.cost, &row.runs)
        {
            ledger.restore_reservation(reservation);
        }
    }
    Ok(())
}

/// The paused or closed state of the rule the object is a part of.
fn load_control(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<BodyRow>(sql, tables, Table::Controls, "SELECT body FROM controls")? {
        // A row that no longer reads back is dropped: the part is open.
        if let Ok(control) = Control::from_json(&row.body) {
            ledger.restore_control(control);
        }
    }
    Ok(())
}
