//! The isolate's copy of the operators' manual bans.
//!
//! Manual bans apply on every rule, so checking them must not cost a
//! Durable Object call per request: each isolate keeps the list, fetches it
//! from the registry on its first request, refreshes it in the background
//! every [`REFRESH_MS`], and applies its own admin calls at once. A ban or
//! unban made through another isolate takes effect here within that
//! interval.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub const REFRESH_MS: u64 = 10_000;

/// A ban as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanRecord {
    pub key: String,
    pub until_ms: u64,
    pub reason: String,
    /// `manual`, or the scope of the rule whose container banned the key.
    pub source: String,
}

#[derive(Debug, Default)]
pub struct BanList {
    bans: HashMap<String, BanRecord>,
    refreshed_ms: Option<u64>,
}

impl BanList {
    pub fn new() -> BanList {
        BanList::default()
    }

    /// The first of `candidates` (a client's network, a rule's key) under an
    /// active ban.
    pub fn find(&self, candidates: &[&str], now_ms: u64) -> Option<&BanRecord> {
        candidates
            .iter()
            .filter_map(|c| self.bans.get(*c))
            .find(|ban| ban.until_ms > now_ms)
    }

    /// Replaces the list with the registry's manual bans.
    pub fn replace(&mut self, records: Vec<BanRecord>, now_ms: u64) {
        self.bans = records
            .into_iter()
            .filter(|r| r.source == "manual" && r.until_ms > now_ms)
            .map(|r| (r.key.clone(), r))
            .collect();
        self.refreshed_ms = Some(now_ms);
    }

    pub fn insert(&mut self, record: BanRecord) {
        self.bans.insert(record.key.clone(), record);
    }

    pub fn remove(&mut self, key: &str) {
        self.bans.remove(key);
    }

    pub fn len(&self) -> usize {
        self.bans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bans.is_empty()
    }

    /// Whether the list has never been fetched.
    pub fn is_unknown(&self) -> bool {
        self.refreshed_ms.is_none()
    }

    /// Whether a background refresh is due; claims it, so that requests
    /// arriving meanwhile do not start another.
    pub fn claim_refresh(&mut self, now_ms: u64) -> bool {
        let due = self
            .refreshed_ms
            .is_some_and(|at| now_ms.saturating_sub(at) >= REFRESH_MS);
        if due {
            self.refreshed_ms = Some(now_ms);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ban(key: &str, until_ms: u64, source: &str) -> BanRecord {
        BanRecord {
            key: key.into(),
            until_ms,
            reason: "r".into(),
            source: source.into(),
        }
    }

    #[test]
    fn finds_active_manual_bans_among_candidates() {
        let mut list = BanList::new();
        assert!(list.is_unknown());
        list.replace(
            vec![
                ban("203.0.113.9", 5000, "manual"),
                ban("k", 5000, "rule:api"),
                ban("old", 10, "manual"),
            ],
            100,
        );
        assert!(!list.is_unknown());
        assert_eq!(
            list.find(&["x", "203.0.113.9"], 100).unwrap().key,
            "203.0.113.9"
        );
        assert!(
            list.find(&["k"], 100).is_none(),
            "automatic bans live in their containers"
        );
        assert!(list.find(&["old"], 100).is_none());
        assert!(
            list.find(&["203.0.113.9"], 5000).is_none(),
            "it ends at until"
        );
        list.insert(ban("alice", 9000, "manual"));
        assert!(list.find(&["alice"], 100).is_some());
        list.remove("alice");
        assert!(list.find(&["alice"], 100).is_none());
    }

    #[test]
    fn one_refresh_per_interval() {
        let mut list = BanList::new();
        assert!(
            !list.claim_refresh(0),
            "the first fetch is not a background refresh"
        );
        list.replace(Vec::new(), 1000);
        assert!(!list.claim_refresh(10_999));
        assert!(list.claim_refresh(11_000));
        assert!(!list.claim_refresh(11_001), "claimed already");
    }
}
