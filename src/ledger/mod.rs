//! What one key object holds, independent of how it is stored: for each
//! key, one limiter per named policy (a "slot") and the key's ban record. It
//! decides, tells the caller which rows to write, and says when the next
//! sweep is due.
//!
//! The Durable Object glue in `edge::limiter` only executes what the ledger
//! returns, so the rules about persistence and sweeping are tested here on the
//! host.

pub mod ban;
pub mod override_row;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::limit::gcra::{GcraPolicy, Throttle};
use crate::limit::lease::{Acquire, Grant, Lease, LeaseError, LeaseTable};
use crate::limit::{Algorithm, Decision, Recorded, Retry, SlidingLog, Spec};
pub use ban::{Ban, BanNotice, BanPolicy};

/// How soon a request refused for want of a lease is told to retry, unless
/// a lease lapses sooner: a holder may release at any moment and the object
/// cannot foresee when, so the lapse (up to a lease's whole TTL) is only the
/// worst case.
pub const LEASE_RETRY_MS: u64 = 1_000;

/// One policy's part of an outcome. On the wire its decision's fields sit
/// beside the name and window (`WireDecision`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "WireDecision", into = "WireDecision")]
pub struct PolicyDecision {
    pub name: String,
    pub window_ms: u64,
    pub decision: Decision,
}

/// A [`PolicyDecision`] as one flat object. Spelled out rather than
/// `#[serde(flatten)]`, which buffers every object it reads into an
/// intermediate map first: a worker reads one of these per policy of every
/// decision, and flatten's machinery was the only user of that map in the
/// wasm.
#[derive(Serialize, Deserialize)]
struct WireDecision {
    name: String,
    window_ms: u64,
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_ms: u64,
    retry_after_ms: Retry,
}

impl From<WireDecision> for PolicyDecision {
    fn from(wire: WireDecision) -> PolicyDecision {
        PolicyDecision {
            name: wire.name,
            window_ms: wire.window_ms,
            decision: Decision {
                allowed: wire.allowed,
                limit: wire.limit,
                remaining: wire.remaining,
                reset_ms: wire.reset_ms,
                retry: wire.retry_after_ms,
            },
        }
    }
}

impl From<PolicyDecision> for WireDecision {
    fn from(policy: PolicyDecision) -> WireDecision {
        let Decision {
            allowed,
            limit,
            remaining,
            reset_ms,
            retry,
        } = policy.decision;
        WireDecision {
            name: policy.name,
            window_ms: policy.window_ms,
            allowed,
            limit,
            remaining,
            reset_ms,
            retry_after_ms: retry,
        }
    }
}

/// The answer to one check across all of a request's policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub allowed: bool,
    pub policies: Vec<PolicyDecision>,
    /// Set when the key is banned, before or by this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban: Option<BanNotice>,
    /// The concurrency limit's part, when the request asked for a lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseOutcome>,
    /// Set, with nothing decided, when the request was asked to leave
    /// alone state its key holds under another algorithm or window: the
    /// name of the policy that conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// [`Retry::NOW`] when allowed; otherwise how long until the whole
    /// request could pass: the ban must end and every refusing policy must
    /// have room (windows only free up while nothing is admitted). A refused
    /// lease counts [`LEASE_RETRY_MS`], or its first lapse if sooner. On the
    /// wire as `retry_after_ms`, like [`Decision::retry`].
    #[serde(rename = "retry_after_ms")]
    pub retry: Retry,
}

/// A concurrency limit's answer, named like a policy for the headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseOutcome {
    pub name: String,
    pub limit: u32,
    /// Leases held after this request.
    pub in_flight: u32,
    /// The lease this request holds, when one was granted.
    pub lease: Option<Lease>,
    /// Whether the concurrency limit refused; it is not asked when a rate
    /// policy has already refused.
    pub refused: bool,
    /// When refused, ms until the first lease lapses: the worst case, since
    /// a release may come sooner.
    pub retry_after_ms: u64,
    /// Set when the acquire was not even tried: the request is at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<LeaseError>,
}

impl Outcome {
    fn new(
        allowed: bool,
        policies: Vec<PolicyDecision>,
        ban: Option<BanNotice>,
        lease: Option<LeaseOutcome>,
        now_ms: u64,
    ) -> Outcome {
        let retry = if allowed {
            Retry::NOW
        } else {
            let refusing = policies.iter().map(|p| p.decision.retry);
            let banned = ban
                .iter()
                .map(|b| Retry::After(b.until_ms.saturating_sub(now_ms)));
            let leased = lease
                .iter()
                .filter(|l| l.refused)
                .map(|l| Retry::After(l.retry_after_ms.min(LEASE_RETRY_MS)));
            refusing
                .chain(banned)
                .chain(leased)
                .max()
                .unwrap_or(Retry::NOW)
        };
        Outcome {
            allowed,
            policies,
            ban,
            lease,
            conflict: None,
            retry,
        }
    }

    /// The answer to a request whose policy `name` conflicts with state
    /// its key holds: nothing decided, nothing changed.
    pub fn conflicting(name: &str) -> Outcome {
        Outcome {
            conflict: Some(name.to_string()),
            ..Outcome::new(false, Vec::new(), None, None, 0)
        }
    }

    /// The names of what refused: rate policies, and the concurrency limit.
    pub fn violated_names(&self) -> Vec<&str> {
        let policies = self.violated().map(|p| p.name.as_str());
        let lease = self
            .lease
            .iter()
            .filter(|l| l.refused)
            .map(|l| l.name.as_str());
        policies.chain(lease).collect()
    }

    /// Whether waiting for the retry time is sure to be enough: a window
    /// frees up no sooner while nothing is admitted and a ban does not end
    /// early, but a lease may be released before it lapses.
    pub fn refusal_holds_until_retry(&self) -> bool {
        self.lease.as_ref().is_none_or(|l| !l.refused)
    }

    pub fn violated(&self) -> impl Iterator<Item = &PolicyDecision> {
        self.policies.iter().filter(|p| !p.decision.allowed)
    }
}

/// A row the caller must write for the state to survive a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// The slot's spec and, for one-row algorithms, its whole state; for
    /// a sliding log, the log's first run (`(at_ms, count)`), written with
    /// the slot so that a new key's first admission is one row.
    Slot {
        name: String,
        spec: Spec,
        state: (u64, u64),
    },
    /// A sliding log's spec changed (its limit): update the slot row and
    /// keep the run it carries.
    Respec { name: String, spec: Spec },
    /// `count` more units admitted at `at_ms` into a sliding log; rows with
    /// the same slot and timestamp add up.
    Hit {
        name: String,
        at_ms: u64,
        count: u32,
    },
    /// The key's ban record, to insert or overwrite.
    Ban(Ban),
    /// The key's override, to insert or overwrite.
    Override(Override),
    /// A lease, new or with changed holds or expiry, and the limit the
    /// key's leases are held under.
    Lease { lease: Lease, limit: Option<u32> },
}

/// What a sweep or reset removed, for the caller to delete from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expired {
    /// Delete the slot's log rows at or before `cutoff_ms`, and the run
    /// its slot row carries if that is as old.
    Hits { name: String, cutoff_ms: u64 },
    /// The slot is empty: delete its row and every log row.
    Slot { name: String },
    /// The key's ban is over and its offences forgiven.
    Ban,
    /// The key's override lapsed or was lifted.
    Override,
    /// A lease was released or lapsed. When `floor` is set, a fence could
    /// still repeat: keep it as the key's fence floor before the lease row
    /// (which held it) goes.
    Lease { id: String, floor: Option<u64> },
    /// The key's fence floor is needed no longer.
    Floor,
}

#[derive(Debug)]
struct Slot {
    name: String,
    limiter: Algorithm,
    /// The spec storage holds for this slot, if it holds any rows: a spec
    /// changed by a refused request is written with the next admission, and
    /// a slot with rows stays until the sweep deletes them.
    stored: Option<Spec>,
}

/// An admission made for a request whose answer decides whether it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reservation {
    id: String,
    /// When it is kept if nobody settled it.
    lapses_ms: u64,
    cost: u32,
    /// Each slot it was admitted into, and the time it was logged at.
    runs: Vec<(String, u64)>,
}

/// How many settled reservations an object remembers, for repeated
/// settles.
const SETTLED_MEMORY: usize = 256;

/// The answer to a settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub kept: bool,
    /// The reservation was settled before; nothing changed this time.
    pub repeated: bool,
}

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
}

impl Override {
    fn is_active(&self, now_ms: u64) -> bool {
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

/// What a request asks of its key: units under rate policies, optionally a
/// lease under a concurrency limit, and the ban policy refusals count toward.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub specs: &'a [(String, Spec)],
    pub cost: u32,
    pub ban: Option<&'a BanPolicy>,
    pub lease: Option<&'a LeaseAsk>,
}

/// A request for a lease under a concurrency limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseAsk {
    /// How the limit is named in headers and refusals.
    pub name: String,
    pub limit: u32,
    pub ttl_ms: u64,
    /// A label for operators; it grants nothing.
    pub owner: Option<String>,
    /// The id of a live lease to take one more hold on (re-entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reenter: Option<String>,
    /// Whether a limit the key's leases are held under stands against this
    /// one: the caller chose it (the decision API), not the operator.
    #[serde(default)]
    pub strict_limit: bool,
    /// The id a new lease gets; chosen by the caller (randomly) so the
    /// ledger stays deterministic.
    pub new_id: String,
}

impl LeaseAsk {
    fn acquire(&self) -> Acquire<'_> {
        Acquire {
            limit: self.limit,
            ttl_ms: self.ttl_ms,
            owner: self.owner.as_deref(),
            reenter: self.reenter.as_deref(),
            strict_limit: self.strict_limit,
        }
    }
}

/// A slot's state as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotReport {
    pub policy: String,
    pub limit: u64,
    pub window_ms: u64,
    /// Units that count now (limit minus remaining).
    pub used: u64,
    pub remaining: u64,
    pub reset_ms: u64,
}

/// Everything one key object holds. An object holds exactly one key (its
/// name is the key's, [`crate::objects::name`]), so nothing here is keyed
/// by it: neither these fields nor the rows they become.
#[derive(Debug, Default)]
pub struct Ledger {
    slots: Vec<Slot>,
    ban: Option<Ban>,
    /// Recent refusals, counted toward a ban (memory only).
    strikes: Option<SlidingLog>,
    leases: LeaseTable,
    overridden: Option<Override>,
    /// Admissions not yet kept or refunded (memory only).
    reservations: Vec<Reservation>,
    /// The last reservations settled, `(id, kept)`, so that a settle sent
    /// twice answers the same (memory only, bounded).
    settled: VecDeque<(String, bool)>,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Checks `ask.cost` units against every policy and, when asked, takes a
    /// lease; admits into all of them or into none. A refusal and a peek
    /// (cost 0) write nothing and leave no new state behind, except that a
    /// refusal counts toward `ask.ban`, and the refusal that completes the
    /// count starts a ban.
    pub fn check(&mut self, ask: &Ask<'_>, now_ms: u64) -> (Outcome, Vec<Write>) {
        self.decide(ask, None, now_ms)
    }

    /// Like [`check`](Self::check), but an admission is a reservation: it
    /// counts against every policy at once, so concurrent requests cannot
    /// slip past the limit, and writes nothing until
    /// [`settle`](Self::settle) keeps it (or refunds it, writing nothing at
    /// all). One not settled by `lapses_ms` is kept: a failed login whose
    /// answer was lost must not be free. Reservations live in memory: an
    /// object restarted before settling has forgotten them.
    pub fn reserve(
        &mut self,
        ask: &Ask<'_>,
        reservation: &str,
        lapses_ms: u64,
        now_ms: u64,
    ) -> (Outcome, Vec<Write>) {
        self.decide(ask, Some((reservation, lapses_ms)), now_ms)
    }

    fn decide(
        &mut self,
        ask: &Ask<'_>,
        reserve: Option<(&str, u64)>,
        now_ms: u64,
    ) -> (Outcome, Vec<Write>) {
        if ask.cost == 0 {
            return (self.peek_ask(ask, now_ms), Vec::new());
        }
        let specs = self.policies(ask.specs, now_ms);
        let indices: Vec<usize> = specs
            .iter()
            .map(|(name, spec)| slot_for(&mut self.slots, name, *spec))
            .collect();
        let mut writes = Vec::new();
        let outcome = match self.ban.as_ref().filter(|b| b.is_active(now_ms)) {
            Some(active) => {
                // When a request can pass again: the ban's end, or later if
                // a window is still full then (windows only free up while
                // nothing is admitted), so that a client that waits as told
                // is not refused again, which would count toward the next
                // offence.
                let pass = indices
                    .iter()
                    .map(|&i| self.slots[i].limiter.decide(now_ms, ask.cost).retry)
                    .max()
                    .unwrap_or(Retry::NOW);
                let notice = BanNotice::of(active, false);
                let policies = report(&mut self.slots, &indices, now_ms, |_| None);
                let lease = ask
                    .lease
                    .map(|l| lease_report(&self.leases, l, None, now_ms));
                let mut outcome = Outcome::new(false, policies, Some(notice), lease, now_ms);
                outcome.retry = outcome.retry.max(pass);
                outcome
            }
            None => self.decide_unbanned(ask, &indices, reserve, now_ms, &mut writes),
        };
        self.forget_idle_slots(now_ms);
        (outcome, writes)
    }

    /// A decision for a key no ban holds: every policy, then the lease, then
    /// the admission (or reservation), and a refusal counted toward a ban.
    fn decide_unbanned(
        &mut self,
        ask: &Ask<'_>,
        indices: &[usize],
        reserve: Option<(&str, u64)>,
        now_ms: u64,
        writes: &mut Vec<Write>,
    ) -> Outcome {
        let decisions: Vec<Decision> = indices
            .iter()
            .map(|&i| self.slots[i].limiter.decide(now_ms, ask.cost))
            .collect();
        let rates_allow = decisions.iter().all(|d| d.allowed);
        let grant = match ask.lease {
            Some(lease) if rates_allow => {
                let grant = self
                    .leases
                    .acquire(now_ms, &lease.acquire(), || lease.new_id.clone());
                if let Ok(Grant {
                    granted: true,
                    lease: Some(granted),
                    ..
                }) = &grant
                {
                    writes.push(Write::Lease {
                        lease: granted.clone(),
                        limit: self.leases.limit(),
                    });
                }
                Some(grant)
            }
            _ => None,
        };
        let allowed = rates_allow
            && grant
                .as_ref()
                .is_none_or(|g| g.as_ref().is_ok_and(|g| g.granted));
        match reserve {
            _ if !allowed => {}
            None => {
                for &i in indices {
                    admit(&mut self.slots[i], now_ms, ask.cost, writes);
                }
            }
            Some((id, lapses_ms)) => {
                let runs = indices
                    .iter()
                    .map(|&i| {
                        let slot = &mut self.slots[i];
                        let at_ms = match slot.limiter.admit(now_ms, ask.cost) {
                            Recorded::Hit { at_ms, .. } => at_ms,
                            Recorded::State(..) => now_ms,
                        };
                        (slot.name.clone(), at_ms)
                    })
                    .collect();
                self.reservations.push(Reservation {
                    id: id.to_string(),
                    lapses_ms,
                    cost: ask.cost,
                    runs,
                });
            }
        }
        // A refused request is logged in no policy, so policies that had
        // room report the state they keep.
        let policies = report(&mut self.slots, indices, now_ms, |n| {
            let d = decisions[n];
            (allowed || !d.allowed).then_some(d)
        });
        let lease = ask
            .lease
            .map(|l| lease_report(&self.leases, l, grant, now_ms));
        // Only rate refusals count toward a ban: a request refused (or
        // queued) for want of a lease did nothing wrong.
        let started = match ask.ban {
            Some(policy) if !rates_allow => self.strike(policy, now_ms, writes),
            _ => None,
        };
        Outcome::new(allowed, policies, started, lease, now_ms)
    }

    /// What [`check`](Self::check) with cost 0 answers: each policy's
    /// state as the asked spec reads it ([`read`](Self::read)).
    fn peek_ask(&mut self, ask: &Ask<'_>, now_ms: u64) -> Outcome {
        let specs = self.policies(ask.specs, now_ms);
        let policies = specs
            .iter()
            .map(|(name, spec)| {
                let decision = self.read(name, *spec, now_ms);
                PolicyDecision {
                    name: name.clone(),
                    window_ms: spec.window_ms(),
                    decision,
                }
            })
            .collect();
        let ban = self.active_ban(now_ms);
        let lease = ask
            .lease
            .map(|l| lease_report(&self.leases, l, None, now_ms));
        Outcome::new(ban.is_none(), policies, ban, lease, now_ms)
    }

    /// Policy `name`'s state as `spec` reads it, changing nothing: a slot
    /// held under another spec is read through a copy, so that a peek
    /// never changes a limit, an algorithm or a window, and never drops an
    /// admission; no slot reads as empty.
    fn read(&mut self, name: &str, spec: Spec, now_ms: u64) -> Decision {
        match self.slots.iter_mut().find(|s| s.name == name) {
            Some(slot) if slot.limiter.spec() == spec => slot.limiter.decide(now_ms, 0),
            Some(slot) => {
                let mut copy = slot.limiter.clone();
                copy.set_spec(spec);
                copy.decide(now_ms, 0)
            }
            None => Algorithm::new(spec).decide(now_ms, 0),
        }
    }

    /// The first of `specs` whose slot holds admissions that still count
    /// under another algorithm or window. Taking such a request would
    /// replace (or re-read) the slot and drop or recount admissions, so
    /// the decision API refuses it rather than let one caller undo another's
    /// limit; a changed `limit` alone is no conflict.
    pub fn conflict<'s>(&self, specs: &'s [(String, Spec)], now_ms: u64) -> Option<&'s str> {
        specs.iter().find_map(|(name, spec)| {
            let slot = self.slots.iter().find(|s| s.name == *name)?;
            let held = slot.limiter.spec();
            let differs = std::mem::discriminant(&held) != std::mem::discriminant(spec)
                || held.window_ms() != spec.window_ms();
            (differs && !slot.limiter.is_idle(now_ms)).then_some(name.as_str())
        })
    }

    /// Extends a live lease.
    pub fn renew(&mut self, id: &str, ttl_ms: u64, now_ms: u64) -> (Option<Lease>, Vec<Write>) {
        let renewed = self.leases.renew(id, now_ms, ttl_ms);
        let writes = renewed
            .iter()
            .map(|lease| Write::Lease {
                lease: lease.clone(),
                limit: self.leases.limit(),
            })
            .collect();
        (renewed, writes)
    }

    /// Drops one hold on a live lease; `None`, changing nothing, for an
    /// unknown or lapsed one.
    pub fn release(&mut self, id: &str, now_ms: u64) -> (Option<Lease>, Vec<Write>, Vec<Expired>) {
        let released = self.leases.release(id, now_ms);
        let (mut writes, mut expired) = (Vec::new(), Vec::new());
        match &released {
            Some(lease) if lease.holds == 0 => {
                expired.push(self.lease_gone(id.to_string(), now_ms));
            }
            Some(lease) => writes.push(Write::Lease {
                lease: lease.clone(),
                limit: self.leases.limit(),
            }),
            None => {}
        }
        self.forget_idle_leases(now_ms);
        (released, writes, expired)
    }

    /// The leases held.
    pub fn leases(&self) -> &[Lease] {
        self.leases.leases()
    }

    /// Restores a lease row and the limit it names (`None` in rows written
    /// before limits were stored).
    pub fn restore_lease(&mut self, lease: Lease, limit: Option<u32>) {
        self.leases.restore(lease, limit);
    }

    /// Restores a fence floor row.
    pub fn restore_floor(&mut self, fence: u64) {
        self.leases.restore_floor(fence);
    }

    /// `CL.THROTTLE`: a GCRA check of `quantity` units in the slot `name`,
    /// answered as redis-cell answers it; admitted units are recorded as by
    /// [`check`](Self::check).
    pub fn throttle(
        &mut self,
        name: &str,
        policy: GcraPolicy,
        now_ms: u64,
        quantity: u32,
    ) -> Option<(Throttle, Vec<Write>)> {
        let spec = Spec::Gcra(policy);
        let i = slot_for(&mut self.slots, name, spec);
        let answer = self.slots[i].limiter.throttle(now_ms, u64::from(quantity));
        let specs = [(name.to_string(), spec)];
        let ask = Ask {
            specs: &specs,
            cost: quantity,
            ban: None,
            lease: None,
        };
        let (_, writes) = self.check(&ask, now_ms);
        answer.map(|throttle| (throttle, writes))
    }

    /// Restores a slot from its storage row (before its hit rows). Returns
    /// false (and keeps nothing) for a row that no longer validates.
    pub fn restore_slot(
        &mut self,
        name: &str,
        encoded: (u64, u64, u64, u64),
        state: (u64, u64),
    ) -> bool {
        let (kind, a, b, c) = encoded;
        let Some(spec) = Spec::decode(kind, a, b, c) else {
            return false;
        };
        let i = slot_for(&mut self.slots, name, spec);
        let slot = &mut self.slots[i];
        if slot.limiter.is_log() {
            // The log's first run, older than any of its hit rows.
            if let Ok(count @ 1..) = u32::try_from(state.1) {
                slot.limiter.restore_hit(state.0, count);
            }
        } else {
            slot.limiter.restore_state(state.0, state.1);
        }
        slot.stored = Some(spec);
        true
    }

    /// Restores a sliding-log row; rows must come in time order per slot.
    /// Rows of a slot without a slot row are ignored.
    pub fn restore_hit(&mut self, name: &str, at_ms: u64, count: u32) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.name == name) {
            slot.limiter.restore_hit(at_ms, count);
        }
    }

    pub fn restore_ban(&mut self, ban: Ban) {
        self.ban = Some(ban);
    }

    /// Expires what no longer counts, forgets empty slots and forgiven bans,
    /// and says which stored rows to delete. Running it twice at the same
    /// time changes nothing the second time, so an alarm that fires twice
    /// is harmless.
    pub fn sweep(&mut self, now_ms: u64) -> Vec<Expired> {
        let mut expired = Vec::new();
        for slot in &mut self.slots {
            slot.limiter.expire(now_ms);
            let name = slot.name.clone();
            if slot.limiter.is_idle(now_ms) {
                expired.push(Expired::Slot { name });
            } else if slot.limiter.is_log() {
                let cutoff_ms = now_ms.saturating_sub(slot.limiter.spec().window_ms());
                expired.push(Expired::Hits { name, cutoff_ms });
            }
        }
        self.slots.retain(|slot| !slot.limiter.is_idle(now_ms));
        for lapsed in self.leases.expire(now_ms) {
            expired.push(self.lease_gone(lapsed.id, now_ms));
        }
        if self.leases.forget_unneeded(now_ms) {
            expired.push(Expired::Floor);
        }
        if self.ban.as_ref().is_some_and(|ban| now_ms >= ban.forget_ms) {
            self.ban = None;
            expired.push(Expired::Ban);
        }
        if self
            .overridden
            .as_ref()
            .is_some_and(|o| !o.is_active(now_ms))
        {
            self.overridden = None;
            expired.push(Expired::Override);
        }
        expired
    }

    /// When the next sweep is due, if anything is held. A slot is due when
    /// its oldest state expires, but at most once per window: under steady
    /// traffic that batches a window's rows into one delete, and an idle
    /// slot is empty by its second sweep. A ban is due when it ends (the
    /// sweep lifts it) and when its offences are forgiven; a lease, exactly
    /// when it lapses, so its slot is reclaimed on time.
    pub fn next_sweep(&self, now_ms: u64) -> Option<u64> {
        let slots = self.slots.iter().filter_map(|slot| {
            let window = slot.limiter.spec().window_ms();
            let expiry = slot.limiter.next_expiry()?;
            Some(expiry.max(now_ms.saturating_add(window)))
        });
        let ban = self.ban.as_ref().map(|ban| {
            if ban.is_active(now_ms) {
                ban.until_ms
            } else {
                ban.forget_ms
            }
        });
        let lease = self.leases.next_expiry();
        let overridden = self.overridden.as_ref().and_then(|o| o.until_ms);
        let reservations = self.reservations.iter().map(|r| r.lapses_ms);
        slots
            .chain(ban)
            .chain(lease)
            .chain(overridden)
            .chain(reservations)
            .min()
    }

    /// Keeps or refunds reservation `id`. Keeping writes what an admission
    /// writes; refunding takes back exactly its own units and writes
    /// nothing. `None` for a reservation this key never had or that lapsed;
    /// a repeated settle answers as the first did and changes nothing.
    pub fn settle(&mut self, id: &str, keep: bool, now_ms: u64) -> (Option<Settled>, Vec<Write>) {
        if let Some(&(_, kept)) = self.settled.iter().find(|(s, _)| s == id) {
            return (
                Some(Settled {
                    kept,
                    repeated: true,
                }),
                Vec::new(),
            );
        }
        let Some(at) = self.reservations.iter().position(|r| r.id == id) else {
            return (None, Vec::new());
        };
        let reservation = self.reservations.remove(at);
        let mut writes = Vec::new();
        self.settle_one(&reservation, keep, &mut writes);
        self.forget_idle_slots(now_ms);
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back((reservation.id, keep));
        (
            Some(Settled {
                kept: keep,
                repeated: false,
            }),
            writes,
        )
    }

    /// Keeps every reservation whose answer never came by its lapse time.
    pub fn lapse(&mut self, now_ms: u64) -> Vec<Write> {
        let mut writes = Vec::new();
        let (lapsed, pending) = std::mem::take(&mut self.reservations)
            .into_iter()
            .partition::<Vec<_>, _>(|r| r.lapses_ms <= now_ms);
        self.reservations = pending;
        for reservation in &lapsed {
            self.settle_one(reservation, true, &mut writes);
        }
        writes
    }

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

    /// Forgets the key's state (an operator's reset) and says which rows to
    /// delete. The floor of a lock's fences stays while a repeat is
    /// possible, since a lock's fences must grow even across a reset, and
    /// an operator's override (configuration, not state) stays too.
    pub fn reset(&mut self, now_ms: u64) -> Vec<Expired> {
        let mut expired: Vec<Expired> = std::mem::take(&mut self.slots)
            .into_iter()
            .map(|slot| Expired::Slot { name: slot.name })
            .collect();
        if self.ban.take().is_some() {
            expired.push(Expired::Ban);
        }
        for lease in self.leases.expire(u64::MAX) {
            expired.push(self.lease_gone(lease.id, now_ms));
        }
        self.strikes = None;
        self.reservations.clear();
        self.forget_idle_leases(now_ms);
        expired
    }

    /// The key's slots and ban at `now_ms` as it stored them, changing
    /// nothing.
    pub fn peek(&mut self, now_ms: u64) -> (Vec<SlotReport>, Option<BanNotice>) {
        let slots = self
            .slots
            .iter_mut()
            .map(|slot| {
                let spec = slot.limiter.spec();
                slot_report(&slot.name, spec, slot.limiter.decide(now_ms, 0))
            })
            .collect();
        (slots, self.active_ban(now_ms))
    }

    /// The key's policies in force for a rule that asks `asked` of it now
    /// (under an active override) and its ban, changing nothing: each as a
    /// decision would read it, its slot through the limit in force rather
    /// than the one it stored at its last decision, and one with no slot
    /// as empty.
    pub fn peek_in_force(
        &mut self,
        asked: &[(String, Spec)],
        now_ms: u64,
    ) -> (Vec<SlotReport>, Option<BanNotice>) {
        let slots = self
            .policies(asked, now_ms)
            .into_iter()
            .map(|(name, spec)| {
                let d = self.read(&name, spec, now_ms);
                slot_report(&name, spec, d)
            })
            .collect();
        (slots, self.active_ban(now_ms))
    }

    /// Whether the key holds nothing, so that its storage can be freed. A
    /// stored fence floor is held until the sweep deletes that row. Strikes
    /// and the memory of settled reservations are left out: they live in
    /// memory only, so no row waits for them.
    pub fn is_empty(&self, now_ms: u64) -> bool {
        self.slots.is_empty()
            && self.ban.is_none()
            && self.overridden.is_none()
            && self.reservations.is_empty()
            && self.leases.is_idle(now_ms)
            && !self.leases.floor_stored()
    }

    /// Forgets the slots that hold nothing: no admission that still counts
    /// and no row. A slot with rows stays until the sweep deletes them.
    fn forget_idle_slots(&mut self, now_ms: u64) {
        self.slots
            .retain(|slot| slot.stored.is_some() || !slot.limiter.is_idle(now_ms));
    }

    /// Forgets the lease table once nothing in it is needed: no lease, and
    /// no fence a later lease could repeat, in memory or in a floor row.
    /// Its last fence would otherwise ask for a sweep long past (the keyed
    /// ledger forgot it with the empty key).
    fn forget_idle_leases(&mut self, now_ms: u64) {
        if self.leases.is_idle(now_ms) && !self.leases.floor_stored() {
            self.leases = LeaseTable::default();
        }
    }

    /// The ban in force, as a decision reports it.
    fn active_ban(&self, now_ms: u64) -> Option<BanNotice> {
        self.ban
            .as_ref()
            .filter(|ban| ban.is_active(now_ms))
            .map(|ban| BanNotice::of(ban, false))
    }

    /// The policies in force: the ones asked, under an active override.
    fn policies(&self, asked: &[(String, Spec)], now_ms: u64) -> Vec<(String, Spec)> {
        match &self.overridden {
            Some(o) if o.is_active(now_ms) => o.applied_to(asked),
            _ => asked.to_vec(),
        }
    }

    /// Removes lease `id`'s row, keeping the last fence as a floor row if a
    /// repeat is still possible.
    fn lease_gone(&mut self, id: String, now_ms: u64) -> Expired {
        let floor = self
            .leases
            .needs_floor(now_ms)
            .then(|| self.leases.last_fence());
        if floor.is_some() {
            self.leases.set_floor_stored(true);
        }
        Expired::Lease { id, floor }
    }

    /// Keeps (writing what its admission would have written) or refunds one
    /// reservation.
    fn settle_one(&mut self, reservation: &Reservation, keep: bool, writes: &mut Vec<Write>) {
        for (name, at_ms) in &reservation.runs {
            let Some(slot) = self.slots.iter_mut().find(|s| s.name == *name) else {
                continue;
            };
            if !keep {
                slot.limiter.refund(*at_ms, reservation.cost);
                continue;
            }
            let recorded = match slot.limiter.state() {
                Some((a, b)) => Recorded::State(a, b),
                None => Recorded::Hit {
                    at_ms: *at_ms,
                    count: reservation.cost,
                },
            };
            record(slot, recorded, writes);
        }
    }

    /// Counts a refusal toward a ban; returns the ban it starts, if any.
    fn strike(
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

/// A policy's state as an operator reads it.
fn slot_report(name: &str, spec: Spec, d: Decision) -> SlotReport {
    SlotReport {
        policy: name.to_string(),
        limit: d.limit,
        window_ms: spec.window_ms(),
        used: d.limit.saturating_sub(d.remaining),
        remaining: d.remaining,
        reset_ms: d.reset_ms,
    }
}

/// The index of the slot named `name`, created or updated to `spec`.
fn slot_for(slots: &mut Vec<Slot>, name: &str, spec: Spec) -> usize {
    match slots.iter().position(|slot| slot.name == name) {
        Some(i) => {
            if slots[i].limiter.spec() != spec {
                slots[i].limiter.set_spec(spec);
            }
            i
        }
        None => {
            slots.push(Slot {
                name: name.to_string(),
                limiter: Algorithm::new(spec),
                stored: None,
            });
            slots.len() - 1
        }
    }
}

/// Each requested policy's decision: `kept(n)` for the n-th when it is to be
/// reported as decided, otherwise the state it holds (a peek).
fn report(
    slots: &mut [Slot],
    indices: &[usize],
    now_ms: u64,
    kept: impl Fn(usize) -> Option<Decision>,
) -> Vec<PolicyDecision> {
    indices
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let slot = &mut slots[i];
            PolicyDecision {
                name: slot.name.clone(),
                window_ms: slot.limiter.spec().window_ms(),
                decision: kept(n).unwrap_or_else(|| slot.limiter.decide(now_ms, 0)),
            }
        })
        .collect()
}

/// The lease part of an outcome: the grant if one was tried, otherwise the
/// table as it stands.
fn lease_report(
    table: &LeaseTable,
    ask: &LeaseAsk,
    grant: Option<Result<Grant, LeaseError>>,
    now_ms: u64,
) -> LeaseOutcome {
    let (lease, refused, retry_after_ms, error) = match grant {
        Some(Ok(grant)) => (grant.lease, !grant.granted, grant.retry_after_ms, None),
        Some(Err(error)) => (None, false, 0, Some(error)),
        None => (None, false, 0, None),
    };
    LeaseOutcome {
        name: ask.name.clone(),
        limit: ask.limit,
        in_flight: table.in_flight_at(now_ms),
        lease,
        refused,
        retry_after_ms,
        error,
    }
}

fn admit(slot: &mut Slot, now_ms: u64, cost: u32, writes: &mut Vec<Write>) {
    let recorded = slot.limiter.admit(now_ms, cost);
    record(slot, recorded, writes);
}

/// The rows an admission into `slot` writes.
fn record(slot: &mut Slot, recorded: Recorded, writes: &mut Vec<Write>) {
    let spec = slot.limiter.spec();
    let name = slot.name.clone();
    match (recorded, slot.stored) {
        // A log's slot row carries its first run, so that a new key's first
        // admission is one row.
        (Recorded::Hit { at_ms, count }, None) => writes.push(Write::Slot {
            name,
            spec,
            state: (at_ms, u64::from(count)),
        }),
        (Recorded::Hit { at_ms, count }, Some(stored)) => {
            if stored != spec {
                writes.push(Write::Respec {
                    name: name.clone(),
                    spec,
                });
            }
            writes.push(Write::Hit { name, at_ms, count });
        }
        (Recorded::State(a, b), _) => writes.push(Write::Slot {
            name,
            spec,
            state: (a, b),
        }),
    }
    slot.stored = Some(spec);
}

#[cfg(test)]
mod tests;
