//! The states of every rule that is not a global quota, as one document:
//! the value of one Workers KV key, which the admin API rewrites and every
//! isolate reads in the background. Only rules that are not open are
//! listed, so the document of a deployment nobody paused is `{"rules":[]}`;
//! otherwise `{"rules":[["api",{"state":"paused","reason":"…","set_ms":…}]]}`.
//! A list rather than a map: a config has a handful of rules, and a map
//! type of its own would cost the worker more code than it saves.

use super::Control;
use crate::input::scan::FromScan;

/// The most rules a document may list; beyond it, an isolate keeps the
/// first (by id). The admin API writes only configured rules, so the bound
/// only matters for a value written by hand.
pub const MAX_RULE_STATES: usize = 1024;

crate::wire! {
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct RuleStates {
        /// Each rule once, by id.
        rules: Vec<(String, Control)>,
    }
}

impl RuleStates {
    pub fn new() -> RuleStates {
        RuleStates::default()
    }

    /// The document a KV value holds; `None` when it is not one, so that
    /// the reader keeps the states it had rather than open every rule.
    pub fn decode(text: &str) -> Option<RuleStates> {
        let mut states = RuleStates::new();
        for (rule, control) in RuleStates::from_json(text).ok()?.rules {
            if states.len() == MAX_RULE_STATES {
                break;
            }
            if states.get(&rule).is_none() {
                states.set(&rule, control);
            }
        }
        Some(states)
    }

    pub fn encode(&self) -> String {
        crate::json::to_string(self)
    }

    /// Rule `rule`'s state when it is not open.
    pub fn get(&self, rule: &str) -> Option<&Control> {
        self.rules.iter().find(|(r, _)| r == rule).map(|(_, c)| c)
    }

    /// Sets rule `rule`'s state; an open rule is no longer listed.
    /// Answers the state it replaced, if it was not open.
    pub fn set(&mut self, rule: &str, control: Control) -> Option<Control> {
        let at = self.rules.iter().position(|(r, _)| r == rule);
        let previous = at.map(|i| self.rules.swap_remove(i).1);
        if control.halts() {
            self.rules.push((rule.to_string(), control));
        }
        previous
    }

    /// Keeps only the rules `known` names: a rule removed from the config
    /// (or renamed) leaves no state behind for a later rule of that name.
    pub fn retain(&mut self, known: impl Fn(&str) -> bool) {
        self.rules.retain(|(rule, _)| known(rule));
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::RuleState;

    fn control(state: RuleState, reason: &str) -> Control {
        Control {
            state,
            reason: reason.to_string(),
            set_ms: 7,
        }
    }

    #[test]
    fn only_rules_that_are_not_open_are_listed() {
        let mut states = RuleStates::new();
        assert_eq!(states.encode(), r#"{"rules":[]}"#);
        assert_eq!(
            states.set("api", control(RuleState::Paused, "deploy")),
            None
        );
        states.set("login", control(RuleState::Closed, ""));
        assert_eq!(states.get("api").unwrap().state, RuleState::Paused);
        let replaced = states.set("api", control(RuleState::Open, "done"));
        assert_eq!(replaced.unwrap().reason, "deploy");
        assert!(states.get("api").is_none());
        assert_eq!(states.len(), 1);
        assert_eq!(
            states.encode(),
            r#"{"rules":[["login",{"state":"closed","reason":"","set_ms":7}]]}"#
        );
        let back = RuleStates::decode(&states.encode()).unwrap();
        assert_eq!(back, states);
    }

    #[test]
    fn a_value_that_is_no_document_decodes_to_none() {
        for text in [
            "",
            "{",
            "[]",
            r#"{"rules":{}}"#,
            r#"{"rules":[["a",{"state":"gone"}]]}"#,
        ] {
            assert!(RuleStates::decode(text).is_none(), "{text}");
        }
        // Open entries written by hand are dropped, and a rule listed
        // twice counts once.
        let states = RuleStates::decode(
            r#"{"rules":[["a",{"state":"open"}],["b",{"state":"paused"}],["b",{"state":"closed"}]]}"#,
        )
        .unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states.get("b").unwrap().state, RuleState::Paused);
    }

    #[test]
    fn a_document_holds_at_most_its_bound_and_only_known_rules() {
        let rules: Vec<(String, Control)> = (0..MAX_RULE_STATES + 5)
            .map(|i| (format!("r{i:05}"), control(RuleState::Paused, "")))
            .collect();
        let text = RuleStates { rules }.encode();
        let mut states = RuleStates::decode(&text).unwrap();
        assert_eq!(states.len(), MAX_RULE_STATES);
        assert!(states.get("r00000").is_some());
        states.retain(|rule| rule == "r00001");
        assert_eq!(states.len(), 1);
    }
}
