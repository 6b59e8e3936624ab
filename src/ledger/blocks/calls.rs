//! What one key object call does with blocks, as rows the object's glue
//! runs: the reports it carries are taken first (so that their unused
//! rest is back before anything is decided), then, after its decision, the
//! blocks it asks for are granted.
//!
//! **Rows.** A hot key's isolate makes one call per block: it reports the
//! block spent (or lapsed), is decided, and asks for the next. Its rows
//! are merged ([`Taken::rows`]) so that the cycle writes two: the report's
//! times with the call's own admission among them (one times row, not a
//! times row and a hit row), and the new block written over the reported
//! block's row (one update, not a delete and an insert).

use super::{times, BlockAsk, BlockGrant, BlockReport};
use crate::ledger::ban::{BanNotice, BanPolicy};
use crate::ledger::{Expired, Ledger, Write};
use crate::limit::Spec;

/// What a call's reports changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Taken {
    pub writes: Vec<Write>,
    /// The reported blocks' rows.
    pub expired: Vec<Expired>,
    /// A ban the reports' strikes started.
    pub ban: Option<BanNotice>,
    /// Admissions the accepted reports carried, pending reservations
    /// included.
    pub admitted: u32,
    /// Reports refused (unknown, lapsed, not the reporter's, out of the
    /// lease): their blocks, if any, stay counted until they lapse.
    pub refused: u32,
}

impl Taken {
    /// The rows of the call that took these reports: theirs, then
    /// `writes` (the decision's and the grants', in that order), merged
    /// (see the module's note). A decision that reserves keeps its hit
    /// rows, which its settle may take units back out of.
    pub fn rows(self, writes: Vec<Write>) -> (Vec<Write>, Vec<Expired>) {
        let mut expired = self.expired;
        let mut all = self.writes;
        let reserving = writes
            .iter()
            .any(|w| matches!(w, Write::Reservation(_) | Write::Refund { .. }));
        for write in writes {
            match write {
                Write::Hit { name, at_ms, count }
                    if !reserving && fold_hit(&mut all, &name, at_ms, count) => {}
                Write::Block {
                    block,
                    replaces: None,
                } => {
                    let replaces = expired.iter().find_map(|e| match e {
                        Expired::Block { id } => Some(*id),
                        _ => None,
                    });
                    expired
                        .retain(|e| !matches!(e, Expired::Block { id } if Some(*id) == replaces));
                    all.push(Write::Block { block, replaces });
                }
                other => all.push(other),
            }
        }
        (all, expired)
    }
}

/// Adds `count` admissions at `at_ms` to the times row of policy `name`
/// among `writes`, if there is one.
fn fold_hit(writes: &mut [Write], name: &str, at_ms: u64, count: u32) -> bool {
    let row = writes.iter_mut().find_map(|w| match w {
        Write::Times(row) if row.policy == name => Some(row),
        _ => None,
    });
    let Some(row) = row else {
        return false;
    };
    let Some(mut all) = times::decode(&row.times) else {
        return false;
    };
    all.extend(std::iter::repeat_n(at_ms, count as usize));
    row.times = times::encode(&all);
    row.newest_ms = row.newest_ms.max(at_ms);
    true
}

impl Ledger {
    /// Takes `reports`, each under the spec the call asks of its policy now
    /// (a policy the call no longer names keeps the spec its block was
    /// granted under).
    pub fn take_reports(
        &mut self,
        reports: &[BlockReport],
        specs: &[(String, Spec)],
        ban: Option<&BanPolicy>,
        now_ms: u64,
    ) -> Taken {
        let mut taken = Taken::default();
        for report in reports {
            let asked = specs.iter().find(|(name, _)| *name == report.policy);
            let granted = self.blocks.iter().find(|b| b.id == report.id);
            let Some(spec) = asked.map(|(_, s)| *s).or(granted.map(|b| b.spec)) else {
                taken.refused += 1;
                continue;
            };
            match self.report_block(report, spec, ban, now_ms) {
                Ok(reported) => {
                    taken.writes.extend(reported.writes);
                    taken.writes.extend(reported.times.map(Write::Times));
                    taken.expired.push(Expired::Block { id: report.id });
                    taken.ban = taken.ban.or(reported.ban);
                    let units = u32::try_from(report.units()).unwrap_or(u32::MAX);
                    taken.admitted = taken.admitted.saturating_add(units);
                }
                Err(_) => taken.refused += 1,
            }
        }
        taken
    }

    /// Grants `holder` a block of each of `specs` the size rule gives one
    /// (`rate`: the key's decisions the isolate saw in the last second):
    /// what to tell it, and the rows to write.
    pub fn grant_blocks(
        &mut self,
        specs: &[(String, Spec)],
        holder: &str,
        rate: u32,
        now_ms: u64,
    ) -> (Vec<BlockGrant>, Vec<Write>) {
        let mut grants = Vec::new();
        let mut writes = Vec::new();
        // An override that adds a policy (or an unlimited one) asks of the
        // key what the isolate's request does not name: no block would
        // hold it to that, so none is granted.
        let in_force = self.policies(specs, now_ms);
        let same = in_force.len() == specs.len()
            && in_force.iter().zip(specs).all(|((a, _), (b, _))| a == b);
        if !same {
            return (grants, writes);
        }
        for (policy, spec) in specs {
            let ask = BlockAsk {
                policy,
                spec: *spec,
                holder,
                rate,
            };
            if let Some((block, charged)) = self.grant_block(&ask, now_ms) {
                grants.push(block.grant());
                writes.extend(charged);
                writes.push(Write::Block {
                    block,
                    replaces: None,
                });
            }
        }
        (grants, writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::blocks::times;
    use crate::ledger::Ask;
    use crate::limit::Policy;

    const T0: u64 = 1_700_000_000_000;

    fn specs() -> Vec<(String, Spec)> {
        vec![(
            "p".to_string(),
            Spec::SlidingLog(Policy::new(1_000, 10_000).unwrap()),
        )]
    }

    fn admit(ledger: &mut Ledger, specs: &[(String, Spec)], now: u64) -> bool {
        let ask = Ask {
            specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        ledger.check(&ask, now).0.allowed
    }

    #[test]
    fn a_grant_is_a_block_row_and_its_report_one_times_row_in_its_place() {
        let specs = specs();
        let mut ledger = Ledger::new();
        assert!(admit(&mut ledger, &specs, T0));
        let (grants, writes) = ledger.grant_blocks(&specs, "iso", 100, T0);
        assert_eq!(grants.len(), 1);
        let grant = &grants[0];
        assert!(grant.admissions >= 2);
        assert!(matches!(writes.last(), Some(Write::Block { block, .. }) if block.id == grant.id));
        let report = BlockReport {
            id: grant.id,
            holder: "iso".into(),
            policy: "p".into(),
            times: vec![T0 + 1, T0 + 2],
            pending: Vec::new(),
            strikes: 0,
        };
        let taken = ledger.take_reports(std::slice::from_ref(&report), &specs, None, T0 + 5);
        assert_eq!((taken.refused, taken.admitted), (0, 2));
        assert_eq!(taken.expired, [Expired::Block { id: grant.id }]);
        let rows: Vec<_> = taken
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::Times(row) => Some(row),
                _ => None,
            })
            .collect();
        assert_eq!(rows.len(), 1, "one row per report");
        assert_eq!(times::decode(&rows[0].times), Some(vec![T0 + 1, T0 + 2]));
        // Reported twice, or by another: refused, nothing changes.
        let again = ledger.take_reports(&[report], &specs, None, T0 + 6);
        assert_eq!(
            (again.refused, again.writes.len(), again.admitted),
            (1, 0, 0)
        );
    }

    #[test]
    fn a_report_of_a_policy_the_call_no_longer_names_keeps_its_grants_spec() {
        let specs = specs();
        let mut ledger = Ledger::new();
        let (grants, _) = ledger.grant_blocks(&specs, "iso", 100, T0);
        let report = BlockReport {
            id: grants[0].id,
            holder: "iso".into(),
            policy: "p".into(),
            times: vec![T0],
            pending: Vec::new(),
            strikes: 0,
        };
        let taken = ledger.take_reports(&[report], &[], None, T0 + 1);
        assert_eq!(taken.refused, 0);
        assert!(ledger.blocks().is_empty());
        // A lapsed block's row goes with the sweep.
        let (grants, _) = ledger.grant_blocks(&specs, "iso", 100, T0 + 2);
        let lapses = ledger.blocks()[0].lapses_ms();
        let expired = ledger.sweep(lapses);
        assert!(expired.contains(&Expired::Block { id: grants[0].id }));
    }

    #[test]
    fn a_peek_counts_an_outstanding_block_in_full_until_its_report() {
        let specs = specs();
        let mut ledger = Ledger::new();
        assert!(admit(&mut ledger, &specs, T0));
        let (grants, _) = ledger.grant_blocks(&specs, "iso", 100, T0);
        let b = u64::from(grants[0].admissions);
        let used = |ledger: &mut Ledger, now| {
            let (peeked, _) = ledger.peek(now);
            let (in_force, _) = ledger.peek_in_force(&specs, now);
            assert_eq!(peeked, in_force);
            (peeked[0].used, peeked[0].remaining)
        };
        assert_eq!(used(&mut ledger, T0 + 1), (1 + b, 1_000 - 1 - b));
        let report = BlockReport {
            id: grants[0].id,
            holder: "iso".into(),
            policy: "p".into(),
            times: vec![T0 + 1],
            pending: Vec::new(),
            strikes: 0,
        };
        ledger.take_reports(&[report], &specs, None, T0 + 2);
        assert_eq!(used(&mut ledger, T0 + 2), (2, 998), "the real times");
    }

    #[test]
    fn an_unlimited_override_grants_nothing_and_takes_reports_without_panicking() {
        use crate::ledger::Override;
        let specs = specs();
        let mut ledger = Ledger::new();
        let (grants, _) = ledger.grant_blocks(&specs, "iso", 100, T0);
        ledger.set_override(Some(Override {
            policies: Vec::new(),
            until_ms: None,
            reason: "launch".into(),
            set_ms: T0,
            whole: None,
        }));
        let (more, writes) = ledger.grant_blocks(&specs, "iso", 100, T0 + 1);
        assert!(
            more.is_empty() && writes.is_empty(),
            "nothing counts: no block"
        );
        let report = BlockReport {
            id: grants[0].id,
            holder: "iso".into(),
            policy: "p".into(),
            times: vec![T0 + 1],
            pending: Vec::new(),
            strikes: 0,
        };
        let taken = ledger.take_reports(&[report], &specs, None, T0 + 2);
        assert_eq!(taken.refused, 0);
        ledger.set_override(None);
        let (peeked, _) = ledger.peek_in_force(&specs, T0 + 3);
        assert_eq!(peeked[0].used, 1, "admitted under the limit, logged");
    }

    #[test]
    fn an_override_that_adds_a_policy_grants_no_block_of_the_others() {
        use crate::ledger::Override;
        let specs = specs();
        let mut ledger = Ledger::new();
        let extra = Spec::SlidingLog(Policy::new(1, 60_000).unwrap());
        ledger.set_override(Some(Override {
            policies: vec![("extra".to_string(), extra)],
            until_ms: None,
            reason: "one a minute".into(),
            set_ms: T0,
            whole: None,
        }));
        // The isolate asks for the rule's policies only: a block of them
        // would let it admit past the override's own.
        let (grants, _) = ledger.grant_blocks(&specs, "iso", 100, T0);
        assert!(grants.is_empty());
    }

    #[test]
    fn a_cold_key_gets_no_block() {
        let mut ledger = Ledger::new();
        let (grants, writes) = ledger.grant_blocks(&specs(), "iso", 1, T0);
        assert!(grants.is_empty() && writes.is_empty());
    }
}
