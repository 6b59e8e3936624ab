//! Stacked limits (`also`): what a valid stack holds, the order its layers
//! are asked in, and an error naming the field for each way to get it
//! wrong.

use serde_json::{json, Value};

use super::error_field;
use crate::config::Config;
use crate::limit::Spec;

/// The flash sale's rule: 1 per user per minute under 10 000 a minute in
/// total, with `extra` fields over it.
fn checkout(extra: Value) -> Value {
    let mut rule = json!({
        "id": "checkout",
        "match": {"path": "/checkout", "methods": ["POST"]},
        "key": "header:x-user",
        "limit": 1,
        "window": "1m",
        "also": [{"id": "all", "scope": "global", "split": 8, "limit": 10_000, "window": "1m"}],
    });
    rule.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"origin": "demo", "jwt": {}, "rules": [rule]})
}

fn parsed(value: Value) -> Config {
    Config::from_value(value).unwrap()
}

/// The scope, policy names and whether keyed, of each layer in ask order.
fn levels(config: &Config) -> Vec<(String, Vec<String>, bool)> {
    let rule = &config.rules[0];
    rule.levels(&rule.tiers[0])
        .iter()
        .map(|l| {
            let names = l.policies.iter().map(|(n, _)| n.clone()).collect();
            (l.scope.id().to_string(), names, l.key.is_some())
        })
        .collect()
}

#[test]
fn a_per_user_layer_under_a_split_global_one() {
    let config = parsed(checkout(json!({})));
    let rule = &config.rules[0];
    let layer = &rule.also[0];
    assert_eq!(layer.scope.to_string(), "rule:checkout.all");
    assert_eq!(layer.policies[0].0, "checkout.all");
    assert_eq!(layer.policies[0].1.limit(), 10_000);
    let parts = &layer.global.as_ref().unwrap().parts;
    assert_eq!(parts.len(), 8);
    assert_eq!(parts.iter().map(|p| p[0].1.limit()).sum::<u64>(), 10_000);
    assert_eq!(
        levels(&config),
        [
            ("checkout".into(), vec!["checkout".into()], true),
            ("checkout.all".into(), vec!["checkout.all".into()], false),
        ]
    );
    let levels = rule.levels(&rule.tiers[0]);
    assert!(levels[0].own && !levels[1].own);
    assert_eq!(levels[1].split_parts().map(<[_]>::len), Some(8));
    assert!(levels[0].split_parts().is_none());
}

#[test]
fn layers_with_a_key_are_asked_before_global_ones_whatever_the_order_written() {
    // A global rule with a per-user layer: the layer is asked first.
    let config = parsed(json!({"origin": "demo", "rules": [{
        "id": "sale", "scope": "global", "limit": 100, "window": "1m",
        "also": [
            {"id": "total", "scope": "global", "limit": 1000, "window": "1h"},
            {"id": "user", "key": "header:x-user", "limit": 1, "window": "1m"},
            {"id": "ip", "key": "ip", "policies": [
                {"name": "minute", "limit": 5, "window": "1m"},
                {"name": "day", "limit": 50, "window": "1d", "algorithm": "fixed_window"},
            ]},
        ],
    }]}));
    let order: Vec<String> = levels(&config).into_iter().map(|l| l.0).collect();
    assert_eq!(order, ["sale.user", "sale.ip", "sale", "sale.total"]);
    assert_eq!(
        levels(&config)[1].1,
        ["sale.ip.minute".to_string(), "sale.ip.day".to_string()]
    );
}

#[test]
fn a_layer_counts_as_the_rule_does_unless_it_says() {
    let config = parsed(json!({"origin": "demo", "rules": [{
        "id": "login", "key": "ip+header:x-user", "limit": 5, "window": "15m",
        "count": {"status": [401]},
        "also": [
            {"id": "ip", "key": "ip", "limit": 50, "window": "15m"},
            {"id": "errors", "key": "ip", "limit": 500, "window": "15m", "count": {"status": ["5xx"]}},
            {"id": "every", "scope": "global", "limit": 5000, "window": "1m", "count": "all"},
        ],
    }]}));
    let also = &config.rules[0].also;
    assert!(also[0].count.as_ref().is_some_and(|c| c.matches(401)));
    let errors = also[1].count.as_ref().unwrap();
    assert!(errors.matches(503) && !errors.matches(401));
    assert!(also[2].count.is_none());
}

#[test]
fn gcra_is_for_the_last_layer_that_counts_every_request() {
    let last_gcra = json!({"also": [{"id": "all", "scope": "global", "limit": 100, "window": "1s", "algorithm": "gcra"}]});
    let config = parsed(checkout(last_gcra));
    assert!(matches!(
        config.rules[0].also[0].policies[0].1,
        Spec::Gcra(_)
    ));
    let cases = [
        (json!({"algorithm": "gcra"}), "SLUICE.rules[0].algorithm"),
        (
            json!({"policies": [{"name": "burst", "limit": 5, "window": "1s", "algorithm": "gcra"}],
                   "limit": null, "window": null}),
            "SLUICE.rules[0].policies[0].algorithm",
        ),
        (
            json!({"also": [
                {"id": "ip", "key": "ip", "limit": 5, "window": "1s", "algorithm": "gcra"},
                {"id": "all", "scope": "global", "limit": 100, "window": "1s"},
            ]}),
            "SLUICE.rules[0].also[0].algorithm",
        ),
        (
            json!({"also": [{"id": "all", "scope": "global", "limit": 100, "window": "1s",
                             "algorithm": "gcra", "count": {"status": [500]}}]}),
            "SLUICE.rules[0].also[0].algorithm",
        ),
    ];
    for (extra, field) in cases {
        assert_eq!(error_field(checkout(extra.clone())), field, "{extra}");
    }
    let tiered = json!({"key": null, "limit": null, "window": null, "tiers": [
        {"name": "registered", "when": "registered", "limit": 5, "window": "1s", "algorithm": "gcra"},
        {"name": "anonymous", "when": "anonymous", "limit": 1, "window": "1s"},
    ]});
    assert_eq!(
        error_field(checkout(tiered)),
        "SLUICE.rules[0].tiers[0].algorithm"
    );
}

#[test]
fn tiers_shadow_and_bans_stack_and_concurrency_does_not() {
    let tiered = parsed(checkout(
        json!({"key": null, "limit": null, "window": null, "tiers": [
        {"name": "registered", "when": "registered", "limit": 5, "window": "1m"},
        {"name": "anonymous", "when": "anonymous", "key": "ip", "limit": 1, "window": "1m"},
    ], "shadow": true, "ban": {"after": 3, "within": "1h", "for": "15m"}}),
    ));
    let rule = &tiered.rules[0];
    for tier in &rule.tiers {
        let levels = rule.levels(tier);
        assert_eq!(levels.len(), 2);
        assert_eq!(levels[0].scope, &tier.scope);
        assert!(
            levels[0].ban.is_some() && levels[1].ban.is_none(),
            "a ban is the rule's own layer's"
        );
    }
    assert_eq!(
        error_field(checkout(json!({"concurrency": 2}))),
        "SLUICE.rules[0].also"
    );
}

#[test]
fn every_invalid_layer_names_its_field() {
    let layer = |extra: Value| {
        let mut layer = json!({"id": "ip", "key": "ip", "limit": 5, "window": "1m"});
        layer
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        checkout(json!({"also": [layer]}))
    };
    let two = |a: Value, b: Value| checkout(json!({"also": [a, b]}));
    let global = json!({"id": "all", "scope": "global", "limit": 10, "window": "1m"});
    let cases = [
        (checkout(json!({"also": []})), "SLUICE.rules[0].also"),
        (
            checkout(json!({"also": [global, global, global, global]})),
            "SLUICE.rules[0].also",
        ),
        (checkout(json!({"also": {}})), "SLUICE.rules[0].also"),
        (layer(json!({"id": "a.b"})), "SLUICE.rules[0].also[0].id"),
        (layer(json!({"id": ""})), "SLUICE.rules[0].also[0].id"),
        (layer(json!({"id": 7})), "SLUICE.rules[0].also[0].id"),
        (
            checkout(json!({"also": [{"key": "ip", "limit": 1, "window": "1m"}]})),
            "SLUICE.rules[0].also[0].id",
        ),
        (
            two(global.clone(), global.clone()),
            "SLUICE.rules[0].also[1].id",
        ),
        (
            two(
                global.clone(),
                json!({"id": "b", "scope": "global", "limit": "ten", "window": "1m"}),
            ),
            "SLUICE.rules[0].also[1].limit",
        ),
        (layer(json!({"key": null})), "SLUICE.rules[0].also[0].key"),
        (
            layer(json!({"key": null, "scope": "key"})),
            "SLUICE.rules[0].also[0].key",
        ),
        (
            layer(json!({"scope": "global"})),
            "SLUICE.rules[0].also[0].key",
        ),
        (
            layer(json!({"scope": "everyone"})),
            "SLUICE.rules[0].also[0].scope",
        ),
        (layer(json!({"split": 4})), "SLUICE.rules[0].also[0].split"),
        (
            layer(json!({"key": null, "scope": "global", "split": 65})),
            "SLUICE.rules[0].also[0].split",
        ),
        (
            layer(json!({"key": null, "scope": "global", "split": 11, "limit": 10})),
            "SLUICE.rules[0].also[0].split",
        ),
        (
            layer(json!({"key": "header:"})),
            "SLUICE.rules[0].also[0].key",
        ),
        (
            layer(json!({"key": "param:id"})),
            "SLUICE.rules[0].also[0].key",
        ),
        (
            layer(json!({"key": "{action}"})),
            "SLUICE.rules[0].also[0].key",
        ),
        (
            layer(json!({"limit": null})),
            "SLUICE.rules[0].also[0].limit",
        ),
        (layer(json!({"limit": 0})), "SLUICE.rules[0].also[0].limit"),
        (
            layer(json!({"window": "soon"})),
            "SLUICE.rules[0].also[0].window",
        ),
        (
            layer(json!({"policies": [{"limit": 1, "window": "1s"}]})),
            "SLUICE.rules[0].also[0].policies",
        ),
        (
            layer(json!({"count": {"status": [99]}})),
            "SLUICE.rules[0].also[0].count.status",
        ),
        (layer(json!({"count": 1})), "SLUICE.rules[0].also[0].count"),
        (layer(json!({"ban": {}})), "SLUICE.rules[0].also[0].ban"),
    ];
    for (config, field) in cases {
        assert_eq!(error_field(config.clone()), field, "{config}");
    }
}

#[test]
fn a_layer_cannot_take_the_names_of_a_tier_or_of_the_rules_own_policies() {
    let tiers = json!({"key": null, "limit": null, "window": null, "tiers": [
        {"name": "all", "when": "registered", "limit": 5, "window": "1m"},
        {"name": "anonymous", "when": "anonymous", "key": "ip", "limit": 1, "window": "1m"},
    ]});
    assert_eq!(error_field(checkout(tiers)), "SLUICE.rules[0].also[0].id");
    let policies = json!({"limit": null, "window": null, "policies": [
        {"name": "all", "limit": 5, "window": "1m"},
        {"name": "day", "limit": 50, "window": "1d"},
    ]});
    assert_eq!(
        error_field(checkout(policies)),
        "SLUICE.rules[0].also[0].id"
    );
}

#[test]
fn a_layer_keyed_by_a_claim_needs_the_jwt_config() {
    let mut config =
        checkout(json!({"also": [{"id": "user", "key": "{sub}", "limit": 1, "window": "1m"}]}));
    let accepted = parsed(config.clone());
    assert!(accepted.rules[0].uses_jwt());
    config.as_object_mut().unwrap().remove("jwt");
    assert_eq!(error_field(config), "SLUICE.rules[0].also[0].key");
}
