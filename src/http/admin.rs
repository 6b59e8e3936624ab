//! The admin API's routes and bodies, below `{prefix}/admin/`.

use std::net::IpAddr;

use super::body;
use super::cidr::{client_network, Cidr};
use super::params::{Whole, CURSOR};
use super::path::escape_at;
use super::problem::Problem;
use crate::from_tree;
use crate::input::duration::parse_ms;
use crate::limits::{DAY_MS, MAX_BAN_MS, MAX_BAN_REASON_BYTES, MAX_KEY_BYTES};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `/admin/keys/{rule}/{key}`
    Key { rule: String, key: String },
    /// `/admin/keys/{rule}/{key}/override`
    Override { rule: String, key: String },
    /// `/admin/keys/{rule}/{key}/ban`: a ban of that key on that rule only.
    KeyBan { rule: String, key: String },
    /// `/admin/bans`
    Bans,
    /// `/admin/bans/{key}`
    Ban { key: String },
    /// `/admin/stats`
    Stats,
    /// `/admin/metrics`: Prometheus's text format.
    Metrics,
    /// `/admin/top`: a rule's most refused keys.
    Top,
    /// `/admin/rules`
    Rules,
    /// `/admin/rooms`
    Rooms,
    /// `/admin/rooms/{rule}`
    Room { rule: String },
    /// `/admin/rules/{rule}`: a rule's state, and a global quota's sale.
    Rule { rule: String },
    /// `/admin/rules/{rule}/state`: open, paused or closed.
    RuleState { rule: String },
    /// `/admin/rules/{rule}/override`: a global quota's whole limit.
    RuleOverride { rule: String },
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
        if rest == "metrics" {
            return Some(AdminRoute::Metrics);
        }
        if rest == "top" {
            return Some(AdminRoute::Top);
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
        if let Some(below) = rest.strip_prefix("rules/") {
            let (rule, what) = match below.split_once('/') {
                Some((rule, what)) => (rule, Some(what)),
                None => (below, None),
            };
            let rule = non_empty(percent_decode(rule)?)?;
            return match what {
                None => Some(AdminRoute::Rule { rule }),
                Some("state") => Some(AdminRoute::RuleState { rule }),
                Some("override") => Some(AdminRoute::RuleOverride { rule }),
                Some(_) => None,
            };
        }
        if let Some(key) = rest.strip_prefix("bans/") {
            return Some(AdminRoute::Ban {
                key: non_empty(percent_decode(key)?)?,
            });
        }
        let (rule, key) = rest.strip_prefix("keys/")?.split_once('/')?;
        // A key's own `/` is percent-encoded, so a literal one before
        // `override` or `ban` ends the key.
        let (key, route): (_, fn(String, String) -> AdminRoute) =
            if let Some(key) = key.strip_suffix("/override") {
                (key, |rule, key| AdminRoute::Override { rule, key })
            } else if let Some(key) = key.strip_suffix("/ban") {
                (key, |rule, key| AdminRoute::KeyBan { rule, key })
            } else {
                (key, |rule, key| AdminRoute::Key { rule, key })
            };
        Some(route(
            non_empty(percent_decode(rule)?)?,
            non_empty(percent_decode(key)?)?,
        ))
    }

    /// The query parameters the route takes; any other is refused.
    pub fn params(&self) -> &'static [&'static str] {
        match self {
            AdminRoute::Stats => &[SINCE.name],
            AdminRoute::Bans => &[BANS_LIMIT.name, CURSOR],
            AdminRoute::Top => &[RULE, TOP_MINUTES.name, TOP_LIMIT.name, CURSOR],
            _ => &[],
        }
    }
}

/// `GET /admin/stats?since=`: counts since then, whole minutes.
pub const SINCE: Whole = Whole {
    name: "since",
    unit: "milliseconds since the epoch",
    min: 0,
    max: u64::MAX,
    default: 0,
};

/// `GET /admin/top?rule=`: whose refused keys (a rule id, or `_api`).
pub const RULE: &str = "rule";

/// `GET /admin/top?top_minutes=`: the minutes the top keys are counted over.
pub const TOP_MINUTES: Whole = Whole {
    name: "top_minutes",
    unit: "minutes",
    min: 1,
    max: 60,
    default: 10,
};

/// `GET /admin/top?limit=`: keys per page (a hub keeps 32 per rule and
/// minute, so no merge ranks more).
pub const TOP_LIMIT: Whole = Whole {
    name: "limit",
    unit: "keys per page",
    min: 1,
    max: 32,
    default: 10,
};

/// `GET /admin/bans?limit=`: bans per page.
pub const BANS_LIMIT: Whole = Whole {
    name: "limit",
    unit: "bans per page",
    min: 1,
    max: 100,
    default: 100,
};

/// What a manual ban on `key` must name to refuse that client: an IPv6
/// address stands for its `/ipv6_prefix` group, because that group is what
/// requests are matched by (a ban on one address of it would refuse
/// nobody). A network (`10.0.0.0/8`, `2001:db8::/32`) holds every address
/// inside it, and is written as [`Cidr`] writes it; one with host bits set
/// or a bad prefix is a 400 naming `key`, since a ban that holds nobody
/// must not answer 200. Any other key, an IPv4 address included, is taken
/// as written, up to [`MAX_KEY_BYTES`] (every hub and isolate holds it).
pub fn ban_subject(key: &str, ipv6_prefix: u8) -> Result<String, Problem> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Problem::invalid(
            "key",
            format!("a key is at most {MAX_KEY_BYTES} bytes; a longer one is addressed by its sha256: form"),
        ));
    }
    if let Ok(ip) = key.parse::<IpAddr>() {
        return Ok(match ip.to_canonical() {
            ip @ IpAddr::V6(_) => client_network(ip, ipv6_prefix),
            ip => ip.to_string(),
        });
    }
    match key.split_once('/') {
        Some((address, _)) if address.parse::<IpAddr>().is_ok() => Cidr::parse(key)
            .map(|network| network.to_string())
            .map_err(|why| Problem::invalid("key", format!("not a network to ban: {why}"))),
        _ => Ok(key.to_string()),
    }
}

/// Whether a manual ban on `subject` (as [`ban_subject`] names it) holds a
/// client at `ip`: the network holds it, or the subject is its address (or
/// its IPv6 group).
pub fn ban_holds(subject: &str, ip: IpAddr, ipv6_prefix: u8) -> bool {
    match ban_network(subject) {
        Some(network) => network.contains(ip),
        None => subject == client_network(ip, ipv6_prefix),
    }
}

/// The network a manual ban's subject names, when it names one (`addr/len`,
/// as [`ban_subject`] writes it); a bare address is a key like any other.
pub fn ban_network(subject: &str) -> Option<Cidr> {
    subject
        .contains('/')
        .then(|| Cidr::parse(subject).ok())
        .flatten()
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

/// `PUT /admin/bans/{key}`: `{"for": "10m", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualBan {
    pub for_ms: u64,
    pub reason: String,
}

from_tree! {
    /// A manual ban's body as sent.
    struct RawManualBan {
        lasts: Option<String> = optional "for",
        reason: Option<String> = optional "reason",
    }
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
        assert_eq!(AdminRoute::parse("/metrics"), Some(AdminRoute::Metrics));
        assert_eq!(AdminRoute::parse("/rules"), Some(AdminRoute::Rules));
        assert_eq!(AdminRoute::parse("/top"), Some(AdminRoute::Top));
        let rule = || "sale".to_string();
        assert_eq!(
            AdminRoute::parse("/rules/sale"),
            Some(AdminRoute::Rule { rule: rule() })
        );
        assert_eq!(
            AdminRoute::parse("/rules/sale/state"),
            Some(AdminRoute::RuleState { rule: rule() })
        );
        assert_eq!(
            AdminRoute::parse("/rules/s%61le/override"),
            Some(AdminRoute::RuleOverride { rule: rule() })
        );
        assert_eq!(
            AdminRoute::parse("/bans/203.0.113.9"),
            Some(AdminRoute::Ban {
                key: "203.0.113.9".into()
            })
        );
        assert_eq!(
            AdminRoute::parse("/keys/search/10.3.3.3/ban"),
            Some(AdminRoute::KeyBan {
                rule: "search".into(),
                key: "10.3.3.3".into()
            })
        );
        assert_eq!(
            AdminRoute::parse("/keys/search/a%2Fban/override"),
            Some(AdminRoute::Override {
                rule: "search".into(),
                key: "a/ban".into()
            })
        );
        assert_eq!(
            AdminRoute::parse("/keys/search/ban"),
            Some(AdminRoute::Key {
                rule: "search".into(),
                key: "ban".into()
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
            "/rules/",
            "/rules//state",
            "/rules/sale/",
            "/rules/sale/stats",
            "/rules/sale/state/x",
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
        let subject = |key: &str, prefix: u8| ban_subject(key, prefix).unwrap();
        assert_eq!(subject("2001:db8:aa:cc::5", 64), "2001:db8:aa:cc::/64");
        assert_eq!(subject("2001:db8:aa:cc::5", 48), "2001:db8:aa::/48");
        assert_eq!(subject("2001:db8:aa:cc::5", 128), "2001:db8:aa:cc::5");
        assert_eq!(subject("::ffff:192.0.2.7", 64), "192.0.2.7");
        for kept in [
            "192.0.2.7",
            "2001:db8:aa:cc::/64",
            "user:42",
            "abc|GET",
            "a/b",
        ] {
            assert_eq!(subject(kept, 64), kept);
        }
    }

    #[test]
    fn a_manual_ban_on_a_network_is_written_as_parsed_or_refused() {
        let subject = |key: &str| ban_subject(key, 64);
        assert_eq!(subject("10.0.0.0/8").unwrap(), "10.0.0.0/8");
        assert_eq!(subject("2001:DB8::/32").unwrap(), "2001:db8::/32");
        assert_eq!(subject("::ffff:10.0.0.0/104").unwrap(), "10.0.0.0/8");
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(subject(&long[1..]).is_ok());
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "2001:db8::1/32",
            "10.0.0.0/x",
            "10.0.0.0/",
            &long,
        ] {
            let problem = subject(bad).unwrap_err();
            assert_eq!(problem.status, 400, "{bad}");
            assert!(problem.to_json().contains("\"field\":\"key\""), "{bad}");
        }
    }

    #[test]
    fn a_ban_holds_its_network_or_its_address() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(ban_holds("10.0.0.0/8", ip("10.9.9.9"), 64));
        assert!(!ban_holds("10.0.0.0/8", ip("11.0.0.1"), 64));
        assert!(ban_holds("192.0.2.7", ip("192.0.2.7"), 64));
        assert!(!ban_holds("192.0.2.7", ip("192.0.2.8"), 64));
        assert!(ban_holds(
            "2001:db8:aa:cc::/64",
            ip("2001:db8:aa:cc::9"),
            64
        ));
        assert!(ban_holds("2001:db8::/32", ip("2001:db8:1::1"), 64));
        assert!(!ban_holds("user:42", ip("192.0.2.7"), 64));
        assert_eq!(ban_network("a/b"), None);
        assert_eq!(ban_network("192.0.2.7"), None);
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
            field(json!({"for": "1m", "reason": "x".repeat(201)})),
            "reason"
        );
        assert_eq!(
            ok(json!({"for": "1m", "reason": "x".repeat(200)}))
                .unwrap()
                .reason
                .len(),
            200
        );
        assert_eq!(field(json!({"for": "1m", "why": "x"})), "why");
        assert_eq!(field(json!(["1m"])), "body");
    }
}
