use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::config::Config;
use crate::http::path::RequestPath;

fn config(rules: Value) -> Result<Config, ConfigError> {
    Config::from_value(json!({"origin": "demo", "rules": rules}))
}

/// Rules validated one by one, so that a set of them may hold a rule that
/// never applies.
fn rules(specs: &[Value]) -> Vec<Rule> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mut spec = spec.clone();
            spec["id"] = json!(format!("r{i}"));
            config(json!([spec])).unwrap().rules.remove(0)
        })
        .collect()
}

const ROOM: &str = "shop";

fn room(path: &str) -> Value {
    json!({"id": ROOM, "match": {"path": path}, "waiting_room": {"active": 1, "per_minute": 1}})
}

#[test]
fn a_rule_behind_a_room_on_its_paths_never_applies_and_the_error_names_both() {
    let e = config(json!([
        room("/shop/*"),
        {"id": "buy", "match": {"path": "/shop/checkout", "methods": ["POST"]}, "limit": 1, "window": "1m"},
    ]))
    .unwrap_err();
    assert_eq!(e.field, "SLUICE.rules[1].match");
    assert!(e.message.contains("\"buy\""), "{}", e.message);
    assert!(e.message.contains("rules[0] (\"shop\")"), "{}", e.message);
    // Two rooms on one path.
    let mut other = room("/shop/*");
    other["id"] = json!("hall");
    let e = config(json!([room("/shop/*"), other])).unwrap_err();
    assert_eq!(e.field, "SLUICE.rules[1].match");
    // Before the room, it applies.
    config(json!([
        {"id": "buy", "match": {"path": "/shop/checkout"}, "limit": 1, "window": "1m"},
        room("/shop/*"),
    ]))
    .unwrap();
}

#[test]
fn rules_that_only_partly_overlap_are_no_error() {
    for pair in [
        // Other methods pass the first.
        json!([{"match": {"path": "/shop/*", "methods": ["GET"]}}, {"match": {"path": "/shop/checkout"}}]),
        // A case-sensitive rule leaves other spellings.
        json!([{"match": {"path": "/API"}, "paths": {"case": "sensitive"}}, {"match": {"path": "/api"}}]),
        // A strict rule on /api/* does not match /api.
        json!([{"match": {"path": "/api/*"}, "paths": {"trailing_slash": "strict"}}, {"match": {"path": "/api"}}]),
        // /a* matches /ab, which neither earlier one does.
        json!([{"match": {"path": "/a"}}, {"match": {"path": "/a/*"}}, {"match": {"path": "/a*"}}]),
        // The root.
        json!([{"match": {"path": "/:x"}}, {"match": {"path": "/:x/*"}}, {"match": {"path": "/*"}}]),
    ] {
        let mut specs: Vec<Value> = pair.as_array().unwrap().clone();
        for (i, spec) in specs.iter_mut().enumerate() {
            spec["id"] = json!(format!("r{i}"));
            spec["limit"] = json!(1);
            spec["window"] = json!("1s");
        }
        config(Value::Array(specs.clone())).unwrap_or_else(|e| panic!("{specs:?}: {e}"));
    }
}

#[test]
fn a_looser_rule_takes_a_stricter_ones_requests() {
    let limit = |path: &str, methods: Value, paths: Value| json!({"match": {"path": path, "methods": methods}, "paths": paths, "limit": 1, "window": "1s"});
    let strict = json!({"trailing_slash": "strict", "case": "sensitive"});
    let cases = [
        // /api/* (ignoring a trailing slash) matches /api as /api/.
        vec![
            limit("/api/*", json!(["GET"]), json!({})),
            limit("/api", json!(["GET"]), strict.clone()),
        ],
        // A case-insensitive rule takes every spelling of a sensitive one's.
        vec![
            limit("/api", json!(["GET"]), json!({})),
            limit("/API", json!(["GET"]), strict.clone()),
        ],
        // A parameter takes any one segment.
        vec![
            limit("/u/:id/*", json!(null), json!({})),
            limit("/u/ann/x", json!(["POST"]), json!({})),
        ],
    ];
    for specs in cases {
        let specs: Vec<Value> = specs
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                s["id"] = json!(format!("r{i}"));
                s
            })
            .collect();
        let e = config(Value::Array(specs.clone())).unwrap_err();
        assert_eq!(e.field, "SLUICE.rules[1].match");
        assert!(e.message.contains("rules[0] (\"r0\")"), "{}", e.message);
    }
}

/// A pattern over a few characters: whole segments of literal text or a
/// parameter, and maybe a `*` at the end.
fn pattern() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("a".to_string()),
        Just("A".to_string()),
        Just(".a".to_string()),
        Just("p".to_string()),
    ];
    (prop::collection::vec(segment, 0..3), 0..4u8).prop_map(|(segments, end)| {
        let mut text = String::new();
        for (i, segment) in segments.iter().enumerate() {
            text.push('/');
            if segment == "p" {
                text.push_str(&format!(":p{i}"));
            } else {
                text.push_str(segment);
            }
        }
        match end {
            0 if !text.is_empty() => {}
            1 if !text.is_empty() && !text.ends_with(|c: char| c.is_ascii_digit()) => {
                text.push('*')
            }
            2 => text.push_str("/*"),
            _ => text.push('/'),
        }
        text
    })
}

fn rule_spec() -> impl Strategy<Value = Value> {
    let methods = prop_oneof![
        Just(Value::Null),
        Just(json!(["GET"])),
        Just(json!(["POST"])),
        Just(json!(["GET", "POST"])),
    ];
    (pattern(), methods, any::<bool>(), any::<bool>()).prop_map(|(path, methods, case, slash)| {
        let mut spec = json!({
            "match": {"path": path},
            "paths": {
                "case": if case { "sensitive" } else { "insensitive" },
                "trailing_slash": if slash { "strict" } else { "ignore" },
            },
            "limit": 1,
            "window": "1s",
        });
        if !methods.is_null() {
            spec["match"]["methods"] = methods;
        }
        spec
    })
}

/// Every raw path of up to `len` characters from `/` and a few others,
/// each starting with `/`: what the real matcher is run over.
fn raw_paths(len: usize) -> Vec<String> {
    let mut paths = vec!["/".to_string()];
    let mut frontier = paths.clone();
    for _ in 1..len {
        frontier = frontier
            .iter()
            .flat_map(|p| ['/', 'a', 'A', '.', 'z'].map(|c| format!("{p}{c}")))
            .collect();
        paths.extend(frontier.iter().cloned());
    }
    paths
}

/// The first rule of `rules` the real matcher picks for a request.
fn first(rules: &[Rule], method: &str, path: &str) -> Option<usize> {
    let config = Config {
        rules: rules.to_vec(),
        ..Config::default()
    };
    let path = RequestPath::new(path);
    let (rule, _) = config.rule_for(method, &path)?;
    rules.iter().position(|r| r.id == rule.id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Against the real matcher: when a rule is said to take another's
    /// requests, no request up to seven characters long (with GET, POST
    /// or another method) reaches the other behind it.
    #[test]
    fn a_rule_said_to_take_anothers_requests_leaves_it_none(specs in prop::collection::vec(rule_spec(), 2)) {
        let rules = rules(&specs);
        if takes(&rules[0], &rules[1]) {
            for method in ["GET", "POST", "ZZZ"] {
                for path in &raw_paths(7) {
                    prop_assert_ne!(
                        first(&rules, method, path), Some(1),
                        "{} {} applies rules[1] of {:?}", method, path, specs
                    );
                }
            }
        }
    }
}

#[test]
fn a_config_of_many_rules_that_never_take_each_others_requests_is_valid() {
    let specs: Vec<Value> = (0..120)
        .map(|i| {
            let path = match i % 3 {
                0 => format!("/api/v{i}/*"),
                1 => format!("/u/:id/item{i}/:x"),
                _ => format!("/shop/{i}/*"),
            };
            json!({"id": format!("r{i}"), "match": {"path": path}, "limit": 1, "window": "1s"})
        })
        .collect();
    config(Value::Array(specs)).unwrap();
}
