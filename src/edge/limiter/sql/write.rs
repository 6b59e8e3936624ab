//! The ledger's writes and deletions as SQL: each table created when it
//! is first written.

use worker::{Result, SqlStorage, SqlStorageValue};

use super::{count_rows, run, Table, Tables};
use crate::edge::storage::int;
use crate::ledger::blocks::Block;
use crate::ledger::{override_row, Ban, Expired, Reservation, Write};
use crate::limit::lease::Lease;
use crate::limit::Spec;

/// Writes one row, creating its table first if it does not exist yet.
pub fn put(sql: &SqlStorage, tables: &mut Tables, write: Write) -> Result<()> {
    let table = match write {
        Write::Slot { .. } | Write::Respec { .. } => Some(Table::Slots),
        Write::Hit { .. } => Some(Table::Hits),
        Write::Ban(_) => Some(Table::Bans),
        Write::Override(_) => Some(Table::Overrides),
        Write::Lease { .. } => Some(Table::Leases),
        Write::Reservation(_) => Some(Table::Reservations),
        Write::Control(_) => Some(Table::Controls),
        Write::Block { .. } => Some(Table::Blocks),
        Write::Times(_) => Some(Table::Times),
        Write::Stock(_) => Some(Table::Stocks),
        // A refund changes rows its admission wrote: no table to create.
        Write::Refund { .. } => None,
    };
    if let Some(table) = table {
        tables.ensure(sql, table)?;
    }
    match write {
        Write::Respec { name, spec } => {
            let (kind, a, b, c) = spec.encode();
            run(
                sql,
                "UPDATE slots SET kind = ?, a = ?, b = ?, c = ? WHERE policy = ?",
                vec![int(kind), int(a), int(b), int(c), name.into()],
            )
        }
        Write::Slot { name, spec, state } => put_slot(sql, name, spec, state),
        Write::Hit { name, at_ms, count } => run(
            sql,
            "INSERT INTO hits (policy, at, n) VALUES (?, ?, ?)
             ON CONFLICT (policy, at) DO UPDATE SET n = n + excluded.n",
            vec![name.into(), int(at_ms), int(u64::from(count))],
        ),
        Write::Ban(ban) => put_ban(sql, ban),
        Write::Override(overridden) => run(
            sql,
            "INSERT OR REPLACE INTO overrides (rowid, body) VALUES (1, ?)",
            vec![override_row::encode(&overridden).into()],
        ),
        Write::Lease { lease, limit } => put_lease(sql, lease, limit),
        Write::Reservation(reservation) => put_reservation(sql, reservation),
        Write::Control(control) => run(
            sql,
            "INSERT OR REPLACE INTO controls (rowid, body) VALUES (1, ?)",
            vec![crate::json::to_string(&control).into()],
        ),
        Write::Refund {
            name,
            at_ms,
            count,
            in_slot_row,
        } => refund(sql, *tables, (name, at_ms, count), in_slot_row),
        Write::Block { block, replaces } => put_block(sql, block, replaces),
        Write::Times(row) => run(
            sql,
            "INSERT INTO times (policy, newest_ms, times) VALUES (?, ?, ?)",
            vec![row.policy.into(), int(row.newest_ms), row.times.into()],
        ),
        Write::Stock(stock) => run(
            sql,
            "INSERT OR REPLACE INTO stocks (rowid, body) VALUES (1, ?)",
            vec![crate::json::to_string(&stock).into()],
        ),
    }
}

/// A block's row, written over block `replaces`'s row when that is there
/// (one row written, where a delete and an insert are two), else new.
fn put_block(sql: &SqlStorage, block: Block, replaces: Option<u64>) -> Result<()> {
    if let Some(old) = replaces {
        let mut bindings = block_values(&block);
        bindings.push(int(old));
        let cursor = sql.exec(
            "UPDATE blocks SET id = ?, holder = ?, policy = ?, kind = ?, a = ?, b = ?, c = ?,
             admissions = ?, granted_ms = ?, until_ms = ?, tat_before = ?, tat_after = ?
             WHERE id = ?",
            bindings,
        )?;
        count_rows(&cursor);
        if cursor.rows_written() > 0 {
            return Ok(());
        }
    }
    run(
        sql,
        "INSERT OR REPLACE INTO blocks (id, holder, policy, kind, a, b, c, admissions, granted_ms, until_ms, tat_before, tat_after)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        block_values(&block),
    )
}

/// A block's columns, in the blocks table's order.
fn block_values(block: &Block) -> Vec<SqlStorageValue> {
    let (kind, a, b, c) = block.spec.encode();
    let (before, after) = block.tat.unzip();
    vec![
        int(block.id),
        block.holder.clone().into(),
        block.policy.clone().into(),
        int(kind),
        int(a),
        int(b),
        int(c),
        int(u64::from(block.admissions)),
        int(block.granted_ms),
        int(block.until_ms),
        before.map(int).into(),
        after.map(int).into(),
    ]
}

fn put_reservation(sql: &SqlStorage, reservation: Reservation) -> Result<()> {
    let runs = reservation.encode_runs();
    run(
        sql,
        "INSERT OR REPLACE INTO reservations (id, lapses_ms, cost, runs) VALUES (?, ?, ?, ?)",
        vec![
            reservation.id.into(),
            int(reservation.lapses_ms),
            int(u64::from(reservation.cost)),
            runs.into(),
        ],
    )
}

/// Takes a refunded reservation's `count` units at `at_ms` back out of the
/// run its slot row carries or out of its hit row, deleting a hit row left
/// empty.
fn refund(
    sql: &SqlStorage,
    tables: Tables,
    (name, at_ms, count): (String, u64, u32),
    in_slot_row: bool,
) -> Result<()> {
    let bind =
        || -> Vec<SqlStorageValue> { vec![int(u64::from(count)), name.clone().into(), int(at_ms)] };
    if in_slot_row && tables.has(Table::Slots) {
        run(
            sql,
            "UPDATE slots SET s2 = s2 - min(s2, ?) WHERE policy = ? AND s1 = ?",
            bind(),
        )?;
    } else if !in_slot_row && tables.has(Table::Hits) {
        run(
            sql,
            "DELETE FROM hits WHERE n <= ? AND policy = ? AND at = ?",
            bind(),
        )?;
        run(
            sql,
            "UPDATE hits SET n = n - ? WHERE policy = ? AND at = ?",
            bind(),
        )?;
    }
    Ok(())
}

/// A policy's slot: its spec and, for one-row algorithms, its state.
fn put_slot(sql: &SqlStorage, name: String, spec: Spec, state: (u64, u64)) -> Result<()> {
    let (kind, a, b, c) = spec.encode();
    run(
        sql,
        "INSERT INTO slots (policy, kind, a, b, c, s1, s2) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (policy) DO UPDATE SET kind = excluded.kind, a = excluded.a,
         b = excluded.b, c = excluded.c, s1 = excluded.s1, s2 = excluded.s2",
        vec![
            name.into(),
            int(kind),
            int(a),
            int(b),
            int(c),
            int(state.0),
            int(state.1),
        ],
    )
}

fn put_ban(sql: &SqlStorage, ban: Ban) -> Result<()> {
    run(
        sql,
        "INSERT OR REPLACE INTO bans (rowid, until_ms, offences, forget_ms, reason) VALUES (1, ?, ?, ?, ?)",
        vec![
            int(ban.until_ms),
            int(u64::from(ban.offences)),
            int(ban.forget_ms),
            ban.reason.into(),
        ],
    )
}

/// A lease, with the limit it is held under (`None` keeps the next
/// acquire's).
fn put_lease(sql: &SqlStorage, lease: Lease, limit: Option<u32>) -> Result<()> {
    run(
        sql,
        "INSERT OR REPLACE INTO leases (id, owner, fence, expires_ms, holds, lim) VALUES (?, ?, ?, ?, ?, ?)",
        vec![
            lease.id.into(),
            lease.owner.into(),
            int(lease.fence),
            int(lease.expires_ms),
            int(u64::from(lease.holds)),
            limit.map(|n| int(u64::from(n))).into(),
        ],
    )
}

/// Deletes what expired, from the tables that exist: a slot that only a
/// peek or a refusal changed has no row to delete, and its table may not
/// exist.
pub fn remove(sql: &SqlStorage, tables: &mut Tables, expired: Expired) -> Result<()> {
    match expired {
        Expired::Hits { name, cutoff_ms } => expire_hits(sql, *tables, &name, cutoff_ms)?,
        Expired::Slot { name } => {
            if tables.has(Table::Hits) {
                run(
                    sql,
                    "DELETE FROM hits WHERE policy = ?",
                    vec![name.clone().into()],
                )?;
            }
            if tables.has(Table::Times) {
                run(
                    sql,
                    "DELETE FROM times WHERE policy = ?",
                    vec![name.clone().into()],
                )?;
            }
            if tables.has(Table::Slots) {
                run(sql, "DELETE FROM slots WHERE policy = ?", vec![name.into()])?;
            }
        }
        Expired::Block { id } => {
            if tables.has(Table::Blocks) {
                run(sql, "DELETE FROM blocks WHERE id = ?", vec![int(id)])?;
            }
        }
        Expired::Ban => {
            if tables.has(Table::Bans) {
                run(sql, "DELETE FROM bans", Vec::new())?;
            }
        }
        Expired::Lease { id, floor } => expire_lease(sql, tables, id, floor)?,
        Expired::Override => {
            if tables.has(Table::Overrides) {
                run(sql, "DELETE FROM overrides", Vec::new())?;
            }
        }
        Expired::Control => {
            if tables.has(Table::Controls) {
                run(sql, "DELETE FROM controls", Vec::new())?;
            }
        }
        Expired::Floor => {
            if tables.has(Table::FenceFloors) {
                run(sql, "DELETE FROM fence_floors", Vec::new())?;
            }
        }
        Expired::Reservation { id } => {
            if tables.has(Table::Reservations) {
                run(
                    sql,
                    "DELETE FROM reservations WHERE id = ?",
                    vec![id.into()],
                )?;
            }
        }
    }
    Ok(())
}

/// A log's hits up to `cutoff_ms`, and a first run kept in the slot row
/// that is as old.
fn expire_hits(sql: &SqlStorage, tables: Tables, name: &str, cutoff_ms: u64) -> Result<()> {
    let bind = || -> Vec<SqlStorageValue> { vec![name.into(), int(cutoff_ms)] };
    if tables.has(Table::Hits) {
        run(sql, "DELETE FROM hits WHERE policy = ? AND at <= ?", bind())?;
    }
    if tables.has(Table::Times) {
        run(
            sql,
            "DELETE FROM times WHERE policy = ? AND newest_ms <= ?",
            bind(),
        )?;
    }
    if tables.has(Table::Slots) {
        run(
            sql,
            "UPDATE slots SET s1 = 0, s2 = 0 WHERE policy = ? AND s2 > 0 AND s1 <= ?",
            bind(),
        )?;
    }
    Ok(())
}

/// A lease that ended, leaving a fence floor when a later lease could
/// otherwise repeat its fence.
fn expire_lease(
    sql: &SqlStorage,
    tables: &mut Tables,
    id: String,
    floor: Option<u64>,
) -> Result<()> {
    if let Some(fence) = floor {
        tables.ensure(sql, Table::FenceFloors)?;
        run(
            sql,
            "INSERT INTO fence_floors (rowid, fence) VALUES (1, ?)
             ON CONFLICT (rowid) DO UPDATE SET fence = max(fence, excluded.fence)",
            vec![int(fence)],
        )?;
    }
    if tables.has(Table::Leases) {
        run(sql, "DELETE FROM leases WHERE id = ?", vec![id.into()])?;
    }
    Ok(())
}
