//! The registry: one Durable Object that indexes what no single container
//! knows. Containers and isolates report to it in the background (bans that
//! started, keys that became live or empty, per-minute decision counts), and
//! it holds the operators' manual bans. The admin API reads it. Its alarm
//! deletes bans that ended and counts older than [`KEEP_STATS_MS`], so
//! listings stay correct as bans expire.

use std::cell::Cell;

use serde::Deserialize;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage, State,
};

use super::storage::{int, set_alarm_at};
use super::{now_ms, respond};
use crate::banlist::BanRecord;
use crate::http::problem::Problem;
use crate::protocol::{LiveReport, UnbanRequest};
use crate::stats::{rule_of, summarize, StatRow};

/// Per-minute counts are kept a week.
pub const KEEP_STATS_MS: u64 = 7 * 24 * 3_600_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS bans (
  key TEXT NOT NULL, source TEXT NOT NULL, until_ms INTEGER NOT NULL, reason TEXT NOT NULL,
  PRIMARY KEY (key, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stats (
  rule TEXT NOT NULL, minute_ms INTEGER NOT NULL,
  admitted INTEGER NOT NULL, refused INTEGER NOT NULL, failed INTEGER NOT NULL,
  PRIMARY KEY (rule, minute_ms)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS live (key TEXT NOT NULL PRIMARY KEY, rule TEXT NOT NULL) WITHOUT ROWID;";

#[durable_object]
pub struct Registry {
    state: State,
    /// Whether this instance has made sure the tables exist.
    ready: Cell<bool>,
}

#[derive(Deserialize)]
struct LiveCount {
    rule: String,
    n: u64,
}

#[derive(Deserialize)]
struct Next {
    at: Option<u64>,
}

impl DurableObject for Registry {
    fn new(state: State, _env: Env) -> Self {
        Registry {
            state,
            ready: Cell::new(false),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let sql = self.sql()?;
        let now = now_ms();
        let url = req.url()?;
        match (req.method(), url.path()) {
            (Method::Post, "/bans") => {
                let Ok(ban) = req.json::<BanRecord>().await else {
                    return bad_body();
                };
                sql.exec(
                    "INSERT OR REPLACE INTO bans (key, source, until_ms, reason) VALUES (?, ?, ?, ?)",
                    vec![ban.key.into(), ban.source.into(), int(ban.until_ms), ban.reason.into()],
                )?;
                self.rearm(&sql).await?;
                Response::from_json(&serde_json::json!({"banned": true}))
            }
            (Method::Post, "/unban") => {
                let Ok(request) = req.json::<UnbanRequest>().await else {
                    return bad_body();
                };
                let removed = sql
                    .exec(
                        "DELETE FROM bans WHERE key = ? AND source = ?",
                        vec![request.key.into(), request.source.into()],
                    )?
                    .rows_written();
                Response::from_json(&serde_json::json!({"removed": removed > 0}))
            }
            (Method::Get, "/bans") => {
                let bans: Vec<BanRecord> = sql
                    .exec(
                        "SELECT key, source, until_ms, reason FROM bans WHERE until_ms > ? ORDER BY until_ms, key",
                        vec![int(now)],
                    )?
                    .to_array()?;
                Response::from_json(&bans)
            }
            (Method::Post, "/stats") => {
                let Ok(rows) = req.json::<Vec<StatRow>>().await else {
                    return bad_body();
                };
                for row in rows {
                    sql.exec(
                        "INSERT INTO stats (rule, minute_ms, admitted, refused, failed) VALUES (?, ?, ?, ?, ?)
                         ON CONFLICT (rule, minute_ms) DO UPDATE SET admitted = admitted + excluded.admitted,
                         refused = refused + excluded.refused, failed = failed + excluded.failed",
                        vec![row.rule.into(), int(row.minute_ms), int(row.admitted), int(row.refused), int(row.failed)],
                    )?;
                }
                self.rearm(&sql).await?;
                Response::from_json(&serde_json::json!({"recorded": true}))
            }
            (Method::Get, "/stats") => {
                let since = url
                    .query_pairs()
                    .find(|(name, _)| name == "since")
                    .and_then(|(_, value)| value.parse::<u64>().ok())
                    .unwrap_or(0);
                let rows: Vec<StatRow> = sql
                    .exec(
                        "SELECT rule, minute_ms, admitted, refused, failed FROM stats ORDER BY rule, minute_ms",
                        None,
                    )?
                    .to_array()?;
                let live: Vec<(String, u64)> = sql
                    .exec("SELECT rule, COUNT(*) AS n FROM live GROUP BY rule", None)?
                    .to_array::<LiveCount>()?
                    .into_iter()
                    .map(|c| (c.rule, c.n))
                    .collect();
                Response::from_json(&summarize(&rows, &live, since, now))
            }
            (Method::Post, "/live") => {
                let Ok(reports) = req.json::<Vec<LiveReport>>().await else {
                    return bad_body();
                };
                for report in reports {
                    let Some(rule) = rule_of(&report.key) else {
                        continue;
                    };
                    if report.live {
                        sql.exec(
                            "INSERT OR IGNORE INTO live (key, rule) VALUES (?, ?)",
                            vec![report.key.clone().into(), rule.into()],
                        )?;
                    } else {
                        sql.exec("DELETE FROM live WHERE key = ?", vec![report.key.into()])?;
                    }
                }
                Response::from_json(&serde_json::json!({"recorded": true}))
            }
            _ => respond::problem(&Problem::new(404, "not-found", "no such registry route")),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let sql = self.sql()?;
        let now = now_ms();
        sql.exec("DELETE FROM bans WHERE until_ms <= ?", vec![int(now)])?;
        sql.exec(
            "DELETE FROM stats WHERE minute_ms < ?",
            vec![int(now.saturating_sub(KEEP_STATS_MS))],
        )?;
        self.rearm(&sql).await?;
        Response::empty()
    }
}

impl Registry {
    fn sql(&self) -> Result<SqlStorage> {
        let sql = self.state.storage().sql();
        if !self.ready.get() {
            sql.exec(SCHEMA, None)?;
            self.ready.set(true);
        }
        Ok(sql)
    }

    /// Sets the alarm for the next ban to end or the oldest count to age
    /// out, whichever is first.
    async fn rearm(&self, sql: &SqlStorage) -> Result<()> {
        let next = sql
            .exec(
                "SELECT MIN(at) AS at FROM (SELECT MIN(until_ms) AS at FROM bans
                 UNION ALL SELECT MIN(minute_ms) + ? AS at FROM stats)",
                vec![int(KEEP_STATS_MS)],
            )?
            .one::<Next>()?
            .at;
        let storage = self.state.storage();
        match next {
            Some(at) => set_alarm_at(&storage, at).await,
            None => storage.delete_alarm().await,
        }
    }
}

fn bad_body() -> Result<Response> {
    respond::problem(&Problem::invalid("body", "malformed registry request"))
}
