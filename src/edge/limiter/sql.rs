//! The key object's tables: the ledger's writes and deletions as SQL, and
//! reading it all back when an instance starts.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use worker::{Result, SqlCursor, SqlStorage, SqlStorageValue};

use super::super::storage::int;
use super::meter;
use crate::ledger::{override_row, Ban, Expired, Ledger, Write};
use crate::limit::lease::Lease;
use crate::limit::Spec;

/// The key object's tables. Each is created when it is first written, so a
/// new key's first admission creates only the table it needs (creating a
/// table counts as a row written), and a key that is only refused creates
/// none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Slots,
    Hits,
    Bans,
    Leases,
    FenceFloors,
    Overrides,
}

impl Table {
    const ALL: [Table; 6] = [
        Table::Slots,
        Table::Hits,
        Table::Bans,
        Table::Leases,
        Table::FenceFloors,
        Table::Overrides,
    ];

    fn name(self) -> &'static str {
        match self {
            Table::Slots => "slots",
            Table::Hits => "hits",
            Table::Bans => "bans",
            Table::Leases => "leases",
            Table::FenceFloors => "fence_floors",
            Table::Overrides => "overrides",
        }
    }

    fn schema(self) -> &'static str {
        match self {
            Table::Slots => {
                "CREATE TABLE IF NOT EXISTS slots (
                  key TEXT NOT NULL, policy TEXT NOT NULL,
                  kind INTEGER NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL,
                  s1 INTEGER NOT NULL, s2 INTEGER NOT NULL,
                  PRIMARY KEY (key, policy)) WITHOUT ROWID"
            }
            Table::Hits => {
                "CREATE TABLE IF NOT EXISTS hits (
                  key TEXT NOT NULL, policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL,
                  PRIMARY KEY (key, policy, at)) WITHOUT ROWID"
            }
            Table::Bans => {
                "CREATE TABLE IF NOT EXISTS bans (
                  key TEXT NOT NULL PRIMARY KEY, until_ms INTEGER NOT NULL, offences INTEGER NOT NULL,
                  forget_ms INTEGER NOT NULL, reason TEXT NOT NULL) WITHOUT ROWID"
            }
            Table::Leases => {
                "CREATE TABLE IF NOT EXISTS leases (
                  key TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL,
                  expires_ms INTEGER NOT NULL, holds INTEGER NOT NULL, lim INTEGER,
                  PRIMARY KEY (key, id)) WITHOUT ROWID"
            }
            Table::FenceFloors => {
                "CREATE TABLE IF NOT EXISTS fence_floors (
                  key TEXT NOT NULL PRIMARY KEY, fence INTEGER NOT NULL) WITHOUT ROWID"
            }
            Table::Overrides => {
                "CREATE TABLE IF NOT EXISTS overrides (
                  key TEXT NOT NULL PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID"
            }
        }
    }
}

/// Which tables exist, as far as this instance knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tables(u8);

impl Tables {
    pub fn has(self, table: Table) -> bool {
        self.0 & (1 << table as u8) != 0
    }

    fn add(&mut self, table: Table) {
        self.0 |= 1 << table as u8;
    }

    /// Whether the object holds any table, i.e. any storage.
    pub fn any(self) -> bool {
        self.0 != 0
    }

    /// Creates `table` unless it exists.
    fn ensure(&mut self, sql: &SqlStorage, table: Table) -> Result<()> {
        if !self.has(table) {
            run(sql, table.schema(), Vec::new())?;
            self.add(table);
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
struct SlotRow {
    key: String,
    policy: String,
    kind: u64,
    a: u64,
    b: u64,
    c: u64,
    s1: u64,
    s2: u64,
}

#[derive(Deserialize)]
struct HitRow {
    key: String,
    policy: String,
    at: u64,
    n: u32,
}

#[derive(Deserialize)]
struct BanRow {
    key: String,
    until_ms: u64,
    offences: u32,
    forget_ms: u64,
    reason: String,
}

#[derive(Deserialize)]
struct LeaseRow {
    key: String,
    id: String,
    owner: Option<String>,
    fence: u64,
    expires_ms: u64,
    holds: u32,
    lim: Option<u32>,
}

#[derive(Deserialize)]
struct OverrideRow {
    key: String,
    body: String,
}

#[derive(Deserialize)]
struct FloorRow {
    key: String,
    fence: u64,
}

#[derive(Deserialize)]
struct Count {
    n: u64,
}

/// The tables that exist.
pub fn existing(sql: &SqlStorage) -> Result<Tables> {
    let names = rows::<Named>(
        sql,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
    )?;
    let mut tables = Tables::default();
    for table in Table::ALL {
        if names.iter().any(|n| n.name == table.name()) {
            tables.add(table);
        }
    }
    Ok(tables)
}

/// Every row, for an operator's inspection.
pub fn row_count(sql: &SqlStorage, tables: Tables) -> Result<u64> {
    let mut total = 0;
    for table in Table::ALL.into_iter().filter(|t| tables.has(*t)) {
        total += one_count(sql, &format!("SELECT COUNT(*) AS n FROM {}", table.name()))?;
    }
    Ok(total)
}

/// Brings tables written by an earlier version to the current layout:
/// leases gained the limit they are held under (`lim`, NULL in old rows:
/// the next acquire's limit is taken).
pub fn upgrade(sql: &SqlStorage, tables: Tables) -> Result<()> {
    if !tables.has(Table::Leases) {
        return Ok(());
    }
    let current = one_count(
        sql,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'leases'
         AND sql LIKE '%lim INTEGER%'",
    )?;
    if current == 0 {
        run(sql, "ALTER TABLE leases ADD COLUMN lim INTEGER", Vec::new())?;
    }
    Ok(())
}

/// The ledger as storage holds it, from the tables that exist.
pub fn load(sql: &SqlStorage, tables: Tables) -> Result<Ledger> {
    let mut ledger = Ledger::new();
    load_limits(sql, tables, &mut ledger)?;
    load_bans(sql, tables, &mut ledger)?;
    load_leases(sql, tables, &mut ledger)?;
    load_overrides(sql, tables, &mut ledger)?;
    Ok(ledger)
}

/// Each policy's slot and a log's hits.
fn load_limits(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<SlotRow>(
        sql,
        tables,
        Table::Slots,
        "SELECT key, policy, kind, a, b, c, s1, s2 FROM slots",
    )? {
        ledger.restore_slot(
            &row.key,
            &row.policy,
            (row.kind, row.a, row.b, row.c),
            (row.s1, row.s2),
        );
    }
    for row in rows_if::<HitRow>(
        sql,
        tables,
        Table::Hits,
        "SELECT key, policy, at, n FROM hits ORDER BY key, policy, at",
    )? {
        ledger.restore_hit(&row.key, &row.policy, row.at, row.n);
    }
    Ok(())
}

fn load_bans(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<BanRow>(
        sql,
        tables,
        Table::Bans,
        "SELECT key, until_ms, offences, forget_ms, reason FROM bans",
    )? {
        let ban = Ban {
            until_ms: row.until_ms,
            offences: row.offences,
            forget_ms: row.forget_ms,
            reason: row.reason,
        };
        ledger.restore_ban(&row.key, ban);
    }
    Ok(())
}

/// Leases held, and the fence floors that outlive them.
fn load_leases(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<LeaseRow>(
        sql,
        tables,
        Table::Leases,
        "SELECT key, id, owner, fence, expires_ms, holds, lim FROM leases",
    )? {
        let lease = Lease {
            id: row.id,
            owner: row.owner,
            fence: row.fence,
            expires_ms: row.expires_ms,
            holds: row.holds,
        };
        ledger.restore_lease(&row.key, lease, row.lim);
    }
    for row in rows_if::<FloorRow>(
        sql,
        tables,
        Table::FenceFloors,
        "SELECT key, fence FROM fence_floors",
    )? {
        ledger.restore_floor(&row.key, row.fence);
    }
    Ok(())
}

fn load_overrides(sql: &SqlStorage, tables: Tables, ledger: &mut Ledger) -> Result<()> {
    for row in rows_if::<OverrideRow>(
        sql,
        tables,
        Table::Overrides,
        "SELECT key, body FROM overrides",
    )? {
        // A row that no longer reads back is dropped, not fatal: the key
        // falls back to its rule's policies.
        if let Some(overridden) = override_row::decode(&row.body) {
            ledger.restore_override(&row.key, overridden);
        }
    }
    Ok(())
}

/// The rows `query` answers, or none when `table` does not exist.
fn rows_if<T: DeserializeOwned>(
    sql: &SqlStorage,
    tables: Tables,
    table: Table,
    query: &str,
) -> Result<Vec<T>> {
    if tables.has(table) {
        rows(sql, query)
    } else {
        Ok(Vec::new())
    }
}

/// Every row a query answers, counted in the meter.
fn rows<T: DeserializeOwned>(sql: &SqlStorage, query: &str) -> Result<Vec<T>> {
    let cursor = sql.exec(query, None)?;
    let rows = cursor.to_array::<T>()?;
    count_rows(&cursor);
    Ok(rows)
}

fn one_count(sql: &SqlStorage, query: &str) -> Result<u64> {
    Ok(rows::<Count>(sql, query)?.first().map_or(0, |c| c.n))
}

/// Runs a statement that answers no rows, counted in the meter.
fn run(sql: &SqlStorage, statement: &str, bindings: Vec<SqlStorageValue>) -> Result<()> {
    let cursor = sql.exec(statement, bindings)?;
    count_rows(&cursor);
    Ok(())
}

fn count_rows(cursor: &SqlCursor) {
    meter::count(|m| {
        m.rows_read += cursor.rows_read() as u64;
        m.rows_written += cursor.rows_written() as u64;
    });
}

/// Writes one row, creating its table first if it does not exist yet.
pub fn put(sql: &SqlStorage, tables: &mut Tables, write: Write) -> Result<()> {
    let table = match write {
        Write::Slot { .. } | Write::Respec { .. } => Table::Slots,
        Write::Hit { .. } => Table::Hits,
        Write::Ban { .. } => Table::Bans,
        Write::Override { .. } => Table::Overrides,
        Write::Lease { .. } => Table::Leases,
    };
    tables.ensure(sql, table)?;
    match write {
        Write::Respec { key, name, spec } => {
            let (kind, a, b, c) = spec.encode();
            run(
                sql,
                "UPDATE slots SET kind = ?, a = ?, b = ?, c = ? WHERE key = ? AND policy = ?",
                vec![int(kind), int(a), int(b), int(c), key.into(), name.into()],
            )
        }
        Write::Slot {
            key,
            name,
            spec,
            state,
        } => put_slot(sql, key, name, spec, state),
        Write::Hit {
            key,
            name,
            at_ms,
            count,
        } => run(
            sql,
            "INSERT INTO hits (key, policy, at, n) VALUES (?, ?, ?, ?)
             ON CONFLICT (key, policy, at) DO UPDATE SET n = n + excluded.n",
            vec![key.into(), name.into(), int(at_ms), int(u64::from(count))],
        ),
        Write::Ban { key, ban } => put_ban(sql, key, ban),
        Write::Override { key, overridden } => run(
            sql,
            "INSERT OR REPLACE INTO overrides (key, body) VALUES (?, ?)",
            vec![key.into(), override_row::encode(&overridden)?.into()],
        ),
        Write::Lease { key, lease, limit } => put_lease(sql, key, lease, limit),
    }
}

/// A policy's slot: its spec and, for one-row algorithms, its state.
fn put_slot(
    sql: &SqlStorage,
    key: String,
    name: String,
    spec: Spec,
    state: (u64, u64),
) -> Result<()> {
    let (kind, a, b, c) = spec.encode();
    run(
        sql,
        "INSERT INTO slots (key, policy, kind, a, b, c, s1, s2) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key, policy) DO UPDATE SET kind = excluded.kind, a = excluded.a,
         b = excluded.b, c = excluded.c, s1 = excluded.s1, s2 = excluded.s2",
        vec![
            key.into(),
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

fn put_ban(sql: &SqlStorage, key: String, ban: Ban) -> Result<()> {
    run(
        sql,
        "INSERT OR REPLACE INTO bans (key, until_ms, offences, forget_ms, reason) VALUES (?, ?, ?, ?, ?)",
        vec![
            key.into(),
            int(ban.until_ms),
            int(u64::from(ban.offences)),
            int(ban.forget_ms),
            ban.reason.into(),
        ],
    )
}

/// A lease, with the limit it is held under (`None` keeps the next
/// acquire's).
fn put_lease(sql: &SqlStorage, key: String, lease: Lease, limit: Option<u32>) -> Result<()> {
    run(
        sql,
        "INSERT OR REPLACE INTO leases (key, id, owner, fence, expires_ms, holds, lim) VALUES (?, ?, ?, ?, ?, ?, ?)",
        vec![
            key.into(),
            lease.id.into(),
            lease.owner.into(),
            int(lease.fence),
            int(lease.expires_ms),
            int(u64::from(lease.holds)),
            limit.map(|n| int(u64::from(n))).into(),
        ],
    )
}

/// Deletes what expired, from the tables that exist.
pub fn remove(sql: &SqlStorage, tables: &mut Tables, expired: Expired) -> Result<()> {
    match expired {
        Expired::Hits {
            key,
            name,
            cutoff_ms,
        } => expire_hits(sql, *tables, &key, &name, cutoff_ms)?,
        Expired::Slot { key, name } => {
            let bind = || -> Vec<SqlStorageValue> { vec![key.clone().into(), name.clone().into()] };
            if tables.has(Table::Hits) {
                run(sql, "DELETE FROM hits WHERE key = ? AND policy = ?", bind())?;
            }
            run(
                sql,
                "DELETE FROM slots WHERE key = ? AND policy = ?",
                bind(),
            )?;
        }
        Expired::Ban { key } => {
            run(sql, "DELETE FROM bans WHERE key = ?", vec![key.into()])?;
        }
        Expired::Lease { key, id, floor } => expire_lease(sql, tables, key, id, floor)?,
        Expired::Override { key } => {
            if tables.has(Table::Overrides) {
                run(sql, "DELETE FROM overrides WHERE key = ?", vec![key.into()])?;
            }
        }
        Expired::Floor { key } => {
            if tables.has(Table::FenceFloors) {
                run(
                    sql,
                    "DELETE FROM fence_floors WHERE key = ?",
                    vec![key.into()],
                )?;
            }
        }
    }
    Ok(())
}

/// A log's hits up to `cutoff_ms`, and a first run kept in the slot row
/// that is as old.
fn expire_hits(
    sql: &SqlStorage,
    tables: Tables,
    key: &str,
    name: &str,
    cutoff_ms: u64,
) -> Result<()> {
    let bind = || -> Vec<SqlStorageValue> { vec![key.into(), name.into(), int(cutoff_ms)] };
    if tables.has(Table::Hits) {
        run(
            sql,
            "DELETE FROM hits WHERE key = ? AND policy = ? AND at <= ?",
            bind(),
        )?;
    }
    run(
        sql,
        "UPDATE slots SET s1 = 0, s2 = 0 WHERE key = ? AND policy = ? AND s2 > 0 AND s1 <= ?",
        bind(),
    )
}

/// A lease that ended, leaving a fence floor when a later lease could
/// otherwise repeat its fence.
fn expire_lease(
    sql: &SqlStorage,
    tables: &mut Tables,
    key: String,
    id: String,
    floor: Option<u64>,
) -> Result<()> {
    if let Some(fence) = floor {
        tables.ensure(sql, Table::FenceFloors)?;
        run(
            sql,
            "INSERT INTO fence_floors (key, fence) VALUES (?, ?)
             ON CONFLICT (key) DO UPDATE SET fence = max(fence, excluded.fence)",
            vec![key.clone().into(), int(fence)],
        )?;
    }
    run(
        sql,
        "DELETE FROM leases WHERE key = ? AND id = ?",
        vec![key.into(), id.into()],
    )
}
