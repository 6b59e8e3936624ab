//! The key object's tables: which exist and their layout, here; reading
//! them back when an instance starts, in `load`; the ledger's writes and
//! deletions as SQL, in `write`.

mod load;
mod write;

pub use load::load;
pub use write::{put, remove};

use worker::{Result, SqlCursor, SqlStorage, SqlStorageValue};

use super::meter;
use crate::edge::storage::{self, row, Count, FromRow};

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
    Reservations,
    Controls,
    Blocks,
    Times,
    Stocks,
}

impl Table {
    const ALL: [Table; 11] = [
        Table::Slots,
        Table::Hits,
        Table::Bans,
        Table::Leases,
        Table::FenceFloors,
        Table::Overrides,
        Table::Reservations,
        Table::Controls,
        Table::Blocks,
        Table::Times,
        Table::Stocks,
    ];

    fn name(self) -> &'static str {
        match self {
            Table::Slots => "slots",
            Table::Hits => "hits",
            Table::Bans => "bans",
            Table::Leases => "leases",
            Table::FenceFloors => "fence_floors",
            Table::Overrides => "overrides",
            Table::Reservations => "reservations",
            Table::Controls => "controls",
            Table::Blocks => "blocks",
            Table::Times => "times",
            Table::Stocks => "stocks",
        }
    }

    /// The table's columns. An object holds one key, so no table has a
    /// key column: the slot's policy names a slot and a log's rows, the
    /// lease id a lease, and the four one-row tables keep their row at
    /// rowid 1.
    fn columns(self) -> &'static str {
        match self {
            Table::Slots => {
                "policy TEXT NOT NULL PRIMARY KEY, kind INTEGER NOT NULL,
                 a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL,
                 s1 INTEGER NOT NULL, s2 INTEGER NOT NULL"
            }
            Table::Hits => {
                "policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL,
                 PRIMARY KEY (policy, at)"
            }
            Table::Bans => {
                "until_ms INTEGER NOT NULL, offences INTEGER NOT NULL,
                 forget_ms INTEGER NOT NULL, reason TEXT NOT NULL"
            }
            Table::Leases => {
                "id TEXT NOT NULL PRIMARY KEY, owner TEXT, fence INTEGER NOT NULL,
                 expires_ms INTEGER NOT NULL, holds INTEGER NOT NULL, lim INTEGER"
            }
            Table::FenceFloors => "fence INTEGER NOT NULL",
            Table::Overrides => "body TEXT NOT NULL",
            // `runs`: JSON, each slot the reservation's units are in
            // (`Reservation::encode_runs`).
            Table::Reservations => {
                "id TEXT NOT NULL PRIMARY KEY, lapses_ms INTEGER NOT NULL,
                 cost INTEGER NOT NULL, runs TEXT NOT NULL"
            }
            // The state of the rule a global quota's part belongs to, when
            // it is paused or closed: JSON, as the worker sends it.
            Table::Controls => "body TEXT NOT NULL",
            // An admission block outstanding (`ledger::blocks`): its
            // policy's spec at the grant as a slot row encodes it, and a
            // GCRA's TATs before and after the grant (NULL otherwise).
            Table::Blocks => {
                "id INTEGER NOT NULL PRIMARY KEY, holder TEXT NOT NULL, policy TEXT NOT NULL,
                 kind INTEGER NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL,
                 c INTEGER NOT NULL, admissions INTEGER NOT NULL,
                 granted_ms INTEGER NOT NULL, until_ms INTEGER NOT NULL,
                 tat_before INTEGER, tat_after INTEGER"
            }
            // A reported block's real times, one row per report
            // (`ledger::blocks::times`), kept until its newest one expires.
            Table::Times => "policy TEXT NOT NULL, newest_ms INTEGER NOT NULL, times TEXT NOT NULL",
            // A sold-out quota's part's stock (`ledger::stock`): JSON.
            Table::Stocks => "body TEXT NOT NULL",
        }
    }

    /// Whether a row is found by its primary key alone (clustered, without
    /// SQLite's rowid), rather than being the table's one row.
    fn keyed(self) -> bool {
        matches!(
            self,
            Table::Slots | Table::Hits | Table::Leases | Table::Reservations | Table::Blocks
        )
    }

    /// The statement that creates the table, named `name`.
    fn create(self, name: &str) -> String {
        let rowid = if self.keyed() { " WITHOUT ROWID" } else { "" };
        format!(
            "CREATE TABLE IF NOT EXISTS {name} ({}){rowid}",
            self.columns()
        )
    }

    /// The table while it is being moved to this layout.
    fn moving(self) -> String {
        format!("{}_next", self.name())
    }

    /// How the rows of the table in the layout before this one (a `key`
    /// text column first, since an object was once meant to hold many
    /// keys) become rows of this one: the columns written, and the query
    /// that selects them from the old table. Every object has held one key,
    /// so rows move as they are; were there two, the runs of a log's
    /// millisecond would add up, the highest fence floor would stay, and
    /// one row of any other table's would be kept rather than fail the load.
    fn moved_from_keyed(self) -> (&'static str, &'static str) {
        match self {
            Table::Slots => (
                "policy, kind, a, b, c, s1, s2",
                "SELECT policy, kind, a, b, c, s1, s2 FROM slots",
            ),
            Table::Hits => (
                "policy, at, n",
                "SELECT policy, at, SUM(n) FROM hits GROUP BY policy, at",
            ),
            Table::Bans => (
                "rowid, until_ms, offences, forget_ms, reason",
                "SELECT 1, until_ms, offences, forget_ms, reason FROM bans LIMIT 1",
            ),
            Table::Leases => (
                "id, owner, fence, expires_ms, holds, lim",
                "SELECT id, owner, fence, expires_ms, holds, lim FROM leases",
            ),
            Table::FenceFloors => (
                "rowid, fence",
                "SELECT 1, fence FROM fence_floors ORDER BY fence DESC LIMIT 1",
            ),
            Table::Overrides => ("rowid, body", "SELECT 1, body FROM overrides LIMIT 1"),
            // Reservations and states were first stored after the key
            // column went.
            Table::Reservations => (
                "id, lapses_ms, cost, runs",
                "SELECT id, lapses_ms, cost, runs FROM reservations",
            ),
            Table::Controls => ("rowid, body", "SELECT 1, body FROM controls LIMIT 1"),
            // Blocks and their times were first stored long after.
            Table::Blocks => (
                "id, holder, policy, kind, a, b, c, admissions, granted_ms, until_ms, tat_before, tat_after",
                "SELECT id, holder, policy, kind, a, b, c, admissions, granted_ms, until_ms, tat_before, tat_after FROM blocks",
            ),
            Table::Times => (
                "policy, newest_ms, times",
                "SELECT policy, newest_ms, times FROM times",
            ),
            Table::Stocks => ("rowid, body", "SELECT 1, body FROM stocks LIMIT 1"),
        }
    }
}

/// Which tables exist, as far as this instance knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tables(u16);

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
            run(sql, &table.create(table.name()), Vec::new())?;
            self.add(table);
        }
        Ok(())
    }
}

row! {
    /// A table as `sqlite_master` describes it.
    struct Stored {
        name: String,
        /// The statement that created it, as altered since.
        sql: Option<String>,
    }
}
/// The tables that exist, each brought to the current layout first if an
/// earlier version wrote it; one read of the schema either way.
pub fn existing(sql: &SqlStorage) -> Result<Tables> {
    let stored = rows::<Stored>(
        sql,
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
    )?;
    let named = |name: &str| stored.iter().find(|s| s.name == name);
    let mut tables = Tables::default();
    for table in Table::ALL {
        match (named(table.name()), named(&table.moving())) {
            (None, None) => continue,
            // A move stopped before it dropped the old table: its copy may
            // be partial, the old table is whole. Start it again.
            (Some(found), Some(_)) => {
                run(sql, &format!("DROP TABLE {}", table.moving()), Vec::new())?;
                upgrade(sql, table, found.sql.as_deref().unwrap_or_default())?;
            }
            (Some(found), None) => upgrade(sql, table, found.sql.as_deref().unwrap_or_default())?,
            // A move stopped after it dropped the old table: the copy is
            // whole, only its name is left to change.
            (None, Some(_)) => run(
                sql,
                &format!("ALTER TABLE {} RENAME TO {}", table.moving(), table.name()),
                Vec::new(),
            )?,
        }
        tables.add(table);
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

/// Brings `table`, created by `schema`, to the current layout, in the order
/// the layouts changed: leases gained the limit they are held under (`lim`,
/// NULL in old rows: the next acquire's limit is taken), then every table
/// lost its `key` column. Each table is moved once, the first time an
/// instance of its object starts on this version; its rows are kept as
/// they were.
fn upgrade(sql: &SqlStorage, table: Table, schema: &str) -> Result<()> {
    if table == Table::Leases && !schema.contains("lim INTEGER") {
        run(sql, "ALTER TABLE leases ADD COLUMN lim INTEGER", Vec::new())?;
    }
    // Case matters: the current layouts say `PRIMARY KEY`, never `key TEXT`.
    if schema.contains("key TEXT NOT NULL") {
        drop_key_column(sql, table)?;
    }
    Ok(())
}

/// Rewrites `table` without its `key` column: a copy under
/// [`Table::moving`]'s name, then the old table dropped and the copy
/// renamed. Each statement is atomic on its own; were a move cut short
/// between them, [`existing`] finishes or restarts it when the object next
/// starts.
fn drop_key_column(sql: &SqlStorage, table: Table) -> Result<()> {
    let name = table.name();
    let next = table.moving();
    let (columns, select) = table.moved_from_keyed();
    run(sql, &table.create(&next), Vec::new())?;
    run(
        sql,
        &format!("INSERT OR REPLACE INTO {next} ({columns}) {select}"),
        Vec::new(),
    )?;
    run(sql, &format!("DROP TABLE {name}"), Vec::new())?;
    run(
        sql,
        &format!("ALTER TABLE {next} RENAME TO {name}"),
        Vec::new(),
    )
}

/// The rows `query` answers, or none when `table` does not exist.
fn rows_if<T: FromRow>(
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
fn rows<T: FromRow>(sql: &SqlStorage, query: &str) -> Result<Vec<T>> {
    let cursor = sql.exec(query, None)?;
    let rows = storage::rows(&cursor)?;
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
