//! The isolate's memory of refusals, "this object refuses until T", so a
//! flood on a banned or exhausted key costs no object call. It only refuses,
//! and only what the object would refuse until T (a ban's end, a minute at
//! most; a pending refusal's second; a paused part's second); a refusal over
//! quota tells the batch of moments its object handed out, one each
//! (docs/algorithms.md, "When a refused request is told to come back").
//! Bounded: expired entries go first, then those that end soonest.

use std::collections::{HashMap, VecDeque};

use crate::ledger::{Outcome, MAX_INVITATIONS};
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
    /// For a spread refusal, the moments (ms since the epoch) still to
    /// tell, in order; `None` when every refusal is told the same retry
    /// time, counted down (a ban, a pending refusal, an object of the
    /// version before).
    moments: Option<VecDeque<u64>>,
    /// Moments of this entry told so far, the refusal that brought it
    /// included: what the next batch is sized by.
    told: u32,
    /// Whether it stopped answering because its time was up, rather than
    /// because its batch was spent.
    ended: bool,
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
    /// times counted down to now; a spread refusal tells the next moment
    /// of its batch, which [`invited`](Self::invited) then hands out.
    /// `None` once the batch is spent.
    pub fn get(&mut self, object: &str, now_ms: u64) -> Option<Outcome> {
        let entry = self.entries.get_mut(object)?;
        if now_ms >= entry.until_ms {
            match &mut entry.moments {
                Some(moments) => {
                    moments.clear();
                    entry.ended = true;
                }
                None => {
                    self.entries.remove(object);
                }
            }
            return None;
        }
        let told = match &entry.moments {
            Some(moments) => Some(moments.front()?.saturating_sub(now_ms)),
            None => None,
        };
        let elapsed = now_ms.saturating_sub(entry.decided_ms);
        let mut outcome = entry.outcome.clone();
        outcome.retry = outcome.retry.elapsed(elapsed);
        for policy in &mut outcome.policies {
            let d = &mut policy.decision;
            d.reset_ms = d.reset_ms.saturating_sub(elapsed);
            d.retry = d.retry.elapsed(elapsed);
            if let (false, Some(wait)) = (d.allowed, told) {
                d.retry = Retry::After(wait);
                d.reset_ms = wait;
            }
        }
        if let Some(wait) = told {
            outcome.retry = Retry::After(wait);
        }
        if let Some(spread) = &mut outcome.spread {
            spread.earliest = spread.earliest.saturating_sub(elapsed);
            spread.next.clear();
        }
        if let Some(ban) = &mut outcome.ban {
            ban.started = false;
        }
        Some(outcome)
    }

    /// Hands out the moment [`get`](Self::get) told for `object`, so that
    /// the next refusal is told the next one.
    pub fn invited(&mut self, object: &str) {
        if let Some(entry) = self.entries.get_mut(object) {
            if let Some(moments) = &mut entry.moments {
                if moments.pop_front().is_some() {
                    entry.told = entry.told.saturating_add(1);
                }
            }
        }
    }

    /// Whether a refusal of `object` holds at `now_ms`, even with its
    /// batch spent: the object would refuse, though the cache has no
    /// moment left to tell.
    pub fn holds(&self, object: &str, now_ms: u64) -> bool {
        self.entries
            .get(object)
            .is_some_and(|entry| !entry.ended && now_ms < entry.until_ms)
    }

    /// How many moments to ask `object` for, should it refuse: as many as
    /// this isolate told from its last entry for it when that entry's time
    /// was up (the refusals one entry's life brings), twice as many when
    /// its batch ran out first; 1 for an object it has no entry for; at
    /// most `MAX_INVITATIONS`.
    pub fn invitations(&self, object: &str) -> u32 {
        self.entries.get(object).map_or(1, |entry| {
            let wanted = if entry.ended {
                entry.told
            } else {
                entry.told.saturating_mul(2)
            };
            wanted.clamp(1, MAX_INVITATIONS)
        })
    }

    /// Remembers a refusal decided at `now_ms`; allowed outcomes and
    /// refusals with nothing to wait for are ignored. A spread refusal's
    /// own moment was told already: the entry tells the rest.
    pub fn insert(&mut self, object: &str, outcome: &Outcome, now_ms: u64) {
        if outcome.allowed || outcome.retry == Retry::NOW {
            return;
        }
        // A request that can never pass is refused for as long as the entry
        // stays (until it is evicted or its key reset); a spread refusal
        // until it could really pass.
        let retry_at_ms = outcome.earliest().at(now_ms).unwrap_or(u64::MAX);
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
        let moments = outcome.spread.as_ref().map(|spread| {
            spread
                .next
                .iter()
                .map(|wait| now_ms.saturating_add(*wait))
                .collect()
        });
        self.entries.insert(
            object.to_string(),
            Entry {
                until_ms,
                decided_ms: now_ms,
                outcome: outcome.clone(),
                moments,
                told: 1,
                ended: false,
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
            spread: None,
            blocks: Vec::new(),
            whole: None,
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
        let (denied, _) = ledger.check_inviting(&ask, None, 8, 10);
        cache.insert("k", &denied, 10);
        // The object itself refuses until exactly the cached time.
        for t in [10, 500, 999] {
            assert!(cache.get("k", t).is_some());
            cache.invited("k");
            assert!(!ledger.check_inviting(&ask, None, 0, t).0.allowed);
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

    fn full_key(limit: u64, window_ms: u64, admitted_at: &[u64]) -> (Ledger, Vec<(String, Spec)>) {
        let policy = vec![(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
        )];
        let mut ledger = Ledger::new();
        for &t in admitted_at {
            let ask = Ask {
                specs: &policy,
                cost: 1,
                ban: None,
                lease: None,
            };
            assert!(ledger.check(&ask, t).0.allowed);
        }
        (ledger, policy)
    }

    fn refuse(ledger: &mut Ledger, policy: &[(String, Spec)], count: u32, now: u64) -> Outcome {
        let ask = Ask {
            specs: policy,
            cost: 1,
            ban: None,
            lease: None,
        };
        let (outcome, _) = ledger.check_inviting(&ask, None, count, now);
        assert!(!outcome.allowed);
        outcome
    }

    #[test]
    fn a_spread_refusal_tells_its_batch_in_order_then_asks_the_object() {
        let (mut by_object, policy) = full_key(3, 1_000, &[0, 10, 20]);
        let (mut batched, _) = full_key(3, 1_000, &[0, 10, 20]);
        let expected: Vec<Retry> = (0..5)
            .map(|_| refuse(&mut by_object, &policy, 1, 100).retry)
            .collect();
        let mut cache = RefusalCache::new(8);
        let first = refuse(&mut batched, &policy, 5, 100);
        cache.insert("k", &first, 100);
        let mut told = vec![first.retry];
        while let Some(cached) = cache.get("k", 100) {
            assert_eq!(cached.policies[0].decision.retry, cached.retry);
            assert_eq!(
                Retry::After(cached.policies[0].decision.reset_ms),
                cached.retry,
                "t is Retry-After"
            );
            assert_eq!(cached.earliest(), Retry::After(900));
            told.push(cached.retry);
            cache.invited("k");
        }
        assert_eq!(told, expected, "the same moments the object would tell");
        assert_eq!(cache.invitations("k"), 10, "spent: ask for twice as many");
        assert_eq!(cache.invitations("other"), 1);
    }

    #[test]
    fn a_spent_batch_still_holds_its_refusal_until_a_place_frees() {
        let (mut ledger, policy) = full_key(1, 1_000, &[0]);
        let mut cache = RefusalCache::new(8);
        cache.insert("k", &refuse(&mut ledger, &policy, 1, 10), 10);
        assert!(cache.get("k", 20).is_none(), "its one moment was its own");
        assert!(cache.holds("k", 20), "yet the object still refuses");
        assert!(!cache.holds("k", 1_000), "a place frees at 1 000");
        assert!(!cache.holds("other", 20));
    }

    #[test]
    fn a_moment_is_handed_out_only_when_told() {
        let (mut ledger, policy) = full_key(1, 1_000, &[0]);
        let mut cache = RefusalCache::new(8);
        cache.insert("k", &refuse(&mut ledger, &policy, 3, 10), 10);
        let peeked = cache.get("k", 20).unwrap().retry;
        assert_eq!(
            cache.get("k", 20).unwrap().retry,
            peeked,
            "a look tells nobody"
        );
        cache.invited("k");
        assert!(cache.get("k", 20).unwrap().retry > peeked);
    }

    #[test]
    fn an_ended_spread_entry_sizes_the_next_batch_and_answers_nothing() {
        let (mut ledger, policy) = full_key(2, 1_000, &[0, 500]);
        let mut cache = RefusalCache::new(8);
        cache.insert("k", &refuse(&mut ledger, &policy, 8, 600), 600);
        for _ in 0..2 {
            assert!(cache.get("k", 700).is_some());
            cache.invited("k");
        }
        // The first place frees at 1 000: the object answers from then on.
        assert!(cache.get("k", 1_000).is_none());
        assert!(cache.get("k", 999).is_none(), "its moments are gone");
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.invitations("k"), 3, "three told in its time: as many");
    }

    /// Several isolates answering for one key, each from batches of the
    /// one object's schedule: every moment told is one the object would
    /// have told, each once, so a full key of N still invites at most N
    /// in any window, whatever the number of isolates.
    #[test]
    fn isolates_tell_moments_of_one_schedule_each_once() {
        let window = 10_000;
        let (mut ledger, policy) = full_key(10, window, &[1_000; 10]);
        let mut isolates: Vec<RefusalCache> = (0..4).map(|_| RefusalCache::new(8)).collect();
        let mut told = Vec::new();
        let mut calls = 0;
        for i in 0..600u64 {
            let now = 2_000 + i;
            let cache = &mut isolates[(i * 7 % 4) as usize];
            let wait = match cache.get("k", now) {
                Some(cached) => {
                    cache.invited("k");
                    cached.retry
                }
                None => {
                    calls += 1;
                    let outcome = refuse(&mut ledger, &policy, cache.invitations("k"), now);
                    cache.insert("k", &outcome, now);
                    outcome.retry
                }
            };
            let at = now + wait.ms().unwrap();
            assert!(at >= 11_000, "never before a place frees");
            told.push(at);
        }
        assert!(calls <= 40, "{calls} object calls for 600 refusals");
        // Each isolate was handed at most as many moments as it told (its
        // batches double, and only its last is left part untold): the
        // latest moment told is no later than the 2 · 600 + 4-th place's,
        // 10 places a lap of 11 s from 11 s on.
        let latest = *told.iter().max().unwrap();
        assert!(latest < 11_000 + (2 * 600 + 4) / 10 * 11_000, "{latest}");
        told.sort_unstable();
        let mut distinct = told.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), told.len(), "no moment told twice");
        for (i, &start) in told.iter().enumerate() {
            let inside = told[i..]
                .iter()
                .take_while(|&&t| t < start + window)
                .count();
            assert!(inside <= 10, "{inside} told within a window from {start}");
        }
    }
}
