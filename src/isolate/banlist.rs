//! The isolate's copy of the operators' manual bans.
//!
//! Manual bans apply on every rule, so checking them must not cost a
//! Durable Object call per request: each isolate keeps the list, which a
//! hub sends back with every report the isolate makes in the background
//! ([`crate::isolate::report`]), and applies its own admin calls at once. A ban or
//! unban made through another isolate takes effect here within one report
//! interval; a report that fails keeps the last list it had, so bans never
//! silently stop applying.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The most manual bans there may be at once, so that the list every
/// isolate holds and receives stays small; it grows only with operators'
/// calls, never with attacker input.
pub const MAX_MANUAL_BANS: usize = 1_000;

/// The `source` of a ban an operator made.
pub const MANUAL: &str = "manual";

/// A ban as the hubs list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanRecord {
    pub key: String,
    pub until_ms: u64,
    pub reason: String,
    /// `manual`, or the scope of the rule whose key object banned the key.
    pub source: String,
}

#[derive(Debug, Default)]
pub struct BanList {
    bans: HashMap<String, BanRecord>,
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

    /// Replaces the list with a hub's manual bans.
    pub fn replace(&mut self, records: Vec<BanRecord>, now_ms: u64) {
        self.bans = records
            .into_iter()
            .filter(|r| r.source == MANUAL && r.until_ms > now_ms)
            .take(MAX_MANUAL_BANS)
            .map(|r| (r.key.clone(), r))
            .collect();
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
        list.replace(
            vec![
                ban("203.0.113.9", 5000, "manual"),
                ban("k", 5000, "rule:api"),
                ban("old", 10, "manual"),
            ],
            100,
        );
        assert_eq!(
            list.find(&["x", "203.0.113.9"], 100).unwrap().key,
            "203.0.113.9"
        );
        assert!(
            list.find(&["k"], 100).is_none(),
            "automatic bans live in their key objects"
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
}
