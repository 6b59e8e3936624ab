//! Per-rule decision counts, tallied in the isolate and sent to a hub with
//! its next report ([`crate::isolate::report`]), so counting adds no Durable Object
//! call to a request. Counts are kept per minute, which is also how the
//! hubs store and answer them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::isolate::top::{Counted, RuleTop, TopKeys, CAPACITY};

/// At most this many (rule, minute) rows wait for a report; beyond it the
/// oldest are dropped, so an outage of the hubs cannot grow an isolate's
/// memory.
pub const MAX_PENDING: usize = 1_000;

/// What a decision was, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Admitted,
    Refused,
    /// The key object could not decide (the rule's on_error applied).
    Failed,
}

impl Verdict {
    /// An admission or a refusal, as a decision said.
    pub fn of(allowed: bool) -> Verdict {
        if allowed {
            Verdict::Admitted
        } else {
            Verdict::Refused
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatRow {
    pub rule: String,
    /// Start of the minute, ms since the epoch.
    pub minute_ms: u64,
    pub admitted: u64,
    pub refused: u64,
    pub failed: u64,
}

#[derive(Debug, Default)]
pub struct Tally {
    pending: BTreeMap<(u64, String), StatRow>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    pub fn record(&mut self, rule: &str, now_ms: u64, verdict: Verdict) {
        let minute_ms = now_ms - now_ms % 60_000;
        let row = self.row(rule, minute_ms);
        match verdict {
            Verdict::Admitted => row.admitted += 1,
            Verdict::Refused => row.refused += 1,
            Verdict::Failed => row.failed += 1,
        }
        self.bound();
    }

    /// Adds back rows that could not be sent.
    pub fn restore(&mut self, rows: Vec<StatRow>) {
        for back in rows {
            let row = self.row(&back.rule, back.minute_ms);
            row.admitted += back.admitted;
            row.refused += back.refused;
            row.failed += back.failed;
        }
        self.bound();
    }

    fn row(&mut self, rule: &str, minute_ms: u64) -> &mut StatRow {
        self.pending
            .entry((minute_ms, rule.to_string()))
            .or_insert_with(|| StatRow {
                rule: rule.to_string(),
                minute_ms,
                ..StatRow::default()
            })
    }

    fn bound(&mut self) {
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_first();
        }
    }

    /// Rows waiting for a flush.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Everything pending, which is then no longer pending.
    pub fn take(&mut self) -> Vec<StatRow> {
        std::mem::take(&mut self.pending).into_values().collect()
    }
}

/// One rule's counts, as `GET /admin/stats` answers them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStats {
    pub rule: String,
    pub admitted: u64,
    pub refused: u64,
    pub failed: u64,
    /// The last hour, one entry per minute that saw a decision.
    pub per_minute: Vec<StatRow>,
    /// The keys refused most often in the last `top_minutes`, largest
    /// first, each count an upper bound and `count - error` a lower one.
    pub top_refused: Vec<Counted>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsAnswer {
    pub since_ms: u64,
    pub now_ms: u64,
    /// The minutes `top_refused` covers.
    pub top_minutes: u64,
    pub rules: Vec<RuleStats>,
}

/// Totals since `since_ms`, the last hour per minute, and the most refused
/// keys of the last `top_minutes`, for every rule with counts.
pub fn summarize(
    rows: &[StatRow],
    top: &[RuleTop],
    since_ms: u64,
    top_minutes: u64,
    now_ms: u64,
) -> StatsAnswer {
    let mut rules: BTreeMap<&str, RuleStats> = BTreeMap::new();
    let hour_ago = now_ms.saturating_sub(3_600_000);
    for row in rows {
        let stats = rules.entry(row.rule.as_str()).or_insert_with(|| RuleStats {
            rule: row.rule.clone(),
            ..RuleStats::default()
        });
        if row.minute_ms + 60_000 > since_ms {
            stats.admitted += row.admitted;
            stats.refused += row.refused;
            stats.failed += row.failed;
        }
        if row.minute_ms + 60_000 > hour_ago {
            stats.per_minute.push(row.clone());
        }
    }
    let top_since = now_ms.saturating_sub(top_minutes.saturating_mul(60_000));
    let mut merged: BTreeMap<&str, TopKeys> = BTreeMap::new();
    for part in top.iter().filter(|t| t.minute_ms + 60_000 > top_since) {
        merged
            .entry(part.rule.as_str())
            .or_default()
            .merge(&part.keys, CAPACITY);
    }
    for (rule, keys) in merged {
        rules
            .entry(rule)
            .or_insert_with(|| RuleStats {
                rule: rule.to_string(),
                ..RuleStats::default()
            })
            .top_refused = keys.ranked();
    }
    let mut rules: Vec<RuleStats> = rules.into_values().collect();
    for stats in &mut rules {
        stats.per_minute.sort_by_key(|row| row.minute_ms);
    }
    StatsAnswer {
        since_ms,
        now_ms,
        top_minutes,
        rules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_rule_and_minute() {
        let mut tally = Tally::new();
        tally.record("api", 60_000, Verdict::Admitted);
        tally.record("api", 119_999, Verdict::Refused);
        tally.record("api", 120_000, Verdict::Admitted);
        tally.record("login", 61_000, Verdict::Failed);
        let rows = tally.take();
        let summary: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.rule.as_str(),
                    r.minute_ms,
                    r.admitted,
                    r.refused,
                    r.failed,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("api", 60_000, 1, 1, 0),
                ("login", 60_000, 0, 0, 1),
                ("api", 120_000, 1, 0, 0)
            ]
        );
        assert!(tally.take().is_empty());
    }

    #[test]
    fn stays_bounded() {
        let mut tally = Tally::new();
        for i in 0..(MAX_PENDING as u64 + 50) {
            tally.record(&format!("rule{}", i % 3), i * 60_000, Verdict::Admitted);
        }
        let rows = tally.take();
        assert_eq!(rows.len(), MAX_PENDING);
        assert_eq!(rows[0].minute_ms, 50 * 60_000, "the oldest went first");
    }

    fn row(rule: &str, minute: u64, admitted: u64, refused: u64) -> StatRow {
        StatRow {
            rule: rule.into(),
            minute_ms: minute * 60_000,
            admitted,
            refused,
            failed: 0,
        }
    }

    #[test]
    fn summaries_add_up_since_a_time_and_per_minute() {
        let rows = [
            row("api", 10, 5, 1),
            row("api", 100, 2, 2),
            row("login", 100, 0, 3),
        ];
        let answer = summarize(&rows, &[], 50 * 60_000, 10, 101 * 60_000);
        let api = &answer.rules[0];
        assert_eq!(
            (api.rule.as_str(), api.admitted, api.refused),
            ("api", 2, 2)
        );
        assert_eq!(api.per_minute, [row("api", 100, 2, 2)]);
        assert_eq!(answer.rules[1].refused, 3);
        let all = summarize(&rows, &[], 0, 10, 101 * 60_000);
        assert_eq!(all.rules[0].admitted, 7);
    }

    #[test]
    fn top_refused_keys_merge_across_reports_within_the_minutes_asked() {
        let top = |minute: u64, keys: &[&str]| {
            let mut summary = TopKeys::new();
            for key in keys {
                summary.add(key, CAPACITY);
            }
            RuleTop {
                rule: "api".into(),
                minute_ms: minute * 60_000,
                keys: summary,
            }
        };
        let parts = [
            top(100, &["a", "b", "a"]),
            top(109, &["a", "c"]),
            top(80, &["old"]),
        ];
        let answer = summarize(&[], &parts, 0, 10, 110 * 60_000);
        let ranked: Vec<(&str, u64)> = answer.rules[0]
            .top_refused
            .iter()
            .map(|c| (c.key.as_str(), c.count))
            .collect();
        assert_eq!(ranked, [("a", 3), ("b", 1), ("c", 1)]);
    }
}
