//! The isolate's copy of the rule states in Workers KV, read in the
//! background at most once per [`REFRESH_MS`], never on a request's path. A
//! new isolate applies no state until its first read answers; a change made
//! through this isolate applies at once and is pinned for [`PIN_MS`], so an
//! older copy read back does not undo it here.

use crate::control::{Control, RuleStates};

/// How often an isolate reads the states: the delay before every isolate
/// applies a change is this plus KV's own propagation (up to 60 s).
pub const REFRESH_MS: u64 = 10_000;

/// How long a change made through this isolate outranks what it reads:
/// longer than KV keeps a location's copy of a value (60 s).
pub const PIN_MS: u64 = 70_000;

#[derive(Debug, Default)]
pub struct StateCopy {
    states: RuleStates,
    /// Changes made here, each with when it is due to be read back.
    pinned: Vec<(String, Control, u64)>,
    /// When the last read left; `None` before the first, which is due at
    /// once.
    read_ms: Option<u64>,
}

impl StateCopy {
    pub fn new() -> StateCopy {
        StateCopy::default()
    }

    /// Whether a read is due, `every_ms` after the last ([`REFRESH_MS`] but
    /// in tests), and claims it: requests that arrive while it is under way
    /// do not start another.
    pub fn claim(&mut self, now_ms: u64, every_ms: u64) -> bool {
        let due = self
            .read_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= every_ms);
        if due {
            self.read_ms = Some(now_ms);
        }
        due
    }

    /// What a read answered. A read that failed changes nothing: the
    /// states in force stay (the caller does not call this).
    pub fn replace(&mut self, states: RuleStates, now_ms: u64) {
        self.states = states;
        self.pinned.retain(|(_, _, until)| now_ms < *until);
    }

    /// A change made through this isolate, applied at once.
    pub fn set(&mut self, rule: &str, control: Control, now_ms: u64) {
        self.states.set(rule, control.clone());
        self.pinned.retain(|(r, _, _)| r != rule);
        self.pinned
            .push((rule.to_string(), control, now_ms.saturating_add(PIN_MS)));
    }

    /// Rule `rule`'s state when it is paused or closed.
    pub fn get(&self, rule: &str, now_ms: u64) -> Option<&Control> {
        match self.pinned.iter().find(|(r, _, _)| r == rule) {
            Some((_, control, until)) if now_ms < *until => Some(control).filter(|c| c.halts()),
            _ => self.states.get(rule),
        }
    }

    /// How many rules this isolate holds paused or closed.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::RuleState;

    fn control(state: RuleState) -> Control {
        Control {
            state,
            reason: String::new(),
            set_ms: 0,
        }
    }

    fn document(rule: &str, state: RuleState) -> RuleStates {
        let mut states = RuleStates::new();
        states.set(rule, control(state));
        states
    }

    #[test]
    fn the_first_read_is_due_at_once_then_once_per_interval() {
        let mut copy = StateCopy::new();
        assert!(copy.claim(5, REFRESH_MS));
        assert!(!copy.claim(5, REFRESH_MS), "one read at a time");
        assert!(!copy.claim(5 + REFRESH_MS - 1, REFRESH_MS));
        assert!(copy.claim(5 + REFRESH_MS, REFRESH_MS));
    }

    #[test]
    fn a_read_replaces_the_states_and_a_new_isolate_holds_none() {
        let mut copy = StateCopy::new();
        assert!(copy.get("api", 0).is_none() && copy.is_empty());
        copy.replace(document("api", RuleState::Paused), 10);
        assert_eq!(copy.get("api", 10).unwrap().state, RuleState::Paused);
        copy.replace(document("login", RuleState::Closed), 20);
        assert!(copy.get("api", 20).is_none(), "opened elsewhere");
        assert_eq!(copy.len(), 1);
    }

    #[test]
    fn a_change_made_here_applies_at_once_and_outranks_older_reads() {
        let mut copy = StateCopy::new();
        copy.replace(document("api", RuleState::Paused), 0);
        copy.set("api", control(RuleState::Open), 1_000);
        assert!(copy.get("api", 1_000).is_none(), "opened at once");
        // A read that still says paused (it left before the write, or KV
        // answered from an older copy) does not undo it while pinned.
        copy.replace(document("api", RuleState::Paused), 5_000);
        assert!(copy.get("api", 5_000).is_none());
        assert!(copy.get("api", 1_000 + PIN_MS - 1).is_none());
        // Then reads decide again.
        assert_eq!(
            copy.get("api", 1_000 + PIN_MS).unwrap().state,
            RuleState::Paused
        );
        copy.set("api", control(RuleState::Closed), 90_000);
        copy.replace(RuleStates::new(), 90_000 + PIN_MS);
        assert!(copy.get("api", 90_000 + PIN_MS).is_none());
        assert!(copy.pinned.is_empty(), "pins are dropped once they lapse");
    }
}
