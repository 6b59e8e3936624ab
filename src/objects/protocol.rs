//! What the worker and its objects say to each other: a call (`{"check":{…}}`,
//! `"inspect"`) answered by a reply, one tagged enum each way for the key
//! objects ([`LimiterCall`], [`LimiterReply`]) and the hubs ([`HubCall`],
//! [`HubReply`]), each declared once by [`wire!`](crate::wire!). An object
//! validates what it receives: a bad body is a 400, never a panic.

mod hub;
mod policy;

use crate::control::Control;
use crate::ledger::blocks::{times, BlockReport, Pending};
use crate::ledger::{
    BanNotice, BanPolicy, LeaseAsk, Outcome, Override, SlotReport, StockAsk, Told,
};
use crate::limit::gcra::Throttle;
use crate::limit::lease::Lease;
use crate::limit::Spec;
use crate::sale::Second;
pub use hub::{HubCall, HubReply, UnbanRequest};
pub use policy::WirePolicy;

/// The tag of a call or reply on the wire: a unit variant is its name, any
/// other the one key of its object.
#[cfg(test)]
fn wire_tag(value: &serde_json::Value) -> Option<&str> {
    match value {
        serde_json::Value::String(name) => Some(name),
        serde_json::Value::Object(map) if map.len() == 1 => map.keys().next().map(String::as_str),
        _ => None,
    }
}

crate::wire! {
    /// A call from the worker to a key's object. One is held per call, so
    /// the size of its largest variant (a check) does not matter.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(clippy::large_enum_variant)]
    pub enum LimiterCall {
        /// Answered with [`LimiterReply::Outcome`].
        Check(CheckRequest) = "check",
        /// Answered with [`LimiterReply::Settled`] or
        /// [`LimiterReply::NoSuchReservation`].
        Settle(SettleRequest) = "settle",
        /// Answered with [`LimiterReply::Lease`] or [`LimiterReply::NoSuchLease`].
        Renew(LeaseRequest) = "renew",
        /// Answered like [`LimiterCall::Renew`].
        Release(LeaseRequest) = "release",
        /// Answered with [`LimiterReply::Throttle`].
        Throttle(ThrottleRequest) = "throttle",
        /// Answered with [`LimiterReply::Key`].
        Peek(PeekRequest) = "peek",
        /// Answered with [`LimiterReply::Reset`].
        Reset(KeyRequest) = "reset",
        /// Answered with [`LimiterReply::Override`].
        Override(OverrideRequest) = "override",
        /// Answered with [`LimiterReply::Ban`].
        Ban(KeyBanRequest) = "ban",
        /// Answered with [`LimiterReply::Control`].
        Control(ControlRequest) = "control",
        /// A sibling part's word on its stock ([`crate::ledger::stock`]);
        /// answered with [`LimiterReply::Control`], the state before.
        Stock(StockRequest) = "stock",
        /// What the object holds, for tests and benchmarks; answered with
        /// [`LimiterReply::Inspection`].
        Inspect = "inspect",
    }
}

crate::wire! {
    /// A key object's answer to a [`LimiterCall`] it could serve.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum LimiterReply {
        Outcome(Outcome) = "outcome",
        Settled(SettleAnswer) = "settled",
        /// The reservation is unknown, or lapsed (and was kept).
        NoSuchReservation = "no_such_reservation",
        /// The lease as it now is.
        Lease(Lease) = "lease",
        /// The lease is unknown, or has lapsed.
        NoSuchLease = "no_such_lease",
        Throttle(Throttle) = "throttle",
        Key(KeyState) = "key",
        /// Whether there was anything to forget.
        Reset { forgot: bool } = "reset",
        /// The override that was replaced or lifted, if any.
        Override { previous: Option<WireOverride> } = "override",
        /// The ban that was in force before, if any.
        Ban { previous: Option<BanNotice> } = "ban",
        /// The state that was in force before (`None`: open).
        Control { previous: Option<Control> } = "control",
        Inspection(Inspection) = "inspection",
    }
}

crate::wire! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WireBan {
        pub after: u64,
        pub within_ms: u64,
        pub for_ms: u64,
        pub multiplier: u64,
        pub max_ms: u64,
    }
}

crate::wire! {
    /// A check: admit `cost` units under every policy, or none;
    /// count a refusal toward `ban`. Answered with a [`crate::ledger::Outcome`].
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CheckRequest {
        /// The object the call is for.
        pub key: String,
        pub policies: Vec<WirePolicy>,
        pub cost: u32,
        pub ban: Option<WireBan> = None,
        /// A lease under a concurrency limit, taken with the units or not at all.
        pub lease: Option<LeaseAsk> = None,
        /// How long to wait for a lease when none is free.
        pub queue: Option<QueueAsk> = None,
        /// Answer a conflict ([`crate::ledger::Outcome::conflicting`]) instead
        /// of adopting a policy whose algorithm or window differs from the
        /// state the key holds. The decision API asks this, since any caller
        /// may send any policy; a rule's policies change only when its
        /// operator redeploys, and then they apply.
        pub refuse_conflicts: bool = false,
        /// Admit as a reservation ([`crate::ledger::Ledger::reserve`]), kept
        /// or refunded by a later [`LimiterCall::Settle`].
        pub reserve: Option<ReserveAsk> = None,
        /// How many moments a refusal over quota hands out: its own, and the
        /// rest for the isolate to tell the refusals it answers next from its
        /// cache ([`crate::ledger::Ledger::check_inviting`]); 1 when absent, as
        /// a worker of the version before asks.
        pub invitations: u32 = 1,
        /// The object is a part of a global quota: count its decisions per
        /// second, for the sale's view ([`crate::sale`]).
        pub watched: bool = false,
        /// Ask for an admission block of each policy, should the check admit
        /// and the key be hot and far from its limit
        /// ([`crate::ledger::blocks`]); answered in [`Outcome::blocks`].
        pub block: Option<BlockAskWire> = None,
        /// Reports of blocks this isolate held of the object, taken before the
        /// check is decided.
        pub reports: Vec<WireReport> = Vec::new(),
        /// The object is a part of a quota that closes once sold out
        /// ([`crate::ledger::stock`]).
        pub stock: Option<StockAsk> = None,
    }
}

crate::wire! {
    /// Part `from`'s word on its stock to the part `key` names (part
    /// `ask.part` of the same quota).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StockRequest {
        pub key: String,
        pub from: u32,
        pub ask: StockAsk,
        pub told: Told,
    }
}

crate::wire! {
    /// An isolate's ask for blocks: its holder id and the key's decisions it
    /// saw in the last second.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BlockAskWire {
        pub holder: String,
        pub rate: u32,
    }
}

crate::wire! {
    /// A block's report on the wire: its times as one
    /// [`times::encode`]d value, as storage keeps them.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WireReport {
        pub id: u64,
        pub holder: String,
        pub policy: String,
        pub times: String,
        pub pending: Vec<Pending> = Vec::new(),
        pub strikes: u32 = 0,
    }
}

impl WireReport {
    pub fn encode(report: &BlockReport) -> WireReport {
        WireReport {
            id: report.id,
            holder: report.holder.clone(),
            policy: report.policy.clone(),
            times: times::encode(&report.times),
            pending: report.pending.clone(),
            strikes: report.strikes,
        }
    }

    pub fn decode(&self) -> Result<BlockReport, Invalid> {
        let times = times::decode(&self.times)
            .ok_or_else(|| Invalid(format!("report {}: times do not read back", self.id)))?;
        Ok(BlockReport {
            id: self.id,
            holder: self.holder.clone(),
            policy: self.policy.clone(),
            times,
            pending: self.pending.clone(),
            strikes: self.strikes,
        })
    }
}

crate::wire! {
    /// A reservation's id (chosen by the caller, at random) and how long it may
    /// wait for its settle before it is kept.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReserveAsk {
        pub id: String,
        pub ttl_ms: u64,
    }
}

crate::wire! {
    /// Keep or refund a reservation.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SettleRequest {
        /// The object the call is for.
        pub key: String,
        pub reservation: String,
        pub keep: bool,
    }
}

crate::wire! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SettleAnswer {
        pub kept: bool,
        /// Settled before; nothing changed this time.
        pub repeated: bool,
    }
}

crate::wire! {
    /// Waiting for a lease: first come, first served, up to `max_wait_ms`, with
    /// at most `max_len` waiting per key.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct QueueAsk {
        pub max_wait_ms: u64,
        pub max_len: u32,
    }
}

/// Why a call cannot be served.
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
            policies: policy::encode_all(policies),
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
            invitations: 1,
            watched: false,
            block: None,
            reports: Vec::new(),
            stock: None,
        }
    }

    /// The reports the call carries; one that does not read back makes
    /// the call invalid.
    pub fn reports(&self) -> Result<Vec<BlockReport>, Invalid> {
        self.reports.iter().map(WireReport::decode).collect()
    }

    pub fn policies(&self) -> Result<Vec<(String, Spec)>, Invalid> {
        policy::decode_all(&self.policies)
    }

    pub fn ban(&self) -> Result<Option<BanPolicy>, Invalid> {
        self.ban
            .map(|b| BanPolicy::new(b.after, b.within_ms, b.for_ms, b.multiplier, b.max_ms))
            .transpose()
            .map_err(|e| Invalid(e.message))
    }
}

crate::wire! {
    /// redis-cell's `CL.THROTTLE key max_burst count period
    /// quantity`, with the period in milliseconds. Answered with a
    /// [`crate::limit::gcra::Throttle`].
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ThrottleRequest {
        /// The object the call is for.
        pub key: String,
        pub max_burst: u64,
        pub count: u64,
        pub period_ms: u64,
        pub quantity: u32,
    }
}

crate::wire! {
    /// A reset of the key an object holds.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KeyRequest {
        /// The object the call is for.
        pub key: String,
    }
}

crate::wire! {
    /// A peek at the key an object holds, for an operator.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PeekRequest {
        /// The object the call is for.
        pub key: String,
        /// The policies the config asks of the key now: its state is reported
        /// under them (and an override over them), not under the limits it
        /// stored at its last decision. `None` reports what it stored (a
        /// decision-API key, whose callers send policies with each call).
        pub policies: Option<Vec<WirePolicy>> = None,
    }
}

impl PeekRequest {
    pub fn new(key: &str, policies: Option<&[(String, Spec)]>) -> PeekRequest {
        PeekRequest {
            key: key.to_string(),
            policies: policies.map(policy::encode_all),
        }
    }

    pub fn policies(&self) -> Result<Option<Vec<(String, Spec)>>, Invalid> {
        self.policies.as_deref().map(policy::decode_all).transpose()
    }
}

crate::wire! {
    /// The answer to a peek: a key's state for an operator.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KeyState {
        pub slots: Vec<SlotReport>,
        pub ban: Option<BanNotice>,
        pub leases: Vec<Lease>,
        /// An operator's override, lapsed or not (its `until_ms` says).
        pub overridden as "override": Option<WireOverride>,
        /// The rule's state, when an operator paused or closed it (a global
        /// quota's part).
        pub control: Option<Control> = None,
        /// A global quota's part: its decisions per second over the last five
        /// minutes, since it started.
        pub seconds: Vec<Second> = Vec::new(),
    }
}

crate::wire! {
    /// An override as sent, whose policies [`WireOverride::decode`]
    /// validates. (Its storage row has its own encoding,
    /// [`crate::ledger::override_row`].)
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WireOverride {
        pub policies: Vec<WirePolicy>,
        pub until_ms: Option<u64>,
        pub reason: String,
        pub set_ms: u64,
        pub whole: Option<(String, u64)> = None,
    }
}

impl WireOverride {
    pub fn encode(o: &Override) -> WireOverride {
        WireOverride {
            policies: policy::encode_all(&o.policies),
            until_ms: o.until_ms,
            reason: o.reason.clone(),
            set_ms: o.set_ms,
            whole: o.whole.clone(),
        }
    }

    pub fn decode(&self) -> Result<Override, Invalid> {
        Ok(Override {
            policies: policy::decode_all(&self.policies)?,
            until_ms: self.until_ms,
            reason: self.reason.clone(),
            set_ms: self.set_ms,
            whole: self.whole.clone(),
        })
    }
}

crate::wire! {
    /// Set (or, with `None`, lift) a key's override.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OverrideRequest {
        /// The object the call is for.
        pub key: String,
        pub overridden as "override": Option<WireOverride>,
    }
}

crate::wire! {
    /// An operator's ban of the key an object holds, on its rule only: until
    /// `until_ms`, for `reason`; with `ban` `None`, a lift.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KeyBanRequest {
        /// The object the call is for.
        pub key: String,
        pub ban: Option<KeyBan>,
    }
}

crate::wire! {
    /// Set the state of the rule the object is a part of.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ControlRequest {
        /// The object the call is for.
        pub key: String,
        pub control: Control,
    }
}

crate::wire! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct KeyBan {
        pub until_ms: u64,
        pub reason: String,
    }
}

crate::wire! {
    /// A renewal or a release: one lease of a key.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LeaseRequest {
        /// The object the call is for.
        pub key: String,
        pub id: String,
        /// For a renewal: how long from now the lease should last (a
        /// release may leave it out).
        pub ttl_ms: u64 => 0,
    }
}

crate::wire! {
    /// The answer to an inspection: what a key object holds, in memory and on disk.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Inspection {
        /// Whether the object's key holds anything (in memory): false once
        /// everything it held has expired or been reset.
        pub held: bool,
        /// Rows in the object's tables (0 when they do not exist).
        pub stored_rows: u64,
        /// Whether the object has any SQLite tables at all; false once the
        /// sweep has freed its storage.
        pub has_storage: bool,
        pub alarm_ms: Option<u64>,
        /// Checks served since this instance started.
        pub checks: u64,
        /// What every key object in this isolate has cost since it started.
        pub meter: Meter,
    }
}

crate::wire! {
    /// Counters of what the key objects cost, for measuring the cost of a
    /// decision (BENCHMARKS.md): on the local runtime every object of the
    /// namespace shares one isolate, so the difference across a run, divided by
    /// the decisions made, is the cost of one.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Meter {
        /// Requests the key objects served (every call, and bodies that were
        /// none).
        pub requests: u64,
        /// Alarm invocations.
        pub alarms: u64,
        /// SQLite rows read and written, as the runtime reports them per
        /// statement (`rowsRead`, `rowsWritten`, which is what Cloudflare bills).
        pub rows_read: u64,
        pub rows_written: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::scan::FromScan;
    use crate::ledger::{Ask, Ledger};
    use crate::limit::gcra::GcraPolicy;
    use crate::limit::{Policy, Retry};

    fn api_policy() -> Vec<(String, Spec)> {
        vec![(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(10, 1000).unwrap()),
        )]
    }

    fn call_round_trip(call: &LimiterCall) -> LimiterCall {
        LimiterCall::from_json(&crate::json::to_string(call)).unwrap()
    }

    fn reply_round_trip(reply: &LimiterReply) -> LimiterReply {
        LimiterReply::from_json(&crate::json::to_string(reply)).unwrap()
    }

    #[test]
    fn a_check_request_round_trips() {
        let policies = api_policy();
        let ban = BanPolicy::new(3, 1000, 60_000, 2, 600_000).unwrap();
        let mut request = CheckRequest::new("k", &policies, 2, Some(&ban));
        request.reserve = Some(ReserveAsk {
            id: "r1".into(),
            ttl_ms: 30_000,
        });
        request.invitations = 16;
        request.block = Some(BlockAskWire {
            holder: "iso-\"1\"".into(),
            rate: 120,
        });
        let report = BlockReport {
            id: 7,
            holder: "iso".into(),
            policy: "api".into(),
            times: vec![1_700_000_000_100, 1_700_000_000_100, 1_700_000_000_350],
            pending: vec![Pending {
                id: "r\"2".into(),
                at_ms: 1_700_000_000_200,
                cost: 1,
                lapses_ms: 1_700_000_060_200,
            }],
            strikes: 2,
        };
        request.reports = vec![WireReport::encode(&report)];
        request.stock = Some(StockAsk {
            part: 0,
            parts: 8,
            whole: 500,
        });
        let LimiterCall::Check(back) = call_round_trip(&LimiterCall::Check(request.clone())) else {
            panic!("a check came back as another call");
        };
        assert_eq!(back, request);
        assert_eq!(back.policies().unwrap(), policies);
        assert_eq!(back.ban().unwrap(), Some(ban));
        assert_eq!(back.cost, 2);
        assert_eq!(back.reports().unwrap(), [report]);
        let mut garbled = back.clone();
        garbled.reports[0].times = "*".into();
        assert!(garbled.reports().is_err(), "times that do not read back");
    }

    #[test]
    fn a_call_is_tagged_and_its_policies_by_algorithm() {
        let call = LimiterCall::Check(CheckRequest::new("k", &api_policy(), 1, None));
        let wire = crate::json::value_of(&call);
        assert_eq!(
            wire,
            serde_json::json!({"check": {
                "key": "k",
                "policies": [{"sliding_log": {"name": "api", "limit": 10, "window_ms": 1000}}],
                "cost": 1,
            }})
        );
        let inspect = crate::json::value_of(&LimiterCall::Inspect);
        assert_eq!(inspect, serde_json::json!("inspect"));
    }

    /// A worker of the version before asks for no invitations (one), and
    /// reads a spread refusal's `retry_after_ms` as the wait it tells;
    /// an object of the version before sends no `spread`, and its retry is
    /// the earliest moment.
    #[test]
    fn invitations_and_a_spread_cross_the_wire_between_versions() {
        let old_call = r#"{"check":{"key":"k","policies":[],"cost":1}}"#;
        let LimiterCall::Check(check) = LimiterCall::from_json(old_call).unwrap() else {
            panic!("a check");
        };
        assert_eq!(check.invitations, 1);
        let mut ledger = Ledger::new();
        let specs = vec![(
            "api".to_string(),
            Spec::SlidingLog(Policy::new(1, 1000).unwrap()),
        )];
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        ledger.check(&ask, 0);
        ledger.check(&ask, 10);
        let (spread, _) = ledger.check_inviting(&ask, None, 3, 20);
        let wire = crate::json::value_of(&LimiterReply::Outcome(spread.clone()));
        // The refusal at 10 was told the place freeing at 1 000; this one
        // its next lap, at 3 000 and a little jitter.
        let told = spread.retry.ms().unwrap();
        assert!((2_980..3_980).contains(&told), "{told}");
        assert_eq!(wire["outcome"]["retry_after_ms"], told);
        assert_eq!(wire["outcome"]["spread"]["earliest_ms"], 980);
        assert_eq!(
            wire["outcome"]["spread"]["next_ms"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            reply_round_trip(&LimiterReply::Outcome(spread.clone())),
            LimiterReply::Outcome(spread)
        );
        let (plain, _) = ledger.check_inviting(&ask, None, 0, 30);
        let old_reply = LimiterReply::from_json(
            r#"{"outcome": {"allowed": false, "policies": [], "retry_after_ms": 970}}"#,
        )
        .unwrap();
        let LimiterReply::Outcome(old) = old_reply else {
            panic!("an outcome");
        };
        assert_eq!(
            (old.earliest(), plain.earliest()),
            (Retry::After(970), Retry::After(970))
        );
    }

    #[test]
    fn every_other_call_round_trips() {
        let key = || KeyRequest { key: "k".into() };
        let peek = PeekRequest::new("k", Some(&api_policy()));
        let lease = LeaseRequest {
            key: "k".into(),
            id: "l1".into(),
            ttl_ms: 500,
        };
        let overridden = Override {
            policies: vec![(
                "cell".into(),
                Spec::Gcra(GcraPolicy::new(4, 2, 1000).unwrap()),
            )],
            until_ms: Some(9_000),
            reason: "launch".into(),
            set_ms: 1_000,
            whole: None,
        };
        let calls = [
            LimiterCall::Settle(SettleRequest {
                key: "k".into(),
                reservation: "r1".into(),
                keep: false,
            }),
            LimiterCall::Renew(lease.clone()),
            LimiterCall::Release(lease),
            LimiterCall::Throttle(ThrottleRequest {
                key: "k".into(),
                max_burst: 4,
                count: 2,
                period_ms: 1000,
                quantity: 1,
            }),
            LimiterCall::Peek(peek),
            LimiterCall::Peek(PeekRequest::new("k", None)),
            LimiterCall::Reset(key()),
            LimiterCall::Override(OverrideRequest {
                key: "k".into(),
                overridden: Some(WireOverride::encode(&overridden)),
            }),
            LimiterCall::Override(OverrideRequest {
                key: "k".into(),
                overridden: None,
            }),
            LimiterCall::Ban(KeyBanRequest {
                key: "k".into(),
                ban: Some(KeyBan {
                    until_ms: 9_000,
                    reason: "abuse".into(),
                }),
            }),
            LimiterCall::Ban(KeyBanRequest {
                key: "k".into(),
                ban: None,
            }),
            LimiterCall::Control(ControlRequest {
                key: "k".into(),
                control: Control {
                    state: crate::control::RuleState::Paused,
                    reason: "stock count".into(),
                    set_ms: 5,
                },
            }),
            LimiterCall::Stock(StockRequest {
                key: "rule:sale:*#1".into(),
                from: 2,
                ask: StockAsk {
                    part: 1,
                    parts: 4,
                    whole: 500,
                },
                told: Told {
                    seq: 3,
                    whole: 500,
                    since: 7,
                    used: true,
                },
            }),
            LimiterCall::Inspect,
        ];
        for call in calls {
            let wire = crate::json::value_of(&call);
            assert_eq!(wire_tag(&wire), Some(call.name()));
            assert_eq!(call_round_trip(&call), call);
        }
        assert_eq!(
            WireOverride::encode(&overridden).decode().unwrap(),
            overridden
        );
    }

    #[test]
    fn replies_round_trip() {
        let mut ledger = Ledger::new();
        let specs = api_policy();
        let lease = LeaseAsk {
            name: "concurrency".into(),
            limit: 2,
            ttl_ms: 1000,
            owner: None,
            reenter: None,
            strict_limit: false,
            new_id: "l1".into(),
        };
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: Some(&lease),
        };
        let (outcome, _) = ledger.check(&ask, 1_000);
        let granted = outcome
            .lease
            .as_ref()
            .and_then(|l| l.lease.clone())
            .unwrap();
        let policy = GcraPolicy::new(4, 2, 1000).unwrap();
        let (throttle, _) = ledger.throttle("cell", policy, 1_000, 1).unwrap();
        let (slots, ban) = ledger.peek(1_000);
        let replies = [
            LimiterReply::Outcome(outcome),
            LimiterReply::Outcome(Outcome::conflicting("api")),
            LimiterReply::Settled(SettleAnswer {
                kept: true,
                repeated: false,
            }),
            LimiterReply::NoSuchReservation,
            LimiterReply::Lease(granted.clone()),
            LimiterReply::NoSuchLease,
            LimiterReply::Throttle(throttle),
            LimiterReply::Key(KeyState {
                slots,
                ban,
                leases: vec![granted],
                overridden: None,
                control: None,
                seconds: vec![Second(1_700_000_000, 3, 4)],
            }),
            LimiterReply::Reset { forgot: true },
            LimiterReply::Override { previous: None },
            LimiterReply::Ban { previous: None },
            LimiterReply::Control { previous: None },
            LimiterReply::Inspection(Inspection {
                held: true,
                stored_rows: 3,
                has_storage: true,
                alarm_ms: Some(2_000),
                checks: 1,
                meter: Meter::default(),
            }),
        ];
        for reply in replies {
            let wire = crate::json::value_of(&reply);
            assert_eq!(wire_tag(&wire), Some(reply.name()));
            assert_eq!(reply_round_trip(&reply), reply);
        }
    }

    /// Every optional part of an outcome and a key's state, set, crosses
    /// the hand-written reader as serde wrote it.
    #[test]
    fn every_optional_field_of_a_reply_round_trips() {
        use crate::control::RuleState;
        use crate::ledger::blocks::BlockGrant;
        use crate::ledger::{LeaseOutcome, PolicyDecision, Spread};
        use crate::limit::lease::LeaseError;
        use crate::limit::Decision;
        let control = Control {
            state: RuleState::Closed,
            reason: "sold \"out\"\n".into(),
            set_ms: 7,
        };
        let ban = BanNotice {
            until_ms: 9,
            reason: "é".into(),
            offences: 2,
            started: true,
        };
        let lease = Lease {
            id: "l1".into(),
            owner: Some("o".into()),
            fence: 3,
            expires_ms: 4,
            holds: 1,
        };
        let outcome = Outcome {
            allowed: false,
            pending: true,
            policies: vec![PolicyDecision {
                name: "api".into(),
                window_ms: 1000,
                decision: Decision {
                    allowed: false,
                    limit: 10,
                    remaining: 0,
                    reset_ms: 5,
                    retry: Retry::Never,
                },
            }],
            ban: Some(ban.clone()),
            lease: Some(LeaseOutcome {
                name: "c".into(),
                limit: 2,
                in_flight: 2,
                lease: Some(lease.clone()),
                refused: true,
                retry_after_ms: 8,
                error: Some(LeaseError::LimitMismatch { held: 3 }),
            }),
            conflict: Some("api".into()),
            halt: Some(control.clone()),
            retry: Retry::After(12),
            spread: Some(Spread {
                earliest: 1,
                next: vec![2, 3],
            }),
            blocks: vec![BlockGrant {
                id: 1 << 52,
                policy: "api".into(),
                admissions: 40,
                granted_ms: 1_700_000_000_000,
                until_ms: 1_700_000_000_999,
            }],
            whole: Some(("api".into(), 30)),
        };
        let overridden = WireOverride {
            policies: vec![WirePolicy::Gcra {
                name: "g".into(),
                max_burst: 1,
                count: 2,
                period_ms: 3,
            }],
            until_ms: None,
            reason: String::new(),
            set_ms: 0,
            whole: Some(("g".into(), 12)),
        };
        let mut no_such_lease = outcome.clone();
        if let Some(lease) = no_such_lease.lease.as_mut() {
            lease.error = Some(LeaseError::NoSuchLease);
            lease.lease = None;
        }
        for reply in [
            LimiterReply::Outcome(outcome),
            LimiterReply::Outcome(no_such_lease),
            LimiterReply::Key(KeyState {
                slots: vec![],
                ban: Some(ban.clone()),
                leases: vec![lease],
                overridden: Some(overridden.clone()),
                control: Some(control.clone()),
                seconds: vec![Second(1, 2, 3)],
            }),
            LimiterReply::Override {
                previous: Some(overridden),
            },
            LimiterReply::Ban {
                previous: Some(ban),
            },
            LimiterReply::Control {
                previous: Some(control),
            },
        ] {
            assert_eq!(reply_round_trip(&reply), reply);
        }
    }

    /// As serde's derived readers did: fields in any order, unknown ones
    /// (of any shape) skipped, whitespace anywhere between tokens.
    #[test]
    fn fields_come_in_any_order_and_unknown_ones_are_skipped() {
        let body = r#" { "settle" : { "keep" : true , "later" : {"x":[1,{"y":null}]},
            "reservation" : "r\u0031", "key" : "k" } } "#;
        assert_eq!(
            LimiterCall::from_json(body),
            Ok(LimiterCall::Settle(SettleRequest {
                key: "k".into(),
                reservation: "r1".into(),
                keep: true,
            }))
        );
        assert_eq!(
            LimiterCall::from_json(r#"{"inspect":null}"#),
            Ok(LimiterCall::Inspect)
        );
        assert_eq!(
            LimiterReply::from_json(r#"{"reset":{"forgot":false,"more":1}}"#),
            Ok(LimiterReply::Reset { forgot: false })
        );
    }

    #[test]
    fn an_unknown_or_malformed_call_does_not_decode() {
        for body in [
            r#"{"drop_everything":{"key":"k"}}"#,
            r#""drop_everything""#,
            r#"{"key":"k","policies":[],"cost":1}"#,
            r#"{"check":{"key":"k","cost":1}}"#,
            r#"{"check":{"key":"k","policies":[{"name":"a","spec":[0,10,1000,0]}],"cost":1}}"#,
            r#"{"renew":{"key":"k"}}"#,
            r#"{"peek":{}}"#,
            r#""peek""#,
            r#"{"peek":{"key":"k"},"reset":{"key":"k"}}"#,
            "[]",
            "",
            r#"{"check":{"key":"k","policies":[],"cost":4294967296}}"#,
            r#"{"check":{"key":"k","policies":[],"cost":1}} trailing"#,
            r#"{"settle":{"key":"k","reservation":"r","keep":1}}"#,
        ] {
            assert!(LimiterCall::from_json(body).is_err(), "{body}");
        }
    }

    #[test]
    fn invalid_values_are_errors_not_panics() {
        let body = r#"{"check":{"key":"k","cost":1,
            "policies":[{"gcra":{"name":"burst","max_burst":1,"count":0,"period_ms":1000}}],
            "ban":{"after":0,"within_ms":1,"for_ms":1,"multiplier":1,"max_ms":1}}}"#;
        let Ok(LimiterCall::Check(request)) = LimiterCall::from_json(body) else {
            panic!("a well-formed check did not decode");
        };
        let Invalid(message) = request.policies().unwrap_err();
        assert!(message.contains("\"burst\""), "{message}");
        assert!(request.ban().is_err());
        let body = r#"{"override":{"key":"k","override":{"policies":
            [{"sliding_log":{"name":"api","limit":10,"window_ms":0}}],
            "until_ms":null,"reason":"","set_ms":0}}}"#;
        let Ok(LimiterCall::Override(request)) = LimiterCall::from_json(body) else {
            panic!("a well-formed override did not decode");
        };
        let Invalid(message) = request.overridden.unwrap().decode().unwrap_err();
        assert!(
            message.contains("\"api\"") && message.contains("window"),
            "{message}"
        );
    }
}
