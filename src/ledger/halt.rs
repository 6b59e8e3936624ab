//! An operator's state for the rule this object is a part of (a global
//! quota's part): while paused or closed, every decision answers with the
//! state instead, admitting nothing, writing nothing and counting nothing
//! toward a ban; what the part admitted before keeps counting, so opening
//! it again admits exactly what the window has room for.

use super::slot::{report, slot_for};
use super::{Ask, Expired, Ledger, Outcome, Write};
use crate::control::Control;
use crate::limit::Retry;

impl Ledger {
    /// Sets the state; an open state is stored as no row at all. Answers
    /// the state it replaced (`None`: open) and what to write or delete.
    pub fn set_control(&mut self, next: Control) -> (Option<Control>, Vec<Write>, Vec<Expired>) {
        let previous = self.control.take();
        if next.halts() {
            self.control = Some(next.clone());
            return (previous, vec![Write::Control(next)], Vec::new());
        }
        let expired = previous.iter().map(|_| Expired::Control).collect();
        (previous, Vec::new(), expired)
    }

    /// The state when it is not open.
    pub fn control(&self) -> Option<&Control> {
        self.control.as_ref()
    }

    pub fn restore_control(&mut self, control: Control) {
        self.control = Some(control).filter(Control::halts);
    }

    /// The answer of a paused or closed part: each policy's state as it
    /// stands, nothing admitted, and the state with its retry (a while
    /// when paused, never when closed).
    pub(super) fn halted(&mut self, ask: &Ask<'_>, now_ms: u64) -> Option<Outcome> {
        let control = self.control.clone()?;
        let specs = self.policies(ask.specs, now_ms);
        let indices: Vec<usize> = specs
            .iter()
            .map(|(name, spec)| slot_for(&mut self.slots, name, *spec))
            .collect();
        let policies = report(&mut self.slots, &indices, now_ms, |_| None);
        self.forget_idle_slots(now_ms);
        let retry = control.retry_after_ms().map_or(Retry::Never, Retry::After);
        Some(Outcome {
            halt: Some(control),
            retry,
            ..Outcome::new(false, policies, None, None, now_ms)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{RuleState, PAUSED_RETRY_MS};
    use crate::ledger::{BanPolicy, Override};
    use crate::limit::{Policy, Spec};

    fn share(limit: u64) -> Vec<(String, Spec)> {
        vec![(
            "sale".to_string(),
            Spec::SlidingLog(Policy::new(limit, 1000).unwrap()),
        )]
    }

    fn control(state: RuleState) -> Control {
        Control {
            state,
            reason: "stock count".into(),
            set_ms: 1,
        }
    }

    fn one(specs: &[(String, Spec)]) -> Ask<'_> {
        Ask {
            specs,
            cost: 1,
            ban: None,
            lease: None,
        }
    }

    #[test]
    fn a_paused_or_closed_part_admits_nothing_writes_nothing_and_keeps_what_it_admitted() {
        let specs = share(3);
        let mut ledger = Ledger::new();
        assert!(ledger.check(&one(&specs), 10).0.allowed);
        for (state, retry) in [
            (RuleState::Paused, Retry::After(PAUSED_RETRY_MS)),
            (RuleState::Closed, Retry::Never),
        ] {
            let (previous, writes, expired) = ledger.set_control(control(state));
            assert_eq!(writes, [Write::Control(control(state))]);
            assert!(expired.is_empty());
            assert_eq!(previous.is_some(), state == RuleState::Closed);
            let (outcome, writes) = ledger.check(&one(&specs), 20);
            assert!(!outcome.allowed && writes.is_empty());
            assert_eq!(outcome.halt, Some(control(state)));
            assert_eq!(outcome.retry, retry);
            assert_eq!(outcome.violated().count(), 0, "no policy refused");
            assert_eq!(outcome.policies[0].decision.remaining, 2);
        }
        // Opening deletes the row; the admission before still counts.
        let (previous, writes, expired) = ledger.set_control(control(RuleState::Open));
        assert_eq!(previous.unwrap().state, RuleState::Closed);
        assert!(writes.is_empty());
        assert_eq!(expired, [Expired::Control]);
        assert!(ledger.check(&one(&specs), 30).0.allowed);
        assert!(ledger.check(&one(&specs), 30).0.allowed);
        let full = ledger.check(&one(&specs), 30).0;
        assert!(!full.allowed && full.halt.is_none());
        // Opening an open part changes nothing.
        let (previous, writes, expired) = ledger.set_control(control(RuleState::Open));
        assert!(previous.is_none() && writes.is_empty() && expired.is_empty());
    }

    #[test]
    fn a_halted_part_counts_no_strike_and_answers_with_its_override() {
        let specs = share(3);
        let ban = BanPolicy::new(1, 1000, 60_000, 1, 60_000).unwrap();
        let mut ledger = Ledger::new();
        ledger.set_override(Some(Override {
            policies: share(5),
            until_ms: None,
            reason: String::new(),
            set_ms: 0,
            whole: None,
        }));
        ledger.set_control(control(RuleState::Paused));
        let ask = Ask {
            ban: Some(&ban),
            ..one(&specs)
        };
        for t in 0..5 {
            let (outcome, _) = ledger.check(&ask, t);
            assert!(outcome.ban.is_none(), "no ban starts");
            assert_eq!(outcome.policies[0].decision.limit, 5);
        }
        ledger.set_control(control(RuleState::Open));
        assert!(ledger.check(&ask, 10).0.allowed, "no strikes were counted");
    }

    #[test]
    fn the_state_outlives_a_reset_and_keeps_the_object_from_being_freed() {
        let specs = share(3);
        let mut ledger = Ledger::new();
        assert!(ledger.is_empty(0));
        ledger.set_control(control(RuleState::Closed));
        assert!(!ledger.is_empty(0), "its row must stay");
        ledger.reset(0);
        assert_eq!(ledger.control().unwrap().state, RuleState::Closed);
        assert!(ledger.sweep(1_000_000).is_empty());
        assert!(!ledger.check(&one(&specs), 5).0.allowed);
        let mut restored = Ledger::new();
        restored.restore_control(control(RuleState::Open));
        assert!(restored.control().is_none(), "an open row means no state");
        restored.restore_control(control(RuleState::Paused));
        assert!(restored.check(&one(&specs), 5).0.halt.is_some());
    }
}
