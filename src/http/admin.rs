//! The admin API's routes and bodies, below `{prefix}/admin/`.

use serde_json::{Map, Value};

use super::problem::Problem;
use crate::config::duration::parse_ms;
use crate::ledger::ban::MAX_BAN_MS;

/// Pseudo rule id under which the decision API's keys are addressed; rule
/// ids may not start with `_`, so it cannot collide with a rule.
pub const API_RULE: &str = "_api";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `/admin/keys/{rule}/{key}`
    Key { rule: String, key: String },
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
        Some(AdminRoute::Key {
            rule: non_empty(percent_decode(rule)?)?,
            key: non_empty(percent_decode(key)?)?,
        })
    }
}

/// The object that holds `key` for `rule` (a rule id, `rule.tier` for a
/// tier, or [`API_RULE`]), as the edge names it.
pub fn object_name(rule: &str, key: &str) -> String {
    if rule == API_RULE {
        format!("api:{key}")
    } else {
        format!("rule:{rule}:{key}")
    }
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
        None => "banned by an operator".to_string(),
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
    fn object_names_match_the_edge() {
        assert_eq!(object_name("api", "1.2.3.4"), "rule:api:1.2.3.4");
        assert_eq!(object_name(API_RULE, "user:1"), "api:user:1");
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
