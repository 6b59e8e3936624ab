//! Which objects an admin key route (`{prefix}/admin/keys/{rule}/{key}`)
//! addresses: the rule name and key are resolved against the config, so a
//! name the config does not have is a 404 that says what would be right;
//! and a split quota's state as a whole, from its parts'.

use super::Config;
use crate::http::problem::{Code, Problem};
use crate::ledger::SlotReport;
use crate::limit::Spec;
use crate::objects::name::{ObjectName, Scope, API_SCOPE, GLOBAL_KEY};

/// One key object an admin key route reads or resets, named by the
/// rule (or `rule.tier`) it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scope: Scope,
    pub object: ObjectName,
}

/// The objects `GET`/`DELETE /admin/keys/{rule}/{key}` concern: one for a
/// rule, a tier (`rule.tier`) or the decision API; every tier's for the id
/// of a tiered rule (the key alone cannot tell which tier it is under). A
/// global rule's key is `*`, or `*#i` for part `i` of a split one; anything
/// else is a 404 naming the field at fault and what would be right.
pub fn targets(config: &Config, rule: &str, key: &str) -> Result<Vec<Target>, Problem> {
    if rule == API_SCOPE {
        return Ok(vec![Target {
            scope: Scope::Api,
            object: Scope::Api.object(key),
        }]);
    }
    let (id, tier) = match rule.split_once('.') {
        Some((id, tier)) => (id, Some(tier)),
        None => (rule, None),
    };
    let not_found = |field: &str, detail: String| {
        Err(Problem::new(Code::NotFound, detail).with("field", field))
    };
    let Some(found) = config.rules.iter().find(|r| r.id == id) else {
        return not_found(
            "rule",
            format!("no rule {rule:?}: use a rule id, <rule>.<tier> for a tier, or {API_SCOPE} for the decision API"),
        );
    };
    let names: Vec<&str> = found
        .tiers
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let chosen: Vec<_> = found
        .tiers
        .iter()
        .filter(|t| tier.is_none() || t.name.as_deref() == tier)
        .collect();
    if chosen.is_empty() {
        let detail = if names.is_empty() {
            format!("rule {id:?} has no tiers: use {id:?}")
        } else {
            format!(
                "rule {id:?} has no tier {:?}; its tiers are {}",
                tier.unwrap_or_default(),
                tiers_of(id, &names)
            )
        };
        return not_found("rule", detail);
    }
    if let Some(global) = &found.global {
        let parts = global.parts.len();
        if parts > 1 && key == GLOBAL_KEY {
            return Ok((0..parts)
                .filter_map(|i| u32::try_from(i).ok())
                .map(|i| Target {
                    scope: found.tiers[0].scope.clone(),
                    object: found.tiers[0].scope.part(i),
                })
                .collect());
        }
        let valid = if parts > 1 {
            key.strip_prefix("*#")
                .filter(|i| i.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < parts)
        } else {
            key == GLOBAL_KEY
        };
        if !valid {
            let expected = if parts > 1 {
                format!(
                    "* (the whole quota) or *#0 to *#{}, one per part of its split quota",
                    parts - 1
                )
            } else {
                "*".to_string()
            };
            return not_found(
                "key",
                format!("rule {id:?} has one quota for every caller: its key is {expected}, not {key:?}"),
            );
        }
    }
    Ok(chosen
        .into_iter()
        .map(|t| Target {
            scope: t.scope.clone(),
            object: t.scope.object(key),
        })
        .collect())
}

/// The parts of the split quota `rule` names when `key` is `*`: the route
/// then shows (or resets) the whole quota, every part.
pub fn whole_quota<'a>(
    config: &'a Config,
    rule: &str,
    key: &str,
) -> Option<&'a [Vec<(String, Spec)>]> {
    if key != GLOBAL_KEY {
        return None;
    }
    config.rules.iter().find(|r| r.id == rule)?.split_parts()
}

/// A split quota's state as a whole, from each part's (`parts[i]` is part
/// `i`'s share of each policy, `states[i]` what its object reports): per
/// policy, the whole limit, the units used in all parts, what remains of
/// each part's share, and the soonest a unit frees anywhere. A part that
/// holds nothing has its whole share left.
pub fn whole_slots(parts: &[Vec<(String, Spec)>], states: &[Vec<SlotReport>]) -> Vec<SlotReport> {
    let Some(first) = parts.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|(name, spec)| {
            let mut whole = SlotReport {
                policy: name.clone(),
                limit: 0,
                window_ms: spec.window_ms(),
                used: 0,
                remaining: 0,
                reset_ms: 0,
            };
            for (shares, slots) in parts.iter().zip(states) {
                let share = shares
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0, |(_, s)| s.limit());
                let slot = slots.iter().find(|s| s.policy == *name);
                let used = slot.map_or(0, |s| s.used);
                whole.limit += share;
                whole.used += used;
                whole.remaining += share.saturating_sub(used);
                if let Some(reset) = slot.map(|s| s.reset_ms).filter(|&ms| ms > 0) {
                    whole.reset_ms = match whole.reset_ms {
                        0 => reset,
                        soonest => soonest.min(reset),
                    };
                }
            }
            whole
        })
        .collect()
}

fn tiers_of(id: &str, names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("{id}.{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn config() -> Config {
        Config::from_value(json!({
            "origin": "demo",
            "jwt": {},
            "rules": [
                {"id": "api", "tiers": [
                    {"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
                    {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
                ]},
                {"id": "plain", "limit": 1, "window": "1s"},
                {"id": "sale", "scope": "global", "split": 4, "limit": 40, "window": "1s"},
                {"id": "one", "scope": "global", "limit": 40, "window": "1s"},
            ]
        }))
        .unwrap()
    }

    fn objects(rule: &str, key: &str) -> Result<Vec<String>, (u16, String)> {
        targets(&config(), rule, key)
            .map(|t| t.into_iter().map(|t| t.object.to_string()).collect())
            .map_err(|p| {
                let body: Value = serde_json::from_str(&p.to_json()).unwrap();
                (
                    p.status,
                    body["field"].as_str().unwrap_or_default().to_string(),
                )
            })
    }

    #[test]
    fn admin_key_routes_name_their_objects_or_say_what_is_wrong() {
        assert_eq!(objects("plain", "1.2.3.4").unwrap(), ["rule:plain:1.2.3.4"]);
        assert_eq!(objects(API_SCOPE, "u").unwrap(), ["api:u"]);
        assert_eq!(
            objects("api.registered", "u1").unwrap(),
            ["rule:api.registered:u1"]
        );
        // A tiered rule's id: every tier's state.
        assert_eq!(
            objects("api", "1.2.3.4").unwrap(),
            ["rule:api.registered:1.2.3.4", "rule:api.anonymous:1.2.3.4"]
        );
        assert_eq!(objects("api.gold", "k").unwrap_err(), (404, "rule".into()));
        assert_eq!(objects("plain.x", "k").unwrap_err(), (404, "rule".into()));
        assert_eq!(objects("nope", "k").unwrap_err(), (404, "rule".into()));
        // A split quota's parts are *#0 to *#3, and * all of them.
        assert_eq!(objects("sale", "*#3").unwrap(), ["rule:sale:*#3"]);
        assert_eq!(
            objects("sale", "*").unwrap(),
            [
                "rule:sale:*#0",
                "rule:sale:*#1",
                "rule:sale:*#2",
                "rule:sale:*#3"
            ]
        );
        for bad in ["*#4", "*#-1", "*#", "*#+1", "x"] {
            assert_eq!(
                objects("sale", bad).unwrap_err(),
                (404, "key".into()),
                "{bad}"
            );
        }
        assert_eq!(objects("one", "*").unwrap(), ["rule:one:*"]);
        assert_eq!(objects("one", "*#0").unwrap_err(), (404, "key".into()));
        let config = config();
        assert_eq!(whole_quota(&config, "sale", "*").map(<[_]>::len), Some(4));
        assert!(whole_quota(&config, "sale", "*#1").is_none());
        assert!(whole_quota(&config, "one", "*").is_none(), "not split");
        assert!(whole_quota(&config, "plain", "*").is_none());
    }

    #[test]
    fn a_split_quota_adds_up_its_parts() {
        let config = config();
        let parts = whole_quota(&config, "sale", "*").unwrap();
        let slot = |used: u64, reset_ms: u64| SlotReport {
            policy: "sale".into(),
            limit: 10,
            window_ms: 1000,
            used,
            remaining: 10 - used,
            reset_ms,
        };
        // Part 1 holds nothing, so it has no slot at all.
        let states = vec![
            vec![slot(3, 400)],
            vec![],
            vec![slot(10, 900)],
            vec![slot(1, 200)],
        ];
        let whole = whole_slots(parts, &states);
        assert_eq!(
            whole,
            [SlotReport {
                policy: "sale".into(),
                limit: 40,
                window_ms: 1000,
                used: 14,
                remaining: 26,
                reset_ms: 200,
            }]
        );
        let idle = whole_slots(parts, &[vec![], vec![], vec![], vec![]]);
        assert_eq!(
            (idle[0].used, idle[0].remaining, idle[0].reset_ms),
            (0, 40, 0)
        );
    }
}
