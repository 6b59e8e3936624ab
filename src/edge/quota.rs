//! The key view of a split global quota, `{prefix}/admin/keys/{rule}/*`:
//! the whole quota (every part's state, added up) and each part; and its
//! reset, of every part. One part alone is `*#i`, served like any key.
//! On the same reading of every part, a global quota's sale as operators
//! watch it, `{prefix}/admin/rules/{rule}`: totals, the rate per second
//! and the time to sell out ([`sale`]).

use crate::json;
use worker::{console_error, Headers, Response, Result};

use super::client::Objects;
use super::clock::now_ms;
use super::{isolate, respond};
use crate::config::lookup::{whole_slots, GlobalQuota, Target};
use crate::control::{agree, strictest, Control, RuleState};
use crate::ledger::{BanNotice, Override, SlotReport};
use crate::limit::lease::Lease;
use crate::limit::Spec;
use crate::objects::name::{ObjectName, GLOBAL_KEY};
use crate::objects::protocol::KeyState;
use crate::sale::{view, Second, SPAN_S};

/// `GET /admin/keys/{rule}/*` of a split quota: `slots` for the whole
/// quota, `parts` for each part (`*#0` …), as their objects report them.
pub async fn inspect(
    objects: &Objects,
    rule: &str,
    parts: &[Vec<(String, Spec)>],
    targets: &[Target],
) -> Result<Response> {
    let mut states = Vec::with_capacity(targets.len());
    let mut shares = Vec::with_capacity(targets.len());
    let mut views = Vec::with_capacity(targets.len());
    for (target, share) in targets.iter().zip(parts) {
        let state = objects
            .peek(target.object.as_str(), target.policies.as_deref())
            .await?;
        states.push(state.slots.clone());
        shares.push(in_force_or(share, in_force(&state, now_ms()).as_ref()));
        views.push(Part {
            rule,
            key: part_key(target),
            object: target.object.as_str(),
            slots: state.slots,
            ban: state.ban,
            leases: state.leases,
        });
    }
    let body = json!({
        "rule": rule, "key": GLOBAL_KEY, "slots": whole_slots(&shares, &states),
        "ban": null, "leases": [], "manual_ban": null, "override": null, "parts": views,
    });
    respond::json(&body, Headers::new())
}

/// One part of a split quota, as its object reports it.
struct Part<'a> {
    rule: &'a str,
    key: &'a str,
    object: &'a str,
    slots: Vec<SlotReport>,
    ban: Option<BanNotice>,
    leases: Vec<Lease>,
}

crate::write_json!(Part<'_> { rule, key, object, slots, ban, leases });

/// `DELETE /admin/keys/{rule}/*` of a split quota: every part reset.
pub async fn reset(objects: &Objects, rule: &str, targets: &[Target]) -> Result<Response> {
    let mut views = Vec::with_capacity(targets.len());
    for target in targets {
        let reset = objects.reset(target.object.as_str()).await?;
        isolate::forget_refusal(&target.object);
        views.push(json!({"key": part_key(target), "object": target.object, "reset": reset}));
    }
    respond::json(
        &json!({"rule": rule, "key": GLOBAL_KEY, "parts": views}),
        Headers::new(),
    )
}

/// Every part's state, in order, `None` for a part that did not answer
/// (logged): one reading serves the sale, the state and the override.
pub async fn peek_parts(objects: &Objects, targets: &[Target]) -> Vec<Option<KeyState>> {
    let mut states = Vec::with_capacity(targets.len());
    for target in targets {
        let state = objects.peek(target.object.as_str(), None).await;
        if let Err(e) = &state {
            console_error!("sluice: {} did not answer: {e}", target.object.as_str());
        }
        states.push(state.ok());
    }
    states
}

/// A global quota's sale as operators watch it.
struct SaleView<'a> {
    rule: &'a str,
    scope: &'static str,
    split: usize,
    now_ms: u64,
    state: Shown<'a>,
    /// Whether every part that answered holds the same state.
    agree: bool,
    /// An operator's override of the whole quota: each policy's limit
    /// added up over the parts that hold it.
    overridden: Option<WholeOverride<'a>>,
    /// Per policy, the whole quota's figures and the time to sell out.
    quota: Vec<QuotaFigures>,
    /// Over the last [`SPAN_S`] seconds, in every part that answered.
    admitted: u64,
    refused: u64,
    span_s: u64,
    rate: Rate,
    /// The soonest a policy sells out at the current rate.
    sell_out_ms: Option<u64>,
    per_second: Vec<Second>,
    parts: Vec<SalePart<'a>>,
    unreachable: Vec<&'a str>,
}

crate::write_json!(SaleView<'_> {
    rule,
    scope,
    split,
    now_ms,
    state,
    agree,
    overridden as "override",
    quota,
    admitted,
    refused,
    span_s,
    rate,
    sell_out_ms,
    per_second,
    parts,
    unreachable,
});

struct WholeOverride<'a> {
    policies: Vec<Limit<'a>>,
    reason: &'a str,
    set_ms: u64,
    /// How many parts hold it.
    parts: usize,
}

crate::write_json!(WholeOverride<'_> { policies, reason, set_ms, parts });

/// A policy's name, limit and window.
pub struct Limit<'a> {
    pub name: &'a str,
    pub limit: u64,
    pub window_ms: u64,
}

crate::write_json!(Limit<'_> { name, limit, window_ms });

/// Policies as operators read them.
pub fn limits(policies: &[(String, Spec)]) -> Vec<Limit<'_>> {
    policies
        .iter()
        .map(|(name, spec)| Limit {
            name,
            limit: spec.limit(),
            window_ms: spec.window_ms(),
        })
        .collect()
}

/// A policy of the whole quota: its parts' figures added up
/// ([`whole_slots`]), and when it sells out at the current rate.
struct QuotaFigures {
    policy: String,
    limit: u64,
    window_ms: u64,
    used: u64,
    remaining: u64,
    reset_ms: u64,
    sell_out_ms: Option<u64>,
}

crate::write_json!(QuotaFigures {
    policy,
    limit,
    window_ms,
    used,
    remaining,
    reset_ms,
    sell_out_ms
});

/// Admissions in the last `over_s` complete seconds.
struct Rate {
    admitted: u64,
    over_s: u64,
}

crate::write_json!(Rate { admitted, over_s });

struct SalePart<'a> {
    key: &'a str,
    object: &'a ObjectName,
    state: Shown<'a>,
    /// Its share of an override of the whole quota.
    overridden: Option<Vec<Limit<'a>>>,
    slots: &'a [SlotReport],
    admitted: u64,
    refused: u64,
}

crate::write_json!(SalePart<'_> { key, object, state, overridden as "override", slots, admitted, refused });

/// One part that answered: its object, what it holds, and its override.
struct Answered<'a> {
    target: &'a Target,
    state: KeyState,
    overridden: Option<Override>,
}

/// A global quota's sale from every part's state (`parts[i]` is part
/// `i`'s share as configured, `targets[i]` its object, `read[i]` what it
/// answered): the state, an override, the whole quota's figures (what is
/// used and left, added up), admissions and refusals per second over the
/// last five minutes and their totals, the rate of the last seconds and
/// the time to sell out at it; and each part's own. A part that does not
/// answer is named in `unreachable` and the figures are those of the
/// parts that did: the view never fails as a whole.
pub fn sale(
    rule: &str,
    parts: &[Vec<(String, Spec)>],
    targets: &[Target],
    read: Vec<Option<KeyState>>,
) -> Result<Response> {
    let now = now_ms();
    let mut shares = Vec::with_capacity(targets.len());
    let mut answered = Vec::with_capacity(targets.len());
    let mut unreachable = Vec::new();
    for ((target, share), state) in targets.iter().zip(parts).zip(read) {
        let Some(state) = state else {
            unreachable.push(part_key(target));
            continue;
        };
        let overridden = in_force(&state, now);
        shares.push(in_force_or(share, overridden.as_ref()));
        answered.push(Answered {
            target,
            state,
            overridden,
        });
    }
    let seconds: Vec<Vec<Second>> = answered.iter().map(|a| a.state.seconds.clone()).collect();
    let per_second = view::merge(&seconds, now);
    let (admitted, refused) = view::totals(&per_second);
    let recent = view::recent_admissions(&per_second, now);
    let slots: Vec<Vec<SlotReport>> = answered.iter().map(|a| a.state.slots.clone()).collect();
    let quota: Vec<QuotaFigures> = whole_slots(&shares, &slots)
        .into_iter()
        .map(|whole| QuotaFigures {
            sell_out_ms: view::sell_out_ms(whole.limit, whole.window_ms, whole.remaining, recent),
            policy: whole.policy,
            limit: whole.limit,
            window_ms: whole.window_ms,
            used: whole.used,
            remaining: whole.remaining,
            reset_ms: whole.reset_ms,
        })
        .collect();
    let controls: Vec<Option<&Control>> =
        answered.iter().map(|a| a.state.control.as_ref()).collect();
    let holding: Vec<&Override> = answered
        .iter()
        .filter_map(|a| a.overridden.as_ref())
        .collect();
    let overridden = holding.first().map(|first| WholeOverride {
        policies: first
            .policies
            .iter()
            .map(|(name, spec)| Limit {
                name,
                limit: holding
                    .iter()
                    .flat_map(|o| o.policies.iter().filter(|(n, _)| n == name))
                    .map(|(_, s)| s.limit())
                    .sum(),
                window_ms: spec.window_ms(),
            })
            .collect(),
        reason: &first.reason,
        set_ms: first.set_ms,
        parts: holding.len(),
    });
    let body = SaleView {
        rule,
        scope: "global",
        split: targets.len(),
        now_ms: now,
        state: Shown::of(strictest(controls.iter().copied().flatten())),
        agree: agree(&controls),
        overridden,
        sell_out_ms: quota.iter().filter_map(|q| q.sell_out_ms).min(),
        quota,
        admitted,
        refused,
        span_s: SPAN_S,
        rate: Rate {
            admitted: recent,
            over_s: view::RATE_S,
        },
        per_second,
        parts: answered
            .iter()
            .map(|a| {
                let (admitted, refused) = view::totals(&a.state.seconds);
                SalePart {
                    key: part_key(a.target),
                    object: &a.target.object,
                    state: Shown::of(a.state.control.as_ref()),
                    overridden: a.overridden.as_ref().map(|o| limits(&o.policies)),
                    slots: &a.state.slots,
                    admitted,
                    refused,
                }
            })
            .collect(),
        unreachable,
    };
    respond::json(&body, Headers::new())
}

/// A global quota's whole, each policy's figures added up over the parts
/// that answered (the metrics' gauges).
pub async fn whole(objects: &Objects, quota: &GlobalQuota<'_>) -> Vec<SlotReport> {
    let now = now_ms();
    let read = peek_parts(objects, &quota.targets).await;
    let (mut shares, mut slots) = (Vec::new(), Vec::new());
    for (share, state) in quota
        .global
        .parts
        .iter()
        .zip(read)
        .filter_map(|(p, s)| Some((p, s?)))
    {
        shares.push(in_force_or(share, in_force(&state, now).as_ref()));
        slots.push(state.slots);
    }
    whole_slots(&shares, &slots)
}

/// A part's override of the whole quota, while it is in force.
fn in_force(state: &KeyState, now: u64) -> Option<Override> {
    state
        .overridden
        .as_ref()
        .filter(|o| o.until_ms.is_none_or(|until| now < until))
        .and_then(|o| o.decode().ok())
}

/// A part's policies in force: its share of an override of the whole
/// quota, or the share the config gives it.
fn in_force_or(share: &[(String, Spec)], overridden: Option<&Override>) -> Vec<(String, Spec)> {
    overridden.map_or(share, |o| &o.policies).to_vec()
}

/// A state as the admin API shows it: `open` when there is none.
pub struct Shown<'a> {
    pub state: RuleState,
    pub reason: &'a str,
    pub set_ms: Option<u64>,
}

crate::write_json!(Shown<'_> { state, reason, set_ms });

impl<'a> Shown<'a> {
    pub fn of(control: Option<&'a Control>) -> Shown<'a> {
        match control {
            Some(c) => Shown {
                state: c.state,
                reason: &c.reason,
                set_ms: Some(c.set_ms),
            },
            None => Shown {
                state: RuleState::Open,
                reason: "",
                set_ms: None,
            },
        }
    }
}

/// A part's key, `*#i`, as its object is named.
pub fn part_key(target: &Target) -> &str {
    let name = target.object.as_str();
    name.rfind(':').map_or(name, |colon| &name[colon + 1..])
}
