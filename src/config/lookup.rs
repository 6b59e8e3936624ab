//! Which objects an admin key route (`{prefix}/admin/keys/{rule}/{key}`)
//! addresses: the rule name and key are resolved against the config, so a
//! name the config does not have is a 404 that says what would be right;
//! and a split quota's state as a whole, from its parts'.

use super::{Config, Global, Layer, Rule, Tier};
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
    /// The policies the config asks this object to enforce (a split
    /// quota's part holds its share), so that its state is read under the
    /// limits in force rather than those it last stored; `None` for a
    /// decision-API key, whose callers send their policies on every call.
    pub policies: Option<Vec<(String, Spec)>>,
}

/// The objects `GET`/`DELETE /admin/keys/{rule}/{key}` concern: one for a
/// rule, a tier (`rule.tier`), a stacked layer (`rule.layer`) or the
/// decision API; every tier's for the id of a tiered rule (the key alone
/// cannot tell which tier it is under). A global rule's or layer's key is
/// `*` (for a split one, every part: the whole quota), or `*#i` for part
/// `i` of a split one; anything else is a 404 naming the field at fault
/// and what would be right.
pub fn targets(config: &Config, rule: &str, key: &str) -> Result<Vec<Target>, Problem> {
    if rule == API_SCOPE {
        return Ok(vec![Target {
            scope: Scope::Api,
            object: Scope::Api.object(key),
            policies: None,
        }]);
    }
    let (found, named) = resolve(
        config,
        rule,
        &format!(", or {API_SCOPE} for the decision API"),
    )?;
    match named {
        Named::Layer(layer) => quota_targets(
            rule,
            &layer.scope,
            layer.global.as_ref(),
            &layer.policies,
            key,
        ),
        Named::Tiers(chosen) => {
            let mut all = Vec::with_capacity(chosen.len());
            for tier in chosen {
                let global = found.global.as_ref();
                all.extend(quota_targets(
                    rule,
                    &tier.scope,
                    global,
                    &tier.policies,
                    key,
                )?);
            }
            Ok(all)
        }
    }
}

/// The objects of one quota (a tier's or a layer's) that `key` names: the
/// key's own; for a global quota, `*` (every part of a split one: the
/// whole quota) or `*#i` for part `i`, each with the share it enforces.
fn quota_targets(
    rule: &str,
    scope: &Scope,
    global: Option<&Global>,
    policies: &[(String, Spec)],
    key: &str,
) -> Result<Vec<Target>, Problem> {
    let one = |object: ObjectName, policies: &[(String, Spec)]| Target {
        scope: scope.clone(),
        object,
        policies: Some(policies.to_vec()),
    };
    let Some(global) = global else {
        return Ok(vec![one(scope.object(key), policies)]);
    };
    let parts = &global.parts;
    if parts.len() > 1 && key == GLOBAL_KEY {
        return Ok((0..)
            .zip(parts)
            .map(|(i, share)| one(scope.part(i), share))
            .collect());
    }
    let part = key
        .strip_prefix("*#")
        .filter(|i| parts.len() > 1 && i.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|i| i.parse::<u32>().ok())
        .filter(|&i| (i as usize) < parts.len());
    match part {
        Some(i) => Ok(vec![one(scope.part(i), &parts[i as usize])]),
        None if parts.len() <= 1 && key == GLOBAL_KEY => Ok(vec![one(scope.object(key), policies)]),
        None => {
            let expected = if parts.len() > 1 {
                format!(
                    "* (the whole quota) or *#0 to *#{}, one per part of its split quota",
                    parts.len() - 1
                )
            } else {
                "*".to_string()
            };
            Err(not_found(
                "key",
                format!(
                    "{rule:?} has one quota for every caller: its key is {expected}, not {key:?}"
                ),
            ))
        }
    }
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
    let (id, layer) = match rule.split_once('.') {
        Some((id, layer)) => (id, Some(layer)),
        None => (rule, None),
    };
    let found = config.rules.iter().find(|r| r.id == id)?;
    let global = match layer {
        None => found.global.as_ref(),
        Some(layer) => found.also.iter().find(|l| l.id == layer)?.global.as_ref(),
    };
    global
        .map(|g| g.parts.as_slice())
        .filter(|parts| parts.len() > 1)
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

/// The tier `PUT`/`DELETE /admin/keys/{rule}/{key}/override` sets limits
/// for: a rule without tiers, or one tier (`rule.tier`). Refused (`400`,
/// naming `rule`): the decision API (its callers send their policies on
/// every call), a tiered rule's id (each tier has its own limits, so the
/// route must name one), a global quota (not per key: change the config)
/// and a rule that limits only concurrency (an override sets rate
/// policies, and has none of the rule's to change).
pub fn override_tier<'c>(config: &'c Config, rule: &str) -> Result<&'c Tier, Problem> {
    let tier = overridden_tier(config, rule)?;
    if tier.policies.is_empty() {
        return Err(Problem::invalid(
            "rule",
            format!("rule {rule:?} limits only concurrency, which comes from the config; an override changes or adds rate policies, and this rule has none to change"),
        ));
    }
    Ok(tier)
}

/// The tier whose keys may hold an override, to lift one: what
/// [`override_tier`] accepts, and a rule that limits only concurrency
/// (an override set there before it was refused can still be lifted).
pub fn overridden_tier<'c>(config: &'c Config, rule: &str) -> Result<&'c Tier, Problem> {
    let refuse = |detail: String| Err(Problem::invalid("rule", detail));
    if rule == API_SCOPE {
        return refuse(format!(
            "decision-API keys take the policies each call sends; an override is for a rule's keys, not {API_SCOPE}"
        ));
    }
    let (found, named) = resolve(config, rule, "")?;
    let chosen = match named {
        Named::Tiers(chosen) => chosen,
        Named::Layer(_) => {
            return refuse(format!(
                "{rule:?} is a stacked layer, whose limits come from the config; an override is for a rule's or a tier's keys"
            ))
        }
    };
    if found.global.is_some() {
        return refuse(format!(
            "rule {:?} is a global quota that every caller shares; change its limit in the config",
            found.id
        ));
    }
    match chosen[..] {
        [tier] => Ok(tier),
        _ => refuse(format!(
            "rule {rule:?} has tiers, each with its own limits: override one of {}",
            tiers_of(&found.id, &tier_names(found))
        )),
    }
}

/// What a route's `{rule}` names in its rule.
enum Named<'c> {
    /// All of a tiered rule's tiers for its id; one for `rule.tier` or a
    /// rule without tiers.
    Tiers(Vec<&'c Tier>),
    /// One of its stacked layers, `rule.layer`.
    Layer(&'c Layer),
}

/// The rule a route's `{rule}` names and what in it; a 404 naming `rule`
/// (and what would be right, `elsewhere` included) when the config has no
/// such rule, tier or layer.
fn resolve<'c>(
    config: &'c Config,
    rule: &str,
    elsewhere: &str,
) -> Result<(&'c Rule, Named<'c>), Problem> {
    let (id, tier) = match rule.split_once('.') {
        Some((id, tier)) => (id, Some(tier)),
        None => (rule, None),
    };
    let Some(found) = config.rules.iter().find(|r| r.id == id) else {
        return Err(not_found(
            "rule",
            format!("no rule {rule:?}: use a rule id, or <rule>.<tier> for a tier{elsewhere}"),
        ));
    };
    if let Some(layer) = tier.and_then(|t| found.also.iter().find(|l| l.id == t)) {
        return Ok((found, Named::Layer(layer)));
    }
    let chosen: Vec<&Tier> = found
        .tiers
        .iter()
        .filter(|t| tier.is_none() || t.name.as_deref() == tier)
        .collect();
    if chosen.is_empty() {
        let names = tier_names(found);
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
        return Err(not_found("rule", detail));
    }
    Ok((found, Named::Tiers(chosen)))
}

/// A quota every caller shares, as the sale view and the whole-quota
/// override address it: a global rule's (`{rule}`) or a global `also`
/// layer's (`{rule}.{layer}`, the name of its policies), so that the
/// ceiling under a per-user limit is watched and changed like a global
/// rule.
#[derive(Debug)]
pub struct GlobalQuota<'c> {
    pub global: &'c Global,
    /// Its policies, as the config gives them before dividing.
    pub policies: &'c [(String, Spec)],
    /// Its objects: every part, each with its share, or its one object.
    pub targets: Vec<Target>,
}

/// The global quota `name` names; a 404 naming `rule` when there is no
/// such rule or layer, a 400 when it gives each key its own quota.
pub fn global_quota<'c>(config: &'c Config, name: &str) -> Result<GlobalQuota<'c>, Problem> {
    if config
        .rules
        .iter()
        .any(|r| r.id == name && r.room.is_some())
    {
        return Err(Problem::invalid(
            "rule",
            format!("{name:?} is a waiting room: it has no quota to watch or override, its places are its active and per_minute"),
        ));
    }
    let (rule, named) = resolve(config, name, "")?;
    let found = match named {
        Named::Layer(layer) => layer
            .global
            .as_ref()
            .map(|global| (global, layer.policies.as_slice())),
        Named::Tiers(_) if name.contains('.') => {
            return Err(not_found(
                "rule",
                format!("{name:?} is a tier: a quota every caller shares is a global rule or a global layer (rule.layer)"),
            ))
        }
        Named::Tiers(tiers) => match (&rule.global, tiers.first()) {
            (Some(global), Some(tier)) => Some((global, tier.policies.as_slice())),
            _ => None,
        },
    };
    let (global, policies) = found.ok_or_else(|| {
        Problem::invalid(
            "rule",
            format!("{name:?} gives each key its own quota, with no sale view or whole-quota override: override one key's with /admin/keys/{{rule}}/{{key}}/override"),
        )
    })?;
    Ok(GlobalQuota {
        global,
        policies,
        targets: targets(config, name, GLOBAL_KEY)?,
    })
}

/// Whether an operator's pause or close of `rule` is kept in objects that
/// decide its requests, and so applies exactly from the next decision: a
/// global rule's parts, or the parts of its global layers (a per-user
/// limit under a ceiling: the sale is closed where the ceiling is
/// counted). A waiting room keeps its own in its shards.
pub fn state_in_parts(rule: &Rule) -> bool {
    rule.room.is_none() && (rule.global.is_some() || rule.also.iter().any(|l| l.global.is_some()))
}

/// The objects that hold `rule`'s state when [`state_in_parts`]: every
/// part of the rule's global quota, or of each of its global layers.
pub fn state_holders(config: &Config, rule: &Rule) -> Vec<Target> {
    if !state_in_parts(rule) {
        return Vec::new();
    }
    let quotas = std::iter::once(rule.id.clone()).chain(
        rule.also
            .iter()
            .filter(|l| l.global.is_some())
            .map(|l| format!("{}.{}", rule.id, l.id)),
    );
    quotas
        .filter_map(|name| global_quota(config, &name).ok())
        .flat_map(|quota| quota.targets)
        .collect()
}

fn not_found(field: &str, detail: String) -> Problem {
    Problem::new(Code::NotFound, detail).with("field", field)
}

fn tier_names(rule: &Rule) -> Vec<&str> {
    rule.tiers
        .iter()
        .filter_map(|t| t.name.as_deref())
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
                {"id": "api", "match": {"path": "/api/*"}, "tiers": [
                    {"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
                    {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
                ]},
                {"id": "plain", "match": {"path": "/plain/*"}, "limit": 1, "window": "1s"},
                {"id": "sale", "match": {"path": "/sale/*"}, "scope": "global", "split": 4, "limit": 40, "window": "1s"},
                {"id": "one", "match": {"path": "/one/*"}, "scope": "global", "limit": 40, "window": "1s"},
                {"id": "report", "match": {"path": "/report/*"}, "concurrency": 2},
                {"id": "shop", "match": {"path": "/shop/*"}, "waiting_room": {"active": 5, "per_minute": 5}},
                {"id": "checkout", "match": {"path": "/checkout/*"}, "key": "header:x-user", "limit": 1, "window": "1m", "also": [
                    {"id": "all", "scope": "global", "split": 4, "limit": 100, "window": "1m"},
                    {"id": "ip", "key": "ip", "limit": 5, "window": "1m"},
                ]},
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_global_quota_is_a_global_rule_or_a_global_layer() {
        let config = config();
        let parts = |name| {
            global_quota(&config, name).map(|q| (q.global.parts.len(), q.policies[0].0.clone()))
        };
        assert_eq!(parts("sale").unwrap(), (4, "sale".to_string()));
        assert_eq!(parts("one").unwrap(), (1, "one".to_string()));
        assert_eq!(
            parts("checkout.all").unwrap(),
            (4, "checkout.all".to_string())
        );
        let status = |name| global_quota(&config, name).unwrap_err().status;
        assert_eq!(status("checkout"), 400, "its own layer is per user");
        assert_eq!(status("checkout.ip"), 400);
        assert_eq!(status("plain"), 400);
        assert_eq!(status("nothing"), 404);
        assert_eq!(status("checkout.none"), 404);
        assert_eq!(status("shop"), 400, "a room keeps no quota");
        assert_eq!(status("api.registered"), 404, "a tier is no shared quota");
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

    fn override_error(rule: &str) -> (u16, String, String) {
        let problem = override_tier(&config(), rule).unwrap_err();
        let body: Value = serde_json::from_str(&problem.to_json()).unwrap();
        (
            problem.status,
            body["field"].as_str().unwrap_or_default().to_string(),
            problem.detail().to_string(),
        )
    }

    #[test]
    fn an_override_names_one_tier_with_rate_policies() {
        let config = config();
        assert_eq!(override_tier(&config, "plain").unwrap().scope.id(), "plain");
        assert_eq!(
            override_tier(&config, "api.registered").unwrap().scope.id(),
            "api.registered"
        );
        let (status, field, detail) = override_error("api");
        assert_eq!((status, field.as_str()), (400, "rule"));
        assert!(
            detail.contains("api.registered, api.anonymous"),
            "a tiered rule's id names its tiers: {detail}"
        );
        for (rule, status) in [
            ("report", 400),
            ("sale", 400),
            ("one", 400),
            (API_SCOPE, 400),
            ("nope", 404),
            ("api.gold", 404),
        ] {
            let (got, field, _) = override_error(rule);
            assert_eq!((got, field.as_str()), (status, "rule"), "{rule}");
        }
        assert!(override_error("report").2.contains("only concurrency"));
        assert!(
            overridden_tier(&config, "report").is_ok(),
            "an override set there before can be lifted"
        );
    }

    #[test]
    fn a_target_carries_the_policies_its_object_enforces() {
        let config = config();
        let limits = |rule: &str, key: &str| -> Option<Vec<u64>> {
            targets(&config, rule, key).unwrap()[0]
                .policies
                .as_ref()
                .map(|p| p.iter().map(|(_, spec)| spec.limit()).collect())
        };
        assert_eq!(limits("plain", "k"), Some(vec![1]));
        assert_eq!(limits("api.anonymous", "k"), Some(vec![10]));
        assert_eq!(
            limits("sale", "*#2"),
            Some(vec![10]),
            "a part holds its share"
        );
        assert_eq!(limits("one", "*"), Some(vec![40]));
        assert_eq!(limits(API_SCOPE, "k"), None);
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

    #[test]
    fn a_waiting_room_keeps_its_join_keys() {
        assert_eq!(objects("shop", "k").unwrap(), ["rule:shop:k"]);
    }

    #[test]
    fn a_stacked_layer_is_looked_up_as_rule_dot_layer() {
        assert_eq!(objects("checkout", "ann").unwrap(), ["rule:checkout:ann"]);
        assert_eq!(
            objects("checkout.all", "*#3").unwrap(),
            ["rule:checkout.all:*#3"]
        );
        assert_eq!(
            objects("checkout.all", "*").unwrap(),
            [
                "rule:checkout.all:*#0",
                "rule:checkout.all:*#1",
                "rule:checkout.all:*#2",
                "rule:checkout.all:*#3"
            ],
            "a split layer's whole quota"
        );
        assert_eq!(
            whole_quota(&config(), "checkout.all", "*").map(<[_]>::len),
            Some(4)
        );
        assert_eq!(
            objects("checkout.ip", "1.2.3.4").unwrap(),
            ["rule:checkout.ip:1.2.3.4"]
        );
        for bad in ["*#4", "ann"] {
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
        let (status, field, detail) = override_error("checkout.ip");
        assert_eq!((status, field.as_str()), (400, "rule"));
        assert!(detail.contains("stacked layer"), "{detail}");
    }
}
