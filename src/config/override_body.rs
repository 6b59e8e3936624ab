//! An operator's override of one key's limits, as the admin API takes it
//! and validated like the config.

use super::policies::{validate_limits, RawLimits, RawPolicy};
use super::tier::Tier;
use super::{error, ConfigError};
use crate::bounds::{reason_fits, DAY_MS, MAX_OVERRIDE_MS, REASON_RULE};
use crate::from_tree;
use crate::input::duration::parse_ms;
use crate::limit::Spec;

from_tree! {
    /// `PUT {prefix}/admin/keys/{rule}/{key}/override` as sent: the limits,
    /// or `"unlimited": true`, with `for` and `reason`. The admin API reads it
    /// like any API body; [`parse_override`] checks it against the tier. A
    /// global quota's override (`PUT {prefix}/admin/rules/{rule}/override`)
    /// is read as the same body and takes `limit`, `window` and `reason` only
    /// (`super::quota_override`).
    pub struct OverrideRequest {
        pub(super) limit: Option<u64> = optional "limit",
        pub(super) window: Option<String> = optional "window",
        pub(super) algorithm: Option<String> = optional "algorithm",
        pub(super) burst: Option<u64> = optional "burst",
        pub(super) policies: Option<Vec<RawPolicy>> = optional "policies",
        pub(super) unlimited: Option<bool> = optional "unlimited",
        pub(super) lasts: Option<String> = optional "for",
        pub(super) reason: Option<String> = optional "reason",
    }
}

/// An override as the admin API takes it, validated like the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideBody {
    /// Named as the tier names its policies; empty for unlimited.
    pub policies: Vec<(String, Spec)>,
    pub for_ms: Option<u64>,
    pub reason: String,
}

/// Parses an override for `tier`. An override may change the limit (and a
/// GCRA burst) of the tier's policies it names, and add policies of its
/// own under other names; the policies it leaves out keep the config's
/// limits ([`crate::ledger::Override::applied_to`]). It may not change a
/// policy's window or algorithm: admissions logged under one window would
/// be re-read through another, and a log read through a shorter window
/// forgets what a longer one counts again. The shorthand (`limit`,
/// `window`) is the tier's one policy, so for a tier of several it is
/// refused: it could only add a policy beside them, not change one.
/// Errors name the body's field.
pub fn parse_override(raw: OverrideRequest, tier: &Tier) -> Result<OverrideBody, ConfigError> {
    let reason = raw.reason.unwrap_or_default();
    if !reason_fits(&reason) {
        return Err(error("reason", REASON_RULE));
    }
    let for_ms = raw
        .lasts
        .map(|text| {
            let ms = parse_ms(&text).map_err(|m| error("for", m))?;
            if (1..=MAX_OVERRIDE_MS).contains(&ms) {
                Ok(ms)
            } else {
                Err(error(
                    "for",
                    format!("for must be from 1 ms to {} days", MAX_OVERRIDE_MS / DAY_MS),
                ))
            }
        })
        .transpose()?;
    let limits = RawLimits {
        limit: raw.limit,
        window: raw.window,
        algorithm: raw.algorithm,
        burst: raw.burst,
        policies: raw.policies,
        needs_refund: None,
    };
    let given = limits.limit.is_some() || limits.window.is_some() || limits.policies.is_some();
    let policies = match raw.unlimited {
        Some(true) if given => {
            return Err(error("unlimited", "give unlimited or limits, not both"));
        }
        Some(true) => Vec::new(),
        Some(false) | None => {
            let shorthand = limits.limit.is_some() || limits.window.is_some();
            let mut policies = validate_limits(limits, tier.scope.id(), "")
                .map_err(|e| error(e.field.trim_start_matches('.'), e.message))?;
            match (&tier.policies[..], &mut policies[..]) {
                ([(name, _)], [(given, _)]) if shorthand => given.clone_from(name),
                ([_, _, ..], _) if shorthand => {
                    let names: Vec<&str> = tier.policies.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(error(
                        "limit",
                        format!("{} has several policies ({}): name the ones to change in policies, e.g. [{{\"name\": \"day\", \"limit\": 5000, \"window\": \"1d\"}}]", tier.scope.id(), names.join(", ")),
                    ));
                }
                _ => {}
            }
            check_same_shape(&policies, &tier.policies)?;
            policies
        }
    };
    Ok(OverrideBody {
        policies,
        for_ms,
        reason,
    })
}

/// Refuses a policy whose name the tier uses with another window or
/// algorithm; see [`parse_override`].
fn check_same_shape(
    policies: &[(String, Spec)],
    configured: &[(String, Spec)],
) -> Result<(), ConfigError> {
    let several = policies.len() > 1;
    for (i, (name, spec)) in policies.iter().enumerate() {
        let Some((_, held)) = configured.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let field = |f: &str| {
            if several {
                format!("policies[{i}].{f}")
            } else {
                f.to_string()
            }
        };
        if std::mem::discriminant(held) != std::mem::discriminant(spec) {
            return Err(error(
                &field("algorithm"),
                format!("policy {name:?} keeps its algorithm; an override changes its limit, or adds a policy under another name"),
            ));
        }
        if held.written().2 != spec.written().2 {
            return Err(error(
                &field("window"),
                format!("policy {name:?} keeps its window of {} ms; an override changes its limit, or adds a policy under another name", held.written().2),
            ));
        }
    }
    Ok(())
}
