//! Bans that escalate: after `after` refusals within `within`, a key is
//! banned for `for`; each further offence multiplies the ban by `multiplier`,
//! up to `max`. A key that stays clean for `max` after its last ban ends
//! starts over at the first offence.
//!
//! The refusals that lead to a ban are counted in memory only: persisting
//! every refusal would make a flood write to storage, which is exactly what
//! a limiter must not do. Bans themselves are persisted, one row each.

use std::fmt;

use super::{Expired, Ledger, Write};
use crate::bounds::MAX_BAN_MS;
use crate::input::duration::format_ms;
use crate::limit::{Policy, SlidingLog, MAX_LIMIT};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BanPolicy {
    /// `after` refusals within `within`: a log of refusals at this limit.
    strikes: Policy,
    for_ms: u64,
    multiplier: u64,
    max_ms: u64,
}

/// A field of a ban policy out of range; `field` is the config name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BanError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for BanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl BanPolicy {
    pub fn new(
        after: u64,
        within_ms: u64,
        for_ms: u64,
        multiplier: u64,
        max_ms: u64,
    ) -> Result<BanPolicy, BanError> {
        let check = |ok: bool, field: &'static str, message: String| {
            if ok {
                Ok(())
            } else {
                Err(BanError { field, message })
            }
        };
        check(
            (1..=MAX_LIMIT).contains(&after),
            "after",
            format!("after must be from 1 to {MAX_LIMIT} refusals, got {after}"),
        )?;
        let strikes = Policy::new(after, within_ms).map_err(|_| BanError {
            field: "within",
            message: format!("within must be from 1 ms to 30 days, got {within_ms} ms"),
        })?;
        check(
            (1..=MAX_BAN_MS).contains(&for_ms),
            "for",
            format!("for must be from 1 ms to 365 days, got {for_ms} ms"),
        )?;
        check(
            (1..=1000).contains(&multiplier),
            "multiplier",
            format!("multiplier must be from 1 to 1000, got {multiplier}"),
        )?;
        check(
            (for_ms..=MAX_BAN_MS).contains(&max_ms),
            "max",
            format!(
                "max must be at least for ({}) and at most 365 days, got {max_ms} ms",
                format_ms(for_ms)
            ),
        )?;
        Ok(BanPolicy {
            strikes,
            for_ms,
            multiplier,
            max_ms,
        })
    }

    /// The log that counts refusals toward a ban.
    pub fn strikes(&self) -> Policy {
        self.strikes
    }

    pub fn for_ms(&self) -> u64 {
        self.for_ms
    }

    pub fn multiplier(&self) -> u64 {
        self.multiplier
    }

    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }

    /// How long the `offence`-th ban lasts (the first is 1).
    pub fn duration_ms(&self, offence: u32) -> u64 {
        let mut ms = self.for_ms;
        for _ in 1..offence {
            ms = ms.saturating_mul(self.multiplier);
            if ms >= self.max_ms {
                break;
            }
        }
        ms.min(self.max_ms)
    }
}

/// A key's ban record, active or remembered for escalation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    pub until_ms: u64,
    pub offences: u32,
    /// When the offence count is forgotten and the record deleted.
    pub forget_ms: u64,
    pub reason: String,
}

impl Ban {
    /// The ban that follows `previous` (if still remembered) at `now_ms`.
    pub fn start(policy: &BanPolicy, previous: Option<&Ban>, now_ms: u64) -> Ban {
        let offences = previous
            .filter(|ban| now_ms < ban.forget_ms)
            .map_or(1, |ban| ban.offences.saturating_add(1));
        let until_ms = now_ms.saturating_add(policy.duration_ms(offences));
        Ban {
            until_ms,
            offences,
            forget_ms: until_ms.saturating_add(policy.max_ms),
            reason: format!(
                "{} refusals within {} (offence {offences})",
                policy.strikes.limit(),
                format_ms(policy.strikes.window_ms())
            ),
        }
    }

    pub fn is_active(&self, now_ms: u64) -> bool {
        now_ms < self.until_ms
    }
}

/// An operator's ban of one key on its rule (`PUT {prefix}/admin/keys/
/// {rule}/{key}/ban`): held in the key's own object like a rule's ban,
/// so it costs no shared lookup, survives restarts, and is answered from
/// the isolate's refusal cache like one.
impl Ledger {
    /// Bans the key until `until_ms` for `reason`, replacing the ban in
    /// force (the operator may shorten it too); with `None`, lifts it.
    /// Answers the ban that was in force, and the rows to write or delete.
    /// An operator's ban is no offence: the offences a rule's bans counted
    /// are kept (and forgiven when they would have been), so the rule's
    /// next ban escalates as it would have.
    pub fn set_ban(
        &mut self,
        next: Option<(u64, String)>,
        now_ms: u64,
    ) -> (Option<BanNotice>, Vec<Write>, Vec<Expired>) {
        let previous = self.active_ban(now_ms);
        if next.is_none() && previous.is_none() {
            return (None, Vec::new(), Vec::new());
        }
        let remembered = self.ban.take().filter(|ban| now_ms < ban.forget_ms);
        self.ban = match (next, remembered) {
            (Some((until_ms, reason)), remembered) => Some(Ban {
                until_ms,
                offences: remembered.as_ref().map_or(0, |ban| ban.offences),
                forget_ms: remembered.map_or(until_ms, |ban| ban.forget_ms.max(until_ms)),
                reason,
            }),
            // A lift ends the ban now; a rule's offences stay remembered.
            (None, Some(ban)) if ban.offences > 0 => Some(Ban {
                until_ms: now_ms,
                ..ban
            }),
            (None, _) => None,
        };
        match &self.ban {
            Some(ban) => (previous, vec![Write::Ban(ban.clone())], Vec::new()),
            None => (previous, Vec::new(), vec![Expired::Ban]),
        }
    }
}

crate::wire! {
    /// What a check reports about a key's ban.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BanNotice {
        pub until_ms: u64,
        pub reason: String,
        pub offences: u32,
        /// Whether this very request started the ban.
        pub started: bool,
    }
}

impl BanNotice {
    pub fn of(ban: &Ban, started: bool) -> BanNotice {
        BanNotice {
            until_ms: ban.until_ms,
            reason: ban.reason.clone(),
            offences: ban.offences,
            started,
        }
    }
}

/// A key's ban as its ledger keeps it: restored, reported, and started
/// by the refusal that completes the count.
impl Ledger {
    pub fn restore_ban(&mut self, ban: Ban) {
        self.ban = Some(ban);
    }

    /// The ban in force, as a decision reports it.
    pub(super) fn active_ban(&self, now_ms: u64) -> Option<BanNotice> {
        self.ban
            .as_ref()
            .filter(|ban| ban.is_active(now_ms))
            .map(|ban| BanNotice::of(ban, false))
    }

    /// Counts a refusal toward a ban; returns the ban it starts, if any.
    pub(super) fn strike(
        &mut self,
        policy: &BanPolicy,
        now_ms: u64,
        writes: &mut Vec<Write>,
    ) -> Option<BanNotice> {
        let strikes = self
            .strikes
            .get_or_insert_with(|| SlidingLog::new(policy.strikes()));
        strikes.set_policy(policy.strikes());
        let counted = strikes.check(now_ms, 1);
        if !counted.allowed || counted.remaining > 0 {
            return None;
        }
        self.strikes = None;
        let ban = Ban::start(policy, self.ban.as_ref(), now_ms);
        let notice = BanNotice::of(&ban, true);
        writes.push(Write::Ban(ban.clone()));
        self.ban = Some(ban);
        Some(notice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BanPolicy {
        BanPolicy::new(3, 10_000, 60_000, 4, 600_000).unwrap()
    }

    #[test]
    fn bans_escalate_up_to_the_cap() {
        let p = policy();
        assert_eq!(p.duration_ms(1), 60_000);
        assert_eq!(p.duration_ms(2), 240_000);
        assert_eq!(p.duration_ms(3), 600_000);
        assert_eq!(p.duration_ms(u32::MAX), 600_000);
    }

    #[test]
    fn offences_are_remembered_until_forgiven() {
        let p = policy();
        let first = Ban::start(&p, None, 0);
        assert_eq!(
            (first.until_ms, first.offences, first.forget_ms),
            (60_000, 1, 660_000)
        );
        let second = Ban::start(&p, Some(&first), 100_000);
        assert_eq!((second.offences, second.until_ms), (2, 340_000));
        let forgiven = Ban::start(&p, Some(&first), 660_000);
        assert_eq!(forgiven.offences, 1);
        assert_eq!(second.reason, "3 refusals within 10s (offence 2)");
    }

    fn check(ledger: &mut Ledger, now_ms: u64, ban: Option<&BanPolicy>) -> crate::ledger::Outcome {
        let specs = [(
            "api".to_string(),
            crate::limit::Spec::SlidingLog(Policy::new(1, 1000).unwrap()),
        )];
        let ask = crate::ledger::Ask {
            specs: &specs,
            cost: 1,
            ban,
            lease: None,
        };
        ledger.check(&ask, now_ms).0
    }

    #[test]
    fn an_operators_ban_holds_in_the_key_until_it_ends_or_is_lifted() {
        let mut ledger = Ledger::new();
        let (previous, writes, expired) = ledger.set_ban(Some((60_000, "abuse".into())), 0);
        assert_eq!(previous, None);
        assert!(
            matches!(&writes[..], [Write::Ban(ban)] if ban.offences == 0 && ban.forget_ms == 60_000)
        );
        assert!(expired.is_empty());
        let refused = check(&mut ledger, 10, None);
        assert!(!refused.allowed);
        let notice = refused.ban.unwrap();
        assert_eq!(
            (notice.until_ms, notice.offences, notice.reason.as_str()),
            (60_000, 0, "abuse")
        );
        assert_eq!(ledger.next_sweep(10), Some(60_000));
        // It ends at its end, and nothing of it is remembered.
        assert!(check(&mut ledger, 60_000, None).allowed);
        assert!(ledger.sweep(60_000).contains(&Expired::Ban));

        let mut lifted = Ledger::new();
        lifted.set_ban(Some((60_000, "abuse".into())), 0);
        let (previous, writes, expired) = lifted.set_ban(None, 5);
        assert_eq!(previous.unwrap().reason, "abuse");
        assert!(writes.is_empty());
        assert_eq!(expired, vec![Expired::Ban]);
        assert!(check(&mut lifted, 6, None).allowed);
        assert_eq!(
            lifted.set_ban(None, 7),
            (None, Vec::new(), Vec::new()),
            "nothing to lift"
        );
    }

    #[test]
    fn a_replaced_ban_is_answered_and_may_end_sooner() {
        let mut ledger = Ledger::new();
        ledger.set_ban(Some((600_000, "first".into())), 0);
        let (previous, _, _) = ledger.set_ban(Some((1_000, "second".into())), 10);
        assert_eq!(previous.unwrap().reason, "first");
        assert!(
            check(&mut ledger, 1_000, None).allowed,
            "the operator shortened it"
        );
    }

    #[test]
    fn an_operators_ban_and_its_lift_keep_a_rules_offences() {
        let p = policy();
        let mut ledger = Ledger::new();
        // The rule bans the key (offence 1) at 3: three refusals after one admission.
        for now in 0..4 {
            check(&mut ledger, now, Some(&p));
        }
        assert_eq!(ledger.peek(4).1.unwrap().offences, 1);
        ledger.set_ban(Some((1_000_000, "operator".into())), 10);
        let notice = ledger.peek(11).1.unwrap();
        assert_eq!((notice.offences, notice.reason.as_str()), (1, "operator"));
        let (_, writes, expired) = ledger.set_ban(None, 20);
        assert!(expired.is_empty(), "the offence stays remembered");
        assert!(
            matches!(&writes[..], [Write::Ban(ban)] if ban.until_ms == 20 && ban.offences == 1)
        );
        assert_eq!(ledger.peek(20).1, None, "lifted");
        // The rule's next ban is its second offence.
        for now in 2_000..2_004 {
            check(&mut ledger, now, Some(&p));
        }
        assert_eq!(ledger.peek(2_004).1.unwrap().offences, 2);
    }

    #[test]
    fn fields_are_validated_by_name() {
        assert_eq!(BanPolicy::new(0, 1, 1, 1, 1).unwrap_err().field, "after");
        assert_eq!(BanPolicy::new(1, 0, 1, 1, 1).unwrap_err().field, "within");
        assert_eq!(BanPolicy::new(1, 1, 0, 1, 1).unwrap_err().field, "for");
        assert_eq!(
            BanPolicy::new(1, 1, 1, 0, 1).unwrap_err().field,
            "multiplier"
        );
        assert_eq!(BanPolicy::new(1, 1, 10, 2, 5).unwrap_err().field, "max");
        assert_eq!(
            BanPolicy::new(1, 1, 10, 2, MAX_BAN_MS + 1)
                .unwrap_err()
                .field,
            "max"
        );
    }
}
