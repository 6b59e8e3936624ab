//! The isolate's memory of refusals: "this object refuses until T".
//!
//! A flood from a banned or exhausted key is answered from here without a
//! Durable Object call. It can only refuse, never admit, so a stale entry
//! errs on the strict side; and it is only filled with refusals that stay
//! refusals until T whatever else happens (a window frees up no sooner while
//! nothing is admitted, a ban does not end early), so it refuses nothing the
//! object would admit, short of an operator's reset. The one exception is
//! a refusal that only reservations in flight caused (`Outcome::pending`):
//! a refund may end it sooner, but its retry is at most a second, the wait
//! the client is told, so it is held no longer. A ban's refusal is
//! held only until the ban ends, so that the object then answers (and counts
//! the refusal toward the next offence), and a minute at most, so that an
//! operator's lift reaches every isolate. A paused or closed part's answer
//! is held a second at most, so that opening it is seen within a second.
//! It is bounded: when full, expired entries go first, then those that end
//! soonest.

use std::collections::HashMap;

use crate::ledger::Outcome;
use crate::limit::Retry;

pub const CAPACITY: usize = 4096;

/// The longest a ban's refusal is answered from the cache: a banned key
/// costs its object one call per isolate per minute, and a ban an operator
/// lifts through one isolate stops being answered by the others within a
/// minute.
pub const MAX_BAN_HOLD_MS: u64 = 60_000;

/// The longest a paused or closed part's answer is given from the cache:
/// a flood during a pause costs each part at most a call per isolate per
/// second, and an isolate that did not serve the operator's change stops
/// answering the old state within a second.
pub const MAX_HALT_HOLD_MS: u64 = 1_000;

#[derive(Debug)]
struct Entry {
    /// When the entry stops answering for the object.
    until_ms: u64,
    decided_ms: u64,
    outcome: Outcome,
}

#[derive(Debug)]
pub struct RefusalCache {
    entries: HashMap<String, Entry>,
    capacity: usize,
}

impl RefusalCache {
    pub fn new(capacity: usize) -> RefusalCache {
        RefusalCache {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The refusal for `object` if it still holds at `now_ms`, with its
    /// times counted down to now.
    pub fn get(&mut self, object: &str, now_ms: u64) -> Option<Outcome> {
        let entry = self.entries.get(object)?;
        if now_ms >= entry.until_ms {
            self.entries.remove(object);
            return None;
        }
        let elapsed = now_ms.saturating_sub(entry.decided_ms);
        let mut outcome = entry.outcome.clone();
        outcome.retry = outcome.retry.elapsed(elapsed);
        for policy in &mut outcome.policies {
            let d = &mut policy.decision;
            d.reset_ms = d.reset_ms.saturating_sub(elapsed);
            d.retry = d.retry.elapsed(elapsed);
        }
        if let Some(ban) = &mut outcome.ban {
            ban.started = false;
        }
        Some(outcome)
    }

    /// Remembers a refusal decided at `now_ms`; allowed outcomes and
    /// refusals with nothing to wait for are ignored.
    pub fn insert(&mut self, object: &str, outcome: &Outcome, now_ms: u64) {
        if outcome.allowed || outcome.retry == Retry::NOW {
            return;
        }
        // A request that can never pass is refused for as long as the entry
        // stays (until it is evicted or its key reset).
        let retry_at_ms = outcome.retry.at(now_ms).unwrap_or(u64::MAX);
        // A ban's refusal holds until the ban ends; after that the object
        // answers, so that it says what the refusal really is and counts it
        // toward the next offence. It holds a minute at most, so that an
        // operator's lift reaches every isolate within a minute.
        let until_ms = outcome.ban.as_ref().map_or(retry_at_ms, |ban| {
            ban.until_ms
                .min(retry_at_ms)
                .min(now_ms.saturating_add(MAX_BAN_HOLD_MS))
        });
        let until_ms = match outcome.halt {
            Some(_) => until_ms.min(now_ms.saturating_add(MAX_HALT_HOLD_MS)),
            None => until_ms,
        };
        if until_ms <= now_ms {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(object) {
            self.entries.retain(|_, e| e.until_ms > now_ms);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.until_ms)
                    .map(|(k, _)| k.clone());
                if let Some(soonest) = soonest {
                    self.entries.remove(&soonest);
                }
            }
        }
        self.entries.insert(
            object.to_string(),
            Entry {
                until_ms,
                decided_ms: now_ms,
                outcome: outcome.clone(),
            },
        );
    }

    /// Forgets `object`, after an operator reset it.
    pub fn remove(&mut self, object: &str) {
        self.entries.remove(object);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Ask, Ledger, PolicyDecision};
    use crate::limit::{Decision, Policy, Spec};

    fn refused(retry_after_ms: u64) -> Outcome {
        let decision = Decision {
            allowed: false,
            limit: 1,
            remaining: 0,
            reset_ms: retry_after_ms,
            retry: Retry::After(retry_after_ms),
        };
        Outcome {
            allowed: false,
            policies: vec![PolicyDecision {
                name: "api".into(),
                window_ms: 1000,
                decision,
            }],
            ban: None,
            lease: None,
            pending: false,
            conflict: None,
            halt: None,
            retry: Retry::After(retry_after_ms),
        }
    }

    #[test]
    fn refuses_until_the_retry_time_counting_down() {
        let mut cache = RefusalCache::new(8);
        cache.insert("k", &refused(1000), 5000);
        let later = cache.get("k", 5400).unwrap();
        assert_eq!(later.retry, Retry::After(600));
        assert_eq!(later.policies[0].decision.retry, Retry::After(600));
        assert_eq!(later.policies[0].decision.reset_ms, 600);
        assert!(cache.get("k", 5999).is_some());
        assert!(cache.get("k", 6000).is_none());
        assert!(cache.is_empty(), "an expired entry is dropped when seen");
    }

    #[test]
    fn a_request_that_can_never_pass_stays_never_while_cached() {
        let mut cache = RefusalCache::new(8);
        let mut never = refused(1000);
        never.retry = Retry::Never;
        never.policies[0].decision.retry = Retry::Never;
        cache.insert("k", &never, 5000);
        let later = cache.get("k", 3_600_000).unwrap();
        assert_eq!(later.retry, Retry::Never, "no wait is made up");
        assert_eq!(later.policies[0].decision.retry, Retry::Never);
    }

    #[test]
    fn never_remembers_an_admission() {
        let mut cache = RefusalCache::new(8);
        let mut ledger = Ledger::new();
        let policy = [(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(1, 1000).unwrap()),
        )];
        let ask = Ask {
            specs: &policy,
            cost: 1,
            ban: None,
            lease: None,
        };
        let (allowed, _) = ledger.check(&ask, 0);
        cache.insert("k", &allowed, 0);
        assert!(cache.is_empty());
        let (denied, _) = ledger.check(&ask, 10);
        cache.insert("k", &denied, 10);
        // The object itself refuses until exactly the cached time.
        for t in [10, 500, 999] {
            assert!(cache.get("k", t).is_some());
            assert!(!ledger.check(&ask, t).0.allowed);
        }
        assert!(cache.get("k", 1000).is_none());
        assert!(ledger.check(&ask, 1000).0.allowed);
    }

    #[test]
    fn a_cached_ban_ends_with_the_ban_keeping_its_retry_time() {
        let mut cache = RefusalCache::new(8);
        let mut banned = refused(60_000);
        banned.ban = Some(crate::ledger::BanNotice {
            until_ms: 7_000,
            reason: "2 refusals".into(),
            offences: 1,
            started: true,
        });
        cache.insert("k", &banned, 5_000);
        let during = cache.get("k", 6_000).unwrap();
        assert!(during.ban.is_some());
        assert_eq!(
            during.retry,
            Retry::After(59_000),
            "when a request can pass"
        );
        // After the ban the object answers: its refusals count toward the
        // next offence, and it never says "banned" for an ended ban.
        assert!(cache.get("k", 7_000).is_none());
    }

    #[test]
    fn a_long_ban_is_held_a_minute_at_most() {
        let mut cache = RefusalCache::new(8);
        let mut banned = refused(86_400_000);
        banned.ban = Some(crate::ledger::BanNotice {
            until_ms: 86_400_000,
            reason: "an operator's".into(),
            offences: 0,
            started: false,
        });
        cache.insert("k", &banned, 0);
        assert!(cache.get("k", MAX_BAN_HOLD_MS - 1).is_some());
        assert!(
            cache.get("k", MAX_BAN_HOLD_MS).is_none(),
            "then the object answers, and says whether it still holds"
        );
    }

    #[test]
    fn a_paused_or_closed_parts_answer_is_held_a_second_at_most() {
        use crate::control::{Control, RuleState, PAUSED_RETRY_MS};
        let mut cache = RefusalCache::new(8);
        for (state, retry) in [
            (RuleState::Paused, Retry::After(PAUSED_RETRY_MS)),
            (RuleState::Closed, Retry::Never),
        ] {
            let mut halted = refused(1000);
            halted.retry = retry;
            halted.halt = Some(Control {
                state,
                reason: "stock count".into(),
                set_ms: 0,
            });
            cache.insert("k", &halted, 5_000);
            let held = cache.get("k", 5_000 + MAX_HALT_HOLD_MS - 1).unwrap();
            assert_eq!(held.halt.unwrap().state, state);
            assert!(cache.get("k", 5_000 + MAX_HALT_HOLD_MS).is_none());
        }
    }

    #[test]
    fn stays_bounded_dropping_what_ends_soonest() {
        let mut cache = RefusalCache::new(3);
        cache.insert("a", &refused(100), 0);
        cache.insert("b", &refused(5000), 0);
        cache.insert("c", &refused(9000), 0);
        cache.insert("d", &refused(7000), 0);
        assert_eq!(cache.len(), 3);
        assert!(
            cache.get("a", 1).is_none(),
            "the soonest to end was dropped"
        );
        cache.insert("e", &refused(100), 200);
        assert_eq!(cache.len(), 3);
        for key in ["c", "d", "e"] {
            assert!(cache.get(key, 201).is_some(), "{key}");
        }
        cache.remove("c");
        assert!(cache.get("c", 201).is_none());
        for i in 0..10_000 {
            cache.insert(&format!("flood-{i}"), &refused(60_000), 300);
        }
        assert_eq!(cache.len(), 3);
    }
}
