//! The admin API's pure half, below `{prefix}/admin/`: its routes and their
//! query parameters here, a manual ban's body in `bans`, a rule state's in
//! `state`; the handlers are in `src/edge/admin/`.

mod bans;
mod state;

use super::params::{Whole, CURSOR};
use super::path::escape_at;
use super::problem::Problem;
use crate::bounds::MAX_KEY_BYTES;
pub use bans::{ban_holds, ban_network, ban_subject, manual_ban_detail, parse_manual_ban};
pub use state::parse_state;

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

/// A key an admin route names, kept as stored: at most [`MAX_KEY_BYTES`].
pub fn key_fits(key: &str) -> Result<(), Problem> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Problem::invalid(
            "key",
            format!("keys are at most {MAX_KEY_BYTES} bytes; a longer one is addressed by its sha256: form"),
        ));
    }
    Ok(())
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
}
