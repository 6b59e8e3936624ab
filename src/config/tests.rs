use serde_json::{json, Value};

use super::*;
use crate::http::jwt::Validation;
use crate::http::path::RequestPath;
use crate::limit::{Policy, Spec};

mod layers;

pub(super) fn error_field(value: Value) -> String {
    let e = match Config::from_value(value.clone()) {
        Ok(_) => panic!("accepted {value}"),
        Err(e) => e,
    };
    assert!(!e.message.is_empty());
    e.field
}

fn with_rule(extra: Value) -> Value {
    let mut rule = json!({"id": "api", "limit": 10, "window": "1m"});
    rule.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({ "origin": "demo", "rules": [rule] })
}

/// A rule of its own fields, with nothing filled in.
fn bare_rule(rule: Value) -> Value {
    json!({ "origin": "demo", "jwt": {}, "rules": [rule] })
}

#[test]
fn a_full_config_parses() {
    let config = Config::from_value(json!({
        "prefix": "/_limits",
        "origin": "https://api.example.com/",
        "rules": [
            {"id": "api", "match": {"path": "/api/*", "methods": ["get", "POST"]},
             "key": "ip+path", "limit": 10, "window": "1m"},
            {"id": "login", "match": {"path": "/login"}, "key": "header:x-user", "limit": 5, "window": "500ms"}
        ]
    }))
    .unwrap();
    assert_eq!(config.prefix, "/_limits");
    assert_eq!(config.origin, Origin::Url("https://api.example.com".into()));
    assert_eq!(
        config.rules[0].methods,
        Some(vec!["GET".into(), "POST".into()])
    );
    let login = &config.rules[1].tiers[0];
    assert_eq!(
        login.policies,
        [(
            "login".to_string(),
            Spec::SlidingLog(Policy::new(5, 500).unwrap())
        )]
    );
    assert_eq!(login.scope.to_string(), "rule:login");
    assert_eq!(
        config
            .rule_for("GET", &RequestPath::new("/api/x"))
            .unwrap()
            .0
            .id,
        "api"
    );
    assert!(config
        .rule_for("DELETE", &RequestPath::new("/api/x"))
        .is_none());
    assert_eq!(
        config
            .rule_for("PUT", &RequestPath::new("/login"))
            .unwrap()
            .0
            .id,
        "login"
    );
    assert!(config
        .rule_for("GET", &RequestPath::new("/other"))
        .is_none());
}

#[test]
fn defaults_apply() {
    let config = Config::from_value(Value::Null).unwrap();
    assert_eq!(config.prefix, DEFAULT_PREFIX);
    assert_eq!(config.origin, Origin::Demo);
    assert_eq!((config.ipv6_prefix, config.timeout_ms), (64, 2000));
    let config = Config::from_value(
        json!({"origin": "demo", "rules": [{"id": "all", "limit": 1, "window": "1s"}]}),
    )
    .unwrap();
    let anything = RequestPath::new("/anything");
    let (rule, _) = config.rule_for("PATCH", &anything).unwrap();
    assert_eq!(rule.on_error, OnError::Deny);
    assert!(!rule.shadow);
    assert!(rule.local, "blocks are on unless a rule turns them off");
    let from_string = Config::from_value(json!(r#"{"origin": "route"}"#)).unwrap();
    assert_eq!(from_string.origin, Origin::Route);
}

#[test]
fn the_decision_api_is_open_only_when_the_config_says_so() {
    assert_eq!(Config::default().api, ApiAccess::Token);
    let api = |value: Value| Config::from_value(json!({"origin": "demo", "api": value}));
    assert_eq!(api(json!("token")).unwrap().api, ApiAccess::Token);
    assert_eq!(api(json!("open")).unwrap().api, ApiAccess::Open);
    for bad in [json!("Open"), json!(""), json!(true), json!("none")] {
        assert_eq!(api(bad).unwrap_err().field, "SLUICE.api");
    }
}

#[test]
fn own_paths_sit_below_the_prefix() {
    let config = Config::default();
    assert_eq!(config.own_path("/_sluice/health"), Some("/health"));
    assert_eq!(config.own_path("/_sluice"), Some(""));
    assert_eq!(config.own_path("/_sluicex/health"), None);
    assert_eq!(config.own_path("/api"), None);
}

#[test]
fn a_prefix_that_would_take_every_path_of_a_rule_is_refused() {
    let config = |prefix: &str, path: &str, paths: Value| {
        json!({"origin": "demo", "prefix": prefix, "rules": [
            {"id": "open", "match": {"path": "/open/*"}, "limit": 1, "window": "1s"},
            {"id": "api", "match": {"path": path}, "paths": paths, "limit": 1, "window": "1s"},
        ]})
    };
    let none = json!(null);
    for (prefix, path) in [
        ("/api", "/api/*"),
        ("/api", "/api"),
        ("/api", "/api*"),
        ("/api", "/api/v1/:id"),
        ("/api/v1", "/api/v1/x"),
        ("/_sluice", "/_sluice/*"),
        ("/API", "/api/*"),
    ] {
        let e = error_of(config(prefix, path, none.clone()));
        assert_eq!(e.field, "SLUICE.prefix", "{prefix} {path}");
        assert!(e.message.contains("rules[1]"), "{}", e.message);
    }
    for (prefix, path) in [
        ("/api", "/apix/*"),
        ("/api", "/ap*"),
        ("/api", "/:version/api"),
        ("/api/v1", "/api/*"),
        ("/_sluice", "/*"),
    ] {
        assert!(
            Config::from_value(config(prefix, path, none.clone())).is_ok(),
            "{prefix} {path}: the rule still matches paths outside the prefix"
        );
    }
    let sensitive = json!({"case": "sensitive"});
    assert!(Config::from_value(config("/API", "/api/*", sensitive)).is_ok());
}

#[test]
fn an_action_no_key_uses_is_refused() {
    assert_eq!(
        error_field(with_rule(json!({"action": "reply"}))),
        "SLUICE.rules[0].action"
    );
    assert_eq!(
        error_field(with_rule(json!({"action": "reply", "key": "ip+path"}))),
        "SLUICE.rules[0].action"
    );
    assert_eq!(
        error_field(with_rule(
            json!({"action": "buy", "scope": "global", "key": null})
        )),
        "SLUICE.rules[0].action"
    );
    assert!(Config::from_value(with_rule(json!({"action": "reply", "key": "ip+action"}))).is_ok());
    let tiered = json!({"origin": "demo", "jwt": {}, "rules": [{
        "id": "t", "action": "post",
        "tiers": [
            {"name": "registered", "when": "registered", "key": "{sub}:{action}", "limit": 2, "window": "1s"},
            {"name": "anonymous", "when": "anonymous", "limit": 1, "window": "1s"},
        ],
    }]});
    assert!(Config::from_value(tiered).is_ok(), "one tier's key uses it");
}

#[test]
fn several_policies_are_named_for_the_headers() {
    let config = Config::from_value(with_rule(json!({
        "limit": null, "window": null,
        "policies": [
            {"name": "second", "limit": 10, "window": "1s"},
            {"name": "day", "limit": 1000, "window": "1d", "algorithm": "fixed_window"},
        ]
    })))
    .unwrap();
    let names: Vec<&str> = config.rules[0].tiers[0]
        .policies
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["api.second", "api.day"]);
    assert!(matches!(
        config.rules[0].tiers[0].policies[1].1,
        Spec::FixedWindow(_)
    ));
}

#[test]
fn gcra_takes_limit_per_window_with_a_burst() {
    let config = Config::from_value(with_rule(json!({"algorithm": "gcra", "burst": 4}))).unwrap();
    let Spec::Gcra(cell) = config.rules[0].tiers[0].policies[0].1 else {
        panic!("a gcra spec");
    };
    assert_eq!(
        (cell.max_burst(), cell.count(), cell.period_ms()),
        (4, 10, 60_000)
    );
    let config = Config::from_value(with_rule(json!({"algorithm": "gcra"}))).unwrap();
    let Spec::Gcra(cell) = config.rules[0].tiers[0].policies[0].1 else {
        panic!("a gcra spec");
    };
    assert_eq!(cell.limit(), 10, "the burst defaults to the whole limit");
}

#[test]
fn tiers_tell_registered_from_anonymous_callers() {
    let config = Config::from_value(json!({
        "origin": "demo",
        "jwt": {"secret": "API_JWT", "leeway": "30s", "on_invalid": "reject"},
        "rules": [{
            "id": "api", "match": {"path": "/api/*"},
            "tiers": [
                {"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
                {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
            ]
        }]
    }))
    .unwrap();
    assert_eq!(
        config.jwt,
        Some(JwtConfig {
            secret: "API_JWT".into(),
            checks: Validation {
                leeway_s: 30,
                require_exp: true,
                audience: None,
                issuer: None,
            },
            on_invalid: OnInvalid::Reject
        })
    );
    let rule = &config.rules[0];
    let someone = crate::http::jwt::Claims::from(json!({"sub": "u1"}).as_object().unwrap().clone());
    let registered = rule.tier_for(Some(&someone)).unwrap();
    assert_eq!(registered.policies[0].0, "api.registered");
    assert_eq!(registered.scope.to_string(), "rule:api.registered");
    assert_eq!(
        registered
            .key
            .parts()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["claim:sub"]
    );
    let anonymous = rule.tier_for(None).unwrap();
    assert_eq!(anonymous.policies[0].0, "api.anonymous");
    assert_eq!(
        anonymous
            .key
            .parts()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["ip"]
    );
}

#[test]
fn rule_options_parse() {
    let config = Config::from_value(json!({
        "origin": "demo", "ipv6_prefix": 56, "timeout": "250ms",
        "allow": ["10.0.0.0/8"], "deny": ["192.0.2.0/24", "2001:db8::/32"],
        "rules": [{
            "id": "reply", "match": {"path": "/threads/:id/reply"}, "action": "reply",
            "key": "{header:x-user}:{action}:{id}", "limit": 5, "window": "10s",
            "ban": {"after": 3, "within": "1m", "for": "10m", "multiplier": 2, "max": "1d", "status": 403},
            "allow": ["10.1.0.0/16"], "deny": ["203.0.113.7"], "shadow": true, "local": false, "on_error": "allow"
        }]
    }))
    .unwrap();
    assert_eq!((config.ipv6_prefix, config.timeout_ms), (56, 250));
    let rule = &config.rules[0];
    let ban = rule.ban.unwrap();
    assert_eq!(
        (ban.status, ban.policy.for_ms(), ban.policy.max_ms()),
        (403, 600_000, 86_400_000)
    );
    assert!(rule.shadow);
    assert!(!rule.local);
    assert_eq!(rule.on_error, OnError::Allow);
    assert!(rule.deny.contains("203.0.113.7".parse().unwrap()));
    assert!(config.deny.contains("2001:db8::1".parse().unwrap()));
    let reply = RequestPath::new("/threads/7/reply");
    let (_, params) = config.rule_for("POST", &reply).unwrap();
    assert_eq!(params, [("id", "7")]);
}

#[test]
fn every_bad_field_is_named() {
    let cases = [
        (json!({"prefix": "nope"}), "SLUICE.prefix"),
        (json!({"prefix": "/a/"}), "SLUICE.prefix"),
        (json!({"prefix": 5}), "SLUICE.prefix"),
        (json!({}), "SLUICE.origin"),
        (json!({"origin": ""}), "SLUICE.origin"),
        (json!({"origin": "Demo"}), "SLUICE.origin"),
        (json!({"origin": null}), "SLUICE.origin"),
        (json!({"origin": "ftp://x"}), "SLUICE.origin"),
        (json!({"origin": "https://"}), "SLUICE.origin"),
        (json!({"origin": "https://x/?q=1"}), "SLUICE.origin"),
        (json!({"extra": 1}), "SLUICE.extra"),
        (json!({"ipv6_prefix": 0}), "SLUICE.ipv6_prefix"),
        (json!({"ipv6_prefix": 129}), "SLUICE.ipv6_prefix"),
        (json!({"ipv6_prefix": 300}), "SLUICE.ipv6_prefix"),
        (json!({"timeout": "2m"}), "SLUICE.timeout"),
        (json!({"timeout": "soon"}), "SLUICE.timeout"),
        (json!({"allow": ["10.0.0.1/8"]}), "SLUICE.allow[0]"),
        (json!({"deny": ["::1", "nope"]}), "SLUICE.deny[1]"),
        (json!({"jwt": {"secret": ""}}), "SLUICE.jwt.secret"),
        (json!({"jwt": {"leeway": "x"}}), "SLUICE.jwt.leeway"),
        (
            json!({"jwt": {"on_invalid": "ignore"}}),
            "SLUICE.jwt.on_invalid",
        ),
        (json!({"jwt": {"claim": "sub"}}), "SLUICE.jwt.claim"),
        (json!({"jwt": {"leeway": "500ms"}}), "SLUICE.jwt.leeway"),
        (json!({"jwt": {"leeway": "1500ms"}}), "SLUICE.jwt.leeway"),
        (json!({"jwt": {"leeway": "11m"}}), "SLUICE.jwt.leeway"),
        (json!({"jwt": {"leeway": "-1s"}}), "SLUICE.jwt.leeway"),
        (
            json!({"jwt": {"leeway": "99999999999999999999d"}}),
            "SLUICE.jwt.leeway",
        ),
        (json!({"jwt": {"leeway": 30}}), "SLUICE.jwt.leeway"),
        (
            json!({"jwt": {"require_exp": "yes"}}),
            "SLUICE.jwt.require_exp",
        ),
        (json!({"jwt": {"aud": ""}}), "SLUICE.jwt.aud"),
        (json!({"jwt": {"aud": ["a", "b"]}}), "SLUICE.jwt.aud"),
        (json!({"jwt": {"aud": "x".repeat(257)}}), "SLUICE.jwt.aud"),
        (json!({"jwt": {"iss": "a\nb"}}), "SLUICE.jwt.iss"),
        (json!({"jwt": {"iss": 7}}), "SLUICE.jwt.iss"),
        (json!({"rules": {}}), "SLUICE.rules"),
        (
            json!({"rules": [{"limit": 1, "window": "1s"}]}),
            "SLUICE.rules[0].id",
        ),
        (with_rule(json!({"id": ""})), "SLUICE.rules[0].id"),
        (with_rule(json!({"id": "a b"})), "SLUICE.rules[0].id"),
        (with_rule(json!({"id": "_api"})), "SLUICE.rules[0].id"),
        (with_rule(json!({"id": "v1.search"})), "SLUICE.rules[0].id"),
        (with_rule(json!({"id": "a:b"})), "SLUICE.rules[0].id"),
        (with_rule(json!({"limit": 0})), "SLUICE.rules[0].limit"),
        (with_rule(json!({"limit": -1})), "SLUICE.rules[0].limit"),
        (with_rule(json!({"limit": 1.5})), "SLUICE.rules[0].limit"),
        (with_rule(json!({"limit": "10"})), "SLUICE.rules[0].limit"),
        (
            with_rule(json!({"limit": 10_000_000})),
            "SLUICE.rules[0].limit",
        ),
        (with_rule(json!({"limit": null})), "SLUICE.rules[0].limit"),
        (with_rule(json!({"window": null})), "SLUICE.rules[0].window"),
        (with_rule(json!({"window": "10"})), "SLUICE.rules[0].window"),
        (with_rule(json!({"window": "0s"})), "SLUICE.rules[0].window"),
        (
            with_rule(json!({"window": "31d"})),
            "SLUICE.rules[0].window",
        ),
        (with_rule(json!({"window": 60})), "SLUICE.rules[0].window"),
        (
            with_rule(json!({"algorithm": "leaky"})),
            "SLUICE.rules[0].algorithm",
        ),
        (with_rule(json!({"burst": 3})), "SLUICE.rules[0].burst"),
        (
            with_rule(json!({"algorithm": "gcra", "burst": 2_000_000})),
            "SLUICE.rules[0].burst",
        ),
        (with_rule(json!({"key": "ip+nose"})), "SLUICE.rules[0].key"),
        (with_rule(json!({"key": "{id}"})), "SLUICE.rules[0].key"),
        (with_rule(json!({"key": "{action}"})), "SLUICE.rules[0].key"),
        (with_rule(json!({"action": ""})), "SLUICE.rules[0].action"),
        (with_rule(json!({"key": "{sub}"})), "SLUICE.rules[0].key"),
        (
            with_rule(json!({"match": {"path": "api/*"}})),
            "SLUICE.rules[0].match.path",
        ),
        (
            with_rule(json!({"match": {"methods": []}})),
            "SLUICE.rules[0].match.methods",
        ),
        (
            with_rule(json!({"match": {"methods": ["G T"]}})),
            "SLUICE.rules[0].match.methods",
        ),
        (
            with_rule(json!({"match": {"methods": "GET"}})),
            "SLUICE.rules[0].match.methods",
        ),
        (
            with_rule(json!({"match": {"host": "x"}})),
            "SLUICE.rules[0].match.host",
        ),
        (with_rule(json!({"limt": 3})), "SLUICE.rules[0].limt"),
        (
            with_rule(json!({"policies": [{"limit": 1, "window": "1s"}]})),
            "SLUICE.rules[0].policies",
        ),
        (
            with_rule(json!({"allow": ["300.0.0.1"]})),
            "SLUICE.rules[0].allow[0]",
        ),
        (
            with_rule(json!({"deny": ["10.0.0.0/33"]})),
            "SLUICE.rules[0].deny[0]",
        ),
        (
            with_rule(json!({"shadow": "yes"})),
            "SLUICE.rules[0].shadow",
        ),
        (with_rule(json!({"local": "no"})), "SLUICE.rules[0].local"),
        (
            with_rule(json!({"on_error": "retry"})),
            "SLUICE.rules[0].on_error",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m"}})),
            "SLUICE.rules[0].ban.for",
        ),
        (
            with_rule(json!({"ban": {"after": 0, "within": "1m", "for": "1m"}})),
            "SLUICE.rules[0].ban.after",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1y", "for": "1m"}})),
            "SLUICE.rules[0].ban.within",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m", "for": "0s"}})),
            "SLUICE.rules[0].ban.for",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m", "for": "1m", "multiplier": 0}})),
            "SLUICE.rules[0].ban.multiplier",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m", "for": "1h", "max": "1m"}})),
            "SLUICE.rules[0].ban.max",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m", "for": "1m", "status": 404}})),
            "SLUICE.rules[0].ban.status",
        ),
        (
            with_rule(json!({"ban": {"after": 3, "within": "1m", "for": "1m", "until": "x"}})),
            "SLUICE.rules[0].ban.until",
        ),
    ];
    for (value, field) in cases {
        assert_eq!(error_field(value.clone()), field, "for {value}");
    }
    let dup = json!({"rules": [
        {"id": "a", "limit": 1, "window": "1s"},
        {"id": "a", "limit": 1, "window": "1s"}
    ]});
    assert_eq!(error_field(dup), "SLUICE.rules[1].id");
    assert_eq!(error_field(json!("{not json")), "SLUICE");
    let e = Config::from_value(json!("{\"origin\": \"demo\",\n \"prefix\" 1}")).unwrap_err();
    assert_eq!(
        e.message,
        "is a string but not valid JSON at line 2 column 11"
    );
    let twice = json!(r#"{"origin": "demo", "rules": [{"id": "a", "limit": 1, "limit": 2}]}"#);
    let e = Config::from_value(twice).unwrap_err();
    assert_eq!(e.field, "SLUICE.rules[0].limit");
    assert!(
        e.message.starts_with("the key appears more than once"),
        "{e}"
    );
}

#[test]
fn bad_policy_lists_and_tiers_are_named() {
    let policies = |list: Value| bare_rule(json!({"id": "api", "policies": list}));
    let tiers = |list: Value| bare_rule(json!({"id": "api", "tiers": list}));
    let cases = [
        (policies(json!([])), "SLUICE.rules[0].policies"),
        (
            policies(
                json!([{"name": "a", "limit": 1, "window": "1s"}, {"limit": 1, "window": "1s"}]),
            ),
            "SLUICE.rules[0].policies[1].name",
        ),
        (
            policies(
                json!([{"name": "a", "limit": 1, "window": "1s"}, {"name": "a", "limit": 1, "window": "1s"}]),
            ),
            "SLUICE.rules[0].policies[1].name",
        ),
        (
            policies(json!([{"name": "a b", "limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].policies[0].name",
        ),
        (
            policies(json!([{"limit": 0, "window": "1s"}])),
            "SLUICE.rules[0].policies[0].limit",
        ),
        (
            policies(json!([{"limit": 1, "window": "1w"}])),
            "SLUICE.rules[0].policies[0].window",
        ),
        (
            policies(json!([{"limit": 1}])),
            "SLUICE.rules[0].policies[0].window",
        ),
        (tiers(json!([])), "SLUICE.rules[0].tiers"),
        (
            tiers(json!([{"name": "x", "when": "registered", "limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].tiers",
        ),
        (
            tiers(json!([{"name": "x", "when": "sometimes", "limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].tiers[0].when",
        ),
        (
            tiers(
                json!([{"name": "x", "limit": 1, "window": "1s"}, {"name": "x", "limit": 1, "window": "1s"}]),
            ),
            "SLUICE.rules[0].tiers[1].name",
        ),
        (
            tiers(json!([{"name": "x"}])),
            "SLUICE.rules[0].tiers[0].limit",
        ),
        (
            tiers(json!([{"name": "x", "key": "ip+", "limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].tiers[0].key",
        ),
        (
            tiers(json!([{"name": "x", "key": "{id}", "limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].tiers[0].key",
        ),
        (
            tiers(json!([{"limit": 1, "window": "1s"}])),
            "SLUICE.rules[0].tiers[0].name",
        ),
        (
            bare_rule(
                json!({"id": "api", "limit": 1, "window": "1s", "tiers": [{"name": "x", "limit": 1, "window": "1s"}]}),
            ),
            "SLUICE.rules[0].tiers",
        ),
    ];
    for (value, field) in cases {
        assert_eq!(error_field(value.clone()), field, "for {value}");
    }
}

#[test]
fn concurrency_limits_parse_with_or_without_rates() {
    let config = Config::from_value(json!({"origin": "demo", "rules": [
        {"id": "report", "match": {"path": "/report"}, "concurrency": 10},
        {"id": "both", "limit": 5, "window": "1s", "concurrency": 2, "lease_ttl": "5s",
         "queue": {"max_wait": "2s", "max_len": 50}},
    ]}))
    .unwrap();
    let only = config.rules[0].concurrency.as_ref().unwrap();
    assert_eq!(
        (only.limit, only.lease_ttl_ms, only.max_wait_ms),
        (10, 30_000, 0)
    );
    assert!(config.rules[0].tiers[0].policies.is_empty());
    let both = config.rules[1].concurrency.as_ref().unwrap();
    assert_eq!(
        (
            both.limit,
            both.lease_ttl_ms,
            both.max_wait_ms,
            both.max_queue
        ),
        (2, 5000, 2000, 50)
    );
    assert_eq!(config.rules[1].tiers[0].policies.len(), 1);
}

#[test]
fn bad_concurrency_fields_are_named() {
    let rule = |extra: Value| {
        let mut rule = json!({"id": "c"});
        rule.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "rules": [rule] })
    };
    let cases = [
        (rule(json!({})), "SLUICE.rules[0].limit"),
        (
            rule(json!({"concurrency": 0})),
            "SLUICE.rules[0].concurrency",
        ),
        (
            rule(json!({"concurrency": 200_000})),
            "SLUICE.rules[0].concurrency",
        ),
        (
            rule(json!({"concurrency": -1})),
            "SLUICE.rules[0].concurrency",
        ),
        (
            rule(json!({"concurrency": 2, "lease_ttl": "0s"})),
            "SLUICE.rules[0].lease_ttl",
        ),
        (
            rule(json!({"concurrency": 2, "lease_ttl": "2d"})),
            "SLUICE.rules[0].lease_ttl",
        ),
        (
            rule(json!({"concurrency": 2, "queue": {"max_wait": "soon"}})),
            "SLUICE.rules[0].queue.max_wait",
        ),
        (
            rule(json!({"concurrency": 2, "queue": {"max_wait": "2m"}})),
            "SLUICE.rules[0].queue.max_wait",
        ),
        (
            rule(json!({"concurrency": 2, "queue": {"max_wait": "1s", "max_len": 0}})),
            "SLUICE.rules[0].queue.max_len",
        ),
        (
            rule(json!({"concurrency": 2, "queue": {"max_wait": "1s", "size": 3}})),
            "SLUICE.rules[0].queue.size",
        ),
        (
            rule(json!({"limit": 1, "window": "1s", "lease_ttl": "5s"})),
            "SLUICE.rules[0].lease_ttl",
        ),
    ];
    for (value, field) in cases {
        assert_eq!(error_field(value.clone()), field, "for {value}");
    }
}

#[test]
fn a_global_quota_splits_into_shares_that_sum_to_the_limit() {
    let config = Config::from_value(with_rule(json!({
        "limit": 20_000, "window": "1s", "scope": "global", "split": 16
    })))
    .unwrap();
    let global = config.rules[0].global.as_ref().unwrap();
    assert_eq!(global.parts.len(), 16);
    let total: u64 = global.parts.iter().map(|p| p[0].1.limit()).sum();
    assert_eq!(total, 20_000);
    assert!(global.parts.iter().all(|p| p[0].1.window_ms() == 1000));

    let single = Config::from_value(with_rule(json!({"scope": "global"}))).unwrap();
    let parts = &single.rules[0].global.as_ref().unwrap().parts;
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0], single.rules[0].tiers[0].policies);

    let per_key = Config::from_value(with_rule(json!({"scope": "key"}))).unwrap();
    assert!(per_key.rules[0].global.is_none());
}

#[test]
fn bad_scope_and_split_fields_are_named() {
    let cases = [
        (
            with_rule(json!({"scope": "world"})),
            "SLUICE.rules[0].scope",
        ),
        (with_rule(json!({"scope": 3})), "SLUICE.rules[0].scope"),
        (with_rule(json!({"split": 4})), "SLUICE.rules[0].split"),
        (
            with_rule(json!({"scope": "global", "split": 0})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "split": 65})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "split": -2})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "split": 11})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "split": 2, "algorithm": "gcra"})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "split": 2, "concurrency": 3})),
            "SLUICE.rules[0].split",
        ),
        (
            with_rule(json!({"scope": "global", "key": "ip"})),
            "SLUICE.rules[0].key",
        ),
        (
            with_rule(json!({"scope": "global", "ban": {"after": 3, "within": "1m", "for": "1m"}})),
            "SLUICE.rules[0].ban",
        ),
    ];
    for (value, field) in cases {
        assert_eq!(error_field(value.clone()), field, "for {value}");
    }
    let tiers = bare_rule(json!({
        "id": "t", "scope": "global",
        "tiers": [{"name": "all", "limit": 1, "window": "1s"}]
    }));
    assert_eq!(error_field(tiers), "SLUICE.rules[0].tiers");
}

/// Which rule each spelling of a path reaches, with the default `paths`
/// (case-insensitive, trailing slash ignored) and with strict ones: no
/// spelling an origin may treat as a protected path skips its rule.
#[test]
fn every_spelling_of_a_path_reaches_its_rule() {
    let config = Config::from_value(json!({
        "origin": "demo",
        "rules": [
            {"id": "login", "match": {"path": "/login", "methods": ["POST"]}, "limit": 2, "window": "1m"},
            {"id": "reply", "match": {"path": "/threads/:id/reply"}, "key": "{id}", "limit": 5, "window": "10s"},
            {"id": "api", "match": {"path": "/api/*"}, "limit": 10, "window": "1m"},
            {"id": "exact", "match": {"path": "/Exact/Case"}, "paths": {"case": "sensitive", "trailing_slash": "strict"}, "limit": 1, "window": "1m"},
        ]
    }))
    .unwrap();
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("POST", "/login", Some("login")),
        ("POST", "/Login", Some("login")),
        ("POST", "/LOGIN", Some("login")),
        ("POST", "/login/", Some("login")),
        ("POST", "/LOGIN/", Some("login")),
        ("POST", "//login", Some("login")),
        ("POST", "/login//", Some("login")),
        ("POST", "/%6cogin", Some("login")),
        ("POST", "/%6Cogin", Some("login")),
        ("POST", "/%4C%4F%47%49%4E", Some("login")),
        ("POST", "/./login", Some("login")),
        ("POST", "/x/../login", Some("login")),
        ("POST", "/x/%2e%2e/login", Some("login")),
        ("POST", "/../login", Some("login")),
        ("POST", "/login;jsessionid=abc", Some("login")),
        ("POST", "/login/.", Some("login")),
        ("POST", "%2flogin", Some("login")),
        ("GET", "/login", None),
        ("POST", "/logins", None),
        ("POST", "/login/x", None),
        ("POST", "/log%69n%2F", Some("login")),
        ("GET", "/api/hello", Some("api")),
        ("GET", "/%61pi/hello", Some("api")),
        ("GET", "//api/hello", Some("api")),
        ("GET", "/API/hello", Some("api")),
        ("GET", "/api%2fhello", Some("api")),
        ("GET", "/api%2Fhello", Some("api")),
        ("GET", "/Api/", Some("api")),
        ("GET", "/api", Some("api")),
        ("GET", "/api;x=1/hello", Some("api")),
        ("GET", "/static/../api/hello", Some("api")),
        ("GET", "/apix", None),
        ("GET", "/threads/7/reply", Some("reply")),
        ("GET", "/Threads/7/Reply/", Some("reply")),
        ("GET", "/threads//7/reply", Some("reply")),
        ("GET", "/threads/7/x/../reply", Some("reply")),
        ("GET", "/threads/%37/reply", Some("reply")),
        ("GET", "/threads/7/8/reply", None),
        ("GET", "/Exact/Case", Some("exact")),
        ("GET", "//Exact/./Case", Some("exact")),
        ("GET", "/%45xact/Case", Some("exact")),
        ("GET", "/exact/case", None),
        ("GET", "/Exact/Case/", None),
    ];
    for (method, raw, expected) in cases {
        let path = RequestPath::new(raw);
        let found = config
            .rule_for(method, &path)
            .map(|(rule, _)| rule.id.as_str());
        assert_eq!(found, *expected, "{method} {raw}");
    }
    let path = RequestPath::new("/THREADS/AbC/reply/");
    let (rule, params) = config.rule_for("GET", &path).unwrap();
    assert_eq!(rule.id, "reply");
    assert_eq!(
        params,
        [("id", "abc")],
        "case-insensitive rules key on folded captures"
    );
}

#[test]
fn paths_options_are_validated_and_inherited() {
    assert_eq!(
        error_field(json!({"paths": {"case": "upper"}})),
        "SLUICE.paths.case"
    );
    assert_eq!(
        error_field(json!({"paths": {"trailing_slash": "sometimes"}})),
        "SLUICE.paths.trailing_slash"
    );
    assert_eq!(
        error_field(json!({"paths": {"cases": "sensitive"}})),
        "SLUICE.paths.cases"
    );
    assert_eq!(
        error_field(with_rule(json!({"paths": {"case": 1}}))),
        "SLUICE.rules[0].paths.case"
    );
    assert_eq!(
        error_field(with_rule(json!({"match": {"path": "/a//b"}}))),
        "SLUICE.rules[0].match.path"
    );
    let config = Config::from_value(json!({
        "origin": "demo",
        "paths": {"case": "sensitive"},
        "rules": [
            {"id": "a", "match": {"path": "/A"}, "limit": 1, "window": "1s"},
            {"id": "b", "match": {"path": "/B"}, "paths": {"trailing_slash": "strict"}, "limit": 1, "window": "1s"},
        ]
    }))
    .unwrap();
    assert!(!config.paths.case_insensitive && config.paths.ignore_trailing_slash);
    let b = &config.rules[1].paths;
    assert!(!b.case_insensitive && !b.ignore_trailing_slash);
    let found = |raw: &str| {
        config
            .rule_for("GET", &RequestPath::new(raw))
            .map(|(rule, _)| rule.id.clone())
    };
    assert_eq!(found("/A/").as_deref(), Some("a"));
    assert_eq!(found("/a"), None);
    assert_eq!(found("/B/"), None);
}

#[test]
fn jwt_checks_parse_with_their_defaults() {
    let config = Config::from_value(json!({"origin": "demo", "jwt": {}})).unwrap();
    assert_eq!(
        config.jwt.unwrap().checks,
        Validation {
            leeway_s: 0,
            require_exp: true,
            audience: None,
            issuer: None,
        }
    );
    let config = Config::from_value(json!({"origin": "demo", "jwt": {
        "leeway": "10m", "require_exp": false,
        "aud": "api.example.com", "iss": "https://issuer.example/"
    }}))
    .unwrap();
    assert_eq!(
        config.jwt.unwrap().checks,
        Validation {
            leeway_s: 600,
            require_exp: false,
            audience: Some("api.example.com".into()),
            issuer: Some("https://issuer.example/".into()),
        }
    );
}

#[test]
fn short_secrets_are_refused_without_being_quoted() {
    let short = "x".repeat(MIN_SECRET_CHARS - 1);
    let e = check_secret_strength("ADMIN_TOKEN", "ADMIN_TOKEN", &short).unwrap_err();
    assert_eq!(e.field, "ADMIN_TOKEN");
    assert!(e.message.contains("31 characters") && e.message.contains("32"));
    assert!(!e.message.contains(&short));
    assert!(check_secret_strength("f", "S", &"x".repeat(MIN_SECRET_CHARS)).is_ok());
    let multibyte = "é".repeat(MIN_SECRET_CHARS - 1);
    assert!(
        check_secret_strength("f", "S", &multibyte).is_err(),
        "characters, not bytes"
    );
}

#[test]
fn origin_auth_parses_with_defaults_and_names_bad_fields() {
    let config = Config::from_value(json!({"origin": "route", "origin_auth": {}})).unwrap();
    assert_eq!(
        config.origin_auth,
        Some(OriginAuthConfig {
            header: "x-sluice-auth".into(),
            secret: "ORIGIN_SECRET".into(),
        })
    );
    let config = Config::from_value(json!({
        "origin": "https://api.example.com",
        "origin_auth": {"header": "X-Origin-Verify", "secret": "EDGE_KEY"}
    }))
    .unwrap();
    assert_eq!(
        config.origin_auth,
        Some(OriginAuthConfig {
            header: "x-origin-verify".into(),
            secret: "EDGE_KEY".into(),
        })
    );
    assert_eq!(Config::default().origin_auth, None);
    for (bad, field) in [
        (json!({"header": ""}), "SLUICE.origin_auth.header"),
        (json!({"header": "x auth"}), "SLUICE.origin_auth.header"),
        (json!({"header": "x-é"}), "SLUICE.origin_auth.header"),
        (json!({"header": "Connection"}), "SLUICE.origin_auth.header"),
        (
            json!({"header": "x-forwarded-for"}),
            "SLUICE.origin_auth.header",
        ),
        (
            json!({"header": "authorization"}),
            "SLUICE.origin_auth.header",
        ),
        (json!({"header": "cf-ray"}), "SLUICE.origin_auth.header"),
        (
            json!({"header": "x".repeat(65)}),
            "SLUICE.origin_auth.header",
        ),
        (json!({"header": 5}), "SLUICE.origin_auth.header"),
        (json!({"secret": ""}), "SLUICE.origin_auth.secret"),
        (json!({"secret": "my secret"}), "SLUICE.origin_auth.secret"),
        (json!({"value": "x"}), "SLUICE.origin_auth.value"),
    ] {
        let config = json!({"origin": "route", "origin_auth": bad});
        assert_eq!(error_field(config), field, "{bad}");
    }
}

#[test]
fn keep_headers_names_forwarding_claims_only() {
    assert!(Config::default().keep_headers.is_empty());
    let config = Config::from_value(json!({
        "origin": "route",
        "keep_headers": ["CF-IPCountry", "x-forwarded-proto", "True-Client-IP"]
    }))
    .unwrap();
    assert_eq!(
        config.keep_headers,
        ["cf-ipcountry", "x-forwarded-proto", "true-client-ip"]
    );
    for (i, bad) in [
        "x-forwarded-for",
        "forwarded",
        "cf-connecting-ip",
        "connection",
        "x-custom",
        "",
    ]
    .iter()
    .enumerate()
    {
        let mut names = vec!["cf-ray"; i];
        names.push(bad);
        let config = json!({"origin": "route", "keep_headers": names});
        assert_eq!(
            error_field(config),
            format!("SLUICE.keep_headers[{i}]"),
            "{bad}"
        );
    }
    assert_eq!(
        error_field(json!({"origin": "route", "keep_headers": "cf-ray"})),
        "SLUICE.keep_headers"
    );
}

fn error_of(value: Value) -> ConfigError {
    match Config::from_value(value.clone()) {
        Ok(_) => panic!("accepted {value}"),
        Err(e) => e,
    }
}

#[test]
fn plan_tiers_match_a_claim_value_in_order() {
    let config = Config::from_value(json!({
        "origin": "demo",
        "jwt": {"require_exp": false},
        "rules": [{
            "id": "api",
            "tiers": [
                {"name": "enterprise", "when": {"claim": "plan", "equals": "enterprise"}, "limit": 6000, "window": "1m"},
                {"name": "pro", "when": {"claim": "plan", "in": ["pro", "team", 7]}, "limit": 600, "window": "1m"},
                {"name": "free", "when": "registered", "limit": 60, "window": "1m"},
                {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
            ]
        }]
    }))
    .unwrap();
    let rule = &config.rules[0];
    let claims = |value: Value| crate::http::jwt::Claims::from(value.as_object().unwrap().clone());
    let tier = |claims: Option<&crate::http::jwt::Claims>| {
        rule.tier_for(claims).unwrap().name.clone().unwrap()
    };
    assert_eq!(
        tier(Some(&claims(json!({"sub": "a", "plan": "enterprise"})))),
        "enterprise"
    );
    assert_eq!(
        tier(Some(&claims(json!({"sub": "a", "plan": "team"})))),
        "pro"
    );
    assert_eq!(tier(Some(&claims(json!({"sub": "a", "plan": 7})))), "pro");
    assert_eq!(
        tier(Some(&claims(json!({"sub": "a", "plan": "hobby"})))),
        "free"
    );
    assert_eq!(tier(Some(&claims(json!({"sub": "a"})))), "free");
    assert_eq!(tier(None), "anonymous");
    assert_eq!(
        rule.tiers[1]
            .key
            .parts()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["claim:sub"],
        "a plan tier keys on the subject by default"
    );
}

#[test]
fn plan_tiers_are_validated_and_must_not_leave_callers_uncovered() {
    let tiered = |when: Value| {
        json!({
            "origin": "demo",
            "jwt": {},
            "rules": [{"id": "api", "tiers": [
                {"name": "p", "when": when, "limit": 1, "window": "1s"},
                {"name": "r", "when": "registered", "limit": 1, "window": "1s"},
                {"name": "a", "when": "anonymous", "limit": 1, "window": "1s"},
            ]}]
        })
    };
    for (when, field) in [
        (json!({"claim": "plan"}), "SLUICE.rules[0].tiers[0].when.in"),
        (
            json!({"claim": "", "in": ["x"]}),
            "SLUICE.rules[0].tiers[0].when.claim",
        ),
        (
            json!({"claim": "plan", "in": []}),
            "SLUICE.rules[0].tiers[0].when.in",
        ),
        (
            json!({"claim": "plan", "in": "pro"}),
            "SLUICE.rules[0].tiers[0].when.in",
        ),
        (
            json!({"claim": "plan", "in": [1.5]}),
            "SLUICE.rules[0].tiers[0].when.in",
        ),
        (
            json!({"claim": "plan", "in": ["a"], "equals": "a"}),
            "SLUICE.rules[0].tiers[0].when.equals",
        ),
        (
            json!({"claim": "plan", "equals": true}),
            "SLUICE.rules[0].tiers[0].when.equals",
        ),
        (
            json!({"claim": "plan", "is": "pro"}),
            "SLUICE.rules[0].tiers[0].when.is",
        ),
        (json!(5), "SLUICE.rules[0].tiers[0].when"),
        (json!("premium"), "SLUICE.rules[0].tiers[0].when"),
    ] {
        assert_eq!(error_field(tiered(when.clone())), field, "{when}");
    }
    let uncovered = json!({
        "origin": "demo",
        "jwt": {},
        "rules": [{"id": "api", "tiers": [
            {"name": "p", "when": {"claim": "plan", "equals": "pro"}, "limit": 1, "window": "1s"},
            {"name": "a", "when": "anonymous", "limit": 1, "window": "1s"},
        ]}]
    });
    assert_eq!(error_field(uncovered), "SLUICE.rules[0].tiers");
}

#[test]
fn configs_that_cannot_work_are_refused() {
    for origin in [
        "https://x:99999",
        "https://x:0",
        "https://x:",
        "https://x:8a",
        "http://:80",
        "https://user@x",
    ] {
        assert_eq!(
            error_field(json!({ "origin": origin })),
            "SLUICE.origin",
            "{origin}"
        );
    }
    for origin in [
        "https://x:8443",
        "http://127.0.0.1:9000/base",
        "https://[::1]:8443",
    ] {
        assert!(
            Config::from_value(json!({ "origin": origin })).is_ok(),
            "{origin}"
        );
    }
    // An anonymous caller has no verified JWT: a claim in its key would
    // make every anonymous request a 400.
    for key in ["{sub}", "claim:plan", "ip+sub"] {
        let anonymous_on_sub = json!({
            "jwt": {},
            "rules": [{"id": "api", "tiers": [
                {"name": "registered", "when": "registered", "limit": 10, "window": "1m"},
                {"name": "anonymous", "when": "anonymous", "key": key, "limit": 5, "window": "1m"},
            ]}]
        });
        assert_eq!(
            error_field(anonymous_on_sub),
            "SLUICE.rules[0].tiers[1].key",
            "{key}"
        );
    }
    // `.` and `:` separate rule, tier, policy and key in policy and
    // object names: `a` + `b.c` must not read like `a.b` + `c`.
    for name in ["a.b", "a:b"] {
        let tier = json!({
            "jwt": {},
            "rules": [{"id": "api", "tiers": [{"name": name, "limit": 1, "window": "1s"}]}]
        });
        assert_eq!(error_field(tier), "SLUICE.rules[0].tiers[0].name");
        let policy = with_rule(json!({
            "limit": null, "window": null,
            "policies": [{"name": name, "limit": 1, "window": "1s"}]
        }));
        assert_eq!(error_field(policy), "SLUICE.rules[0].policies[0].name");
    }
}

#[test]
fn config_errors_speak_the_users_words() {
    let message = |value: Value| error_of(value).to_string();
    for (value, field, words) in [
        (json!([]), "SLUICE", "a table"),
        (
            json!({"rules": [{"id": "a", "match": "/api/*", "limit": 1, "window": "1s"}]}),
            "SLUICE.rules[0].match",
            "a table",
        ),
        (
            json!({"rules": [{"id": "a", "limit": 10.0, "window": "1s"}]}),
            "SLUICE.rules[0].limit",
            "a non-negative whole number",
        ),
        (
            json!({"rules": [{"id": "a", "limit": 1, "window": 5}]}),
            "SLUICE.rules[0].window",
            "a string",
        ),
        (
            json!({"rules": [{"id": "a", "allow": "10.0.0.0/8", "limit": 1, "window": "1s"}]}),
            "SLUICE.rules[0].allow",
            "a list",
        ),
        (
            json!({"rules": [{"limit": 1, "window": "1s"}]}),
            "SLUICE.rules[0].id",
            "id is required",
        ),
        (
            json!({"rules": [{"id": "a", "limit": 1, "window": "1s", "algorithm": "gcra", "burst": 2_000_000}]}),
            "SLUICE.rules[0].burst",
            "burst",
        ),
    ] {
        let e = error_of(value.clone());
        assert_eq!(e.field, field, "{value}");
        assert!(e.message.contains(words), "{value}: {}", e.message);
        for internal in [
            "Raw",
            "struct",
            "u64",
            "u8",
            "u16",
            "max_burst",
            "sequence",
            "map",
        ] {
            assert!(
                !e.message.contains(internal),
                "{value}: {} leaks {internal}",
                e.message
            );
        }
    }
    assert!(message(
        json!({"rules": [{"id": "a", "limit": 1, "window": "1s", "lease_ttl": "1s"}]})
    )
    .starts_with("SLUICE.rules[0].lease_ttl:"));
    assert!(message(
        json!({"rules": [{"id": "a", "limit": 1, "window": "1s", "queue": {"max_wait": "1s"}}]})
    )
    .starts_with("SLUICE.rules[0].queue:"));
    assert!(
        message(json!({"rules": [{"id": "a", "key": "{sub}", "limit": 1, "window": "1s"}]}))
            .starts_with("SLUICE.rules[0].key:")
    );
}

#[test]
fn count_takes_statuses_and_classes_where_a_refund_can_be_exact() {
    let rule = |extra: Value| {
        let mut rule = json!({"id": "login", "limit": 5, "window": "15m"});
        rule.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"origin": "demo", "rules": [rule]})
    };
    let config = Config::from_value(rule(json!({"count": {"status": [401, 403, "5xx"]}}))).unwrap();
    let counted = config.rules[0].count.as_ref().unwrap();
    assert!(counted.matches(401) && counted.matches(403) && counted.matches(503));
    assert!(!counted.matches(200) && !counted.matches(404) && !counted.matches(302));
    let all = Config::from_value(rule(json!({"count": "all"}))).unwrap();
    assert!(all.rules[0].count.is_none());
    let global = json!({"count": {"status": ["5xx"]}, "scope": "global", "split": 2});
    let global = Config::from_value(rule(global)).unwrap();
    assert!(global.rules[0].count.is_some(), "each part settles its own");
    for (extra, field) in [
        (json!({"count": "some"}), "SLUICE.rules[0].count"),
        (
            json!({"count": {"status": []}}),
            "SLUICE.rules[0].count.status",
        ),
        (
            json!({"count": {"status": [99]}}),
            "SLUICE.rules[0].count.status",
        ),
        (
            json!({"count": {"status": ["6xx"]}}),
            "SLUICE.rules[0].count.status",
        ),
        (
            json!({"count": {"status": [401], "when": 1}}),
            "SLUICE.rules[0].count.when",
        ),
        (
            json!({"count": {"status": [401]}, "concurrency": 3}),
            "SLUICE.rules[0].count",
        ),
        (
            json!({"count": {"status": [401]}, "algorithm": "gcra"}),
            "SLUICE.rules[0].count",
        ),
    ] {
        assert_eq!(error_field(rule(extra.clone())), field, "{extra}");
    }
}

#[test]
fn override_bodies_are_read_like_any_api_body_then_checked_against_the_tier() {
    use crate::config::override_body::{parse_override, OverrideRequest};
    use crate::http::body;
    let config = Config::from_value(with_rule(json!({}))).unwrap();
    let tier = &config.rules[0].tiers[0];
    let read = |body: Value| {
        body::read::<OverrideRequest>(Some("application/json"), body.to_string().as_bytes())
    };
    let Ok(Ok(raised)) = read(json!({"limit": 50, "window": "1m", "for": "1d"}))
        .map(|raw| parse_override(raw, tier))
    else {
        panic!("a raised limit is an override")
    };
    assert_eq!(
        (raised.policies[0].1.limit(), raised.for_ms),
        (50, Some(86_400_000))
    );
    let field = |body: Value| {
        let Err(problem) = read(body) else {
            panic!("accepted")
        };
        serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(field(json!({"limt": 50})), "limt");
    assert_eq!(field(json!({"limit": "50"})), "limit");
    assert_eq!(
        field(json!({"policies": [{"limit": 1}]})),
        "policies[0].window"
    );
    let check = |body: Value| match read(body).map(|raw| parse_override(raw, tier)) {
        Ok(Err(e)) => e.field,
        _ => panic!("read, then refused against the tier"),
    };
    assert_eq!(check(json!({"limit": 50, "window": "1h"})), "window");
    assert_eq!(
        check(json!({"limit": 50, "window": "1m", "for": "367d"})),
        "for"
    );
    assert_eq!(check(json!({"unlimited": true, "limit": 5})), "unlimited");
}

#[test]
fn an_override_s_shorthand_is_a_tier_s_one_policy() {
    use crate::config::override_body::{parse_override, OverrideRequest};
    use crate::http::body;
    let config = Config::from_value(json!({"origin": "demo", "rules": [
        {"id": "one", "match": {"path": "/one"}, "policies": [{"name": "day", "limit": 10, "window": "1d"}]},
        {"id": "two", "match": {"path": "/two"}, "policies": [
            {"name": "second", "limit": 2, "window": "1s"},
            {"name": "day", "limit": 10, "window": "1d"},
        ]},
    ]}))
    .unwrap();
    let parse = |rule: usize, body: Value| {
        let raw =
            body::read::<OverrideRequest>(Some("application/json"), body.to_string().as_bytes())
                .unwrap();
        parse_override(raw, &config.rules[rule].tiers[0])
    };
    let one = parse(0, json!({"limit": 50, "window": "1d"})).unwrap();
    assert_eq!(
        one.policies[0].0, "one.day",
        "the tier's one policy, by its name"
    );
    let two = parse(1, json!({"limit": 50, "window": "1d"})).unwrap_err();
    assert_eq!(two.field, "limit");
    assert!(
        two.message.contains("two.second, two.day"),
        "{}",
        two.message
    );
    let named = parse(
        1,
        json!({"policies": [{"name": "day", "limit": 50, "window": "1d"}]}),
    )
    .unwrap();
    assert_eq!(named.policies[0].0, "two.day");
}

#[test]
fn sold_out_closes_a_global_quota_of_one_limit_and_nothing_else() {
    let rule = |extra: Value| {
        let mut rule = json!({"id": "drop", "match": {"path": "/drop"}, "scope": "global", "split": 4, "limit": 8, "window": "30d", "sold_out": "close"});
        for (k, v) in extra.as_object().unwrap() {
            rule[k] = v.clone();
        }
        json!({"origin": "demo", "rules": [rule]})
    };
    let config = Config::from_value(rule(json!({}))).unwrap();
    assert!(config.rules[0].global.as_ref().unwrap().sold_out);
    let layered = Config::from_value(json!({"origin": "demo", "rules": [{
        "id": "buy", "key": "header:x-user", "limit": 1, "window": "1h",
        "also": [{"id": "all", "scope": "global", "split": 2, "limit": 4, "window": "30d", "sold_out": "close"}],
    }]}))
    .unwrap();
    assert!(layered.rules[0].also[0].global.as_ref().unwrap().sold_out);
    for (extra, field) in [
        (
            json!({"scope": "key", "split": null, "key": "ip"}),
            "sold_out",
        ),
        (json!({"sold_out": "later"}), "sold_out"),
        (
            json!({"limit": null, "window": null, "policies": [{"name": "a", "limit": 8, "window": "1s"}, {"name": "b", "limit": 80, "window": "1d"}]}),
            "sold_out",
        ),
        (json!({"split": null, "algorithm": "gcra"}), "sold_out"),
        (json!({"shadow": true}), "sold_out"),
    ] {
        let mut config = rule(extra.clone());
        let fields = config["rules"][0].as_object_mut().unwrap();
        fields.retain(|_, v| !v.is_null());
        let e = error_of(config);
        assert_eq!(
            e.field,
            format!("SLUICE.rules[0].{field}"),
            "{extra}: {}",
            e.message
        );
    }
}

#[test]
fn a_duration_out_of_range_is_quoted_as_written() {
    for (rule, field, quoted) in [
        (
            json!({"window": "60d"}),
            "SLUICE.rules[0].window",
            "got \"60d\"",
        ),
        (
            json!({"window": "1m", "ban": {"after": 2, "within": "31d", "for": "1h"}}),
            "SLUICE.rules[0].ban.within",
            "got \"31d\"",
        ),
        (
            json!({"window": "1m", "ban": {"after": 2, "within": "1m", "for": "2h", "max": "1h"}}),
            "SLUICE.rules[0].ban.max",
            "at least for (2h) and at most 365 days, got \"1h\"",
        ),
    ] {
        let mut spec = json!({"id": "a", "match": {"path": "/a"}, "limit": 1});
        spec.as_object_mut()
            .unwrap()
            .extend(rule.as_object().unwrap().clone());
        let e = error_of(json!({"rules": [spec]}));
        assert_eq!(e.field, field);
        assert!(e.message.ends_with(quoted), "{}", e.message);
        assert!(!e.message.contains(" ms,"), "{}", e.message);
    }
}
