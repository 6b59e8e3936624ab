//! The admission blocks an isolate holds (issue 30), per key object and
//! policy: it admits from them with no call while they last, records the
//! real times, and says when each is to be reported. A lease is in its
//! object's clock, mapped onto this one from the call that brought it and
//! used only while the reading plus [`CLOCK_MARGIN_MS`] is within it; every
//! block rides with its key's next call ([`take`](BlockHolder::take)), or is
//! [`due`](BlockHolder::due) on its own once lapsed, or spent while the
//! isolate decides for another object; a reservation is held in its block
//! and settled there ([`settle`](BlockHolder::settle)). Why, and what each
//! promises: docs/algorithms.md, "Admission blocks" (clocks, reports,
//! `RateLimit` from a block, reservations from blocks).

use crate::ledger::blocks::size::CLOCK_MARGIN_MS;
use crate::ledger::blocks::{BlockGrant, BlockReport, Pending};

#[derive(Debug, Clone)]
struct Held {
    object: String,
    policy: String,
    id: u64,
    admissions: u32,
    granted_ms: u64,
    until_ms: u64,
    /// The object's clock less this isolate's, as the grant's call bounds
    /// it (see the module's note on clocks).
    shift_ms: i64,
    times: Vec<u64>,
    /// Reservations admitted from it and not settled yet.
    pending: Vec<Pending>,
    strikes: u32,
}

impl Held {
    /// `now_ms` (this isolate's clock) in the object's clock.
    fn object_ms(&self, now_ms: u64) -> u64 {
        let mapped = i128::from(now_ms) + i128::from(self.shift_ms);
        u64::try_from(mapped.max(0))
            .unwrap_or(u64::MAX)
            .max(self.granted_ms)
    }

    fn left(&self) -> u32 {
        let pending: u32 = self.pending.iter().map(|p| p.cost).sum();
        self.admissions - self.times.len() as u32 - pending
    }

    /// When an admission at `now_ms` is stamped: never before its real
    /// time, while the reading is at most the margin behind.
    fn stamp(&self, now_ms: u64) -> u64 {
        self.object_ms(now_ms).saturating_add(CLOCK_MARGIN_MS)
    }

    fn usable(&self, cost: u32, now_ms: u64) -> bool {
        self.left() >= cost && self.stamp(now_ms) <= self.until_ms
    }

    fn report(self, holder: &str) -> BlockReport {
        BlockReport {
            id: self.id,
            holder: holder.to_string(),
            policy: self.policy,
            times: self.times,
            pending: self.pending,
            strikes: self.strikes,
        }
    }
}

/// An admission from a block taken as a reservation: its id, and how long
/// it waits for its settle before it is kept.
#[derive(Debug, Clone, Copy)]
pub struct Reserve<'a> {
    pub id: &'a str,
    pub ttl_ms: u64,
}

/// The blocks one isolate holds.
#[derive(Debug)]
pub struct BlockHolder {
    /// This isolate's id, which the object grants to.
    holder: String,
    held: Vec<Held>,
    /// The latest reading of the clock: one below it is a step back.
    latest: u64,
    /// Steps back read so far.
    steps: u32,
}

/// A reading of the isolate's clock, as a call's send time: a block its
/// call brings is mapped from it, unless the clock stepped back since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub ms: u64,
    steps: u32,
}

impl BlockHolder {
    pub fn new(holder: String) -> BlockHolder {
        BlockHolder {
            holder,
            held: Vec::new(),
            latest: 0,
            steps: 0,
        }
    }

    /// Takes a reading of the clock: one below the latest ends every
    /// block held (see the module's note on clocks).
    pub fn read(&mut self, now_ms: u64) -> Reading {
        if now_ms < self.latest {
            self.steps += 1;
            for held in &mut self.held {
                // Lapsed: reported as due, used no more.
                held.until_ms = 0;
            }
        }
        self.latest = now_ms;
        Reading {
            ms: now_ms,
            steps: self.steps,
        }
    }

    /// Whether it holds a block of `object`.
    pub fn holds(&self, object: &str) -> bool {
        self.held.iter().any(|h| h.object == object)
    }

    /// The objects it holds a block of that can take one more admission
    /// at `now_ms`.
    pub fn usable(&self, now_ms: u64) -> impl Iterator<Item = &str> {
        let stepped_back = now_ms < self.latest;
        self.held
            .iter()
            .filter(move |h| !stepped_back && h.usable(1, now_ms))
            .map(|h| h.object.as_str())
    }

    /// How many blocks it holds.
    pub fn count(&self) -> usize {
        self.held.len()
    }

    /// This isolate's id, to ask for blocks with.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Keeps `block`, granted by `object` in answer to a call sent at
    /// `sent`; held lapsed (to be reported, not used) when the clock
    /// stepped back since, as the mapping is of the clock before.
    pub fn hold(&mut self, object: &str, block: &BlockGrant, sent: Reading) {
        let shift = i128::from(block.granted_ms) - i128::from(sent.ms);
        let stepped_back = sent.steps != self.steps;
        self.held.push(Held {
            object: object.to_string(),
            policy: block.policy.clone(),
            id: block.id,
            admissions: block.admissions,
            granted_ms: block.granted_ms,
            until_ms: if stepped_back { 0 } else { block.until_ms },
            shift_ms: i64::try_from(shift).unwrap_or(if shift < 0 { i64::MIN } else { i64::MAX }),
            times: Vec::new(),
            pending: Vec::new(),
            strikes: 0,
        });
    }

    /// Admits `cost` units under every one of `policies` of `object` from
    /// the blocks held, or none: `Some(r)`, the least of the blocks'
    /// unused admissions after it (a lower bound of the RateLimit `r`),
    /// or `None` when a policy has no usable block (the request goes to
    /// the object). With `reserve`, the units are a reservation, pending
    /// until [`settle`](Self::settle)d or reported.
    pub fn admit(
        &mut self,
        object: &str,
        policies: &[&str],
        cost: u32,
        reserve: Option<Reserve<'_>>,
        now_ms: u64,
    ) -> Option<u64> {
        let now_ms = self.read(now_ms).ms;
        let picks: Vec<usize> = policies
            .iter()
            .map(|policy| {
                self.held.iter().position(|h| {
                    h.object == object && h.policy == *policy && h.usable(cost, now_ms)
                })
            })
            .collect::<Option<_>>()?;
        if picks.is_empty() {
            return None;
        }
        for &i in &picks {
            let held = &mut self.held[i];
            let at = held.stamp(now_ms);
            match reserve {
                Some(Reserve { id, ttl_ms }) => held.pending.push(Pending {
                    id: id.to_string(),
                    at_ms: at,
                    cost,
                    lapses_ms: at.saturating_add(ttl_ms),
                }),
                None => held.times.extend(std::iter::repeat_n(at, cost as usize)),
            }
        }
        picks.iter().map(|&i| u64::from(self.held[i].left())).min()
    }

    /// Keeps or refunds reservation `id` of `object` where blocks held
    /// admitted it: kept, its units are admissions at their time; refunded,
    /// they are gone and the blocks may admit them again. False when no
    /// block held has it pending (never admitted here, or reported since:
    /// the settle goes to the object).
    pub fn settle(&mut self, object: &str, id: &str, keep: bool) -> bool {
        let mut found = false;
        for held in self.held.iter_mut().filter(|h| h.object == object) {
            let Some(at) = held.pending.iter().position(|p| p.id == id) else {
                continue;
            };
            let pending = held.pending.swap_remove(at);
            if keep {
                let units = std::iter::repeat_n(pending.at_ms, pending.cost as usize);
                held.times.extend(units);
            }
            found = true;
        }
        found
    }

    /// Counts a refusal this isolate answered for `object` toward its
    /// report; false when it holds no block of that object to carry it.
    pub fn strike(&mut self, object: &str) -> bool {
        match self.held.iter_mut().find(|h| h.object == object) {
            Some(held) => {
                held.strikes = held.strikes.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// The blocks lapsed at `now_ms`, or spent and not of `deciding` (the
    /// object the isolate decides for now, whose spent blocks wait for its
    /// next call), taken out to be reported: `(object, report)`.
    pub fn due(&mut self, now_ms: u64, deciding: &str) -> Vec<(String, BlockReport)> {
        let now_ms = self.read(now_ms).ms;
        let (due, kept) = std::mem::take(&mut self.held)
            .into_iter()
            .partition::<Vec<_>, _>(|h| {
                h.stamp(now_ms) > h.until_ms || (h.left() == 0 && h.object != deciding)
            });
        self.held = kept;
        due.into_iter()
            .map(|h| (h.object.clone(), h.report(&self.holder)))
            .collect()
    }

    /// Every block of `object`, taken out to be reported with the next call
    /// to it.
    pub fn take(&mut self, object: &str) -> Vec<BlockReport> {
        let (taken, kept) = std::mem::take(&mut self.held)
            .into_iter()
            .partition::<Vec<_>, _>(|h| h.object == object);
        self.held = kept;
        taken.into_iter().map(|h| h.report(&self.holder)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn grant(id: u64, policy: &str, admissions: u32, granted_ms: u64, until_ms: u64) -> BlockGrant {
        BlockGrant {
            id,
            policy: policy.into(),
            admissions,
            granted_ms,
            until_ms,
        }
    }

    #[test]
    fn admits_from_every_policys_block_or_none() {
        let mut holder = BlockHolder::new("iso".into());
        let sent = holder.read(T0);
        holder.hold("k", &grant(1, "minute", 5, T0, T0 + 500), sent);
        holder.hold("k", &grant(2, "second", 2, T0, T0 + 500), sent);
        assert_eq!(
            holder.admit("k", &["minute", "second"], 1, None, T0 + 1),
            Some(1)
        );
        assert_eq!(holder.admit("k", &["minute"], 3, None, T0 + 2), Some(1));
        assert_eq!(
            holder.admit("k", &["minute", "second"], 2, None, T0 + 3),
            None,
            "second has 1"
        );
        assert_eq!(
            holder.admit("k", &["minute", "hour"], 1, None, T0 + 3),
            None
        );
        assert_eq!(holder.admit("other", &["minute"], 1, None, T0 + 3), None);
        assert_eq!(holder.admit("k", &[], 1, None, T0 + 3), None);
        assert_eq!(
            holder.admit("k", &["minute", "second"], 1, None, T0 + 4),
            Some(0)
        );
        assert!(
            holder.due(T0 + 4, "k").is_empty(),
            "spent: they wait for k's next call"
        );
        assert_eq!(holder.usable(T0 + 4).count(), 0);
        let due = holder.due(T0 + 4, "other");
        assert_eq!(due.len(), 2, "spent, and another object decided");
        // Stamped the margin late.
        let m = CLOCK_MARGIN_MS;
        let times = [T0 + 1 + m, T0 + 2 + m, T0 + 2 + m, T0 + 2 + m, T0 + 4 + m];
        assert_eq!(due[0].1.times, times);
        assert_eq!(due[1].1.times, [T0 + 1 + m, T0 + 4 + m]);
        assert_eq!((due[0].1.holder.as_str(), due[0].0.as_str()), ("iso", "k"));
    }

    #[test]
    fn maps_its_clock_onto_the_objects_and_stops_a_margin_before_the_lease_end() {
        let mut holder = BlockHolder::new("iso".into());
        // Sent at local 5_000, granted at object time T0: shift T0 - 5_000.
        let sent = holder.read(5_000);
        holder.hold("k", &grant(1, "p", 10, T0, T0 + 100), sent);
        let m = CLOCK_MARGIN_MS;
        assert_eq!(holder.admit("k", &["p"], 1, None, 5_040), Some(9));
        let last = 5_100 - m;
        assert_eq!(
            holder.admit("k", &["p"], 1, None, last),
            Some(8),
            "stamped at e itself"
        );
        assert!(holder.due(last, "").is_empty());
        assert_eq!(holder.usable(last).collect::<Vec<_>>(), ["k"]);
        assert_eq!(holder.admit("k", &["p"], 1, None, last + 1), None);
        assert_eq!(holder.usable(last + 1).count(), 0);
        let due = holder.due(last + 1, "k");
        assert_eq!(due[0].1.times, [T0 + 40 + m, T0 + 100]);
    }

    #[test]
    fn a_clock_that_steps_back_ends_every_block() {
        let mut holder = BlockHolder::new("iso".into());
        let sent = holder.read(5_000);
        holder.hold("k", &grant(1, "p", 10, T0, T0 + 500), sent);
        assert_eq!(holder.admit("k", &["p"], 1, None, 5_010), Some(9));
        // A call sent now, answered after the step back.
        let before = holder.read(5_020);
        assert_eq!(holder.admit("k", &["p"], 1, None, 5_019), None);
        assert_eq!(holder.usable(5_019).count(), 0);
        holder.hold("k", &grant(2, "p", 10, T0 + 20, T0 + 500), before);
        assert_eq!(holder.admit("k", &["p"], 1, None, 5_030), None);
        let due = holder.due(5_030, "k");
        assert_eq!(due.len(), 2, "both due, to give their rest back");
        assert_eq!(due[0].1.times, [T0 + 10 + CLOCK_MARGIN_MS]);
        assert!(due[1].1.times.is_empty());
        // A call sent after it maps the clock afresh.
        let after = holder.read(5_031);
        holder.hold("k", &grant(3, "p", 10, T0 + 40, T0 + 500), after);
        assert_eq!(holder.admit("k", &["p"], 1, None, 5_032), Some(9));
    }

    #[test]
    fn strikes_and_unspent_blocks_ride_with_the_next_call() {
        let mut holder = BlockHolder::new("iso".into());
        assert!(!holder.strike("k"));
        let sent = holder.read(T0);
        holder.hold("k", &grant(1, "p", 10, T0, T0 + 100), sent);
        holder.hold("j", &grant(1, "p", 10, T0, T0 + 100), sent);
        assert!(holder.strike("k"));
        assert!(holder.strike("k"));
        let reports = holder.take("k");
        assert_eq!(reports.len(), 1);
        assert_eq!((reports[0].strikes, reports[0].id), (2, 1));
        assert!(holder.take("k").is_empty());
        assert_eq!(holder.holder(), "iso");
        assert_eq!(holder.due(T0 + 101, "j")[0].0, "j", "lapsed");
    }
}
