//! The Durable Object that holds keys' state: one per key by default. It is
//! a single-threaded container, so a decision and its write happen with no
//! other request in between; SQLite storage makes admissions and bans
//! survive restarts and evictions, and one alarm sweeps what has expired.
//!
//! The ledger decides and says what to write; this file only runs SQL.
//! Storage calls here are synchronous (SQLite in the object) or storage
//! promises, so the input gate stays shut for the whole decision.

use std::cell::RefCell;
use std::collections::HashSet;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use worker::{
    console_error, durable_object, DurableObject, Env, Method, Request, Response, Result,
    SqlStorage, SqlStorageValue, State,
};

use super::client::Objects;
use super::storage::{int, set_alarm_at};
use super::{now_ms, respond};
use crate::http::problem::Problem;
use crate::ledger::{Ban, Expired, Ledger, Write};
use crate::limit::gcra::GcraPolicy;
use crate::protocol::{
    CheckRequest, Inspection, KeyRequest, KeyState, LiveReport, ThrottleRequest,
};

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
  forget_ms INTEGER NOT NULL, reason TEXT NOT NULL) WITHOUT ROWID;";

/// Reports to the registry are background work; they get a generous
/// deadline of their own.
const REPORT_TIMEOUT_MS: u64 = 10_000;

#[durable_object]
pub struct Limiter {
    state: State,
    env: Env,
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
    /// Checks this instance has served, for measuring how many requests
    /// reach an object at all.
    checks: u64,
    /// Keys reported live to the registry, to report again when forgotten.
    /// Keys restored from storage count as reported.
    reported: HashSet<String>,
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
struct Count {
    n: u64,
}

impl DurableObject for Limiter {
    fn new(state: State, env: Env) -> Self {
        Limiter {
            state,
            env,
            inner: RefCell::new(Inner::default()),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        self.load().await?;
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/check") => match body::<CheckRequest>(&mut req).await {
                Ok(check) => self.check(check).await,
                Err(problem) => respond::problem(&problem),
            },
            (Method::Post, "/throttle") => match body::<ThrottleRequest>(&mut req).await {
                Ok(request) => self.throttle(request).await,
                Err(problem) => respond::problem(&problem),
            },
            (Method::Post, "/peek") => match body::<KeyRequest>(&mut req).await {
                Ok(request) => {
                    let (slots, ban) = self.inner.borrow_mut().ledger.peek(&request.key, now_ms());
                    Response::from_json(&KeyState { slots, ban })
                }
                Err(problem) => respond::problem(&problem),
            },
            (Method::Post, "/reset") => match body::<KeyRequest>(&mut req).await {
                Ok(request) => self.reset(&request.key).await,
                Err(problem) => respond::problem(&problem),
            },
            (Method::Get, "/inspect") => Response::from_json(&self.inspect()?),
            _ => respond::problem(&Problem::new(404, "not-found", "no such container route")),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        self.load().await?;
        let now = now_ms();
        let expired = {
            let mut inner = self.inner.borrow_mut();
            inner.alarm_ms = None;
            inner.ledger.sweep(now)
        };
        self.delete(expired).await?;
        Response::empty()
    }
}

/// A JSON body, or the problem that says it is not one.
async fn body<T: DeserializeOwned>(req: &mut Request) -> std::result::Result<T, Problem> {
    req.json::<T>()
        .await
        .map_err(|_| Problem::invalid("body", "malformed container request"))
}

impl Limiter {
    async fn check(&self, check: CheckRequest) -> Result<Response> {
        let (policies, ban) = match (check.policies(), check.ban()) {
            (Ok(policies), Ok(ban)) => (policies, ban),
            (Err(e), _) | (_, Err(e)) => return respond::problem(&Problem::invalid("body", e.0)),
        };
        let now = now_ms();
        let (outcome, writes) = {
            let mut inner = self.inner.borrow_mut();
            inner.checks += 1;
            inner
                .ledger
                .check(&check.key, &policies, now, check.cost, ban.as_ref())
        };
        self.persist(&check.key, writes, now).await?;
        Response::from_json(&outcome)
    }

    async fn throttle(&self, request: ThrottleRequest) -> Result<Response> {
        let policy = match GcraPolicy::new(request.max_burst, request.count, request.period_ms) {
            Ok(policy) => policy,
            Err(e) => return respond::problem(&Problem::invalid(e.field(), e.to_string())),
        };
        let now = now_ms();
        let answer = self.inner.borrow_mut().ledger.throttle(
            &request.key,
            "throttle",
            policy,
            now,
            request.quantity,
        );
        let Some((throttle, writes)) = answer else {
            return respond::problem(&Problem::new(
                500,
                "internal",
                "the throttle slot holds another algorithm",
            ));
        };
        self.persist(&request.key, writes, now).await?;
        Response::from_json(&throttle)
    }

    /// Writes what a decision recorded, re-arms the alarm, and reports a
    /// key that has just started holding state.
    async fn persist(&self, key: &str, writes: Vec<Write>, now: u64) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let new_key = writes
            .iter()
            .any(|w| matches!(w, Write::Slot { .. } | Write::Ban { .. }))
            && !self.inner.borrow().reported.contains(key);
        let sql = self.state.storage().sql();
        self.ensure_tables(&sql)?;
        for write in writes {
            put(&sql, write)?;
        }
        self.rearm(now).await?;
        if new_key {
            self.inner.borrow_mut().reported.insert(key.to_string());
            self.report(vec![LiveReport {
                key: key.to_string(),
                live: true,
            }]);
        }
        Ok(())
    }

    /// Tells the registry which keys started or stopped holding state, in
    /// the background: the decision does not wait for it.
    fn report(&self, reports: Vec<LiveReport>) {
        let objects = Objects::new(&self.env, REPORT_TIMEOUT_MS);
        self.state.wait_until(async move {
            if let Err(e) = objects.report_live(&reports).await {
                console_error!("sluice: could not report live keys: {e}");
            }
        });
    }

    /// An operator's reset: forget the key, and free storage if it was the
    /// last one.
    async fn reset(&self, key: &str) -> Result<Response> {
        let expired = self.inner.borrow_mut().ledger.reset(key);
        let forgot = !expired.is_empty();
        self.delete(expired).await?;
        Response::from_json(&serde_json::json!({ "reset": forgot }))
    }

    /// Deletes what the ledger expired and reports keys it forgot; frees
    /// the whole storage once the ledger is empty, and otherwise re-arms for
    /// the next sweep.
    async fn delete(&self, expired: Vec<Expired>) -> Result<()> {
        let gone: Vec<LiveReport> = {
            let mut inner = self.inner.borrow_mut();
            let forgotten: Vec<String> = inner
                .reported
                .iter()
                .filter(|key| !inner.ledger.holds(key))
                .cloned()
                .collect();
            forgotten
                .into_iter()
                .map(|key| {
                    inner.reported.remove(&key);
                    LiveReport { key, live: false }
                })
                .collect()
        };
        if !gone.is_empty() {
            self.report(gone);
        }
        let (empty, has_tables) = {
            let inner = self.inner.borrow();
            (inner.ledger.is_empty(), inner.has_tables)
        };
        if empty {
            if has_tables {
                // Whether deleteAll also clears the alarm depends on the
                // compatibility date; clearing it here keeps memory true.
                let storage = self.state.storage();
                storage.delete_all().await?;
                storage.delete_alarm().await?;
                let mut inner = self.inner.borrow_mut();
                inner.has_tables = false;
                inner.alarm_ms = None;
            }
            return Ok(());
        }
        let sql = self.state.storage().sql();
        for gone in expired {
            remove(&sql, gone)?;
        }
        self.rearm(now_ms()).await
    }

    fn inspect(&self) -> Result<Inspection> {
        let inner = self.inner.borrow();
        let stored_rows = if inner.has_tables {
            let sql = self.state.storage().sql();
            sql.exec(
                "SELECT (SELECT COUNT(*) FROM slots) + (SELECT COUNT(*) FROM hits) + (SELECT COUNT(*) FROM bans) AS n",
                None,
            )?
            .one::<Count>()?
            .n
        } else {
            0
        };
        Ok(Inspection {
            keys: inner.ledger.keys().map(str::to_string).collect(),
            stored_rows,
            has_storage: inner.has_tables,
            alarm_ms: inner.alarm_ms,
            checks: inner.checks,
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
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'bans'",
                None,
            )?
            .one::<Count>()?
            .n > 0;
        let mut ledger = Ledger::new();
        if has_tables {
            for row in
                rows::<SlotRow>(&sql, "SELECT key, policy, kind, a, b, c, s1, s2 FROM slots")?
            {
                ledger.restore_slot(
                    &row.key,
                    &row.policy,
                    (row.kind, row.a, row.b, row.c),
                    (row.s1, row.s2),
                );
            }
            for row in rows::<HitRow>(
                &sql,
                "SELECT key, policy, at, n FROM hits ORDER BY key, policy, at",
            )? {
                ledger.restore_hit(&row.key, &row.policy, row.at, row.n);
            }
            for row in rows::<BanRow>(
                &sql,
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
        }
        let ledger_keys: HashSet<String> = ledger.keys().map(str::to_string).collect();
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
                checks: 0,
                reported: ledger_keys,
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

    /// Moves the alarm earlier if the ledger is due sooner than it is set.
    async fn rearm(&self, now: u64) -> Result<()> {
        let (due, armed) = {
            let inner = self.inner.borrow();
            (inner.ledger.next_sweep(now), inner.alarm_ms)
        };
        let Some(due) = due.filter(|&due| armed.is_none_or(|armed| due < armed)) else {
            return Ok(());
        };
        set_alarm_at(&self.state.storage(), due).await?;
        self.inner.borrow_mut().alarm_ms = Some(due);
        Ok(())
    }
}

fn rows<T: DeserializeOwned>(sql: &SqlStorage, query: &str) -> Result<Vec<T>> {
    sql.exec(query, None)?.to_array::<T>()
}

fn put(sql: &SqlStorage, write: Write) -> Result<()> {
    match write {
        Write::Slot {
            key,
            name,
            spec,
            state,
        } => {
            let (kind, a, b, c) = spec.encode();
            sql.exec(
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
        } => sql.exec(
            "INSERT INTO hits (key, policy, at, n) VALUES (?, ?, ?, ?)
             ON CONFLICT (key, policy, at) DO UPDATE SET n = n + excluded.n",
            vec![key.into(), name.into(), int(at_ms), int(u64::from(count))],
        )?,
        Write::Ban { key, ban } => sql.exec(
            "INSERT OR REPLACE INTO bans (key, until_ms, offences, forget_ms, reason) VALUES (?, ?, ?, ?, ?)",
            vec![
                key.into(),
                int(ban.until_ms),
                int(u64::from(ban.offences)),
                int(ban.forget_ms),
                ban.reason.into(),
            ],
        )?,
    };
    Ok(())
}

fn remove(sql: &SqlStorage, expired: Expired) -> Result<()> {
    match expired {
        Expired::Hits {
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
            sql.exec("DELETE FROM slots WHERE key = ? AND policy = ?", bind())?;
        }
        Expired::Ban { key } => {
            sql.exec("DELETE FROM bans WHERE key = ?", vec![key.into()])?;
        }
    }
    Ok(())
}
