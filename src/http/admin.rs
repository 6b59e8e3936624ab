//! The admin API's routes and bodies, below `{prefix}/admin/`.

use std::net::IpAddr;

use serde_json::{Map, Value};

use super::cidr::client_network;
use super::problem::Problem;
use crate::config::duration::parse_ms;
use crate::config::Config;
use crate::ledger::ban::MAX_BAN_MS;
use crate::objects::name::{ObjectName, Scope, API_SCOPE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `/admin/keys/{rule}/{key}`
    Key { rule: String, key: String },
    /// `/admin/keys/{rule}/{key}/override`
    Override { rule: String, key: String },
    /// `/admin/bans`
    Bans,
    /// `/admin/bans/{key}`
    Ban { key: String },
    /// `/admin/stats`
    Stats,
    /// `/admin/rules`
    Rules,
    /// `/admin/` and the dashboard's files below it, named as the build
    /// writes them. They hold no data, so they need no token (the page
    /// asks for it).
    Dashboard { file: &'static str },
    /// `/admin` without the slash: sent to `/admin/`, below which the
    /// page's relative URLs resolve.
    DashboardHome,
}

/// The dashboard's files: the path below `/admin` and the file's name in
/// the build's asset directory (`build/dashboard`).
const DASHBOARD_FILES: [(&str, &str); 4] = [
    ("/", "index.html"),
    ("/dashboard.js", "dashboard.js"),
    ("/dashboard.css", "dashboard.css"),
    ("/favicon.svg", "favicon.svg"),
];

/// The part of `own` (a path below Sluice's prefix) below `/admin`, when
/// it is an admin path: `/admin` itself or under `/admin/`, not
/// `/administrator`.
pub fn admin_path(own: &str) -> Option<&str> {
    own.strip_prefix("/admin")
        .filter(|below| below.is_empty() || below.starts_with('/'))
}

impl AdminRoute {
    /// The route for `path` (below `/admin`); keys are percent-decoded and
    /// may contain `/`.
    pub fn parse(path: &str) -> Option<AdminRoute> {
        if path.is_empty() {
            return Some(AdminRoute::DashboardHome);
        }
        if let Some((_, file)) = DASHBOARD_FILES.iter().find(|(at, _)| *at == path) {
            return Some(AdminRoute::Dashboard { file });
        }
        let rest = path.strip_prefix('/')?;
        if rest == "bans" {
            return Some(AdminRoute::Bans);
        }
        if rest == "stats" {
            return Some(AdminRoute::Stats);
        }
        if rest == "rules" {
            return Some(AdminRoute::Rules);
        }
        if let Some(key) = rest.strip_prefix("bans/") {
            return Some(AdminRoute::Ban {
                key: non_empty(percent_decode(key)?)?,
            });
        }
        let (rule, key) = rest.strip_prefix("keys/")?.split_once('/')?;
        // A key's own `/` is percent-encoded, so a literal one before
        // `override` ends the key.
        if let Some(key) = key.strip_suffix("/override") {
            return Some(AdminRoute::Override {
                rule: non_empty(percent_decode(rule)?)?,
                key: non_empty(percent_decode(key)?)?,
            });
        }
        Some(AdminRoute::Key {
            rule: non_empty(percent_decode(rule)?)?,
            key: non_empty(percent_decode(key)?)?,
        })
    }
}

/// What a manual ban on `key` must name to refuse that client: an IPv6
/// address stands for its `/ipv6_prefix` group, because that group is what
/// requests are matched by (a ban on one address of it would refuse
/// nobody). Any other key, an IPv4 address and a group included, is taken
/// as written.
pub fn ban_subject(key: &str, ipv6_prefix: u8) -> String {
    match key.parse::<IpAddr>() {
        Ok(ip) if ip.to_canonical().is_ipv6() => client_network(ip, ipv6_prefix),
        Ok(ip) => ip.to_canonical().to_string(),
        Err(_) => key.to_string(),
    }
}

/// The refusal's detail for a manual ban: the reason only when the operator
/// gave one (the default reason would repeat the sentence).
pub fn manual_ban_detail(until: &str, reason: &str) -> String {
    if reason.is_empty() || reason == DEFAULT_BAN_REASON {
        format!("banned by an operator until {until}")
    } else {
        format!("banned by an operator until {until}: {reason}")
    }
}

/// The reason a manual ban gets when the operator gives none.
pub const DEFAULT_BAN_REASON: &str = "banned by an operator";

/// `?since=<ms since the epoch>` of `GET /admin/stats`; 0 (everything kept)
/// when absent. Counts are kept per minute, so a `since` inside a minute
/// counts that whole minute.
pub fn parse_since(since: Option<&str>) -> Result<u64, Problem> {
    match since {
        None => Ok(0),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                Problem::invalid(
                    "since",
                    format!("since must be milliseconds since the epoch (a whole number of at least 0), got {text:?}"),
                )
            }),
    }
}

/// One container object an admin key route reads or resets, named by the
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
        Err(Problem::new(404, "not-found", detail).with("field", field))
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
        let valid = if parts > 1 {
            key.strip_prefix("*#")
                .filter(|i| i.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < parts)
        } else {
            key == "*"
        };
        if !valid {
            let expected = if parts > 1 {
                format!("*#0 to *#{}, one per part of its split quota", parts - 1)
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

fn tiers_of(id: &str, names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("{id}.{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `PUT /admin/bans/{key}`: `{"for": "10m", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualBan {
    pub for_ms: u64,
    pub reason: String,
}

pub fn parse_manual_ban(object: &Map<String, Value>) -> Result<ManualBan, Problem> {
    if let Some(unknown) = object
        .keys()
        .find(|k| !["for", "reason"].contains(&k.as_str()))
    {
        return Err(Problem::invalid(
            unknown,
            format!("unknown field {unknown:?}; expected for, reason"),
        ));
    }
    let for_ms = match object.get("for") {
        Some(Value::String(text)) => parse_ms(text).map_err(|m| Problem::invalid("for", m))?,
        _ => {
            return Err(Problem::invalid(
                "for",
                "for is required: a duration such as \"10m\"",
            ))
        }
    };
    if !(1..=MAX_BAN_MS).contains(&for_ms) {
        return Err(Problem::invalid("for", "for must be from 1 ms to 365 days"));
    }
    let reason = match object.get("reason") {
        None => DEFAULT_BAN_REASON.to_string(),
        Some(Value::String(reason)) if reason.len() <= 512 => reason.clone(),
        Some(_) => {
            return Err(Problem::invalid(
                "reason",
                "reason must be a string of at most 512 bytes",
            ))
        }
    };
    Ok(ManualBan { for_ms, reason })
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// `%XX` escapes decoded; `None` for a malformed escape or invalid UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admin_paths_are_admin_or_below_it() {
        assert_eq!(admin_path("/admin"), Some(""));
        assert_eq!(admin_path("/admin/stats"), Some("/stats"));
        assert_eq!(admin_path("/administrator"), None);
        assert_eq!(admin_path("/v1/limit"), None);
    }

    #[test]
    fn routes_parse_with_encoded_keys() {
        assert_eq!(AdminRoute::parse("/bans"), Some(AdminRoute::Bans));
        assert_eq!(AdminRoute::parse("/stats"), Some(AdminRoute::Stats));
        assert_eq!(AdminRoute::parse("/rules"), Some(AdminRoute::Rules));
        assert_eq!(
            AdminRoute::parse("/bans/203.0.113.9"),
            Some(AdminRoute::Ban {
                key: "203.0.113.9".into()
            })
        );
        assert_eq!(
            AdminRoute::parse("/keys/api.registered/u%3A42%7C%2Fx/y"),
            Some(AdminRoute::Key {
                rule: "api.registered".into(),
                key: "u:42|/x/y".into()
            })
        );
        for bad in [
            "/keys",
            "/keys/api",
            "/keys/api/",
            "/keys//k",
            "/bans/",
            "/bans/%zz",
            "/other",
            "/keys/a/%ff",
            "/index.html",
            "/dashboard.js/",
            "//dashboard.js",
        ] {
            assert_eq!(AdminRoute::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_dashboard_is_the_slash_and_its_named_files() {
        assert_eq!(AdminRoute::parse(""), Some(AdminRoute::DashboardHome));
        assert_eq!(
            AdminRoute::parse("/"),
            Some(AdminRoute::Dashboard { file: "index.html" })
        );
        assert_eq!(
            AdminRoute::parse("/dashboard.js"),
            Some(AdminRoute::Dashboard {
                file: "dashboard.js"
            })
        );
    }

    #[test]
    fn a_manual_ban_on_an_ipv6_address_names_its_group() {
        assert_eq!(ban_subject("2001:db8:aa:cc::5", 64), "2001:db8:aa:cc::/64");
        assert_eq!(ban_subject("2001:db8:aa:cc::5", 48), "2001:db8:aa::/48");
        assert_eq!(ban_subject("2001:db8:aa:cc::5", 128), "2001:db8:aa:cc::5");
        assert_eq!(ban_subject("::ffff:192.0.2.7", 64), "192.0.2.7");
        for kept in ["192.0.2.7", "2001:db8:aa:cc::/64", "user:42", "abc|GET"] {
            assert_eq!(ban_subject(kept, 64), kept);
        }
    }

    #[test]
    fn the_default_ban_reason_is_not_repeated() {
        let until = "2030-01-01T00:00:00Z";
        assert_eq!(
            manual_ban_detail(until, DEFAULT_BAN_REASON),
            "banned by an operator until 2030-01-01T00:00:00Z"
        );
        assert_eq!(
            manual_ban_detail(until, "scraping"),
            "banned by an operator until 2030-01-01T00:00:00Z: scraping"
        );
    }

    #[test]
    fn since_is_a_whole_number_of_milliseconds() {
        assert_eq!(parse_since(None).unwrap(), 0);
        assert_eq!(
            parse_since(Some("1700000000000")).unwrap(),
            1_700_000_000_000
        );
        for bad in ["abc", "-5", "", "+5", "1.5", "99999999999999999999999"] {
            let problem = parse_since(Some(bad)).unwrap_err();
            assert_eq!(problem.status, 400, "{bad}");
            assert!(problem.to_json().contains("\"field\":\"since\""), "{bad}");
        }
    }

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
    fn manual_bans_are_validated() {
        let ok = |v: Value| parse_manual_ban(v.as_object().unwrap());
        assert_eq!(
            ok(json!({"for": "10m", "reason": "abuse"})).unwrap(),
            ManualBan {
                for_ms: 600_000,
                reason: "abuse".into()
            }
        );
        assert_eq!(
            ok(json!({"for": "1s"})).unwrap().reason,
            "banned by an operator"
        );
        let field = |v: Value| {
            let problem = ok(v).unwrap_err();
            serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(field(json!({})), "for");
        assert_eq!(field(json!({"for": 10})), "for");
        assert_eq!(field(json!({"for": "0s"})), "for");
        assert_eq!(field(json!({"for": "400d"})), "for");
        assert_eq!(field(json!({"for": "1m", "reason": 5})), "reason");
        assert_eq!(field(json!({"for": "1m", "why": "x"})), "why");
    }
}
