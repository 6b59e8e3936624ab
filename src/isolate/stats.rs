//! Per-rule decision counts, tallied in the isolate and sent to a hub with
//! its next report ([`crate::isolate::report`]), so counting adds no Durable Object
//! call to a request. Counts are kept per minute, which is also how the
//! hubs store and answer them.

use std::collections::BTreeMap;

use crate::ledger::{Outcome, PolicyDecision};
use crate::short_sort;

/// At most this many (rule, minute) rows wait for a report; beyond it the
/// oldest are dropped, so an outage of the hubs cannot grow an isolate's
/// memory.
pub const MAX_PENDING: usize = 1_000;

/// What a decision was, for counting; ordered so that of a request's
/// layers the most telling one counts (a failure, then a refusal, then an
/// admission near a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Admitted,
    /// Admitted, leaving a policy at most a fifth of its limit
    /// ([`NEAR_LIMIT_LEFT`]): Envoy's `near_limit`.
    Near,
    Refused,
    /// Refused by a shadow rule, which let it through: counted as refused,
    /// and as a shadow refusal.
    Shadow,
    /// The key object could not decide (the rule's on_error applied).
    Failed,
}

/// An admission is near its limit when a policy has at most this share of
/// its limit left (a fifth: 80 % used, as Envoy's ratelimit counts it).
pub const NEAR_LIMIT_LEFT: (u64, u64) = (1, 5);

impl Verdict {
    /// An admission or a refusal, as a decision said.
    pub fn of(allowed: bool) -> Verdict {
        if allowed {
            Verdict::Admitted
        } else {
            Verdict::Refused
        }
    }

    /// What `outcome` was, under a `shadow` rule or not.
    pub fn decided(outcome: &Outcome, shadow: bool) -> Verdict {
        let (left, of) = NEAR_LIMIT_LEFT;
        let near = |p: &PolicyDecision| p.decision.remaining * of <= p.decision.limit * left;
        match (outcome.allowed, shadow) {
            (true, _) if outcome.policies.iter().any(near) => Verdict::Near,
            (true, _) => Verdict::Admitted,
            (false, true) => Verdict::Shadow,
            (false, false) => Verdict::Refused,
        }
    }

    /// How the metrics and Analytics Engine name it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Admitted | Verdict::Near => "admitted",
            Verdict::Refused | Verdict::Shadow => "refused",
            Verdict::Failed => "failed",
        }
    }
}

crate::wire! {
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct StatRow {
        pub rule: String,
        /// Start of the minute, ms since the epoch.
        pub minute_ms: u64,
        pub admitted: u64,
        pub refused: u64,
        pub failed: u64,
        /// Of the admissions, those near a limit ([`Verdict::Near`]); absent
        /// from a worker of the version before.
        pub near_limit: u64 => 0,
        /// Of the refusals, a shadow rule's ([`Verdict::Shadow`]).
        pub shadow: u64 => 0,
    }
}

impl StatRow {
    /// Adds `other`'s counts to this row's.
    pub fn add(&mut self, other: &StatRow) {
        self.admitted += other.admitted;
        self.refused += other.refused;
        self.failed += other.failed;
        self.near_limit += other.near_limit;
        self.shadow += other.shadow;
    }
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
            Verdict::Near => {
                row.admitted += 1;
                row.near_limit += 1;
            }
            Verdict::Refused => row.refused += 1,
            Verdict::Shadow => {
                row.refused += 1;
                row.shadow += 1;
            }
            Verdict::Failed => row.failed += 1,
        }
        self.bound();
    }

    /// Adds back rows that could not be sent.
    pub fn restore(&mut self, rows: Vec<StatRow>) {
        for back in rows {
            self.row(&back.rule, back.minute_ms).add(&back);
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

/// The most rules a stats answer lists (by name), and a hub sends counts
/// for: more than any config holds, so the bound only matters for
/// hostile or forgotten input.
pub const MAX_STAT_RULES: usize = 128;

crate::wire! {
    /// One rule's counts, as `GET /admin/stats` answers them.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct RuleStats {
        pub rule: String,
        pub admitted: u64,
        pub refused: u64,
        pub failed: u64,
        pub near_limit: u64,
        pub shadow: u64,
        /// The last hour, one entry per minute that saw a decision.
        pub per_minute: Vec<StatRow>,
    }
}

crate::wire! {
    /// What one hub counted ([`crate::objects::protocol::HubCall::Stats`]):
    /// counts, not lists, so its size depends on the rules only.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct HubStats {
        /// Requests the hub has received since its instance started.
        pub requests: u64,
        /// Per rule, everything since the time asked (`minute_ms` is the
        /// first minute counted); at most [`MAX_STAT_RULES`] rules.
        pub totals: Vec<StatRow>,
        /// Per rule and minute, the last hour.
        pub recent: Vec<StatRow>,
        /// Manual bans in force (every hub holds them all).
        pub manual_bans: u64,
        /// Bans rules started, as this hub has them listed.
        pub rule_bans: u64,
    }
}

crate::wire! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StatsAnswer {
        pub since_ms: u64,
        pub now_ms: u64,
        pub rules: Vec<RuleStats>,
    }
}

/// Totals since `since_ms` and the last hour per minute, for every rule
/// the hubs counted (at most [`MAX_STAT_RULES`], by name), from the hubs'
/// [`HubStats::totals`] and [`HubStats::recent`]. A minute counted by
/// several hubs is one entry.
pub fn summarize(
    totals: &[StatRow],
    recent: &[StatRow],
    since_ms: u64,
    now_ms: u64,
) -> StatsAnswer {
    let mut rules: BTreeMap<&str, RuleStats> = BTreeMap::new();
    for row in totals {
        let stats = rules.entry(row.rule.as_str()).or_insert_with(|| RuleStats {
            rule: row.rule.clone(),
            ..RuleStats::default()
        });
        stats.admitted += row.admitted;
        stats.refused += row.refused;
        stats.failed += row.failed;
        stats.near_limit += row.near_limit;
        stats.shadow += row.shadow;
    }
    let hour_ago = now_ms.saturating_sub(3_600_000);
    for row in recent
        .iter()
        .filter(|row| row.minute_ms + 60_000 > hour_ago)
    {
        let stats = rules.entry(row.rule.as_str()).or_insert_with(|| RuleStats {
            rule: row.rule.clone(),
            ..RuleStats::default()
        });
        // At most 61 minutes per rule: a scan finds the minute.
        match stats
            .per_minute
            .iter_mut()
            .find(|m| m.minute_ms == row.minute_ms)
        {
            Some(minute) => minute.add(row),
            None => stats.per_minute.push(row.clone()),
        }
    }
    let mut rules: Vec<RuleStats> = rules.into_values().take(MAX_STAT_RULES).collect();
    for stats in &mut rules {
        short_sort::sort_by_key(&mut stats.per_minute, |row| row.minute_ms);
    }
    StatsAnswer {
        since_ms,
        now_ms,
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
            near_limit: 0,
            shadow: 0,
        }
    }

    #[test]
    fn summaries_add_up_the_hubs_totals_and_minutes() {
        let totals = [
            row("api", 50, 5, 1),
            row("api", 50, 2, 2),
            row("login", 50, 0, 3),
        ];
        let recent = [
            row("api", 100, 2, 2),
            row("api", 100, 1, 0),
            row("api", 99, 1, 0),
            row("login", 100, 0, 3),
            row("api", 10, 9, 9),
        ];
        let answer = summarize(&totals, &recent, 50 * 60_000, 101 * 60_000);
        let api = &answer.rules[0];
        assert_eq!(
            (api.rule.as_str(), api.admitted, api.refused),
            ("api", 7, 3)
        );
        assert_eq!(
            api.per_minute,
            [row("api", 99, 1, 0), row("api", 100, 3, 2)],
            "one entry per minute, in order, the last hour only"
        );
        assert_eq!(answer.rules[1].refused, 3);
    }

    #[test]
    fn a_summary_lists_a_bounded_number_of_rules() {
        let totals: Vec<StatRow> = (0..MAX_STAT_RULES + 10)
            .map(|i| row(&format!("rule{i:04}"), 1, 1, 0))
            .collect();
        let answer = summarize(&totals, &[], 0, 2 * 60_000);
        assert_eq!(answer.rules.len(), MAX_STAT_RULES);
        assert_eq!(answer.rules[0].rule, "rule0000");
    }
}
