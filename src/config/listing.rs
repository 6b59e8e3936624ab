//! `GET {prefix}/admin/rules`: the rules as the validated config holds
//! them, for the dashboard and for operators checking what a deploy
//! enforces. Built from the config types, so it shows what Sluice runs,
//! not what the var said.

use super::concurrency::Concurrency;
use super::room::WaitingRoom;
use super::{Config, Layer, OnError, Rule, RuleBan, Tier, When};
use crate::http::time::rfc3339;
use crate::limit::Spec;
use crate::objects::name::API_SCOPE;

crate::wire! {
    /// Every rule in match order, and the name the decision API's keys are
    /// looked up under.
    pub write struct Listing<'a> {
        rules: Vec<Listed<'a>>,
        api_rule: &'static str,
    }
}

pub fn of(config: &Config) -> Listing<'_> {
    Listing {
        rules: config.rules.iter().map(Listed::of).collect(),
        api_rule: API_SCOPE,
    }
}

crate::wire! {
    write struct Listed<'a> {
        id: &'a str,
        matcher as "match": Match<'a>,
        paths: Paths,
        action: Option<&'a str>,
        tiers: Vec<ListedTier<'a>>,
        scope: &'static str,
        split: usize,
        concurrency: Option<ListedConcurrency>,
        ban: Option<ListedBan>,
        allow: Vec<String>,
        deny: Vec<String>,
        shadow: bool,
        /// Whether the rule lets hot keys be decided from admission blocks:
        /// an operator reading a refusal count needs to know when decisions
        /// were made in the isolate.
        local: bool,
        on_error: &'static str,
        also: Vec<ListedLayer<'a>>,
        /// Only on a waiting room's rule, which has no tiers.
        waiting_room: Option<ListedRoom> = None,
    }
}

crate::wire! {
    write struct ListedRoom {
        active: u32,
        per_minute: u32,
        session_ms: u64,
        shards: u32,
        refresh_ms: u64,
        opens_at: Option<String>,
        challenge_work: Option<u32>,
    }
}

impl ListedRoom {
    fn of(room: &WaitingRoom) -> ListedRoom {
        ListedRoom {
            active: room.active,
            per_minute: room.per_minute,
            session_ms: room.session_ms,
            shards: room.shards,
            refresh_ms: room.refresh_ms,
            opens_at: room.opens_at_ms.map(rfc3339),
            challenge_work: room.work_bits,
        }
    }
}

crate::wire! {
    /// A stacked layer (`also`), as written: its key (none for a global
    /// quota), its split, its policies, and the rule name its keys are looked
    /// up under (`rule.layer`).
    write struct ListedLayer<'a> {
        id: &'a str,
        key: Option<String>,
        scope: &'static str,
        split: usize,
        lookup: &'a str,
        policies: Vec<ListedPolicy<'a>>,
    }
}

crate::wire! {
    write struct Match<'a> {
        path: String,
        methods: Option<&'a [String]>,
    }
}

crate::wire! {
    /// How the rule compares paths, in the config's words.
    write struct Paths {
        /// `insensitive` or `sensitive`.
        case: &'static str,
        /// `ignore` or `strict`.
        trailing_slash: &'static str,
    }
}

crate::wire! {
    /// A tier: who it is for, its key (none for a global quota, which every
    /// caller shares), its policies, and the rule name its keys are looked up
    /// under (`GET /admin/keys/{lookup}/{key}`).
    write struct ListedTier<'a> {
        name: Option<&'a str>,
        /// `always`, `registered`, `anonymous`, or `claim plan in [pro, team]`.
        when: String,
        key: Option<String>,
        lookup: &'a str,
        policies: Vec<ListedPolicy<'a>>,
    }
}

crate::wire! {
    /// A policy as the config spells it: for GCRA, `limit` per `window` with
    /// a `burst` (not the bucket's capacity and refill time, which the
    /// RateLimit fields announce).
    write struct ListedPolicy<'a> {
        name: &'a str,
        limit: u64,
        window_ms: u64,
        algorithm: &'static str,
        burst: Option<u64> = None,
    }
}

crate::wire! {
    write struct ListedConcurrency {
        limit: u32,
        lease_ttl_ms: u64,
        max_wait_ms: u64,
        max_queue: u32,
    }
}

crate::wire! {
    write struct ListedBan {
        after: u32,
        within_ms: u64,
        for_ms: u64,
        multiplier: u64,
        max_ms: u64,
        status: u16,
    }
}

impl<'a> Listed<'a> {
    fn of(rule: &'a Rule) -> Listed<'a> {
        let global = rule.global.as_ref();
        Listed {
            id: &rule.id,
            matcher: Match {
                path: rule.path.to_string(),
                methods: rule.methods.as_deref(),
            },
            paths: Paths {
                case: if rule.paths.case_insensitive {
                    "insensitive"
                } else {
                    "sensitive"
                },
                trailing_slash: if rule.paths.ignore_trailing_slash {
                    "ignore"
                } else {
                    "strict"
                },
            },
            action: rule.action.as_deref(),
            tiers: rule
                .tiers
                .iter()
                .map(|tier| ListedTier::of(tier, global.is_none()))
                .collect(),
            scope: if global.is_some() { "global" } else { "key" },
            split: global.map_or(1, |g| g.parts.len()),
            concurrency: rule.concurrency.as_ref().map(ListedConcurrency::of),
            ban: rule.ban.as_ref().map(ListedBan::of),
            allow: rule.allow.iter().map(ToString::to_string).collect(),
            deny: rule.deny.iter().map(ToString::to_string).collect(),
            shadow: rule.shadow,
            local: rule.local,
            on_error: match rule.on_error {
                OnError::Allow => "allow",
                OnError::Deny => "deny",
            },
            also: rule.also.iter().map(ListedLayer::of).collect(),
            waiting_room: rule.room.as_ref().map(ListedRoom::of),
        }
    }
}

impl<'a> ListedTier<'a> {
    fn of(tier: &'a Tier, keyed: bool) -> ListedTier<'a> {
        ListedTier {
            name: tier.name.as_deref(),
            when: match &tier.when {
                When::Always => "always".to_string(),
                When::Registered => "registered".to_string(),
                When::Anonymous => "anonymous".to_string(),
                When::Claim { name, values } => {
                    format!("claim {name} in [{}]", values.join(", "))
                }
            },
            key: keyed.then(|| tier.key.to_string()),
            lookup: tier.scope.id(),
            policies: tier
                .policies
                .iter()
                .map(|(name, spec)| ListedPolicy::of(name, spec))
                .collect(),
        }
    }
}

impl<'a> ListedLayer<'a> {
    fn of(layer: &'a Layer) -> ListedLayer<'a> {
        let global = layer.global.as_ref();
        ListedLayer {
            id: &layer.id,
            key: layer.key.as_ref().map(ToString::to_string),
            scope: if global.is_some() { "global" } else { "key" },
            split: global.map_or(1, |g| g.parts.len()),
            lookup: layer.scope.id(),
            policies: layer
                .policies
                .iter()
                .map(|(name, spec)| ListedPolicy::of(name, spec))
                .collect(),
        }
    }
}

impl<'a> ListedPolicy<'a> {
    fn of(name: &'a str, spec: &Spec) -> ListedPolicy<'a> {
        let (algorithm, limit, window_ms, burst) = spec.written();
        ListedPolicy {
            name,
            limit,
            window_ms,
            algorithm,
            burst,
        }
    }
}

impl ListedConcurrency {
    fn of(c: &Concurrency) -> ListedConcurrency {
        ListedConcurrency {
            limit: c.limit,
            lease_ttl_ms: c.lease_ttl_ms,
            max_wait_ms: c.max_wait_ms,
            max_queue: c.max_queue,
        }
    }
}

impl ListedBan {
    fn of(ban: &RuleBan) -> ListedBan {
        let strikes = ban.policy.strikes();
        ListedBan {
            after: strikes.limit(),
            within_ms: strikes.window_ms(),
            for_ms: ban.policy.for_ms(),
            multiplier: ban.policy.multiplier(),
            max_ms: ban.policy.max_ms(),
            status: ban.status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn listed(config: Value) -> Value {
        crate::json::value_of(&of(&Config::from_value(config).unwrap()))
    }

    #[test]
    fn a_plain_rule_lists_every_field() {
        let rules = listed(json!({
            "origin": "demo",
            "rules": [{"id": "api", "match": {"path": "/API/*", "methods": ["get"]},
                       "key": "ip+header:x-team", "limit": 10, "window": "1m",
                       "allow": ["10.0.0.0/8"]}]
        }));
        assert_eq!(rules["api_rule"], "_api");
        assert_eq!(
            rules["rules"][0],
            json!({
                "id": "api",
                "match": {"path": "/api/*", "methods": ["GET"]},
                "paths": {"case": "insensitive", "trailing_slash": "ignore"},
                "action": null,
                "tiers": [{
                    "name": null, "when": "always", "key": "{ip}|{header:x-team}", "lookup": "api",
                    "policies": [{"name": "api", "limit": 10, "window_ms": 60_000, "algorithm": "sliding_log"}],
                }],
                "scope": "key",
                "split": 1,
                "concurrency": null,
                "ban": null,
                "allow": ["10.0.0.0/8"],
                "deny": [],
                "shadow": false,
                "local": true,
                "on_error": "deny",
                "also": [],
            })
        );
    }

    #[test]
    fn paths_are_spelled_as_the_config_spells_them() {
        let rules = listed(json!({
            "origin": "demo",
            "paths": {"case": "sensitive"},
            "rules": [{"id": "api", "paths": {"trailing_slash": "strict"}, "limit": 1, "window": "1s"}]
        }));
        assert_eq!(
            rules["rules"][0]["paths"],
            json!({"case": "sensitive", "trailing_slash": "strict"})
        );
    }

    #[test]
    fn stacked_layers_are_listed_with_their_lookup() {
        let rules = listed(json!({
            "origin": "demo",
            "rules": [{"id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m", "also": [
                {"id": "all", "scope": "global", "split": 8, "limit": 10_000, "window": "1m"},
                {"id": "ip", "key": "ip", "limit": 5, "window": "1m"},
            ]}]
        }));
        assert_eq!(
            rules["rules"][0]["also"],
            json!([
                {"id": "all", "key": null, "scope": "global", "split": 8, "lookup": "checkout.all",
                 "policies": [{"name": "checkout.all", "limit": 10_000, "window_ms": 60_000, "algorithm": "sliding_log"}]},
                {"id": "ip", "key": "{ip}", "scope": "key", "split": 1, "lookup": "checkout.ip",
                 "policies": [{"name": "checkout.ip", "limit": 5, "window_ms": 60_000, "algorithm": "sliding_log"}]},
            ])
        );
    }

    #[test]
    fn bans_concurrency_shadow_local_and_on_error_are_listed() {
        let rules = listed(json!({
            "origin": "demo",
            "rules": [
                {"id": "login", "match": {"path": "/login"}, "limit": 5, "window": "15m",
                 "ban": {"after": 3, "within": "1h", "for": "10m", "multiplier": 2, "max": "1d", "status": 403},
                 "shadow": true, "local": false, "on_error": "allow"},
                {"id": "report", "match": {"path": "/report"}, "concurrency": 10, "lease_ttl": "1m",
                 "queue": {"max_wait": "5s", "max_len": 20}},
            ]
        }));
        let login = &rules["rules"][0];
        assert_eq!(login["local"], false);
        assert_eq!(
            login["ban"],
            json!({"after": 3, "within_ms": 3_600_000, "for_ms": 600_000, "multiplier": 2,
                   "max_ms": 86_400_000, "status": 403})
        );
        assert_eq!(login["shadow"], true);
        assert_eq!(login["on_error"], "allow");
        let report = &rules["rules"][1];
        assert_eq!(
            report["concurrency"],
            json!({"limit": 10, "lease_ttl_ms": 60_000, "max_wait_ms": 5_000, "max_queue": 20})
        );
        assert_eq!(report["tiers"][0]["policies"], json!([]));
    }

    #[test]
    fn a_split_global_quota_lists_the_whole_ceiling_and_no_key() {
        let rules = listed(json!({
            "origin": "demo",
            "rules": [{"id": "sale", "match": {"path": "/buy"}, "scope": "global", "split": 4,
                       "limit": 1000, "window": "1s", "algorithm": "fixed_window"}]
        }));
        let sale = &rules["rules"][0];
        assert_eq!(
            (sale["scope"].as_str(), sale["split"].as_u64()),
            (Some("global"), Some(4))
        );
        assert_eq!(sale["tiers"][0]["key"], Value::Null);
        assert_eq!(
            sale["tiers"][0]["policies"],
            json!([{"name": "sale", "limit": 1000, "window_ms": 1_000, "algorithm": "fixed_window"}])
        );
    }

    #[test]
    fn a_waiting_room_is_listed_with_its_settings() {
        let rules = listed(json!({
            "origin": "demo",
            "rules": [{"id": "shop", "match": {"path": "/shop/*"},
                       "waiting_room": {"active": 500, "per_minute": 200, "opens_at": "2026-12-01T10:00:00Z"}}]
        }));
        let shop = &rules["rules"][0];
        assert_eq!(
            shop["tiers"],
            json!([{"name": null, "when": "always", "key": "{ip}", "lookup": "shop",
                    "policies": [{"name": "shop", "limit": 5, "window_ms": 60_000, "algorithm": "sliding_log"}]}]),
            "the join limit, by default"
        );
        assert_eq!(shop["also"][0]["lookup"], "shop.pre-queue");
        assert_eq!(
            shop["also"][0]["policies"],
            json!([{"name": "shop.pre-queue", "limit": 5, "window_ms": 2_592_000_000u64, "algorithm": "sliding_log"}])
        );
        assert_eq!(
            shop["waiting_room"],
            json!({"active": 500, "per_minute": 200, "session_ms": 300_000, "shards": 8,
                   "refresh_ms": 20_000, "opens_at": "2026-12-01T10:00:00.000Z", "challenge_work": null})
        );
    }

    #[test]
    fn tiers_and_gcra_policies_are_listed() {
        let rules = listed(json!({
            "origin": "demo",
            "jwt": {},
            "rules": [{"id": "api", "match": {"path": "/api/*"}, "tiers": [
                {"name": "registered", "when": "registered",
                 "policies": [{"name": "burst", "limit": 10, "window": "1s", "algorithm": "gcra", "burst": 4}]},
                {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
            ]}]
        }));
        let tiers = &rules["rules"][0]["tiers"];
        assert_eq!(tiers[0]["when"], "registered");
        assert_eq!(tiers[0]["key"], "{claim:sub}");
        assert_eq!(tiers[0]["lookup"], "api.registered");
        assert_eq!(
            tiers[0]["policies"][0],
            json!({"name": "api.registered.burst", "limit": 10, "window_ms": 1_000, "algorithm": "gcra",
                   "burst": 4}),
            "as the config spells it: 10 per second, a burst of 4"
        );
        assert_eq!(tiers[1]["lookup"], "api.anonymous");
        assert_eq!(tiers[1]["key"], "{ip}");
    }
}
