//! What one container object holds, independent of how it is stored: for each
//! key, one sliding log per named policy (a "slot"). It decides, tells the
//! caller which rows to write, and says when the next sweep is due.
//!
//! The Durable Object glue in `edge::container` only executes what the ledger
//! returns, so the rules about persistence and sweeping are tested here on the
//! host.

use std::collections::HashMap;

use crate::limit::{Decision, Policy, SlidingLog};

/// One policy's part of an outcome.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyDecision {
    pub name: String,
    pub window_ms: u64,
    #[serde(flatten)]
    pub decision: Decision,
}

/// The answer to one check across all of a request's policies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub allowed: bool,
    pub policies: Vec<PolicyDecision>,
}

impl Outcome {
    /// How long until the whole request could pass: every refusing policy
    /// must have room, and windows only free up while nothing is admitted.
    pub fn retry_after_ms(&self) -> u64 {
        self.policies
            .iter()
            .map(|p| p.decision.retry_after_ms)
            .max()
            .unwrap_or(0)
    }

    pub fn violated(&self) -> impl Iterator<Item = &PolicyDecision> {
        self.policies.iter().filter(|p| !p.decision.allowed)
    }
}

/// A row the caller must write for an admission to survive a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// The slot's policy (new, or changed since it was last stored).
    Policy {
        key: String,
        name: String,
        policy: Policy,
    },
    /// `count` more units admitted at `at_ms`; rows with the same slot and
    /// timestamp add up.
    Hit {
        key: String,
        name: String,
        at_ms: u64,
        count: u32,
    },
}

/// What a sweep removed from one slot, for the caller to delete from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expired {
    /// Delete the slot's hits at or before `cutoff_ms`.
    Before {
        key: String,
        name: String,
        cutoff_ms: u64,
    },
    /// The slot is empty: delete its policy and every hit.
    Slot { key: String, name: String },
}

#[derive(Debug)]
struct Slot {
    name: String,
    log: SlidingLog,
    /// The policy storage holds for this slot, if it holds any rows: a
    /// policy changed by a refused request is written with the next
    /// admission, and a slot with rows stays until the sweep deletes them.
    stored: Option<Policy>,
}

#[derive(Debug, Default)]
pub struct Ledger {
    keys: HashMap<String, Vec<Slot>>,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Checks `cost` units against every policy; admits them into all of the
    /// policies' logs or into none. A refusal and a peek (cost 0) write
    /// nothing and leave no new state behind.
    pub fn check(
        &mut self,
        key: &str,
        policies: &[(String, Policy)],
        now_ms: u64,
        cost: u32,
    ) -> (Outcome, Vec<Write>) {
        let mut slots = self.keys.remove(key).unwrap_or_default();
        let indices: Vec<usize> = policies
            .iter()
            .map(|(name, policy)| slot_for(&mut slots, name, *policy))
            .collect();
        let decisions: Vec<Decision> = indices
            .iter()
            .map(|&i| slots[i].log.decide(now_ms, cost))
            .collect();
        let allowed = decisions.iter().all(|d| d.allowed);
        let mut writes = Vec::new();
        let reported: Vec<Decision> = if allowed {
            if cost > 0 {
                for &i in &indices {
                    admit(key, &mut slots[i], now_ms, cost, &mut writes);
                }
            }
            decisions
        } else {
            // Policies that had room report the state they keep, since this
            // request is not logged in them either.
            decisions
                .into_iter()
                .zip(&indices)
                .map(|(d, &i)| {
                    if d.allowed {
                        slots[i].log.decide(now_ms, 0)
                    } else {
                        d
                    }
                })
                .collect()
        };
        let outcome = Outcome {
            allowed,
            policies: indices
                .iter()
                .zip(reported)
                .map(|(&i, decision)| PolicyDecision {
                    name: slots[i].name.clone(),
                    window_ms: slots[i].log.policy().window_ms(),
                    decision,
                })
                .collect(),
        };
        slots.retain(|slot| slot.stored.is_some() || !slot.log.is_empty());
        if !slots.is_empty() {
            self.keys.insert(key.to_string(), slots);
        }
        (outcome, writes)
    }

    /// Restores a slot's policy from storage. Returns false (and keeps
    /// nothing) for a row that no longer validates.
    pub fn restore_policy(&mut self, key: &str, name: &str, limit: u64, window_ms: u64) -> bool {
        let Ok(policy) = Policy::new(limit, window_ms) else {
            return false;
        };
        let slots = self.keys.entry(key.to_string()).or_default();
        let i = slot_for(slots, name, policy);
        slots[i].stored = Some(policy);
        true
    }

    /// Restores admitted units from storage; rows must come in time order
    /// per slot. Hits of a slot without a policy are ignored.
    pub fn restore_hit(&mut self, key: &str, name: &str, at_ms: u64, count: u32) {
        if let Some(slot) = self
            .keys
            .get_mut(key)
            .and_then(|slots| slots.iter_mut().find(|s| s.name == name))
        {
            slot.log.record(at_ms, count);
        }
    }

    /// Expires what no longer counts, forgets empty slots and keys, and says
    /// which stored rows to delete. Running it twice at the same time changes
    /// nothing the second time, so an alarm that fires twice is harmless.
    pub fn sweep(&mut self, now_ms: u64) -> Vec<Expired> {
        let mut expired = Vec::new();
        for (key, slots) in &mut self.keys {
            for slot in slots.iter_mut() {
                slot.log.expire(now_ms);
                let key = key.clone();
                let name = slot.name.clone();
                expired.push(if slot.log.is_empty() {
                    Expired::Slot { key, name }
                } else {
                    let window = slot.log.policy().window_ms();
                    Expired::Before {
                        key,
                        name,
                        cutoff_ms: now_ms.saturating_sub(window),
                    }
                });
            }
            slots.retain(|slot| !slot.log.is_empty());
        }
        self.keys.retain(|_, slots| !slots.is_empty());
        expired
    }

    /// When the next sweep is due, if anything is held. A slot is due when
    /// its oldest admission expires, but at most once per window: under
    /// steady traffic that batches a window's rows into one delete, and an
    /// idle slot is empty by its second sweep.
    pub fn next_sweep(&self, now_ms: u64) -> Option<u64> {
        self.slots()
            .filter_map(|(_, _, log)| {
                let window = log.policy().window_ms();
                let oldest = log.oldest_expiry()?;
                Some(oldest.max(now_ms.saturating_add(window)))
            })
            .min()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every slot as `(key, policy name, log)`.
    pub fn slots(&self) -> impl Iterator<Item = (&str, &str, &SlidingLog)> {
        self.keys.iter().flat_map(|(key, slots)| {
            slots
                .iter()
                .map(move |slot| (key.as_str(), slot.name.as_str(), &slot.log))
        })
    }
}

/// The index of the slot named `name`, created or updated to `policy`.
fn slot_for(slots: &mut Vec<Slot>, name: &str, policy: Policy) -> usize {
    match slots.iter().position(|slot| slot.name == name) {
        Some(i) => {
            slots[i].log.set_policy(policy);
            i
        }
        None => {
            slots.push(Slot {
                name: name.to_string(),
                log: SlidingLog::new(policy),
                stored: None,
            });
            slots.len() - 1
        }
    }
}

fn admit(key: &str, slot: &mut Slot, now_ms: u64, cost: u32, writes: &mut Vec<Write>) {
    let policy = slot.log.policy();
    if slot.stored != Some(policy) {
        writes.push(Write::Policy {
            key: key.to_string(),
            name: slot.name.clone(),
            policy,
        });
        slot.stored = Some(policy);
    }
    let at_ms = slot.log.admit(now_ms, cost);
    writes.push(Write::Hit {
        key: key.to_string(),
        name: slot.name.clone(),
        at_ms,
        count: cost,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, limit: u64, window_ms: u64) -> (String, Policy) {
        (name.to_string(), Policy::new(limit, window_ms).unwrap())
    }

    #[test]
    fn the_first_admission_writes_the_policy_then_only_hits() {
        let mut ledger = Ledger::new();
        let p = [policy("api", 2, 1000)];
        let (outcome, writes) = ledger.check("k", &p, 10, 1);
        assert!(outcome.allowed);
        assert!(matches!(
            writes[..],
            [
                Write::Policy { .. },
                Write::Hit {
                    at_ms: 10,
                    count: 1,
                    ..
                }
            ]
        ));
        let (_, writes) = ledger.check("k", &p, 11, 1);
        assert!(matches!(writes[..], [Write::Hit { at_ms: 11, .. }]));
    }

    #[test]
    fn refusals_and_peeks_write_nothing_and_keep_nothing() {
        let mut ledger = Ledger::new();
        let (outcome, writes) = ledger.check("k", &[policy("api", 1, 1000)], 0, 0);
        assert!(outcome.allowed);
        assert!(writes.is_empty());
        assert!(ledger.is_empty());
        ledger.check("k", &[policy("api", 1, 1000)], 0, 1);
        let (outcome, writes) = ledger.check("k", &[policy("api", 1, 1000)], 1, 1);
        assert!(!outcome.allowed);
        assert!(writes.is_empty());
    }

    #[test]
    fn several_policies_admit_all_or_nothing() {
        let mut ledger = Ledger::new();
        let p = [policy("second", 2, 1000), policy("day", 3, 86_400_000)];
        assert!(ledger.check("k", &p, 0, 1).0.allowed);
        assert!(ledger.check("k", &p, 1, 1).0.allowed);
        let (refused, writes) = ledger.check("k", &p, 2, 1);
        assert!(!refused.allowed);
        assert!(writes.is_empty());
        let names: Vec<_> = refused.violated().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["second"]);
        // The day policy had room, and reports it unchanged.
        assert_eq!(refused.policies[1].decision.remaining, 1);
        assert_eq!(refused.retry_after_ms(), 998);
        assert!(ledger.check("k", &p, 1000, 1).0.allowed);
        let (refused, _) = ledger.check("k", &p, 2000, 1);
        let names: Vec<_> = refused.violated().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["day"]);
        assert_eq!(refused.retry_after_ms(), 86_400_000 - 2000);
    }

    #[test]
    fn a_changed_policy_is_stored_with_the_next_admission() {
        let mut ledger = Ledger::new();
        ledger.check("k", &[policy("api", 1, 1000)], 0, 1);
        let (refused, writes) = ledger.check("k", &[policy("api", 1, 500)], 100, 1);
        assert!(!refused.allowed);
        assert!(writes.is_empty());
        let (allowed, writes) = ledger.check("k", &[policy("api", 1, 500)], 500, 1);
        assert!(allowed.allowed);
        assert!(
            matches!(&writes[..], [Write::Policy { policy, .. }, Write::Hit { .. }]
            if policy.window_ms() == 500)
        );
    }

    #[test]
    fn a_stored_slot_stays_until_the_sweep_deletes_its_rows() {
        let mut ledger = Ledger::new();
        ledger.check("k", &[policy("api", 1, 100)], 0, 1);
        // Expired in memory and changed by a refusal, but its rows remain.
        ledger.check("k", &[policy("api", 1, 50)], 500, 0);
        assert_eq!(ledger.slots().count(), 1);
        assert_eq!(
            ledger.sweep(500),
            [Expired::Slot {
                key: "k".into(),
                name: "api".into()
            }]
        );
        assert!(ledger.is_empty());
    }

    #[test]
    fn restoring_rows_rebuilds_the_same_state() {
        let mut ledger = Ledger::new();
        assert!(ledger.restore_policy("k", "api", 3, 1000));
        ledger.restore_hit("k", "api", 100, 2);
        ledger.restore_hit("k", "ghost", 100, 2);
        assert!(!ledger.restore_policy("k", "bad", 0, 1000));
        let (outcome, writes) = ledger.check("k", &[policy("api", 3, 1000)], 200, 2);
        assert!(!outcome.allowed);
        assert!(writes.is_empty());
        let (outcome, writes) = ledger.check("k", &[policy("api", 3, 1000)], 200, 1);
        assert!(outcome.allowed);
        assert!(
            matches!(writes[..], [Write::Hit { .. }]),
            "policy row is already stored"
        );
        assert_eq!(ledger.slots().count(), 1);
    }

    #[test]
    fn the_sweep_deletes_expired_rows_and_forgets_empty_slots() {
        let mut ledger = Ledger::new();
        ledger.check("a", &[policy("api", 5, 1000)], 0, 1);
        ledger.check("a", &[policy("api", 5, 1000)], 600, 1);
        ledger.check("b", &[policy("api", 5, 1000)], 100, 1);
        assert_eq!(ledger.next_sweep(600), Some(1600));
        let mut expired = ledger.sweep(1200);
        expired.sort_by_key(|e| format!("{e:?}"));
        assert_eq!(
            expired,
            [
                Expired::Before {
                    key: "a".into(),
                    name: "api".into(),
                    cutoff_ms: 200
                },
                Expired::Slot {
                    key: "b".into(),
                    name: "api".into()
                },
            ]
        );
        assert_eq!(
            ledger.sweep(1200),
            [Expired::Before {
                key: "a".into(),
                name: "api".into(),
                cutoff_ms: 200
            }]
        );
        assert_eq!(ledger.next_sweep(1200), Some(2200));
        ledger.sweep(2200);
        assert!(ledger.is_empty());
        assert_eq!(ledger.next_sweep(2200), None);
    }

    #[test]
    fn an_idle_key_is_empty_by_its_second_sweep() {
        let mut ledger = Ledger::new();
        let mut alarm = None;
        for t in (0..1000).step_by(7) {
            ledger.check("k", &[policy("api", 1000, 1000)], t, 1);
            alarm = alarm.or(ledger.next_sweep(t));
        }
        let first = alarm.unwrap();
        assert_eq!(first, 1000);
        ledger.sweep(first);
        let second = ledger.next_sweep(first).unwrap();
        assert_eq!(second, 2000);
        ledger.sweep(second);
        assert!(ledger.is_empty());
    }
}
