//! Which objects an admin key route (`{prefix}/admin/keys/{rule}/{key}`)
//! addresses: the rule name and key are resolved against the config, so a
//! name the config does not have is a 404 that says what would be right.

use super::{Config, Global};
use crate::http::problem::{Code, Problem};
use crate::objects::name::{ObjectName, Scope, API_SCOPE};

/// One key object an admin key route reads or resets, named by the
/// rule (or `rule.tier`) it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scope: Scope,
    pub object: ObjectName,
}

/// The objects `GET`/`DELETE /admin/keys/{rule}/{key}` concern: one for a
/// rule, a tier (`rule.tier`), a stacked layer (`rule.layer`) or the
/// decision API; every tier's for the id of a tiered rule (the key alone
/// cannot tell which tier it is under). A global rule's or layer's key is
/// `*`, or `*#i` for part `i` of a split one; anything else is a 404
/// naming the field at fault and what would be right.
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
    if let Some(layer) = tier.and_then(|t| found.also.iter().find(|l| l.id == t)) {
        check_global_key(layer.global.as_ref(), rule, key)?;
        return Ok(vec![Target {
            scope: layer.scope.clone(),
            object: layer.scope.object(key),
        }]);
    }
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
        let layers: Vec<&str> = found.also.iter().map(|l| l.id.as_str()).collect();
        let mut detail = if names.is_empty() {
            format!("rule {id:?} has no tiers: use {id:?}")
        } else {
            format!(
                "rule {id:?} has no tier {:?}; its tiers are {}",
                tier.unwrap_or_default(),
                tiers_of(id, &names)
            )
        };
        if !layers.is_empty() {
            detail.push_str(&format!("; its layers are {}", tiers_of(id, &layers)));
        }
        return not_found("rule", detail);
    }
    check_global_key(found.global.as_ref(), id, key)?;
    Ok(chosen
        .into_iter()
        .map(|t| Target {
            scope: t.scope.clone(),
            object: t.scope.object(key),
        })
        .collect())
}

/// A global quota's key is `*`, or `*#0` to `*#K-1` for a split one;
/// `rule` is the name the route used.
fn check_global_key(global: Option<&Global>, rule: &str, key: &str) -> Result<(), Problem> {
    let Some(global) = global else {
        return Ok(());
    };
    let parts = global.parts.len();
    let valid = if parts > 1 {
        key.strip_prefix("*#")
            .filter(|i| i.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < parts)
    } else {
        key == "*"
    };
    if valid {
        return Ok(());
    }
    let expected = if parts > 1 {
        format!("*#0 to *#{}, one per part of its split quota", parts - 1)
    } else {
        "*".to_string()
    };
    Err(Problem::new(
        Code::NotFound,
        format!("{rule:?} has one quota for every caller: its key is {expected}, not {key:?}"),
    )
    .with("field", "key"))
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
                {"id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m", "also": [
                    {"id": "all", "scope": "global", "split": 4, "limit": 100, "window": "1m"},
                    {"id": "ip", "key": "ip", "limit": 5, "window": "1m"},
                ]},
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
        // A split quota's parts are *#0 to *#3.
        assert_eq!(objects("sale", "*#3").unwrap(), ["rule:sale:*#3"]);
        for bad in ["*#4", "*#-1", "*#", "*", "*#+1", "x"] {
            assert_eq!(
                objects("sale", bad).unwrap_err(),
                (404, "key".into()),
                "{bad}"
            );
        }
        assert_eq!(objects("one", "*").unwrap(), ["rule:one:*"]);
        assert_eq!(objects("one", "*#0").unwrap_err(), (404, "key".into()));
    }

    #[test]
    fn a_stacked_layer_is_looked_up_as_rule_dot_layer() {
        assert_eq!(objects("checkout", "ann").unwrap(), ["rule:checkout:ann"]);
        assert_eq!(
            objects("checkout.all", "*#3").unwrap(),
            ["rule:checkout.all:*#3"]
        );
        assert_eq!(
            objects("checkout.ip", "1.2.3.4").unwrap(),
            ["rule:checkout.ip:1.2.3.4"]
        );
        for bad in ["*#4", "*", "ann"] {
            assert_eq!(
                objects("checkout.all", bad).unwrap_err(),
                (404, "key".into()),
                "{bad}"
            );
        }
        let missing = targets(&config(), "checkout.none", "k").unwrap_err();
        assert!(
            missing.detail().contains("checkout.all, checkout.ip"),
            "{}",
            missing.detail()
        );
    }
}
