//! Object names are injective: whatever rule ids, tier names, key templates
//! and request values a config and its callers use, two different
//! (rule, tier, key values) never name the same Durable Object, so no
//! caller can share (or reset, or ban) another's state.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::json;
use sluice::config::Config;
use sluice::http::key::KeyInputs;
use sluice::http::Incoming;

struct Headers(Vec<(&'static str, String)>);

impl Incoming for Headers {
    fn method(&self) -> &str {
        "GET"
    }

    fn header(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }
}

/// Key templates, each with the headers it reads.
const KEYS: &[(&str, &[&str])] = &[
    ("{header:x-a}:{header:x-b}", &["x-a", "x-b"]),
    ("header:x-a+header:x-b", &["x-a", "x-b"]),
    ("{header:x-a}|{header:x-b}", &["x-a", "x-b"]),
    ("k{header:x-a}", &["x-a"]),
    ("header:x-a", &["x-a"]),
    ("{header:x-a}.{header:x-b}", &["x-a", "x-b"]),
    // Refused by validation: with nothing between them, parts are ambiguous.
    ("{header:x-a}{header:x-b}", &["x-a", "x-b"]),
];

/// Request values: the tricky ones every case tries, plus random ones.
fn values() -> impl Strategy<Value = Vec<String>> {
    let random = prop_oneof![
        8 => prop::collection::vec(
            prop::sample::select(vec!["a", "b", ":", "|", ".", "%", "%3A", "e1", "sha256:", "*", "#0"]),
            1..5,
        )
        .prop_map(|parts| parts.concat()),
        1 => "[a-c]{520,530}",
    ];
    prop::collection::vec(random, 0..8).prop_map(|mut values| {
        for tricky in [
            "a", "b", "e1", "ae", "a:b", "b:a", "b:a:b", "a.b", "a|b", "a%3Ab", "%", "1",
        ] {
            values.push(tricky.to_string());
        }
        values.push(format!("sha256:{}", "0".repeat(64)));
        values
    })
}

fn name() -> impl Strategy<Value = String> {
    "[a-c_-]{1,3}".prop_filter("not starting with _", |n| !n.starts_with('_'))
}

/// Tier names, some of which validation refuses (`:` and `.` delimit the
/// parts of an object's name).
fn tier_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "a-b", "a:b", "b:a", "a.b", "a_b"]).prop_map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn different_callers_never_share_an_object(
        rules in prop::collection::btree_map(name(), (prop::collection::btree_set(tier_name(), 0..3), 0..KEYS.len()), 1..4),
        values in values(),
    ) {
        let raw_rules: Vec<_> = rules
            .iter()
            .map(|(id, (tiers, key))| {
                let (template, _) = KEYS[*key];
                if tiers.is_empty() {
                    json!({"id": id, "key": template, "limit": 1, "window": "1s"})
                } else {
                    let tiers: Vec<_> = tiers
                        .iter()
                        .map(|tier| json!({"name": tier, "key": template, "limit": 1, "window": "1s"}))
                        .collect();
                    json!({"id": id, "tiers": tiers})
                }
            })
            .collect();
        // Tiers without `when` all cover every caller; the config takes the
        // first, but each tier still names its own objects.
        let config = match Config::from_value(json!({"origin": "demo", "rules": raw_rules})) {
            Ok(config) => config,
            Err(e) => return Err(TestCaseError::reject(e.to_string())),
        };
        let inputs = KeyInputs { path: "/", params: &[], claims: None, action: None, ipv6_prefix: 64 };
        let mut seen: HashMap<String, (String, usize, Vec<String>)> = HashMap::new();
        for rule in &config.rules {
            let (_, reads) = KEYS[rules[&rule.id].1];
            for (tier_index, tier) in rule.tiers.iter().enumerate() {
                for a in &values {
                    for b in &values {
                        let request = Headers(vec![("x-a", a.clone()), ("x-b", b.clone())]);
                        let key = tier.key.build(&request, &inputs).expect("every header is present");
                        let object = format!("{}:{key}", tier.scope);
                        let used: Vec<String> = reads
                            .iter()
                            .map(|h| if *h == "x-a" { a.clone() } else { b.clone() })
                            .collect();
                        let identity = (rule.id.clone(), tier_index, used);
                        if let Some(earlier) = seen.get(&object) {
                            prop_assert_eq!(earlier, &identity, "two callers share {}", object);
                        }
                        seen.insert(object, identity);
                    }
                }
            }
        }
    }
}
