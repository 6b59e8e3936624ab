//! An operator's override: limits for one key in force over its rule's
//! until it lapses or is lifted.

use super::{Expired, Ledger, Write};
use crate::limit::Spec;

/// An operator's limits for one key, in force over its rule's (or tier's)
/// policies from the key's next decision until `until_ms`: see
/// [`Override::applied_to`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The policies it sets; none means unlimited.
    pub policies: Vec<(String, Spec)>,
    /// When it lapses (the sweep removes it); `None`: until lifted.
    pub until_ms: Option<u64>,
    pub reason: String,
    /// When it was set, for operators.
    pub set_ms: u64,
    /// A part of a global quota whose whole limit an operator set: the
    /// policy it changed and the whole quota's limit, which a split
    /// quota's part announces (its own share is in `policies`).
    pub whole: Option<(String, u64)>,
}

impl Override {
    pub(super) fn is_active(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until| now_ms < until)
    }

    /// The policies in force for a key its rule asks `asked` of: none for
    /// an unlimited override; otherwise the rule's, each one the override
    /// names under the override's limit, then the override's own. A
    /// policy the override leaves out keeps the rule's limit, as the
    /// config says it today, so raising one limit never drops another.
    pub fn applied_to(&self, asked: &[(String, Spec)]) -> Vec<(String, Spec)> {
        if self.policies.is_empty() {
            return Vec::new();
        }
        let mut policies: Vec<(String, Spec)> = asked
            .iter()
            .map(|(name, spec)| {
                let set = self.policies.iter().find(|(n, _)| n == name);
                (name.clone(), set.map_or(*spec, |(_, spec)| *spec))
            })
            .collect();
        for (name, spec) in &self.policies {
            if !asked.iter().any(|(n, _)| n == name) {
                policies.push((name.clone(), *spec));
            }
        }
        policies
    }
}

impl Ledger {
    /// Sets (or, with `None`, lifts) the override; answers the one it
    /// replaced and what to write or delete. An override on a key with no
    /// state is one row, and the key's alarm removes it when it lapses.
    pub fn set_override(
        &mut self,
        next: Option<Override>,
    ) -> (Option<Override>, Vec<Write>, Vec<Expired>) {
        let previous = std::mem::replace(&mut self.overridden, next.clone());
        let (writes, expired) = match next {
            Some(overridden) => (vec![Write::Override(overridden)], Vec::new()),
            None if previous.is_some() => (Vec::new(), vec![Expired::Override]),
            None => (Vec::new(), Vec::new()),
        };
        (previous, writes, expired)
    }

    /// The override, lapsed or not.
    pub fn overridden(&self) -> Option<&Override> {
        self.overridden.as_ref()
    }

    pub fn restore_override(&mut self, overridden: Override) {
        self.overridden = Some(overridden);
    }

    /// What a split quota's part announces as its whole quota's limit
    /// under an operator's override of the whole ([`Override::whole`]).
    pub(super) fn whole(&self, now_ms: u64) -> Option<(String, u64)> {
        let active = self.overridden.as_ref().filter(|o| o.is_active(now_ms));
        active.and_then(|o| o.whole.clone())
    }

    /// The policies in force: the ones asked, under an active override.
    pub(super) fn policies(&self, asked: &[(String, Spec)], now_ms: u64) -> Vec<(String, Spec)> {
        match &self.overridden {
            Some(o) if o.is_active(now_ms) => o.applied_to(asked),
            _ => asked.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ask;
    use crate::limit::Policy;

    fn log(limit: u64) -> Vec<(String, Spec)> {
        vec![(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(limit, 1000).unwrap()),
        )]
    }

    #[test]
    fn a_lowered_limit_reports_every_admission_the_log_still_holds() {
        let specs = log(3);
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        let mut ledger = Ledger::new();
        for t in 0..3 {
            assert!(ledger.check(&ask, t).0.allowed);
        }
        ledger.set_override(Some(Override {
            policies: log(1),
            until_ms: None,
            reason: String::new(),
            set_ms: 5,
            whole: None,
        }));
        assert!(!ledger.check(&ask, 10).0.allowed);
        let slot = &ledger.peek(10).0[0];
        assert_eq!((slot.limit, slot.used, slot.remaining), (1, 3, 0));
    }
}
