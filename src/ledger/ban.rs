//! Bans that escalate: after `after` refusals within `within`, a key is
//! banned for `for`; each further offence multiplies the ban by `multiplier`,
//! up to `max`. A key that stays clean for `max` after its last ban ends
//! starts over at the first offence.
//!
//! The refusals that lead to a ban are counted in memory only: persisting
//! every refusal would make a flood write to storage, which is exactly what
//! a limiter must not do. Bans themselves are persisted, one row each.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::input::duration::format_ms;
use crate::limit::{Policy, MAX_LIMIT};
use crate::limits::MAX_BAN_MS;

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
            format!("max must be at least for ({for_ms} ms) and at most 365 days, got {max_ms} ms"),
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

/// What a check reports about a key's ban.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanNotice {
    pub until_ms: u64,
    pub reason: String,
    pub offences: u32,
    /// Whether this very request started the ban.
    pub started: bool,
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
