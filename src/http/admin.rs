//! The admin API's routes and bodies, below `{prefix}/admin/`.

use std::net::IpAddr;

use serde::Deserialize;

use super::body;
use super::cidr::client_network;
use super::path::escape_at;
use super::problem::Problem;
use crate::input::duration::parse_ms;
use crate::limits::{DAY_MS, MAX_BAN_MS, MAX_BAN_REASON_BYTES};

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
    /// `/admin/rooms`
    Rooms,
    /// `/admin/rooms/{rule}`
    Room { rule: String },
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
        if rest == "rooms" {
            return Some(AdminRoute::Rooms);
        }
        if let Some(rule) = rest.strip_prefix("rooms/") {
            return Some(AdminRoute::Room {
                rule: non_empty(percent_decode(rule)?)?,
            });
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

/// `PUT /admin/bans/{key}`: `{"for": "10m", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualBan {
    pub for_ms: u64,
    pub reason: String,
}

/// A manual ban's body as sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManualBan {
    #[serde(rename = "for")]
    lasts: Option<String>,
    reason: Option<String>,
}

pub fn parse_manual_ban(content_type: Option<&str>, body: &[u8]) -> Result<ManualBan, Problem> {
    let raw: RawManualBan = body::read(content_type, body)?;
    let lasts = raw
        .lasts
        .ok_or_else(|| Problem::invalid("for", "for is required: a duration such as \"10m\""))?;
    let for_ms = parse_ms(&lasts).map_err(|m| Problem::invalid("for", m))?;
    if !(1..=MAX_BAN_MS).contains(&for_ms) {
        return Err(Problem::invalid(
            "for",
            format!("for must be from 1 ms to {} days", MAX_BAN_MS / DAY_MS),
        ));
    }
    let reason = match raw.reason {
        None => DEFAULT_BAN_REASON.to_string(),
        Some(reason) if reason.len() <= MAX_BAN_REASON_BYTES => reason,
        Some(_) => {
            return Err(Problem::invalid(
                "reason",
                format!("reason must be a string of at most {MAX_BAN_REASON_BYTES} bytes"),
            ))
        }
    };
    Ok(ManualBan { for_ms, reason })
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// `%XX` escapes decoded; `None` for a malformed escape (two hex digits,
/// nothing else: `%+1` names no byte) or invalid UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(escape_at(bytes, i)?);
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
    use serde_json::{json, Value};

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
            "/bans/%+1",
            "/keys/a/%+a",
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

    #[test]
    fn manual_bans_are_validated() {
        let ok = |v: Value| parse_manual_ban(Some("application/json"), v.to_string().as_bytes());
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
        assert_eq!(field(json!({"for": "forever"})), "for");
        assert_eq!(field(json!({"for": "400d"})), "for");
        assert_eq!(field(json!({"for": "1m", "reason": 5})), "reason");
        assert_eq!(
            field(json!({"for": "1m", "reason": "x".repeat(513)})),
            "reason"
        );
        assert_eq!(field(json!({"for": "1m", "why": "x"})), "why");
        assert_eq!(field(json!(["1m"])), "body");
    }
}
