//! What an isolate tells the hubs: per-minute decision counts per rule, its
//! most refused keys ([`TopKeys`]) and the bans it started, sent at most once
//! per [`INTERVAL_MS`] to one hub at random, in the background, which answers
//! with the manual bans. Bounded, so a hub outage or a flood of keys cannot
//! grow an isolate's memory or its next report.

use std::collections::BTreeMap;

use crate::isolate::banlist::BanRecord;
use crate::isolate::stats::{StatRow, Tally, Verdict};
use crate::isolate::top::{RuleTop, TopKeys, CAPACITY};

/// How often an isolate reports (and refreshes the manual bans).
pub const INTERVAL_MS: u64 = 10_000;

/// The var with which a test shortens this interval and the states'
/// ([`crate::isolate::states::REFRESH_MS`]), so that it need not wait them
/// out. wrangler.toml does not declare it: deployed, both stay as documented.
pub const TEST_INTERVAL_VAR: &str = "SLUICE_TEST_INTERVAL_MS";

/// The interval a test asked for in [`TEST_INTERVAL_VAR`] (`None`: unset),
/// in whole milliseconds from 100 (the hubs' load stays bounded) to
/// [`INTERVAL_MS`] (it can only shorten); anything else is an error that
/// says so.
pub fn test_interval(var: Option<&str>) -> Result<Option<u64>, &'static str> {
    match var.map(str::parse::<u64>) {
        None => Ok(None),
        Some(Ok(ms)) if (100..=INTERVAL_MS).contains(&ms) => Ok(Some(ms)),
        Some(_) => Err("must be whole milliseconds from 100 to 10000"),
    }
}

/// How many hubs share the reports. At 10 000 isolates reporting every
/// [`INTERVAL_MS`], that is 1 000 reports/s in all and about 63 per hub.
pub const HUBS: u32 = 16;

/// Rules whose refused keys an isolate follows; more rules than any config
/// holds, so the bound only matters for hostile input.
pub const MAX_RULES: usize = 128;

/// Bans that started, kept for the next report; beyond it they are
/// dropped (each still holds in its own object).
pub const MAX_BANS: usize = 64;

crate::wire! {
    /// An isolate's report to a hub ([`crate::objects::protocol::HubCall::Report`]).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Report {
        pub stats: Vec<StatRow>,
        pub top: Vec<RuleTop>,
        pub bans: Vec<BanRecord>,
    }
}

crate::wire! {
    /// A hub's answer to a report: the manual bans every isolate applies.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct HubAnswer {
        pub manual_bans: Vec<BanRecord>,
    }
}

#[derive(Debug, Default)]
pub struct Outbox {
    tally: Tally,
    top: BTreeMap<String, TopKeys>,
    bans: Vec<BanRecord>,
    /// When the last report left; `None` before the first, which is due at
    /// once so that a new isolate learns the manual bans soon.
    sent_ms: Option<u64>,
}

impl Outbox {
    pub fn new() -> Outbox {
        Outbox::default()
    }

    pub fn record(&mut self, rule: &str, now_ms: u64, verdict: Verdict) {
        self.tally.record(rule, now_ms, verdict);
    }

    /// Counts a refusal of `key` under `rule`.
    pub fn refused(&mut self, rule: &str, key: &str) {
        if !self.top.contains_key(rule) && self.top.len() >= MAX_RULES {
            return;
        }
        self.top
            .entry(rule.to_string())
            .or_default()
            .add(key, CAPACITY);
    }

    pub fn ban_started(&mut self, ban: BanRecord) {
        if self.bans.len() < MAX_BANS {
            self.bans.push(ban);
        }
    }

    /// Whether a report is due, `every_ms` after the last ([`INTERVAL_MS`]
    /// but in tests), and claims it: requests that arrive while it is
    /// under way do not start another.
    pub fn claim(&mut self, now_ms: u64, every_ms: u64) -> bool {
        let due = self
            .sent_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= every_ms);
        if due {
            self.sent_ms = Some(now_ms);
        }
        due
    }

    /// Everything collected, which is then no longer pending.
    pub fn take(&mut self, now_ms: u64) -> Report {
        let minute_ms = now_ms - now_ms % 60_000;
        Report {
            stats: self.tally.take(),
            top: std::mem::take(&mut self.top)
                .into_iter()
                .map(|(rule, keys)| RuleTop {
                    rule,
                    minute_ms,
                    keys,
                })
                .collect(),
            bans: std::mem::take(&mut self.bans),
        }
    }

    /// Puts back a report that could not be sent, within the same bounds:
    /// counts are added to what came since, and the hubs learn it next time.
    pub fn restore(&mut self, report: Report) {
        self.tally.restore(report.stats);
        for RuleTop { rule, keys, .. } in report.top {
            if !self.top.contains_key(&rule) && self.top.len() >= MAX_RULES {
                continue;
            }
            self.top.entry(rule).or_default().merge(&keys, CAPACITY);
        }
        for ban in report.bans {
            self.ban_started(ban);
        }
    }

    /// Figures for operators: each is bounded.
    pub fn pending(&self) -> (usize, usize, usize) {
        (self.tally.pending(), self.top.len(), self.bans.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ban(key: &str) -> BanRecord {
        BanRecord {
            key: key.into(),
            until_ms: 1,
            reason: "r".into(),
            source: "rule:api".into(),
            started_ms: 0,
        }
    }

    #[test]
    fn the_first_report_is_due_at_once_then_once_per_interval() {
        let mut outbox = Outbox::new();
        assert!(outbox.claim(5, INTERVAL_MS));
        assert!(!outbox.claim(5, INTERVAL_MS), "claimed");
        assert!(!outbox.claim(INTERVAL_MS + 4, INTERVAL_MS));
        assert!(outbox.claim(INTERVAL_MS + 5, INTERVAL_MS));
        assert!(!outbox.claim(INTERVAL_MS + 504, 500), "a test's interval");
        assert!(outbox.claim(INTERVAL_MS + 505, 500));
    }

    #[test]
    fn a_test_interval_only_shortens_and_is_read_or_refused_whole() {
        assert_eq!(test_interval(None), Ok(None));
        assert_eq!(test_interval(Some("500")), Ok(Some(500)));
        assert_eq!(test_interval(Some("100")), Ok(Some(100)));
        assert_eq!(test_interval(Some("10000")), Ok(Some(INTERVAL_MS)));
        for bad in ["99", "10001", "0", "", " 500", "5e2", "-1", "500ms"] {
            let e = test_interval(Some(bad)).unwrap_err();
            assert!(e.contains("from 100 to 10000"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_report_carries_counts_top_keys_and_bans_once() {
        let mut outbox = Outbox::new();
        outbox.record("api", 61_000, Verdict::Refused);
        outbox.refused("api", "10.0.0.1");
        outbox.refused("api", "10.0.0.1");
        outbox.ban_started(ban("10.0.0.1"));
        let report = outbox.take(62_000);
        assert_eq!(report.stats.len(), 1);
        assert_eq!(report.top[0].rule, "api");
        assert_eq!(report.top[0].minute_ms, 60_000);
        assert_eq!(report.top[0].keys.ranked()[0].count, 2);
        assert_eq!(report.bans, [ban("10.0.0.1")]);
        assert_eq!(outbox.take(63_000), Report::default());
    }

    #[test]
    fn a_failed_report_is_put_back_within_bounds() {
        let mut outbox = Outbox::new();
        outbox.record("api", 0, Verdict::Refused);
        outbox.refused("api", "a");
        let report = outbox.take(0);
        outbox.refused("api", "a");
        outbox.restore(report);
        let again = outbox.take(0);
        assert_eq!(again.stats[0].refused, 1);
        assert_eq!(again.top[0].keys.ranked()[0].count, 2);
    }

    #[test]
    fn hostile_input_stays_bounded() {
        let mut outbox = Outbox::new();
        for i in 0..10_000 {
            outbox.refused(&format!("rule{i}"), &format!("key{i}"));
            outbox.refused("api", &format!("key{i}"));
            outbox.ban_started(ban(&format!("key{i}")));
        }
        let (_, rules, bans) = outbox.pending();
        assert_eq!((rules, bans), (MAX_RULES, MAX_BANS));
        let report = outbox.take(0);
        assert!(report.top.iter().all(|t| t.keys.len() <= CAPACITY));
    }
}
