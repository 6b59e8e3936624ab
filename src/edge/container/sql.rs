//! The container's tables: the ledger's writes and deletions as SQL, and
//! reading it all back when an instance starts.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use worker::{Result, SqlCursor, SqlStorage, SqlStorageValue};

use super::super::storage::int;
use super::meter;
use crate::ledger::{Ban, Expired, Ledger, Write};
use crate::limit::lease::Lease;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS slots (
  key TEXT NOT NULL, policy TEXT NOT NULL,
  kind INTEGER NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL,
  s1 INTEGER NOT NULL, s2 INTEGER NOT NULL,
  PRIMARY KEY (key, policy)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hits (
  key TEXT NOT NULL, policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (key, policy, at)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bans (
  key TEXT NOT NULL PRIMARY KEY, until_ms INTEGER NOT NULL, offences INTEGER NOT NULL,
  forget_ms INTEGER NOT NULL, reason TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
  key TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL, holds INTEGER NOT NULL, lim INTEGER,
  PRIMARY KEY (key, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fence_floors (
  key TEXT NOT NULL PRIMARY KEY, fence INTEGER NOT NULL) WITHOUT ROWID;";

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
struct FloorRow {
    key: String,
    fence: u64,
}

#[derive(Deserialize)]
struct Count {
    n: u64,
}

/// Whether the tables exist (the last one the schema creates).
pub fn has_tables(sql: &SqlStorage) -> Result<bool> {
    let count = one_count(
        sql,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'leases'",
    )?;
    Ok(count > 0)
}

/// Every row, for an operator's inspection.
pub fn row_count(sql: &SqlStorage) -> Result<u64> {
    one_count(
        sql,
        "SELECT (SELECT COUNT(*) FROM slots) + (SELECT COUNT(*) FROM hits)
         + (SELECT COUNT(*) FROM bans) + (SELECT COUNT(*) FROM leases)
         + (SELECT COUNT(*) FROM fence_floors) AS n",
    )
}

/// Brings tables written by an earlier version to the current layout:
/// leases gained the limit they are held under (`lim`, NULL in old rows:
/// the next acquire's limit is taken), and fence floors their own table.
pub fn upgrade(sql: &SqlStorage) -> Result<()> {
    let current = one_count(
        sql,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'leases'
         AND sql LIKE '%lim INTEGER%'",
    )?;
    if current == 0 {
        run(sql, "ALTER TABLE leases ADD COLUMN lim INTEGER", Vec::new())?;
    }
    create(sql)
}

/// The ledger as storage holds it.
pub fn load(sql: &SqlStorage) -> Result<Ledger> {
    let mut ledger = Ledger::new();
    for row in rows::<SlotRow>(sql, "SELECT key, policy, kind, a, b, c, s1, s2 FROM slots")? {
        ledger.restore_slot(
            &row.key,
            &row.policy,
            (row.kind, row.a, row.b, row.c),
            (row.s1, row.s2),
        );
    }
    for row in rows::<HitRow>(
        sql,
        "SELECT key, policy, at, n FROM hits ORDER BY key, policy, at",
    )? {
        ledger.restore_hit(&row.key, &row.policy, row.at, row.n);
    }
    for row in rows::<BanRow>(
        sql,
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
    for row in rows::<LeaseRow>(
        sql,
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
    for row in rows::<FloorRow>(sql, "SELECT key, fence FROM fence_floors")? {
        ledger.restore_floor(&row.key, row.fence);
    }
    Ok(ledger)
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

/// Creates the tables.
pub fn create(sql: &SqlStorage) -> Result<()> {
    run(sql, SCHEMA, Vec::new())
}

fn count_rows(cursor: &SqlCursor) {
    meter::count(|m| {
        m.rows_read += cursor.rows_read() as u64;
        m.rows_written += cursor.rows_written() as u64;
    });
}

pub fn put(sql: &SqlStorage, write: Write) -> Result<()> {
    match write {
        Write::Slot {
            key,
            name,
            spec,
            state,
        } => {
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
            )?
        }
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
        )?,
        Write::Ban { key, ban } => run(
            sql,
            "INSERT OR REPLACE INTO bans (key, until_ms, offences, forget_ms, reason) VALUES (?, ?, ?, ?, ?)",
            vec![
                key.into(),
                int(ban.until_ms),
                int(u64::from(ban.offences)),
                int(ban.forget_ms),
                ban.reason.into(),
            ],
        )?,
        Write::Lease { key, lease, limit } => run(
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
        )?,
    };
    Ok(())
}

pub fn remove(sql: &SqlStorage, expired: Expired) -> Result<()> {
    match expired {
        Expired::Hits {
            key,
            name,
            cutoff_ms,
        } => {
            run(
                sql,
                "DELETE FROM hits WHERE key = ? AND policy = ? AND at <= ?",
                vec![key.into(), name.into(), int(cutoff_ms)],
            )?;
        }
        Expired::Slot { key, name } => {
            let bind = || -> Vec<SqlStorageValue> { vec![key.clone().into(), name.clone().into()] };
            run(sql, "DELETE FROM hits WHERE key = ? AND policy = ?", bind())?;
            run(
                sql,
                "DELETE FROM slots WHERE key = ? AND policy = ?",
                bind(),
            )?;
        }
        Expired::Ban { key } => {
            run(sql, "DELETE FROM bans WHERE key = ?", vec![key.into()])?;
        }
        Expired::Lease { key, id, floor } => {
            if let Some(fence) = floor {
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
            )?;
        }
        Expired::Floor { key } => {
            run(
                sql,
                "DELETE FROM fence_floors WHERE key = ?",
                vec![key.into()],
            )?;
        }
    }
    Ok(())
}
