//! What the worker and its container objects say to each other: JSON
//! bodies on internal `fetch` calls. Both sides are this crate, but the
//! container still validates what it receives, since a bad value must
//! become an error response, never a panic.

use serde::{Deserialize, Serialize};

use crate::ledger::{BanNotice, BanPolicy, LeaseAsk, Override, SlotReport};
use crate::limit::lease::Lease;
use crate::limit::Spec;

/// A policy as sent: its name and its spec in storage encoding, which
/// [`Spec::decode`] validates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSpec {
    pub name: String,
    pub spec: (u64, u64, u64, u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireBan {
    pub after: u64,
    pub within_ms: u64,
    pub for_ms: u64,
    pub multiplier: u64,
    pub max_ms: u64,
}

/// `POST /check`: admit `cost` units for `key` under every policy, or none;
/// count a refusal toward `ban`. Answered with a [`crate::ledger::Outcome`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    pub key: String,
    pub policies: Vec<WireSpec>,
    pub cost: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban: Option<WireBan>,
    /// A lease under a concurrency limit, taken with the units or not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseAsk>,
    /// How long to wait for a lease when none is free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueAsk>,
    /// Answer a conflict ([`crate::ledger::Outcome::conflicting`]) instead
    /// of adopting a policy whose algorithm or window differs from the
    /// state the key holds. The decision API asks this, since any caller
    /// may send any policy; a rule's policies change only when its
    /// operator redeploys, and then they apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_conflicts: bool,
    /// Admit as a reservation ([`crate::ledger::Ledger::reserve`]), kept
    /// or refunded by a later `/settle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve: Option<ReserveAsk>,
}

/// A reservation's id (chosen by the caller, at random) and how long it may
/// wait for its settle before it is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveAsk {
    pub id: String,
    pub ttl_ms: u64,
}

/// `POST /settle`: keep or refund a reservation. Answered with
/// [`SettleAnswer`], or 404 for one unknown or lapsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleRequest {
    pub key: String,
    pub reservation: String,
    pub keep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleAnswer {
    pub kept: bool,
    /// Settled before; nothing changed this time.
    pub repeated: bool,
}

/// Waiting for a lease: first come, first served, up to `max_wait_ms`, with
/// at most `max_len` waiting per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueAsk {
    pub max_wait_ms: u64,
    pub max_len: u32,
}

/// Policies in storage encoding, as both sides send them.
fn encode_specs(policies: &[(String, Spec)]) -> Vec<WireSpec> {
    policies
        .iter()
        .map(|(name, spec)| WireSpec {
            name: name.clone(),
            spec: spec.encode(),
        })
        .collect()
}

/// Policies as sent, validated: an invalid one is an error, not a panic.
fn decode_specs(policies: &[WireSpec]) -> Result<Vec<(String, Spec)>, Invalid> {
    policies
        .iter()
        .map(|p| {
            let (kind, a, b, c) = p.spec;
            Spec::decode(kind, a, b, c)
                .map(|spec| (p.name.clone(), spec))
                .ok_or_else(|| Invalid(format!("policy {:?} has an invalid spec", p.name)))
        })
        .collect()
}

/// Why a check request cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl CheckRequest {
    pub fn new(
        key: &str,
        policies: &[(String, Spec)],
        cost: u32,
        ban: Option<&BanPolicy>,
    ) -> CheckRequest {
        CheckRequest {
            key: key.to_string(),
            policies: encode_specs(policies),
            cost,
            ban: ban.map(|b| WireBan {
                after: u64::from(b.strikes().limit()),
                within_ms: b.strikes().window_ms(),
                for_ms: b.for_ms(),
                multiplier: b.multiplier(),
                max_ms: b.max_ms(),
            }),
            lease: None,
            queue: None,
            refuse_conflicts: false,
            reserve: None,
        }
    }

    pub fn policies(&self) -> Result<Vec<(String, Spec)>, Invalid> {
        decode_specs(&self.policies)
    }

    pub fn ban(&self) -> Result<Option<BanPolicy>, Invalid> {
        self.ban
            .map(|b| BanPolicy::new(b.after, b.within_ms, b.for_ms, b.multiplier, b.max_ms))
            .transpose()
            .map_err(|e| Invalid(e.message))
    }
}

/// `POST /throttle`: redis-cell's `CL.THROTTLE key max_burst count period
/// quantity`, with the period in milliseconds. Answered with a
/// [`crate::limit::gcra::Throttle`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleRequest {
    pub key: String,
    pub max_burst: u64,
    pub count: u64,
    pub period_ms: u64,
    pub quantity: u32,
}

/// `POST /peek` and `POST /reset`: one key, by its name in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRequest {
    pub key: String,
}

/// The answer to `/peek`: a key's state for an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyState {
    pub slots: Vec<SlotReport>,
    pub ban: Option<BanNotice>,
    pub leases: Vec<Lease>,
    /// An operator's override, lapsed or not (its `until_ms` says).
    #[serde(default, rename = "override")]
    pub overridden: Option<WireOverride>,
}

/// An override as sent and stored: policies in storage encoding, which
/// [`WireOverride::decode`] validates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireOverride {
    pub policies: Vec<WireSpec>,
    pub until_ms: Option<u64>,
    pub reason: String,
    pub set_ms: u64,
}

impl WireOverride {
    pub fn encode(o: &Override) -> WireOverride {
        WireOverride {
            policies: encode_specs(&o.policies),
            until_ms: o.until_ms,
            reason: o.reason.clone(),
            set_ms: o.set_ms,
        }
    }

    pub fn decode(&self) -> Result<Override, Invalid> {
        Ok(Override {
            policies: decode_specs(&self.policies)?,
            until_ms: self.until_ms,
            reason: self.reason.clone(),
            set_ms: self.set_ms,
        })
    }
}

/// `POST /override`: set (or, with `None`, lift) a key's override.
/// Answered with the one it replaced, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRequest {
    pub key: String,
    #[serde(rename = "override")]
    pub overridden: Option<WireOverride>,
}

/// `POST /renew` and `POST /release`: one lease of a key. Answered with
/// the [`Lease`] as it now is, or 404 for an unknown or lapsed lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRequest {
    pub key: String,
    pub id: String,
    /// For a renewal: how long from now the lease should last.
    #[serde(default)]
    pub ttl_ms: u64,
}

/// `GET /inspect`: what a container object holds, in memory and on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    pub keys: Vec<String>,
    /// Rows in the object's tables (0 when they do not exist).
    pub stored_rows: u64,
    /// Whether the object has any SQLite tables at all; false once the
    /// sweep has freed its storage.
    pub has_storage: bool,
    pub alarm_ms: Option<u64>,
    /// Checks served since this instance started.
    pub checks: u64,
    /// What every container in this isolate has cost since it started.
    pub meter: Meter,
}

/// Counters of what the containers cost, for measuring the cost of a
/// decision (BENCHMARKS.md): on the local runtime every object of the
/// namespace shares one isolate, so the difference across a run, divided by
/// the decisions made, is the cost of one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meter {
    /// Requests the containers served (every route).
    pub requests: u64,
    /// Alarm invocations.
    pub alarms: u64,
    /// SQLite rows read and written, as the runtime reports them per
    /// statement (`rowsRead`, `rowsWritten`, which is what Cloudflare bills).
    pub rows_read: u64,
    pub rows_written: u64,
}

/// `DELETE /bans` to a hub: lift the ban `source` placed on `key`
/// (`manual`, or a rule's scope after an operator's reset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnbanRequest {
    pub key: String,
    pub source: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Policy;

    #[test]
    fn a_check_request_round_trips() {
        let policies = vec![(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(10, 1000).unwrap()),
        )];
        let ban = BanPolicy::new(3, 1000, 60_000, 2, 600_000).unwrap();
        let request = CheckRequest::new("k", &policies, 2, Some(&ban));
        let wire = serde_json::to_string(&request).unwrap();
        let back: CheckRequest = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.policies().unwrap(), policies);
        assert_eq!(back.ban().unwrap(), Some(ban));
        assert_eq!(back.cost, 2);
    }

    #[test]
    fn invalid_values_are_errors_not_panics() {
        let request = CheckRequest {
            key: "k".into(),
            policies: vec![WireSpec {
                name: "x".into(),
                spec: (0, 0, 1, 0),
            }],
            cost: 1,
            ban: Some(WireBan {
                after: 0,
                within_ms: 1,
                for_ms: 1,
                multiplier: 1,
                max_ms: 1,
            }),
            lease: None,
            queue: None,
            refuse_conflicts: false,
            reserve: None,
        };
        assert!(request.policies().is_err());
        assert!(request.ban().is_err());
    }
}
