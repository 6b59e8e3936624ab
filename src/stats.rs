//! Per-rule decision counts, tallied in the isolate and flushed to the
//! registry in the background, so counting adds no Durable Object call to
//! a request. Counts are kept per minute, which is also how the registry
//! stores and answers them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::http::admin::API_RULE;

/// How often an isolate flushes its tally.
pub const FLUSH_EVERY_MS: u64 = 10_000;

/// At most this many (rule, minute) rows wait for a flush; beyond it the
/// oldest are dropped, so a registry outage cannot grow an isolate's memory.
pub const MAX_PENDING: usize = 10_000;

/// What a decision was, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Admitted,
    Refused,
    /// The container could not decide (the rule's on_error applied).
    Failed,
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
    flushed_ms: u64,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    pub fn record(&mut self, rule: &str, now_ms: u64, verdict: Verdict) {
        let minute_ms = now_ms - now_ms % 60_000;
        let row = self
            .pending
            .entry((minute_ms, rule.to_string()))
            .or_insert_with(|| StatRow {
                rule: rule.to_string(),
                minute_ms,
                ..StatRow::default()
            });
        match verdict {
            Verdict::Admitted => row.admitted += 1,
            Verdict::Refused => row.refused += 1,
            Verdict::Failed => row.failed += 1,
        }
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_first();
        }
    }

    /// Whether something is pending and the last flush is old enough.
    pub fn due(&self, now_ms: u64) -> bool {
        !self.pending.is_empty() && now_ms.saturating_sub(self.flushed_ms) >= FLUSH_EVERY_MS
    }

    /// Rows waiting for a flush.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Everything pending, which is then no longer pending.
    pub fn take(&mut self, now_ms: u64) -> Vec<StatRow> {
        self.flushed_ms = now_ms;
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
    /// Keys of this rule that hold state in a container now.
    pub live_keys: u64,
    /// The last hour, one entry per minute that saw a decision.
    pub per_minute: Vec<StatRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsAnswer {
    pub since_ms: u64,
    pub now_ms: u64,
    pub rules: Vec<RuleStats>,
}

/// Totals since `since_ms` and the last hour per minute, for every rule that
/// has counts or live keys.
pub fn summarize(
    rows: &[StatRow],
    live: &[(String, u64)],
    since_ms: u64,
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
    for (rule, count) in live {
        rules
            .entry(rule.as_str())
            .or_insert_with(|| RuleStats {
                rule: rule.clone(),
                ..RuleStats::default()
            })
            .live_keys = *count;
    }
    let mut rules: Vec<RuleStats> = rules.into_values().collect();
    for stats in &mut rules {
        stats.per_minute.sort_by_key(|row| row.minute_ms);
    }
    StatsAnswer {
        since_ms,
        now_ms,
        rules,
    }
}

/// The rule a container key belongs to: `rule:<id>[.<tier>]:<key>` gives
/// `<id>`, the decision API's `api:<key>` gives `_api`.
pub fn rule_of(key: &str) -> Option<&str> {
    if key.starts_with("api:") {
        return Some(API_RULE);
    }
    let scope = key.strip_prefix("rule:")?;
    let end = scope.find(['.', ':'])?;
    Some(&scope[..end])
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
        let rows = tally.take(130_000);
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
        assert!(tally.take(130_001).is_empty());
    }

    #[test]
    fn flushes_at_most_every_interval() {
        let mut tally = Tally::new();
        assert!(!tally.due(50_000), "nothing pending");
        tally.record("api", 50_000, Verdict::Admitted);
        assert!(tally.due(50_000));
        tally.take(50_000);
        tally.record("api", 55_000, Verdict::Admitted);
        assert!(!tally.due(59_999));
        assert!(tally.due(60_000));
    }

    #[test]
    fn stays_bounded() {
        let mut tally = Tally::new();
        for i in 0..(MAX_PENDING as u64 + 50) {
            tally.record(&format!("rule{}", i % 3), i * 60_000, Verdict::Admitted);
        }
        let rows = tally.take(0);
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
        let live = [("api".to_string(), 4), ("quiet".to_string(), 1)];
        let answer = summarize(&rows, &live, 50 * 60_000, 101 * 60_000);
        let api = &answer.rules[0];
        assert_eq!(
            (api.rule.as_str(), api.admitted, api.refused, api.live_keys),
            ("api", 2, 2, 4)
        );
        assert_eq!(api.per_minute, [row("api", 100, 2, 2)]);
        assert_eq!(answer.rules[1].refused, 3);
        assert_eq!(
            (answer.rules[2].rule.as_str(), answer.rules[2].live_keys),
            ("quiet", 1)
        );
        let all = summarize(&rows, &[], 0, 101 * 60_000);
        assert_eq!(all.rules[0].admitted, 7);
    }

    #[test]
    fn keys_name_their_rule() {
        assert_eq!(rule_of("rule:api:203.0.113.9"), Some("api"));
        assert_eq!(rule_of("rule:api.registered:alice"), Some("api"));
        assert_eq!(rule_of("api:user:1"), Some(API_RULE));
        assert_eq!(rule_of("other"), None);
        assert_eq!(rule_of("rule:nokey"), None);
    }
}
