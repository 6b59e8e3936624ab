//! One key's limits in a decision-API body: as sent (`KeyLimits`, the
//! one-policy form or `policies`), validated (`LimitRequest`) and answered
//! (`limit_answer`). A one-key call (`limit.rs`) and each of `layers`
//! (`layers.rs`) are read and answered by these.

use super::{check_policy_name, wait_ms, DEFAULT_POLICY, THROTTLE_SLOT};
use crate::bounds::MAX_POLICIES;
use crate::from_tree;
use crate::http::problem::Problem;
use crate::json::{Json, Object};
use crate::ledger::Outcome;
use crate::limit::{Policy, Spec};
use crate::{json, json_object};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRequest {
    pub key: String,
    pub policies: Vec<(String, Spec)>,
    pub cost: u32,
    /// Whether the request used the `policies` form, which is answered
    /// per policy.
    pub named: bool,
    /// When an admission is a reservation, to keep or refund with
    /// `POST {prefix}/v1/limit/settle`: how long it waits for its settle
    /// before it lapses into a kept admission, in ms.
    pub reserve: Option<u64>,
    /// Whether a hot key may be decided in the isolate from an admission
    /// block (`"local"`, on unless `false`; never for a reservation, whose
    /// settle may reach another isolate; every key of a call with
    /// `layers`, those that reserve held pending in the block).
    pub local: bool,
}

/// One key's limits as sent, in a body or in one of its `layers`: the
/// one-policy form (`limit`, `window_ms`, `algorithm`) or the named form
/// (`policies`).
pub(super) struct KeyLimits {
    pub(super) limit: Option<u64>,
    pub(super) window_ms: Option<u64>,
    pub(super) algorithm: Option<String>,
    pub(super) policies: Option<Vec<RawPolicy>>,
}

from_tree! {
    /// One of `policies`.
    pub(super) struct RawPolicy {
        name: String = required "name",
        limit: u64 = required "limit",
        window_ms: u64 = required "window_ms",
        algorithm: Option<String> = optional "algorithm",
    }
}

/// The policies one key's `limits` give, their fields named below
/// `prefix` (`""`, or `"layers[1]."`).
pub(super) fn key_policies(
    limits: KeyLimits,
    prefix: &str,
) -> Result<Vec<(String, Spec)>, Problem> {
    match limits.policies {
        Some(policies) => {
            let flat = [
                ("limit", limits.limit.is_some()),
                ("window_ms", limits.window_ms.is_some()),
                ("algorithm", limits.algorithm.is_some()),
            ];
            if let Some((field, _)) = flat.iter().find(|(_, given)| *given) {
                return Err(Problem::invalid(
                    &format!("{prefix}{field}"),
                    format!("give either \"policies\" or \"limit\" and \"window_ms\", not both (\"{field}\" was given; set algorithm per policy)"),
                ));
            }
            named_policies(policies, prefix)
        }
        None => {
            let limit = limits
                .limit
                .ok_or_else(|| Problem::invalid(&format!("{prefix}limit"), "limit is required"))?;
            let window_ms = limits.window_ms.ok_or_else(|| {
                Problem::invalid(&format!("{prefix}window_ms"), "window_ms is required")
            })?;
            let spec = policy_spec(limit, window_ms, limits.algorithm.as_deref(), prefix)?;
            Ok(vec![(DEFAULT_POLICY.to_string(), spec)])
        }
    }
}

/// `cost` (1 unless given), which no limit of `policies` may be below.
pub(super) fn checked_cost<'p>(
    cost: Option<u64>,
    policies: impl IntoIterator<Item = &'p (String, Spec)>,
) -> Result<u32, Problem> {
    let smallest = policies
        .into_iter()
        .map(|(_, p)| p.limit())
        .min()
        .unwrap_or(0);
    match cost {
        None => Ok(1),
        Some(cost) => u32::try_from(cost)
            .ok()
            .filter(|_| cost <= smallest)
            .ok_or_else(|| {
                Problem::invalid(
                    "cost",
                    format!("cost {cost} exceeds the limit {smallest}: such a request could never be admitted"),
                )
            }),
    }
}

fn named_policies(raw: Vec<RawPolicy>, prefix: &str) -> Result<Vec<(String, Spec)>, Problem> {
    if raw.is_empty() || raw.len() > MAX_POLICIES {
        return Err(Problem::invalid(
            &format!("{prefix}policies"),
            format!(
                "policies must hold 1 to {MAX_POLICIES} policies, got {}",
                raw.len()
            ),
        ));
    }
    let mut policies: Vec<(String, Spec)> = Vec::with_capacity(raw.len());
    for (i, policy) in raw.into_iter().enumerate() {
        let prefix = format!("{prefix}policies[{i}].");
        let name_field = format!("{prefix}name");
        check_policy_name(&policy.name).map_err(|e| Problem::invalid(&name_field, e))?;
        if policy.name == THROTTLE_SLOT {
            return Err(Problem::invalid(
                &name_field,
                format!("{THROTTLE_SLOT:?} is reserved for {{prefix}}/v1/throttle's state; choose another name"),
            ));
        }
        if policies.iter().any(|(n, _)| *n == policy.name) {
            return Err(Problem::invalid(
                &name_field,
                format!("policy name {:?} is used twice", policy.name),
            ));
        }
        let spec = policy_spec(
            policy.limit,
            policy.window_ms,
            policy.algorithm.as_deref(),
            &prefix,
        )?;
        policies.push((policy.name, spec));
    }
    Ok(policies)
}

/// `limit`, `window_ms` and `algorithm` (sliding_log by default; GCRA has
/// its own endpoint, since its parameters differ); `prefix` is where they
/// are in the body.
fn policy_spec(
    limit: u64,
    window_ms: u64,
    algorithm: Option<&str>,
    prefix: &str,
) -> Result<Spec, Problem> {
    let policy = Policy::new(limit, window_ms)
        .map_err(|e| Problem::invalid(&format!("{prefix}{}", e.field()), e.to_string()))?;
    // Any policy here may be reserved, so it must give units back: GCRA,
    // which cannot, has its own endpoint, whose parameters differ.
    match Spec::named(algorithm, policy, None) {
        Ok(spec) if spec.refunds() => Ok(spec),
        _ => Err(Problem::invalid(
            &format!("{prefix}algorithm"),
            format!("algorithm must be \"sliding_log\" or \"fixed_window\" (GCRA is POST /v1/throttle), got {:?}", algorithm.unwrap_or_default()),
        )),
    }
}

/// One key's answer: flat for the one-policy form, per policy otherwise.
pub(super) fn limit_answer(request: &LimitRequest, outcome: &Outcome) -> Object {
    if !request.named {
        if let Some(only) = outcome.policies.first() {
            let d = &only.decision;
            return json_object!({
                "allowed": outcome.allowed,
                "limit": d.limit,
                "remaining": d.remaining,
                "reset_ms": d.reset_ms,
                "retry_after_ms": wait_ms(d.retry),
            });
        }
    }
    let violated = outcome.violated_names();
    let policies: Vec<Json> = outcome
        .policies
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "allowed": p.decision.allowed,
                "limit": p.decision.limit,
                "window_ms": p.window_ms,
                "remaining": p.decision.remaining,
                "reset_ms": p.decision.reset_ms,
                "retry_after_ms": wait_ms(p.decision.retry),
            })
        })
        .collect();
    json_object!({
        "allowed": outcome.allowed,
        "violated": violated,
        "retry_after_ms": wait_ms(outcome.retry),
        "policies": policies,
    })
}
