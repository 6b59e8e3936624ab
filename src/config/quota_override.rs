//! An operator's override of a global quota's whole limit, as the admin API
//! takes it (`PUT {prefix}/admin/rules/{rule}/override`), validated against
//! the rule and divided over its parts exactly as the config divides it.

use super::global::divide;
use super::lookup::GlobalQuota;
use super::override_body::OverrideRequest;
use super::{error, ConfigError};
use crate::bounds::{reason_fits, REASON_RULE};
use crate::input::duration::parse_ms;
use crate::ledger::Override;
use crate::limit::{Spec, MAX_LIMIT};

/// A validated override of a global quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaOverride {
    /// The policy whose limit changes, and its new whole limit.
    pub policy: String,
    pub limit: u64,
    pub reason: String,
    /// Each part's policies: the rule's, with that one's limit changed,
    /// divided as the config divides them.
    pub parts: Vec<Vec<(String, Spec)>>,
}

impl QuotaOverride {
    /// Part `index`'s override, set at `now_ms`, until lifted.
    pub fn part(&self, index: usize, now_ms: u64) -> Option<Override> {
        Some(Override {
            policies: self.parts.get(index)?.clone(),
            until_ms: None,
            reason: self.reason.clone(),
            set_ms: now_ms,
            whole: Some((self.policy.clone(), self.limit)),
        })
    }
}

/// Checks an override of a global quota (a rule's or a layer's), read as a key override's
/// body: the whole quota's new `limit`, the `window` of the policy it is
/// for (needed only when the rule has several), and a `reason`. Errors
/// name the body's field. The window and algorithm stay the rule's
/// (admissions logged under one window would be re-read through another),
/// so `window` only says which policy's limit changes; and it holds until
/// it is lifted.
pub fn parse_quota_override(
    raw: OverrideRequest,
    quota: &GlobalQuota<'_>,
) -> Result<QuotaOverride, ConfigError> {
    let global = quota.global;
    let others = [
        ("algorithm", raw.algorithm.is_some()),
        ("burst", raw.burst.is_some()),
        ("policies", raw.policies.is_some()),
        ("unlimited", raw.unlimited.is_some()),
        ("for", raw.lasts.is_some()),
    ];
    if let Some((field, _)) = others.into_iter().find(|(_, given)| *given) {
        return Err(error(
            field,
            format!("a global quota's override takes limit, window and reason, not {field}: it holds until lifted"),
        ));
    }
    let reason = raw.reason.unwrap_or_default();
    if !reason_fits(&reason) {
        return Err(error("reason", REASON_RULE));
    }
    // A global quota has 1 to `MAX_PARTS` parts.
    let parts = u32::try_from(global.parts.len()).unwrap_or(u32::MAX).max(1);
    let limit = raw
        .limit
        .ok_or_else(|| error("limit", "limit is required: the whole quota's new limit"))?;
    if !(u64::from(parts)..=MAX_LIMIT).contains(&limit) {
        return Err(error(
            "limit",
            format!(
                "limit must be from {parts} (a unit for each of the {parts} parts) to {MAX_LIMIT}, got {limit}"
            ),
        ));
    }
    let policies = quota.policies;
    let index = chosen(policies, raw.window.as_deref())?;
    let mut whole = policies.to_vec();
    let (name, spec) = &mut whole[index];
    *spec = spec
        .with_limit(limit)
        .ok_or_else(|| {
            error(
                "limit",
                format!("policy {name:?} is gcra: an override of a global quota changes a sliding_log or fixed_window limit"),
            )
        })?
        .map_err(|e| error("limit", e.to_string()))?;
    let policy = name.clone();
    let parts = divide(&whole, parts).map_err(|name| {
        error(
            "limit",
            format!("policy {name:?} cannot be divided over the parts"),
        )
    })?;
    Ok(QuotaOverride {
        policy,
        limit,
        reason,
        parts,
    })
}

/// Which of `policies` an override is for: the one whose window `window`
/// names, or the only one.
fn chosen(policies: &[(String, Spec)], window: Option<&str>) -> Result<usize, ConfigError> {
    let windows = || {
        policies
            .iter()
            .map(|(name, spec)| format!("{name}: {} ms", spec.window_ms()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(window) = window else {
        return match policies.len() {
            1 => Ok(0),
            _ => Err(error(
                "window",
                format!("the rule has several policies ({}): give the window of the one whose limit changes", windows()),
            )),
        };
    };
    let window_ms = parse_ms(window).map_err(|m| error("window", m))?;
    let mut matching = policies
        .iter()
        .enumerate()
        .filter(|(_, (_, spec))| spec.window_ms() == window_ms)
        .map(|(i, _)| i);
    match (matching.next(), matching.next()) {
        (Some(i), None) => Ok(i),
        (Some(_), Some(_)) => Err(error(
            "window",
            format!("several of the rule's policies have a window of {window_ms} ms"),
        )),
        (None, _) => Err(error(
            "window",
            format!(
                "the window stays the rule's ({}); an override changes the limit",
                windows()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::lookup::global_quota;
    use crate::config::Config;
    use crate::limit::split::share;

    fn config() -> Config {
        Config::from_value(json!({
            "origin": "demo",
            "rules": [
                {"id": "sale", "match": {"path": "/sale"}, "scope": "global", "split": 4, "limit": 10, "window": "1m"},
                {"id": "two", "match": {"path": "/two"}, "scope": "global", "split": 2, "policies": [
                    {"name": "second", "limit": 10, "window": "1s"},
                    {"name": "day", "limit": 1000, "window": "1d", "algorithm": "fixed_window"},
                ]},
                {"id": "api", "limit": 10, "window": "1m"},
            ]
        }))
        .unwrap()
    }

    fn parse(rule: usize, body: Value) -> Result<QuotaOverride, ConfigError> {
        let raw: OverrideRequest = crate::input::tree::from_value(body).unwrap();
        let config = config();
        let quota = global_quota(&config, &config.rules[rule].id)
            .map_err(|problem| error("rule", problem.to_json()))?;
        parse_quota_override(raw, &quota)
    }

    #[test]
    fn the_whole_limit_is_divided_over_the_parts_as_the_config_divides_it() {
        let o = parse(0, json!({"limit": 14, "reason": "more stock"})).unwrap();
        assert_eq!((o.policy.as_str(), o.limit), ("sale", 14));
        let shares: Vec<u64> = o.parts.iter().map(|p| p[0].1.limit()).collect();
        assert_eq!(shares, (0..4).map(|i| share(14, 4, i)).collect::<Vec<_>>());
        assert_eq!(shares.iter().sum::<u64>(), 14);
        assert!(o.parts.iter().all(|p| p[0].1.window_ms() == 60_000));
        let part = o.part(3, 77).unwrap();
        assert_eq!(
            (part.until_ms, part.set_ms, part.reason.as_str()),
            (None, 77, "more stock")
        );
        assert!(o.part(4, 77).is_none());
        // The window may be named, as the rule has it.
        assert_eq!(
            parse(0, json!({"limit": 4, "window": "60s"}))
                .unwrap()
                .limit,
            4
        );
    }

    #[test]
    fn with_several_policies_the_window_says_which_one_changes() {
        let o = parse(1, json!({"limit": 500, "window": "1d"})).unwrap();
        assert_eq!(o.policy, "two.day");
        for part in &o.parts {
            assert_eq!(part[0].1.limit(), 5, "the other policy keeps its share");
            assert_eq!(part[1].1.limit(), 250);
            assert_eq!(part[1].1.algorithm(), "fixed_window");
        }
    }

    #[test]
    fn bad_overrides_name_their_field() {
        let field = |rule, body| parse(rule, body).unwrap_err().field;
        assert_eq!(field(0, json!({})), "limit");
        assert_eq!(field(0, json!({"limit": 3})), "limit", "a unit per part");
        assert_eq!(field(0, json!({"limit": 0})), "limit");
        assert_eq!(field(0, json!({"limit": 1_000_001})), "limit");
        assert_eq!(field(0, json!({"limit": 8, "window": "1s"})), "window");
        assert_eq!(field(0, json!({"limit": 8, "window": "soon"})), "window");
        assert_eq!(field(1, json!({"limit": 8})), "window");
        assert_eq!(
            field(0, json!({"limit": 8, "reason": "x".repeat(201)})),
            "reason"
        );
        assert_eq!(field(0, json!({"limit": 8, "reason": "a\nb"})), "reason");
        assert_eq!(field(2, json!({"limit": 8})), "rule");
        for other in ["algorithm", "burst", "policies", "unlimited", "for"] {
            let value = match other {
                "burst" => json!(2),
                "unlimited" => json!(true),
                "policies" => json!([]),
                _ => json!("1m"),
            };
            assert_eq!(field(0, json!({"limit": 8, other: value})), other);
        }
    }
}
