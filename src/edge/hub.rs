//! The hubs: [`HUBS`] Durable Objects that gather what no single key object
//! knows, off every request's path. Each isolate sends its report (counts,
//! top refused keys, bans that started) to one hub at random at most once
//! per interval, and the hub answers with the manual bans; the admin API
//! writes manual bans to every hub and reads all of them to answer. No
//! key's lifecycle and no request ever waits on a hub.
//!
//! A hub's alarm deletes bans that ended, counts older than
//! [`KEEP_STATS_MS`] and top keys older than an hour.
//!
//! The hubs replaced a single registry object (class renamed by migration
//! `v2`). That object still holds the manual bans of an earlier version;
//! when its alarm next fires, it hands them to the hubs and drops its old
//! tables.

use std::cell::Cell;

use worker::{
    console_error, durable_object, DurableObject, Env, Request, Response, Result, SqlStorage, State,
};

use super::client::Objects;
use super::clock::now_ms;
use super::rpc::{self, served_by_rpc, Served};
use super::storage::{self, int, row, rows, set_alarm_at, Columns, Count, FromRow};
use crate::http::problem::Problem;
use crate::input::scan::FromScan;
use crate::isolate::banlist::{BanRecord, MANUAL, MAX_MANUAL_BANS};
use crate::isolate::pages::BanCursor;
use crate::isolate::report::{HubAnswer, Report};
use crate::isolate::stats::{HubStats, StatRow, MAX_STAT_RULES};
use crate::isolate::top::{merge_all, TopKeys, CAPACITY};
use crate::objects::protocol::{HubCall, HubReply};

/// Per-minute counts are kept a week; older ones are added to each rule's
/// totals (`hub_totals`), so that the counts since the hub began only
/// ever grow (the metrics' counters, `GET {prefix}/admin/metrics`).
pub const KEEP_STATS_MS: u64 = 7 * 24 * 3_600_000;

/// A stat row's counts, in the order the tables and [`StatRow`] hold them.
const COUNTS: &str = "admitted, refused, failed, near_limit, shadow";

/// Top refused keys are kept an hour.
pub const KEEP_TOP_MS: u64 = 3_600_000;

/// Bans that decisions started, at most this many per hub: they come from
/// attackers' keys, so the list is bounded (each ban still holds in its
/// own object; only the listing would miss it).
pub const MAX_STARTED_BANS: u64 = 10_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS hub_bans (
  key TEXT NOT NULL, source TEXT NOT NULL, until_ms INTEGER NOT NULL, reason TEXT NOT NULL,
  started_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (key, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hub_minutes (
  rule TEXT NOT NULL, minute_ms INTEGER NOT NULL,
  admitted INTEGER NOT NULL, refused INTEGER NOT NULL, failed INTEGER NOT NULL,
  near_limit INTEGER NOT NULL DEFAULT 0, shadow INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (rule, minute_ms)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hub_totals (
  rule TEXT NOT NULL PRIMARY KEY,
  admitted INTEGER NOT NULL, refused INTEGER NOT NULL, failed INTEGER NOT NULL,
  near_limit INTEGER NOT NULL, shadow INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hub_top (
  rule TEXT NOT NULL, minute_ms INTEGER NOT NULL, summary TEXT NOT NULL,
  PRIMARY KEY (rule, minute_ms)) WITHOUT ROWID;";

/// The bans' order for paged listing, newest first; made once the table
/// has its `started_ms` column.
const BANS_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS hub_bans_newest ON hub_bans (started_ms DESC, key, source)";

#[durable_object]
pub struct Hub {
    state: State,
    env: Env,
    /// Whether this instance has made sure the tables exist.
    ready: Cell<bool>,
    /// Requests received since this instance started, so that operators
    /// and tests can see that background traffic stays bounded.
    requests: Cell<u64>,
}

row! {
    struct Next {
        at: Option<u64>,
    }
}

/// A top-keys summary and a table's statement: rows of one text column.
struct Text(String);

impl FromRow for Text {
    fn read(c: &mut Columns) -> Result<Text> {
        Ok(Text(c.text()?))
    }
}

row! { StatRow { rule, minute_ms, admitted, refused, failed, near_limit, shadow } }

// Read from `key, source, until_ms, reason, started_ms`.
row! { BanRecord { key, source, until_ms, reason, started_ms } }

impl DurableObject for Hub {
    fn new(state: State, env: Env) -> Self {
        Hub {
            state,
            env,
            ready: Cell::new(false),
            requests: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let text = req.text().await.unwrap_or_default();
        rpc::response(self.serve_text(&text).await)
    }

    async fn alarm(&self) -> Result<Response> {
        let sql = self.sql()?;
        let now = now_ms();
        self.hand_over_legacy_bans(&sql, now).await?;
        sql.exec("DELETE FROM hub_bans WHERE until_ms <= ?", vec![int(now)])?;
        let old = int(now.saturating_sub(KEEP_STATS_MS));
        sql.exec(
            &format!(
                "INSERT INTO hub_totals (rule, {COUNTS}) SELECT rule, SUM(admitted), SUM(refused),
                 SUM(failed), SUM(near_limit), SUM(shadow) FROM hub_minutes WHERE minute_ms < ?
                 GROUP BY rule ON CONFLICT (rule) DO UPDATE SET admitted = admitted + excluded.admitted,
                 refused = refused + excluded.refused, failed = failed + excluded.failed,
                 near_limit = near_limit + excluded.near_limit, shadow = shadow + excluded.shadow"
            ),
            vec![old.clone()],
        )?;
        sql.exec("DELETE FROM hub_minutes WHERE minute_ms < ?", vec![old])?;
        sql.exec(
            "DELETE FROM hub_top WHERE minute_ms < ?",
            vec![int(now.saturating_sub(KEEP_TOP_MS))],
        )?;
        self.rearm(&sql).await?;
        Response::empty()
    }
}

served_by_rpc!(Hub);

impl Hub {
    /// One call from the worker, by RPC or by `fetch`: parsed in Rust by
    /// the hand-written reader, as a key object reads its calls and as the
    /// worker reads every hub's reply (`Request::json` would have
    /// JavaScript parse it and `serde_wasm_bindgen` walk the result back
    /// into Rust, a second reader of every call type, about 8 KB of wasm).
    async fn serve_call(&self, text: &str) -> Result<Served> {
        self.requests.set(self.requests.get() + 1);
        let Ok(call) = HubCall::from_json(text) else {
            return Ok(Err(Problem::invalid("body", "malformed hub call")));
        };
        let sql = self.sql()?;
        let now = now_ms();
        let reply = match call {
            HubCall::Report(report) => {
                self.take_report(&sql, report)?;
                self.rearm(&sql).await?;
                HubReply::Report(HubAnswer {
                    manual_bans: manual_bans(&sql, now)?,
                })
            }
            HubCall::Ban(ban) => {
                let (banned, replaced) = self.ban(&sql, &ban, now).await?;
                HubReply::Ban { banned, replaced }
            }
            HubCall::Unban(request) => {
                let removed = sql
                    .exec(
                        "DELETE FROM hub_bans WHERE key = ? AND source = ?",
                        vec![request.key.into(), request.source.into()],
                    )?
                    .rows_written();
                HubReply::Unban {
                    removed: removed > 0,
                }
            }
            HubCall::Stats { since_ms } => HubReply::Stats(self.stats(&sql, since_ms, now)?),
            HubCall::Top { rule, since_ms } => HubReply::Top(top(&sql, &rule, since_ms)?),
            HubCall::Bans { limit, after } => {
                HubReply::Bans(bans_page(&sql, limit, after.as_ref(), now)?)
            }
        };
        Ok(Ok(crate::json::to_string(&reply)))
    }

    fn sql(&self) -> Result<SqlStorage> {
        let sql = self.state.storage().sql();
        if !self.ready.get() {
            sql.exec(SCHEMA, None)?;
            upgrade(&sql)?;
            sql.exec(BANS_INDEX, None)?;
            self.ready.set(true);
        }
        Ok(sql)
    }

    /// Records a manual ban: whether it was (false if the hub holds as
    /// many other manual bans as it may), and whether it replaced one on
    /// the same key that had not ended.
    async fn ban(&self, sql: &SqlStorage, ban: &BanRecord, now: u64) -> Result<(bool, bool)> {
        let held = count(
            sql,
            "SELECT COUNT(*) AS n FROM hub_bans WHERE source = ? AND until_ms > ? AND key <> ?",
            vec![MANUAL.into(), int(now), ban.key.clone().into()],
        )?;
        if held >= MAX_MANUAL_BANS as u64 {
            return Ok((false, false));
        }
        let replaced = count(
            sql,
            "SELECT COUNT(*) AS n FROM hub_bans WHERE source = ? AND until_ms > ? AND key = ?",
            vec![MANUAL.into(), int(now), ban.key.clone().into()],
        )? > 0;
        put_ban(sql, ban)?;
        self.rearm(sql).await?;
        Ok((true, replaced))
    }

    /// What this hub counted since `since_ms` (0: since it began, the
    /// minutes aged out of the week included) and in the last hour, per
    /// rule, and how many bans it lists: counts only, so the answer's
    /// size depends on the number of rules, never on keys or bans.
    fn stats(&self, sql: &SqlStorage, since_ms: u64, now: u64) -> Result<HubStats> {
        let rules = i64::try_from(MAX_STAT_RULES).unwrap_or(i64::MAX);
        let totals: Vec<StatRow> = rows(&sql.exec(
            &format!(
                "SELECT rule, MIN(minute_ms), SUM(admitted), SUM(refused), SUM(failed),
                 SUM(near_limit), SUM(shadow) FROM (SELECT rule, minute_ms, {COUNTS} FROM hub_minutes
                 WHERE minute_ms + 60000 > ? UNION ALL SELECT rule, 0, {COUNTS} FROM hub_totals
                 WHERE ? = 0) GROUP BY rule ORDER BY rule LIMIT ?"
            ),
            vec![int(since_ms), int(since_ms), rules.into()],
        )?)?;
        let recent: Vec<StatRow> = rows(&sql.exec(
            &format!(
                "SELECT rule, minute_ms, {COUNTS} FROM hub_minutes
                 WHERE minute_ms + 3660000 > ? ORDER BY rule, minute_ms LIMIT ?"
            ),
            vec![int(now), rules.saturating_mul(61).into()],
        )?)?;
        let bans = |query: &str| count(sql, query, vec![int(now), MANUAL.into()]);
        Ok(HubStats {
            requests: self.requests.get(),
            totals,
            recent,
            manual_bans: bans(
                "SELECT COUNT(*) AS n FROM hub_bans WHERE until_ms > ? AND source = ?",
            )?,
            rule_bans: bans(
                "SELECT COUNT(*) AS n FROM hub_bans WHERE until_ms > ? AND source <> ?",
            )?,
        })
    }

    /// Adds an isolate's report to what this hub holds.
    fn take_report(&self, sql: &SqlStorage, report: Report) -> Result<()> {
        for row in report.stats {
            sql.exec(
                &format!(
                    "INSERT INTO hub_minutes (rule, minute_ms, {COUNTS}) VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (rule, minute_ms) DO UPDATE SET admitted = admitted + excluded.admitted,
                     refused = refused + excluded.refused, failed = failed + excluded.failed,
                     near_limit = near_limit + excluded.near_limit, shadow = shadow + excluded.shadow"
                ),
                vec![
                    row.rule.into(),
                    int(row.minute_ms),
                    int(row.admitted),
                    int(row.refused),
                    int(row.failed),
                    int(row.near_limit),
                    int(row.shadow),
                ],
            )?;
        }
        for part in report.top {
            let held: Vec<Text> = rows(&sql.exec(
                "SELECT summary FROM hub_top WHERE rule = ? AND minute_ms = ?",
                vec![part.rule.clone().into(), int(part.minute_ms)],
            )?)?;
            let mut keys: TopKeys = held
                .first()
                .and_then(|row| TopKeys::from_json(&row.0).ok())
                .unwrap_or_default();
            keys.merge(&part.keys, CAPACITY);
            sql.exec(
                "INSERT OR REPLACE INTO hub_top (rule, minute_ms, summary) VALUES (?, ?, ?)",
                vec![
                    part.rule.into(),
                    int(part.minute_ms),
                    crate::json::to_string(&keys).into(),
                ],
            )?;
        }
        let started = count(
            sql,
            "SELECT COUNT(*) AS n FROM hub_bans WHERE source <> ?",
            vec![MANUAL.into()],
        )?;
        let room = MAX_STARTED_BANS.saturating_sub(started);
        let started = report
            .bans
            .into_iter()
            .filter(|ban| ban.source != MANUAL)
            .take(usize::try_from(room).unwrap_or(usize::MAX));
        for mut ban in started {
            if ban.started_ms == 0 {
                ban.started_ms = now_ms();
            }
            put_ban(sql, &ban)?;
        }
        Ok(())
    }

    /// The object that was the single registry before the hubs: passes its
    /// manual bans to the hubs, then drops its tables. Nothing else
    /// addresses it, so this runs when its last alarm fires.
    async fn hand_over_legacy_bans(&self, sql: &SqlStorage, now: u64) -> Result<()> {
        let legacy = count(
            sql,
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'live'",
            Vec::new(),
        )?;
        if legacy == 0 {
            return Ok(());
        }
        let manual: Vec<BanRecord> = rows(&sql.exec(
            "SELECT key, source, until_ms, reason, 0 AS started_ms FROM bans
             WHERE source = ? AND until_ms > ?",
            vec![MANUAL.into(), int(now)],
        )?)?;
        let objects = Objects::new(&self.env, 10_000);
        for ban in &manual {
            if let Err(e) = objects.ban_everywhere(ban).await {
                console_error!("sluice: could not hand a manual ban to the hubs: {e}");
                return Ok(());
            }
        }
        sql.exec(
            "DROP TABLE IF EXISTS bans; DROP TABLE IF EXISTS stats; DROP TABLE IF EXISTS live;",
            None,
        )?;
        Ok(())
    }

    /// Sets the alarm for the next ban to end or the oldest row to age out,
    /// whichever is first.
    async fn rearm(&self, sql: &SqlStorage) -> Result<()> {
        let next = rows::<Next>(&sql.exec(
            "SELECT MIN(at) AS at FROM (SELECT MIN(until_ms) AS at FROM hub_bans
             UNION ALL SELECT MIN(minute_ms) + ? AS at FROM hub_minutes
             UNION ALL SELECT MIN(minute_ms) + ? AS at FROM hub_top)",
            vec![int(KEEP_STATS_MS), int(KEEP_TOP_MS)],
        )?)?;
        match next.first().and_then(|next| next.at) {
            Some(at) => set_alarm_at(&self.state, at),
            None => self.state.storage().delete_alarm().await,
        }
    }
}

/// Brings a hub's tables to the current layout: `hub_bans` gained the
/// time each ban started (0, unknown, for the bans listed before: they
/// come last, as the oldest), and `hub_minutes` the admissions near a
/// limit and the shadow refusals (0 for the minutes counted before).
fn upgrade(sql: &SqlStorage) -> Result<()> {
    let schema = |table: &str| -> Result<String> {
        let found: Vec<Text> = rows(&sql.exec(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
            vec![table.into()],
        )?)?;
        Ok(found.into_iter().map(|t| t.0).collect())
    };
    if !schema("hub_bans")?.contains("started_ms") {
        sql.exec(
            "ALTER TABLE hub_bans ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0",
            None,
        )?;
    }
    if !schema("hub_minutes")?.contains("near_limit") {
        sql.exec(
            "ALTER TABLE hub_minutes ADD COLUMN near_limit INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE hub_minutes ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;",
            None,
        )?;
    }
    Ok(())
}

fn put_ban(sql: &SqlStorage, ban: &BanRecord) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO hub_bans (key, source, until_ms, reason, started_ms) VALUES (?, ?, ?, ?, ?)",
        vec![
            ban.key.clone().into(),
            ban.source.clone().into(),
            int(ban.until_ms),
            ban.reason.clone().into(),
            int(ban.started_ms),
        ],
    )?;
    Ok(())
}

/// The manual bans in force, which every report's answer carries (at most
/// [`MAX_MANUAL_BANS`]).
fn manual_bans(sql: &SqlStorage, now: u64) -> Result<Vec<BanRecord>> {
    rows(&sql.exec(
        "SELECT key, source, until_ms, reason, started_ms FROM hub_bans
         WHERE until_ms > ? AND source = ? LIMIT ?",
        vec![int(now), MANUAL.into(), int(MAX_MANUAL_BANS as u64)],
    )?)
}

/// The first `limit` bans in force after `after`, in the pages' order
/// ([`crate::isolate::pages::ban_order`]: newest first, then key and
/// source).
fn bans_page(
    sql: &SqlStorage,
    limit: u32,
    after: Option<&BanCursor>,
    now: u64,
) -> Result<Vec<BanRecord>> {
    let columns = "SELECT key, source, until_ms, reason, started_ms FROM hub_bans";
    let order = "ORDER BY started_ms DESC, key, source LIMIT ?";
    let limit = int(u64::from(limit));
    let rows = match after {
        None => sql.exec(
            &format!("{columns} WHERE until_ms > ? {order}"),
            vec![int(now), limit],
        )?,
        Some(BanCursor(started_ms, key, source)) => sql.exec(
            &format!(
                "{columns} WHERE until_ms > ? AND (started_ms < ? OR (started_ms = ? AND
                 (key > ? OR (key = ? AND source > ?)))) {order}"
            ),
            vec![
                int(now),
                int(*started_ms),
                int(*started_ms),
                key.clone().into(),
                key.clone().into(),
                source.clone().into(),
                limit,
            ],
        )?,
    };
    storage::rows(&rows)
}

/// `rule`'s top refused keys of the minutes since `since_ms`, merged.
fn top(sql: &SqlStorage, rule: &str, since_ms: u64) -> Result<TopKeys> {
    let minutes: Vec<TopKeys> = rows::<Text>(&sql.exec(
        "SELECT summary FROM hub_top WHERE rule = ? AND minute_ms + 60000 > ?",
        vec![rule.into(), int(since_ms)],
    )?)?
    .into_iter()
    .filter_map(|row| TopKeys::from_json(&row.0).ok())
    .collect();
    Ok(merge_all(&minutes, CAPACITY))
}

fn count(sql: &SqlStorage, query: &str, bindings: Vec<worker::SqlStorageValue>) -> Result<u64> {
    let counted = rows::<Count>(&sql.exec(query, bindings)?)?;
    Ok(counted.first().map_or(0, |count| count.n))
}
