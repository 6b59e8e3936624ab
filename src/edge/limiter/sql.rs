//! The key object's tables: the ledger's writes and deletions as SQL, and
//! reading it all back when an instance starts.

use worker::{Result, SqlCursor, SqlStorage, SqlStorageValue};

use super::super::storage::{self, int, BodyRow, Columns, Count, FromRow};
use super::meter;
use crate::control::Control;
use crate::input::scan::whole;
use crate::ledger::blocks::Block;
use crate::ledger::{override_row, Ban, Expired, Ledger, Reservation, Write};
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
    Reservations,
    Controls,
    Blocks,
    Times,
}

impl Table {
    const ALL: [Table; 10] = [
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

/// A table as `sqlite_master` describes it.
struct Stored {
    name: String,
    /// The statement that created it, as altered since.
    sql: Option<String>,
}

impl FromRow for Stored {
    fn read(c: &mut Columns) -> Result<Stored> {
        Ok(Stored {
            name: c.text()?,
            sql: c.text_or_null()?,
        })
    }
}

struct SlotRow {
    policy: String,
    kind: u64,
    a: u64,
    b: u64,
    c: u64,
    s1: u64,
    s2: u64,
}

impl FromRow for SlotRow {
    fn read(c: &mut Columns) -> Result<SlotRow> {
        Ok(SlotRow {
            policy: c.text()?,
            kind: c.whole()?,
            a: c.whole()?,
            b: c.whole()?,
            c: c.whole()?,
            s1: c.whole()?,
            s2: c.whole()?,
        })
    }
}

struct HitRow {
    policy: String,
    at: u64,
    n: u32,
}

impl FromRow for HitRow {
    fn read(c: &mut Columns) -> Result<HitRow> {
        Ok(HitRow {
            policy: c.text()?,
            at: c.whole()?,
            n: c.small()?,
        })
    }
}

struct BanRow {
    until_ms: u64,
    offences: u32,
    forget_ms: u64,
    reason: String,
}

impl FromRow for BanRow {
    fn read(c: &mut Columns) -> Result<BanRow> {
        Ok(BanRow {
            until_ms: c.whole()?,
            offences: c.small()?,
            forget_ms: c.whole()?,
            reason: c.text()?,
        })
    }
}

struct LeaseRow {
    id: String,
    owner: Option<String>,
    fence: u64,
    expires_ms: u64,
    holds: u32,
    lim: Option<u32>,
}

impl FromRow for LeaseRow {
    fn read(c: &mut Columns) -> Result<LeaseRow> {
        Ok(LeaseRow {
            id: c.text()?,
            owner: c.text_or_null()?,
            fence: c.whole()?,
            expires_ms: c.whole()?,
            holds: c.small()?,
            lim: c.small_or_null()?,
        })
    }
}

struct ReservationRow {
    id: String,
    lapses_ms: u64,
    cost: u32,
    runs: String,
}

impl FromRow for ReservationRow {
    fn read(c: &mut Columns) -> Result<ReservationRow> {
        Ok(ReservationRow {
            id: c.text()?,
            lapses_ms: c.whole()?,
            cost: c.small()?,
            runs: c.text()?,
        })
    }
}

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

impl FromRow for BlockRow {
    fn read(c: &mut Columns) -> Result<BlockRow> {
        Ok(BlockRow {
            id: c.whole()?,
            holder: c.text()?,
            policy: c.text()?,
            kind: c.whole()?,
            a: c.whole()?,
            b: c.whole()?,
            c: c.whole()?,
            admissions: c.small()?,
            granted_ms: c.whole()?,
            until_ms: c.whole()?,
            tat_before: c.whole_or_null()?,
            tat_after: c.whole_or_null()?,
        })
    }
}

struct TimesRowRead {
    policy: String,
    times: String,
}

impl FromRow for TimesRowRead {
    fn read(c: &mut Columns) -> Result<TimesRowRead> {
        Ok(TimesRowRead {
            policy: c.text()?,
            times: c.text()?,
        })
    }
}

struct FloorRow {
    fence: u64,
}

impl FromRow for FloorRow {
    fn read(c: &mut Columns) -> Result<FloorRow> {
        Ok(FloorRow { fence: c.whole()? })
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
    for row in rows_if::<BanRow>(
        sql,
        tables,
        Table::Bans,
        "SELECT until_ms, offences, forget_ms, reason FROM bans",
    )? {
        ledger.restore_ban(Ban {
            until_ms: row.until_ms,
            offences: row.offences,
            forget_ms: row.forget_ms,
            reason: row.reason,
        });
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
        if let Ok(control) = whole(&row.body, Control::read) {
            ledger.restore_control(control);
        }
    }
    Ok(())
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
