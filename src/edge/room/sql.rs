//! A room shard's tables: the shard's changes as SQL, and reading it all
//! back when an instance starts. Small by construction: one row of
//! counters, at most `places` offers and sessions, at most `per_minute`
//! logged starts, an hour of samples, and the operator's state when it is
//! not open (one row, kept in a table of its own, so that a shard stored
//! before rooms had a state reads back as it was: open).

use worker::{Result, SqlStorage, SqlStorageValue};

use super::super::storage::{self, int, BodyRow, Columns, FromRow};
use crate::control::Control;
use crate::input::scan::{whole, FromScan};
use crate::room::shard::{Change, Counters, Offer, Sample, Session, Stored, Terms};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS room_state (
  id INTEGER PRIMARY KEY CHECK (id = 1), terms TEXT NOT NULL, counters TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS room_offers (
  place INTEGER PRIMARY KEY, made_ms INTEGER NOT NULL, until_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS room_sessions (
  id INTEGER PRIMARY KEY, started_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS room_starts (at INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS room_minutes (
  minute_ms INTEGER PRIMARY KEY, waiting INTEGER NOT NULL, active INTEGER NOT NULL,
  admitted INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS room_control (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL);";

struct StateRow {
    terms: String,
    counters: String,
}

impl FromRow for StateRow {
    fn read(c: &mut Columns) -> Result<StateRow> {
        Ok(StateRow {
            terms: c.text()?,
            counters: c.text()?,
        })
    }
}

/// Any row of the shard's tables but the state's, its columns named `a` to
/// `d` in the query: one row type, so one reader in the wasm.
struct Row {
    a: u64,
    b: u64,
    c: u64,
    d: u64,
}

impl FromRow for Row {
    fn read(c: &mut Columns) -> Result<Row> {
        Ok(Row {
            a: c.whole()?,
            b: c.whole()?,
            c: c.whole()?,
            d: c.whole()?,
        })
    }
}

/// The terms the shard last ran under and what it stored; `None` for a
/// shard that has stored nothing yet.
pub fn load(sql: &SqlStorage) -> Result<Option<(Terms, Stored)>> {
    sql.exec(SCHEMA, None)?;
    let state: Vec<StateRow> =
        storage::rows(&sql.exec("SELECT terms, counters FROM room_state", None)?)?;
    let Some(state) = state.into_iter().next() else {
        return Ok(None);
    };
    let unreadable =
        |_| worker::Error::RustError("the room's stored state does not read back".into());
    let terms = whole(&state.terms, Terms::read).map_err(unreadable)?;
    let counters = whole(&state.counters, Counters::read).map_err(unreadable)?;
    let offers = rows(
        sql,
        "SELECT place AS a, made_ms AS b, until_ms AS c, 0 AS d FROM room_offers",
    )?
    .into_iter()
    .map(|r| {
        let offer = Offer {
            made_ms: r.b,
            until_ms: r.c,
        };
        (r.a, offer)
    })
    .collect();
    let sessions = rows(
        sql,
        "SELECT id AS a, started_ms AS b, expires_ms AS c, 0 AS d FROM room_sessions",
    )?
    .into_iter()
    .map(|r| Session {
        id: r.a,
        started_ms: r.b,
        expires_ms: r.c,
    })
    .collect();
    let admitted = rows(
        sql,
        "SELECT at AS a, n AS b, 0 AS c, 0 AS d FROM room_starts ORDER BY at",
    )?
    .into_iter()
    .map(|r| (r.a, u32::try_from(r.b).unwrap_or(u32::MAX)))
    .collect();
    let history = rows(
        sql,
        "SELECT minute_ms AS a, waiting AS b, active AS c, admitted AS d FROM room_minutes ORDER BY minute_ms",
    )?
    .into_iter()
    .map(|r| Sample {
        minute_ms: r.a,
        waiting: r.b,
        active: u32::try_from(r.c).unwrap_or(u32::MAX),
        admitted: u32::try_from(r.d).unwrap_or(u32::MAX),
    })
    .collect();
    // A row that no longer reads back is dropped: the shard is open.
    let control = storage::rows::<BodyRow>(&sql.exec("SELECT body FROM room_control", None)?)?
        .into_iter()
        .find_map(|row| Control::from_json(&row.body).ok());
    let stored = Stored {
        counters,
        offers,
        sessions,
        admitted,
        history,
        control,
    };
    Ok(Some((terms, stored)))
}

/// Applies what an operation changed; `state` is the shard's terms and
/// counters, written whenever either changed (or the row is new).
pub fn apply(
    sql: &SqlStorage,
    changes: &[Change],
    state: (Terms, Counters),
    new: bool,
) -> Result<()> {
    let mut state_changed = new;
    for change in changes {
        match *change {
            Change::Terms(_) | Change::Counters(_) => state_changed = true,
            Change::Control(ref control) => match control {
                Some(control) => run(
                    sql,
                    "INSERT OR REPLACE INTO room_control (id, body) VALUES (1, ?)",
                    vec![crate::json::to_string(control).into()],
                )?,
                None => run(sql, "DELETE FROM room_control", Vec::new())?,
            },
            Change::Offer { place, offer } => run(
                sql,
                "INSERT OR REPLACE INTO room_offers (place, made_ms, until_ms) VALUES (?, ?, ?)",
                vec![int(place), int(offer.made_ms), int(offer.until_ms)],
            )?,
            Change::OfferGone { place } => run(
                sql,
                "DELETE FROM room_offers WHERE place = ?",
                vec![int(place)],
            )?,
            Change::Session(s) => run(
                sql,
                "INSERT OR REPLACE INTO room_sessions (id, started_ms, expires_ms) VALUES (?, ?, ?)",
                vec![int(s.id), int(s.started_ms), int(s.expires_ms)],
            )?,
            Change::SessionGone { id } => {
                run(sql, "DELETE FROM room_sessions WHERE id = ?", vec![int(id)])?
            }
            Change::Admitted { at_ms } => run(
                sql,
                "INSERT INTO room_starts (at, n) VALUES (?, 1) ON CONFLICT (at) DO UPDATE SET n = n + 1",
                vec![int(at_ms)],
            )?,
            Change::AdmittedBefore { at_ms } => {
                run(sql, "DELETE FROM room_starts WHERE at <= ?", vec![int(at_ms)])?
            }
            Change::Sample(s) => run(
                sql,
                "INSERT OR REPLACE INTO room_minutes (minute_ms, waiting, active, admitted) VALUES (?, ?, ?, ?)",
                vec![int(s.minute_ms), int(s.waiting), int(u64::from(s.active)), int(u64::from(s.admitted))],
            )?,
            Change::SamplesBefore { minute_ms } => run(
                sql,
                "DELETE FROM room_minutes WHERE minute_ms < ?",
                vec![int(minute_ms)],
            )?,
        }
    }
    if state_changed {
        let (terms, counters) = state;
        run(
            sql,
            "INSERT OR REPLACE INTO room_state (id, terms, counters) VALUES (1, ?, ?)",
            vec![
                crate::json::to_string(&terms).into(),
                crate::json::to_string(&counters).into(),
            ],
        )?;
    }
    Ok(())
}

fn rows(sql: &SqlStorage, query: &str) -> Result<Vec<Row>> {
    storage::rows(&sql.exec(query, None)?)
}

fn run(sql: &SqlStorage, statement: &str, bindings: Vec<SqlStorageValue>) -> Result<()> {
    sql.exec(statement, bindings)?;
    Ok(())
}
