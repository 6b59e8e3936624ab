//! Live control of a rule (open, paused, closed) without a redeploy, and
//! what a decision does under each. A global quota's state lives in its
//! parts, which decide with it exactly; any other rule's is one Workers KV
//! document ([`RuleStates`]) each isolate reads in the background.

mod states;

use crate::input::scan::{FromScan, Malformed, Read, Scan};

pub use states::{RuleStates, MAX_RULE_STATES};

/// How long a client of a paused rule is told to wait (`Retry-After`): a
/// pause lasts as long as its operator wants, so the wait is a guess, long
/// enough that paused clients do not hammer the edge and short enough that
/// they come back soon after it opens.
pub const PAUSED_RETRY_MS: u64 = 10_000;

/// A rule's state, as operators set it; ordered from the most open to the
/// strictest. On the wire it is its name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleState {
    /// Decided as configured.
    #[default]
    Open,
    /// Every matching request is answered `503`, code `paused`, with
    /// `Retry-After`: come back later.
    Paused,
    /// Every matching request is answered `410`, code `closed` ("sold
    /// out"), without `Retry-After`: there is nothing to come back for.
    Closed,
}

impl RuleState {
    const ALL: [RuleState; 3] = [RuleState::Open, RuleState::Paused, RuleState::Closed];

    /// The state's name, as the admin API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleState::Open => "open",
            RuleState::Paused => "paused",
            RuleState::Closed => "closed",
        }
    }

    /// The state a name spells, exactly (lower case).
    pub fn named(name: &str) -> Option<RuleState> {
        RuleState::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl crate::json::Write for RuleState {
    fn write(&self, out: &mut crate::json::Text) {
        out.str(self.as_str());
    }
}

impl FromScan for RuleState {
    fn from_scan(scan: &mut Scan<'_>) -> Read<RuleState> {
        RuleState::named(&scan.str()?).ok_or(Malformed)
    }
}

crate::wire! {
    /// A rule's state, why, and since when.
    #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
    pub struct Control {
        pub state: RuleState,
        /// The operator's reason, shown in every answer the state gives.
        pub reason: String => Default::default(),
        /// When it was set, ms since the epoch.
        pub set_ms: u64 => Default::default(),
    }
}

impl Control {
    /// Whether the state answers requests itself (paused or closed), so
    /// that nothing is decided, admitted or counted toward a ban.
    pub fn halts(&self) -> bool {
        self.state != RuleState::Open
    }

    /// How long a client the state answered should wait: a while when
    /// paused, never (`None`) when closed or open.
    pub fn retry_after_ms(&self) -> Option<u64> {
        (self.state == RuleState::Paused).then_some(PAUSED_RETRY_MS)
    }
}

/// The strictest of several parts' states (closed, then paused); `None`
/// when there is none, every part being open. Parts disagree only while an
/// operator's change is being written to them, or when it reached some
/// and not others: the view shows the state that holds somewhere.
pub fn strictest<'a>(controls: impl IntoIterator<Item = &'a Control>) -> Option<&'a Control> {
    controls.into_iter().max_by_key(|c| c.state)
}

/// Whether every part holds the same state, for the same reason (parts
/// that closed themselves when sold out did so each at its own moment).
pub fn agree(controls: &[Option<&Control>]) -> bool {
    controls.windows(2).all(|pair| match pair {
        [Some(a), Some(b)] => (a.state, &a.reason) == (b.state, &b.reason),
        [a, b] => a.is_none() && b.is_none(),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strictest_state_wins() {
        let control = |state| Control {
            state,
            reason: String::new(),
            set_ms: 0,
        };
        let parts = [
            control(RuleState::Paused),
            control(RuleState::Closed),
            control(RuleState::Open),
        ];
        assert_eq!(strictest(&parts).unwrap().state, RuleState::Closed);
        assert_eq!(strictest(&parts[..1]).unwrap().state, RuleState::Paused);
        assert!(strictest(&[]).is_none());
    }

    #[test]
    fn only_paused_and_closed_halt_and_only_a_pause_asks_for_a_retry() {
        let control = |state| Control {
            state,
            reason: String::new(),
            set_ms: 0,
        };
        assert!(!control(RuleState::Open).halts());
        assert!(control(RuleState::Paused).halts());
        assert!(control(RuleState::Closed).halts());
        assert_eq!(
            control(RuleState::Paused).retry_after_ms(),
            Some(PAUSED_RETRY_MS)
        );
        assert_eq!(control(RuleState::Closed).retry_after_ms(), None);
        assert_eq!(control(RuleState::Open).retry_after_ms(), None);
    }

    #[test]
    fn states_are_spelled_in_lower_case_on_the_wire() {
        for state in [RuleState::Open, RuleState::Paused, RuleState::Closed] {
            let wire = crate::json::to_string(&state);
            assert_eq!(wire, format!("\"{}\"", state.as_str()));
            assert_eq!(RuleState::from_json(&wire).unwrap(), state);
        }
        assert!(RuleState::from_json("\"Paused\"").is_err());
        let control = Control::from_json(r#"{"state":"closed"}"#).unwrap();
        assert_eq!(
            (control.state, control.reason.as_str()),
            (RuleState::Closed, "")
        );
    }
}
