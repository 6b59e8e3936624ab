use proptest::prelude::*;
use serde::Deserialize;
use serde_json::json;

use super::*;

from_tree! {
    /// Read by [`from_tree!`] here, and by serde's derived reader
    /// (`serde_json::from_value`) to compare: the same fields and
    /// defaults.
    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Config {
        id: String = required "id",
        #[serde(default)]
        rules: Vec<Rule> = or_default "rules",
        tags: Option<Vec<String>> = optional "tags",
        on: Option<bool> = optional "on",
        #[serde(default)]
        strict: bool = or_default "strict",
        small: Option<u8> = optional "small",
        any: Option<Value> = optional "any",
    }
}

from_tree! {
    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Rule {
        limit: u32 = required "limit",
        also: Option<Vec<Rule>> = optional "also",
        scope: Option<String> = optional "scope",
        big: Option<u64> = optional "big",
        port: Option<u16> = optional "port",
    }
}

fn error(value: Value) -> (Option<String>, String) {
    let e = from_value::<Config>(value.clone()).expect_err(&value.to_string());
    (e.field(), e.words(Dialect::Toml))
}

/// A message of serde's, and the path `serde_path_to_error` gave it, in
/// the writer's words as they were made from them before this module
/// wrote them directly: the reference the cases below are checked with.
fn serde_words(path: &str, message: &str, dialect: Dialect) -> (Option<String>, String) {
    let field = (path != ".").then(|| path.to_string());
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        let field = match field {
            Some(path) => format!("{path}.{name}"),
            None => name.to_string(),
        };
        return (Some(field), format!("{name} is required"));
    }
    let Some((got, expected)) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return (field, message.replace('`', "\""));
    };
    let max = match expected {
        "u8" => Some(u64::from(u8::MAX)),
        "u16" => Some(u64::from(u16::MAX)),
        "u32" => Some(u64::from(u32::MAX)),
        "u64" => Some(u64::MAX),
        _ => None,
    };
    let wanted = match (max, expected) {
        (Some(max), _) => {
            let too_large = got
                .strip_prefix("integer `")
                .and_then(|n| n.strip_suffix('`'))
                .and_then(|n| n.parse::<u128>().ok())
                .is_some_and(|n| n > u128::from(max));
            if too_large {
                format!("a whole number up to {max}")
            } else {
                "a non-negative whole number".to_string()
            }
        }
        (None, e) if e.starts_with("struct ") || e == "a map" => dialect.map().to_string(),
        (None, "a sequence") => dialect.sequence().to_string(),
        (None, other) => other.to_string(),
    };
    let quoted = |prefix: &str| {
        got.strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_string())
    };
    let found = match got {
        "sequence" => dialect.sequence().to_string(),
        "map" => dialect.map().to_string(),
        "null" => "nothing".to_string(),
        _ => quoted("floating point ")
            .or_else(|| quoted("integer "))
            .map(|v| format!("the number {v}"))
            .or_else(|| quoted("boolean "))
            .or_else(|| {
                got.strip_prefix("string ")
                    .map(|v| format!("the string {v}"))
            })
            .unwrap_or_else(|| got.to_string()),
    };
    (field, format!("expected {wanted}, got {found}"))
}

#[test]
fn values_read_as_serde_reads_them() {
    let value = json!({
        "id": "a",
        "rules": [{"limit": 1, "also": [{"limit": 2, "scope": "global", "big": u64::MAX}]}],
        "tags": ["x"],
        "on": null,
        "strict": true,
        "small": 255,
        "any": {"k": [1, "v"]},
    });
    let read: Config = from_value(value.clone()).unwrap();
    assert_eq!(read, serde_json::from_value::<Config>(value).unwrap());
    assert_eq!(read.rules[0].also.as_ref().unwrap()[0].big, Some(u64::MAX));
    let bare: Config = from_value(json!({"id": "b"})).unwrap();
    assert_eq!(
        bare,
        Config {
            id: "b".into(),
            ..Config::default()
        }
    );
}

/// Each case's path and message as `serde_path_to_error` gave them
/// over `serde_json::Value` (checked against it when this module
/// first replaced it).
#[test]
fn an_error_names_the_path_to_it() {
    let also =
        |layer: Value| json!({"id": "a", "rules": [{"limit": 1, "also": [{"limit": 1}, layer]}]});
    let cases = [
        (
            json!(7),
            ".",
            "invalid type: integer `7`, expected struct Config",
        ),
        (json!({}), ".", "missing field `id`"),
        (
            json!({"id": 7}),
            "id",
            "invalid type: integer `7`, expected a string",
        ),
        (
            json!({"id": "a", "zzz": 1}),
            "zzz",
            "unknown field `zzz`, expected one of `id`, `rules`, `tags`, `on`, `strict`, `small`, `any`",
        ),
        (
            also(json!({"limit": "x"})),
            "rules[0].also[1].limit",
            "invalid type: string \"x\", expected u32",
        ),
        (
            also(json!({"limit": -1})),
            "rules[0].also[1].limit",
            "invalid value: integer `-1`, expected u32",
        ),
        (
            also(json!({"limit": 1.5})),
            "rules[0].also[1].limit",
            "invalid type: floating point `1.5`, expected u32",
        ),
        (
            also(json!({"limit": 10.0})),
            "rules[0].also[1].limit",
            "invalid type: floating point `10.0`, expected u32",
        ),
        (also(json!({})), "rules[0].also[1]", "missing field `limit`"),
        (
            also(json!({"limit": 1, "x": 2})),
            "rules[0].also[1].x",
            "unknown field `x`, expected one of `limit`, `also`, `scope`, `big`, `port`",
        ),
        (
            also(json!({"limit": 1, "port": 65536})),
            "rules[0].also[1].port",
            "invalid value: integer `65536`, expected u16",
        ),
        (
            json!({"id": "a", "rules": {}}),
            "rules",
            "invalid type: map, expected a sequence",
        ),
        (
            json!({"id": "a", "rules": [1]}),
            "rules[0]",
            "invalid type: integer `1`, expected struct Rule",
        ),
        (
            json!({"id": "a", "rules": [[1]]}),
            "rules[0]",
            "invalid type: sequence, expected struct Rule",
        ),
        (
            json!({"id": "a", "tags": ["x", null]}),
            "tags[1]",
            "invalid type: null, expected a string",
        ),
        (
            json!({"id": "a", "small": 300}),
            "small",
            "invalid value: integer `300`, expected u8",
        ),
        (
            json!({"id": "a", "strict": null}),
            "strict",
            "invalid type: null, expected a boolean",
        ),
        (
            json!({"id": null}),
            "id",
            "invalid type: null, expected a string",
        ),
        // The first error by the object's keys (sorted), then the
        // first missing field.
        (
            json!({"id": 1, "zzz": 1}),
            "id",
            "invalid type: integer `1`, expected a string",
        ),
        (
            json!({"aaa": 1, "id": 1}),
            "aaa",
            "unknown field `aaa`, expected one of `id`, `rules`, `tags`, `on`, `strict`, `small`, `any`",
        ),
        (json!({"rules": [{}]}), "rules[0]", "missing field `limit`"),
    ];
    for (value, path, message) in cases {
        assert_eq!(
            error(value.clone()),
            serde_words(path, message, Dialect::Toml),
            "{value}"
        );
    }
}

#[test]
fn an_unknown_field_lists_the_known_ones_as_serde_does() {
    let unknown = |names: &'static [&'static str]| {
        Error::new(Kind::Unknown("b".into(), names)).words(Dialect::Json)
    };
    assert_eq!(unknown(&[]), "unknown field \"b\", there are no fields");
    assert_eq!(unknown(&["a"]), "unknown field \"b\", expected \"a\"");
    assert_eq!(
        unknown(&["a", "c"]),
        "unknown field \"b\", expected \"a\" or \"c\""
    );
}

#[test]
fn shape_errors_are_in_the_writers_words() {
    let words = |value: Value, dialect| {
        let e = from_value::<Rule>(value).unwrap_err();
        (e.field(), e.words(dialect))
    };
    let toml = |value| words(value, Dialect::Toml);
    let field = |name: &str| Some(name.to_string());
    assert_eq!(
        toml(json!("/api/*")),
        (None, "expected a table, got the string \"/api/*\"".into())
    );
    assert_eq!(
        toml(json!({"limit": 10.0})),
        (
            field("limit"),
            "expected a non-negative whole number, got the number 10.0".into()
        )
    );
    assert_eq!(
        toml(json!({"limit": 1, "port": -1})),
        (
            field("port"),
            "expected a non-negative whole number, got the number -1".into()
        )
    );
    assert_eq!(
        toml(json!({"limit": 1, "port": 65536})),
        (
            field("port"),
            "expected a whole number up to 65535, got the number 65536".into()
        )
    );
    assert_eq!(
        toml(json!({"limit": "5"})),
        (
            field("limit"),
            "expected a non-negative whole number, got the string \"5\"".into()
        )
    );
    assert_eq!(
        toml(json!({})),
        (field("limit"), "limit is required".into())
    );
    assert_eq!(
        toml(json!({"limit": 1, "also": [{}]})),
        (field("also[0].limit"), "limit is required".into())
    );
    assert_eq!(
        words(json!([1]), Dialect::Json),
        (None, "expected an object, got an array".into())
    );
    assert_eq!(
        toml(json!({"limit": 1, "also": {}})),
        (field("also"), "expected a list, got a table".into())
    );
    assert_eq!(
        toml(json!({"limt": 1})),
        (
            field("limt"),
            "unknown field \"limt\", expected one of \"limit\", \"also\", \"scope\", \"big\", \"port\"".into()
        )
    );
}

/// Any JSON value: scalars of every kind a field may be wrongly given,
/// and arrays and objects of them, with the test types' field names
/// and a stranger among the keys.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(0u64),
            Just(255),
            Just(256),
            Just(65_536),
            Just(u64::MAX)
        ]
        .prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        prop_oneof![Just(1.5f64), Just(10.0), Just(-0.5)].prop_map(Value::from),
        "[a-z\"]{0,3}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        let key = prop_oneof![
            Just("id"),
            Just("rules"),
            Just("tags"),
            Just("on"),
            Just("strict"),
            Just("small"),
            Just("any"),
            Just("limit"),
            Just("also"),
            Just("scope"),
            Just("big"),
            Just("port"),
            Just("zz"),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map(key.prop_map(String::from), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Whether `value`, read as a test type, holds an array where a
/// struct is read: serde reads one as the struct's fields in order,
/// this module refuses it (no config or body was meant to be one).
fn struct_as_array(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => ["rules", "also"].iter().any(|key| {
            matches!(map.get(*key), Some(Value::Array(items)) if items.iter().any(struct_as_array))
        }),
        _ => false,
    }
}

proptest! {
    #[test]
    fn reads_and_refuses_as_serde_does(fields in any_value()) {
        let value = match fields {
            Value::Object(mut map) => {
                map.entry("id").or_insert_with(|| Value::from("a"));
                Value::Object(map)
            }
            other => other,
        };
        prop_assume!(!struct_as_array(&value));
        let hand = from_value::<Config>(value.clone()).map_err(|e| e.words(Dialect::Toml));
        let serde = serde_json::from_value::<Config>(value)
            .map_err(|e| serde_words(".", &e.to_string(), Dialect::Toml).1);
        prop_assert_eq!(hand, serde);
    }
}

#[test]
fn a_text_parses_as_serde_json_parses_it() {
    for text in [
        r#"{"a":[1,-2,-0,2.5,-2.5e-3,1e3,18446744073709551615,18446744073709551616,-9223372036854775809],"b":{"c":null,"d":true,"e":false},"f":"x\u00e9\n"}"#,
        " [ ] ",
        "0",
        "\"\"",
        "-0.0E+1",
    ] {
        assert_eq!(
            parse(text),
            Ok(serde_json::from_str::<Value>(text).unwrap()),
            "{text}"
        );
    }
}

#[test]
fn what_is_not_json_is_placed_by_line_and_column() {
    for (text, line, column) in [
        ("", 1, 1),
        ("{\"a\" 1}", 1, 6),
        ("{\"a\":1,}", 1, 8),
        ("[1,\n 2", 2, 3),
        ("[1] 2", 1, 5),
        ("1e400", 1, 6),
        ("\"\\ud800\"", 1, 8),
        ("nul", 1, 1),
    ] {
        assert_eq!(
            parse(text),
            Err(Unreadable::Syntax(line, column)),
            "{text:?}"
        );
    }
    let depth = super::super::scan::MAX_DEPTH as usize;
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(parse(&nested(depth)).is_ok());
    assert!(matches!(
        parse(&nested(depth + 1)),
        Err(Unreadable::Syntax(..))
    ));
    assert!(matches!(
        parse(&"[".repeat(100_000)),
        Err(Unreadable::Syntax(..))
    ));
}

#[test]
fn the_first_repeated_key_is_named_by_its_path() {
    for (json, repeated) in [
        (r#"{"key":"a","key":"b"}"#, "key"),
        (r#"{"sub":"alice","s\u0075b":"admin"}"#, "sub"),
        (r#"{"ctx":{"role":"user","role":"admin"}}"#, "ctx.role"),
        (
            r#"{"policies":[{"name":"a"},{"name":"b","limit":1,"limit":2}]}"#,
            "policies[1].limit",
        ),
        (r#"[[{"a":1}],[{"a":1,"a":1}]]"#, "[1][0].a"),
        (r#"{"b":{"x":1,"x":2},"a":1,"a":2}"#, "b.x"),
        (r#"{"a":1,"a":{"x":1,"x":2}}"#, "a"),
    ] {
        assert_eq!(
            parse(json),
            Err(Unreadable::Repeated(repeated.to_string())),
            "{json}"
        );
    }
    for json in [
        r#"{"a":{"a":1},"b":[{"a":1},{"a":2}],"sub":"x"}"#,
        r#"{"a":"a","A":"a"}"#,
    ] {
        assert!(parse(json).is_ok(), "{json}");
    }
    // What is not JSON says so first, wherever the repeat is.
    assert!(matches!(
        parse(r#"{"a":1,"a":2,}"#),
        Err(Unreadable::Syntax(..))
    ));
}

proptest! {
    #[test]
    fn any_value_written_parses_back(value in any_value()) {
        let text = value.to_string();
        prop_assert_eq!(parse(&text), Ok(value));
    }
}

proptest! {
    /// Floats of up to 15 digits scaled by at most 22 powers of ten (what
    /// people write) read as serde_json reads them, bit for bit (beyond,
    /// serde_json rounds twice and may land one float away).
    #[test]
    fn floats_read_as_serde_json_reads_them(
        digits in "-?(0|[1-9][0-9]{0,7})\\.[0-9]{1,7}",
        exponent in prop::option::of(-15i32..=15),
    ) {
        let text = match exponent {
            Some(e) => format!("{digits}e{e}"),
            None => digits,
        };
        prop_assert_eq!(parse(&text), Ok(serde_json::from_str::<Value>(&text).unwrap()));
    }
}

#[test]
fn a_place_inside_a_character_is_no_panic() {
    // The escape's backslash is read, then the first byte of `꯸`: the
    // reader stops inside the character.
    assert_eq!(parse("\";\\꯸\""), Err(Unreadable::Syntax(1, 5)));
}
