//! The Durable Object that holds keys' logs: one per key by default. It is a
//! single-threaded container, so a decision and its write happen with no
//! other request in between; SQLite storage makes admissions survive
//! restarts and evictions, and one alarm sweeps what has expired.
//!
//! The ledger decides and says what to write; this file only runs SQL.
//! Storage calls here are synchronous (SQLite in the object) or storage
//! promises, so the input gate stays shut for the whole decision.

use std::cell::RefCell;

use serde::Deserialize;
use worker::{
    durable_object, js_sys, wasm_bindgen::JsValue, DurableObject, Env, Method, Request, Response,
    Result, ScheduledTime, SqlStorage, SqlStorageValue, State,
};

use super::{now_ms, respond};
use crate::http::problem::Problem;
use crate::ledger::{Expired, Ledger, Write};
use crate::protocol::{CheckRequest, Inspection, SlotState};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS policies (
  key TEXT NOT NULL, policy TEXT NOT NULL, lim INTEGER NOT NULL, window_ms INTEGER NOT NULL,
  PRIMARY KEY (key, policy)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hits (
  key TEXT NOT NULL, policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (key, policy, at)) WITHOUT ROWID;";

#[durable_object]
pub struct Limiter {
    state: State,
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    ledger: Ledger,
    /// Whether the ledger has been read back from storage.
    loaded: bool,
    /// Whether the tables exist; false on a new object and after the sweep
    /// frees storage, so that reading never creates storage.
    has_tables: bool,
    /// When the alarm is set for, as far as this instance knows.
    alarm_ms: Option<u64>,
}

#[derive(Deserialize)]
struct PolicyRow {
    key: String,
    policy: String,
    lim: u64,
    window_ms: u64,
}

#[derive(Deserialize)]
struct HitRow {
    key: String,
    policy: String,
    at: u64,
    n: u32,
}

#[derive(Deserialize)]
struct Count {
    n: u64,
}

impl DurableObject for Limiter {
    fn new(state: State, _env: Env) -> Self {
        Limiter {
            state,
            inner: RefCell::new(Inner::default()),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        self.load().await?;
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/check") => {
                let Ok(check) = req.json::<CheckRequest>().await else {
                    return respond::problem(&Problem::invalid("body", "malformed check request"));
                };
                self.check(check).await
            }
            (Method::Get, "/inspect") => Response::from_json(&self.inspect()?),
            _ => respond::problem(&Problem::new(404, "not-found", "no such container route")),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        self.load().await?;
        let now = now_ms();
        let (expired, empty, next) = {
            let mut inner = self.inner.borrow_mut();
            inner.alarm_ms = None;
            let expired = inner.ledger.sweep(now);
            (
                expired,
                inner.ledger.is_empty(),
                inner.ledger.next_sweep(now),
            )
        };
        if empty {
            self.state.storage().delete_all().await?;
            self.inner.borrow_mut().has_tables = false;
        } else {
            let sql = self.state.storage().sql();
            for gone in expired {
                delete(&sql, gone)?;
            }
            if let Some(at) = next {
                self.arm(at).await?;
            }
        }
        Response::empty()
    }
}

impl Limiter {
    async fn check(&self, check: CheckRequest) -> Result<Response> {
        let policies = match check.policies() {
            Ok(policies) => policies,
            Err(e) => return respond::problem(&Problem::invalid(e.field(), e.to_string())),
        };
        let now = now_ms();
        let (outcome, writes, due) = {
            let mut inner = self.inner.borrow_mut();
            let (outcome, writes) = inner.ledger.check(&check.key, &policies, now, check.cost);
            let due = inner.ledger.next_sweep(now);
            (outcome, writes, due)
        };
        if !writes.is_empty() {
            let sql = self.state.storage().sql();
            self.ensure_tables(&sql)?;
            for write in writes {
                put(&sql, write)?;
            }
            let armed = self.inner.borrow().alarm_ms;
            if let Some(due) = due.filter(|&due| armed.is_none_or(|armed| due < armed)) {
                self.arm(due).await?;
            }
        }
        Response::from_json(&outcome)
    }

    fn inspect(&self) -> Result<Inspection> {
        let inner = self.inner.borrow();
        let stored_rows = if inner.has_tables {
            let sql = self.state.storage().sql();
            sql.exec("SELECT COUNT(*) AS n FROM hits", None)?
                .one::<Count>()?
                .n
        } else {
            0
        };
        Ok(Inspection {
            slots: inner
                .ledger
                .slots()
                .map(|(key, policy, log)| SlotState {
                    key: key.to_string(),
                    policy: policy.to_string(),
                    limit: u64::from(log.policy().limit()),
                    window_ms: log.policy().window_ms(),
                    held: log.held(),
                })
                .collect(),
            stored_rows,
            has_storage: inner.has_tables,
            alarm_ms: inner.alarm_ms,
        })
    }

    /// Reads the ledger back from storage once per instance.
    async fn load(&self) -> Result<()> {
        if self.inner.borrow().loaded {
            return Ok(());
        }
        let sql = self.state.storage().sql();
        let has_tables =
            sql.exec(
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'hits'",
                None,
            )?
            .one::<Count>()?
            .n > 0;
        let mut ledger = Ledger::new();
        if has_tables {
            for row in sql
                .exec("SELECT key, policy, lim, window_ms FROM policies", None)?
                .to_array::<PolicyRow>()?
            {
                ledger.restore_policy(&row.key, &row.policy, row.lim, row.window_ms);
            }
            for row in sql
                .exec(
                    "SELECT key, policy, at, n FROM hits ORDER BY key, policy, at",
                    None,
                )?
                .to_array::<HitRow>()?
            {
                ledger.restore_hit(&row.key, &row.policy, row.at, row.n);
            }
        }
        let alarm_ms = self
            .state
            .storage()
            .get_alarm()
            .await?
            .and_then(|at| u64::try_from(at).ok());
        let mut inner = self.inner.borrow_mut();
        if !inner.loaded {
            *inner = Inner {
                ledger,
                loaded: true,
                has_tables,
                alarm_ms,
            };
        }
        Ok(())
    }

    fn ensure_tables(&self, sql: &SqlStorage) -> Result<()> {
        if !self.inner.borrow().has_tables {
            sql.exec(SCHEMA, None)?;
            self.inner.borrow_mut().has_tables = true;
        }
        Ok(())
    }

    async fn arm(&self, at_ms: u64) -> Result<()> {
        let when = js_sys::Date::new(&JsValue::from_f64(at_ms as f64));
        self.state
            .storage()
            .set_alarm(ScheduledTime::new(when))
            .await?;
        self.inner.borrow_mut().alarm_ms = Some(at_ms);
        Ok(())
    }
}

fn put(sql: &SqlStorage, write: Write) -> Result<()> {
    match write {
        Write::Policy { key, name, policy } => sql.exec(
            "INSERT INTO policies (key, policy, lim, window_ms) VALUES (?, ?, ?, ?)
             ON CONFLICT (key, policy) DO UPDATE SET lim = excluded.lim, window_ms = excluded.window_ms",
            vec![
                key.into(),
                name.into(),
                int(u64::from(policy.limit())),
                int(policy.window_ms()),
            ],
        )?,
        Write::Hit {
            key,
            name,
            at_ms,
            count,
        } => sql.exec(
            "INSERT INTO hits (key, policy, at, n) VALUES (?, ?, ?, ?)
             ON CONFLICT (key, policy, at) DO UPDATE SET n = n + excluded.n",
            vec![key.into(), name.into(), int(at_ms), int(u64::from(count))],
        )?,
    };
    Ok(())
}

fn delete(sql: &SqlStorage, expired: Expired) -> Result<()> {
    match expired {
        Expired::Before {
            key,
            name,
            cutoff_ms,
        } => {
            sql.exec(
                "DELETE FROM hits WHERE key = ? AND policy = ? AND at <= ?",
                vec![key.into(), name.into(), int(cutoff_ms)],
            )?;
        }
        Expired::Slot { key, name } => {
            let bind = || -> Vec<SqlStorageValue> { vec![key.clone().into(), name.clone().into()] };
            sql.exec("DELETE FROM hits WHERE key = ? AND policy = ?", bind())?;
            sql.exec("DELETE FROM policies WHERE key = ? AND policy = ?", bind())?;
        }
    }
    Ok(())
}

/// Timestamps and limits are far below 2^53, so they bind as exact
/// integers; saturating keeps a corrupt value from wrapping negative.
fn int(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}
