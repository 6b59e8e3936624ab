//! What a decision answers: each policy's part, the lease's, a ban, and
//! when the whole request could pass; the same types cross the wire from
//! a key object to the worker.

use super::ban::BanNotice;
use super::blocks::BlockGrant;
use crate::control::Control;
use crate::input::scan::{need, FromScan, Malformed, Read, Scan};
use crate::limit::lease::{Lease, LeaseError};
use crate::limit::{Decision, Retry};

/// How soon a request refused for want of a lease is told to retry, unless
/// a lease lapses sooner: a holder may release at any moment and the object
/// cannot foresee when, so the lapse (up to a lease's whole TTL) is only the
/// worst case.
pub const LEASE_RETRY_MS: u64 = 1_000;

/// One policy's part of an outcome. On the wire its decision's fields sit
/// beside the name and window, in one flat object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    pub name: String,
    pub window_ms: u64,
    pub decision: Decision,
}

impl crate::json::Write for PolicyDecision {
    fn write(&self, out: &mut crate::json::Text) {
        let d = &self.decision;
        let mut fields = out.object();
        fields.field("name", &self.name);
        fields.field("window_ms", &self.window_ms);
        fields.field("allowed", &d.allowed);
        fields.field("limit", &d.limit);
        fields.field("remaining", &d.remaining);
        fields.field("reset_ms", &d.reset_ms);
        fields.field("retry_after_ms", &d.retry);
        fields.end();
    }
}

impl FromScan for PolicyDecision {
    fn from_scan(scan: &mut Scan<'_>) -> Read<PolicyDecision> {
        const NAMES: [&str; 7] = [
            "name",
            "allowed",
            "retry_after_ms",
            "window_ms",
            "limit",
            "remaining",
            "reset_ms",
        ];
        let (mut name, mut allowed, mut retry) = (None, None, Retry::Never);
        let mut values = [None; 4];
        let mut object = scan.object()?;
        while let Some(at) = object.field(scan, &NAMES)? {
            match at {
                0 => name = Some(scan.string()?),
                1 => allowed = Some(scan.bool()?),
                2 => retry = Retry::from_scan(scan)?,
                _ => {
                    if let Some(value) = values.get_mut(at.wrapping_sub(3)) {
                        *value = Some(scan.u64()?);
                    }
                }
            }
        }
        let [Some(window_ms), Some(limit), Some(remaining), Some(reset_ms)] = values else {
            return Err(Malformed);
        };
        Ok(PolicyDecision {
            name: need(name)?,
            window_ms,
            decision: Decision {
                allowed: need(allowed)?,
                limit,
                remaining,
                reset_ms,
                retry,
            },
        })
    }
}

crate::wire! {
    /// The answer to one check across all of a request's policies.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Outcome {
        pub allowed: bool,
        /// Set on a refusal that only pending reservations caused: every
        /// refusing policy would have admitted the request with their units
        /// given back. Such a refusal says so (`pending`), asks for a short
        /// retry ([`PENDING_RETRY_MS`]) and counts toward no ban: the attempts
        /// holding the places may all be refunded a moment later.
        ///
        /// [`PENDING_RETRY_MS`]: super::PENDING_RETRY_MS
        pub pending: bool = false,
        pub policies: Vec<PolicyDecision>,
        /// Set when the key is banned, before or by this request.
        pub ban: Option<BanNotice> = None,
        /// The concurrency limit's part, when the request asked for a lease.
        pub lease: Option<LeaseOutcome> = None,
        /// Set, with nothing decided, when the request was asked to leave
        /// alone state its key holds under another algorithm or window: the
        /// name of the policy that conflicts.
        pub conflict: Option<String> = None,
        /// Set, with nothing decided, when an operator paused or closed the
        /// rule this object is a part of: the state, which answers instead.
        pub halt: Option<Control> = None,
        /// [`Retry::NOW`] when allowed; otherwise how long until the whole
        /// request could pass: the ban must end and every refusing policy must
        /// have room (windows only free up while nothing is admitted). A refused
        /// lease counts [`LEASE_RETRY_MS`], or its first lapse if sooner, and a
        /// pending refusal [`PENDING_RETRY_MS`], or its window's room if sooner.
        /// A refusal over quota is told a later moment when earlier refusals
        /// were told this one ([`spread`](Self::spread)). On the wire as
        /// `retry_after_ms`, like [`Decision::retry`].
        ///
        /// [`PENDING_RETRY_MS`]: super::PENDING_RETRY_MS
        pub retry as "retry_after_ms": Retry,
        /// Set when `retry` was spread over the moments places free up
        /// ([`crate::limit::spread`]): when the request could really pass, and
        /// what to tell the next refusals.
        pub spread: Option<Spread> = None,
        /// Admission blocks granted with this answer, when the call asked for
        /// them ([`super::blocks`]).
        pub blocks: Vec<BlockGrant> = Vec::new(),
        /// A part of a split quota whose whole limit an operator set: the
        /// policy and the whole limit its answer announces (`Override::whole`).
        pub whole: Option<(String, u64)> = None,
    }
}

crate::wire! {
    /// A refusal whose retry time was spread: `retry` is the moment its
    /// refusing policies invited it, at or after the moment it could really
    /// pass. Both in ms from the decision.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Spread {
        /// How long until the request could really pass if nothing else were
        /// admitted: until then the object refuses it whatever happens, so a
        /// copy of the refusal (the isolate's cache) may answer for it.
        pub earliest as "earliest_ms": u64,
        /// The moments the next refusals are invited to come back, in order,
        /// handed out already for a copy of the refusal to tell them: the
        /// isolate answers the refusals that follow from its cache with these,
        /// one each.
        pub next as "next_ms": Vec<u64> = Vec::new(),
    }
}

crate::wire! {
    /// A concurrency limit's answer, named like a policy for the headers.
    #[derive(Debug, Clone, PartialEq, Eq)]
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
        pub error: Option<LeaseError> = None,
    }
}

impl Outcome {
    pub(super) fn new(
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
            pending: false,
            policies,
            ban,
            lease,
            conflict: None,
            halt: None,
            retry,
            spread: None,
            blocks: Vec::new(),
            whole: None,
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

    /// Whether the isolate may answer for the object until the retry time:
    /// a window frees up no sooner while nothing is admitted and a ban does
    /// not end early, but a lease may be released before it lapses. A
    /// pending refusal may end sooner too (a refund), but its retry is at
    /// most [`PENDING_RETRY_MS`], the wait the client is told, so it is
    /// held no longer than that.
    ///
    /// [`PENDING_RETRY_MS`]: super::PENDING_RETRY_MS
    pub fn refusal_holds_until_retry(&self) -> bool {
        self.lease.as_ref().is_none_or(|l| !l.refused)
    }

    /// How long until the request could really pass if nothing else were
    /// admitted: `retry`, or less when it was spread.
    pub fn earliest(&self) -> Retry {
        self.spread
            .as_ref()
            .map_or(self.retry, |s| Retry::After(s.earliest))
    }

    pub fn violated(&self) -> impl Iterator<Item = &PolicyDecision> {
        self.policies.iter().filter(|p| !p.decision.allowed)
    }
}
