//! A serde type read out of a parsed JSON value, with the path of the
//! first error (`rules[0].also[1].limit`), for the config and the API
//! bodies.
//!
//! `serde_path_to_error` named the path before, by wrapping the
//! deserializer and every visitor it met: a wrapped copy of each type's
//! reader for each type read (47 KB of the wasm, 12 KB gzip). Here the
//! path is added as an error comes back out through the maps, arrays and
//! enums it was found in, so the only copies are serde's own, one per
//! type. The values read and the messages are `serde_json::from_value`'s,
//! and the path is written as `serde_path_to_error` wrote it; one thing
//! differs: a struct is read from an object only, never from an array of
//! its fields in order, which no config or body was meant to be (the
//! words a caller makes of either refusal are the same: `expected an
//! object, got an array`).
//!
//! A `Value` holds one copy of a repeated key, so refusing one is the
//! caller's, on the text (`http::body` does, with `unique_keys`). Object
//! calls and stored rows need no path and are not read through a `Value`
//! (2-4 times slower to parse): they are read by hand over [`super::scan`].

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, Expected, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};

/// `value` read as a `T`, or the first error and where it was found.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    T::deserialize(Tree(value))
}

/// An error and the path to where it was found.
#[derive(Debug)]
pub struct Error {
    /// Innermost first: each map, array or enum the error comes out of
    /// adds its step at the end.
    steps: Vec<Step>,
    message: String,
}

#[derive(Debug)]
enum Step {
    Key(String),
    Index(usize),
}

impl Error {
    /// The path as `serde_path_to_error` writes it: keys joined by dots,
    /// indexes in brackets (`items[0].size`), `.` for the whole value.
    pub fn path(&self) -> String {
        if self.steps.is_empty() {
            return ".".to_string();
        }
        let mut path = String::new();
        for step in self.steps.iter().rev() {
            match step {
                Step::Index(i) => path.push_str(&format!("[{i}]")),
                Step::Key(key) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
            }
        }
        path
    }

    /// What is wrong, in serde's words (`missing field `id``).
    pub fn message(&self) -> &str {
        &self.message
    }

    fn at(mut self, step: Step) -> Error {
        self.steps.push(step);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path(), self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Error {
        Error {
            steps: Vec::new(),
            message: message.to_string(),
        }
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Error {
        mismatch("type", unexpected, expected)
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Error {
        mismatch("value", unexpected, expected)
    }
}

/// `invalid type: null, expected u32`, worded as `serde_json` words it.
fn mismatch(what: &str, unexpected: Unexpected<'_>, expected: &dyn Expected) -> Error {
    de::Error::custom(format_args!(
        "invalid {what}: {}, expected {expected}",
        described(unexpected)
    ))
}

/// What was found, as `serde_json` describes it: `null` for nothing, a
/// float as JSON writes it. Written out here so that serde's own
/// description, which formats a float with `f64`'s `Display`, is not
/// needed for it.
fn described(unexpected: Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Bool(b) => format!("boolean `{b}`"),
        Unexpected::Unsigned(n) => format!("integer `{n}`"),
        Unexpected::Signed(n) => format!("integer `{n}`"),
        Unexpected::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => format!("floating point `{n}`"),
            None => "floating point".to_string(),
        },
        Unexpected::Char(c) => format!("character `{c}`"),
        Unexpected::Str(s) => format!("string {s:?}"),
        Unexpected::Bytes(_) => "byte array".to_string(),
        Unexpected::Unit => "null".to_string(),
        Unexpected::Option => "Option value".to_string(),
        Unexpected::NewtypeStruct => "newtype struct".to_string(),
        Unexpected::Seq => "sequence".to_string(),
        Unexpected::Map => "map".to_string(),
        Unexpected::Enum => "enum".to_string(),
        Unexpected::UnitVariant => "unit variant".to_string(),
        Unexpected::NewtypeVariant => "newtype variant".to_string(),
        Unexpected::TupleVariant => "tuple variant".to_string(),
        Unexpected::StructVariant => "struct variant".to_string(),
        Unexpected::Other(other) => other.to_string(),
    }
}

/// What a value is, for an error about it.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            (None, None) => Unexpected::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn wrong_type(value: &Value, expected: &dyn Expected) -> Error {
    de::Error::invalid_type(unexpected(value), expected)
}

/// One value being read.
struct Tree(Value);

impl<'de> de::Deserializer<'de> for Tree {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (None, Some(i)) => visitor.visit_i64(i),
                (None, None) => visitor.visit_f64(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => visitor.visit_string(s),
            Value::Array(items) => visit_array(items, visitor),
            Value::Object(map) => visit_object(map, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            value => visitor.visit_some(Tree(value)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => visitor.visit_string(s),
            other => Err(wrong_type(&other, &visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visit_array(items, visitor),
            other => Err(wrong_type(&other, &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visit_object(map, visitor),
            other => Err(wrong_type(&other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let (variant, value) = match self.0 {
            Value::String(variant) => (variant, None),
            Value::Object(map) if map.len() == 1 => match map.into_iter().next() {
                Some((variant, value)) => (variant, Some(value)),
                None => return Err(de::Error::custom("an empty map")),
            },
            Value::Object(_) => {
                return Err(de::Error::invalid_value(
                    Unexpected::Map,
                    &"map with a single key",
                ))
            }
            other => return Err(wrong_type(&other, &"string or map")),
        };
        visitor.visit_enum(Variant {
            name: variant,
            value,
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct
    }
}

fn visit_array<'de, V: Visitor<'de>>(items: Vec<Value>, visitor: V) -> Result<V::Value, Error> {
    let len = items.len();
    let mut seq = Items {
        items: items.into_iter(),
        index: 0,
    };
    let value = visitor.visit_seq(&mut seq)?;
    if seq.items.len() == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

fn visit_object<'de, V: Visitor<'de>>(
    map: Map<String, Value>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = map.len();
    let mut entries = Entries {
        entries: map.into_iter(),
        pending: None,
    };
    let value = visitor.visit_map(&mut entries)?;
    if entries.entries.len() == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

/// An array's items, each read at its index.
struct Items {
    items: std::vec::IntoIter<Value>,
    index: usize,
}

impl<'de> SeqAccess<'de> for &mut Items {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(Tree(item))
            .map(Some)
            .map_err(|e| e.at(Step::Index(index)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// An object's entries, each value read under its key.
struct Entries {
    entries: serde_json::map::IntoIter,
    /// The key just read and its value, still to be read.
    pending: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for &mut Entries {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let read = seed.deserialize(Key(&key));
        match read {
            Ok(read) => {
                self.pending = Some((key, value));
                Ok(Some(read))
            }
            Err(e) => Err(e.at(Step::Key(key))),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.pending.take() {
            Some((key, value)) => seed
                .deserialize(Tree(value))
                .map_err(|e| e.at(Step::Key(key))),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An object's key, or an enum's variant name.
struct Key<'a>(&'a str);

impl<'de> de::Deserializer<'de> for Key<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.0)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// An enum's variant and what it holds (`None` for a bare name). An
/// unknown variant is an error of the enum's own path; an error in what
/// a known one holds is under its name, as `serde_path_to_error` had it.
struct Variant {
    name: String,
    value: Option<Value>,
}

impl Variant {
    fn under_name<T>(
        self,
        read: impl FnOnce(Option<Value>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        read(self.value).map_err(|e| e.at(Step::Key(self.name)))
    }
}

impl<'de> EnumAccess<'de> for Variant {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), Error> {
        let variant = seed.deserialize(Key(&self.name))?;
        Ok((variant, self))
    }
}

impl<'de> VariantAccess<'de> for Variant {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        self.under_name(|value| match value {
            Some(value) => serde::Deserialize::deserialize(Tree(value)),
            None => Ok(()),
        })
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        self.under_name(|value| match value {
            Some(value) => seed.deserialize(Tree(value)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.under_name(|value| match value {
            Some(Value::Array(items)) => visit_array(items, visitor),
            Some(other) => Err(wrong_type(&other, &"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.under_name(|value| match value {
            Some(Value::Object(map)) => visit_object(map, visitor),
            Some(other) => Err(wrong_type(&other, &"struct variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Config {
        id: String,
        #[serde(default)]
        rules: Vec<Rule>,
        kind: Option<Kind>,
        tags: Option<BTreeMap<String, u32>>,
        pair: Option<(u8, String)>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Rule {
        limit: u32,
        also: Option<Vec<Rule>>,
        scope: Option<Scope>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Scope {
        Key,
        Global,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case", deny_unknown_fields)]
    enum Kind {
        Unit,
        New(u32),
        Pair(u8, u8),
        Named { a: u32 },
    }

    fn error(value: Value) -> (String, String) {
        let e = from_value::<Config>(value.clone()).expect_err(&value.to_string());
        (e.path(), e.message().to_string())
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let read: Config = from_value(json!({
            "id": "a",
            "rules": [{"limit": 1, "also": [{"limit": 2, "scope": "global"}]}],
            "kind": {"named": {"a": 3}},
            "tags": {"x": 4},
            "pair": [5, "y"],
        }))
        .unwrap();
        let text = r#"{"id":"a","rules":[{"limit":1,"also":[{"limit":2,"scope":"global"}]}],
            "kind":{"named":{"a":3}},"tags":{"x":4},"pair":[5,"y"]}"#;
        assert_eq!(read, serde_json::from_str::<Config>(text).unwrap());
        for (kind, expected) in [
            (json!("unit"), Kind::Unit),
            (json!({"unit": null}), Kind::Unit),
            (json!({"new": 7}), Kind::New(7)),
            (json!({"pair": [1, 2]}), Kind::Pair(1, 2)),
        ] {
            let read: Config = from_value(json!({"id": "a", "kind": kind})).unwrap();
            assert_eq!(read.kind, Some(expected));
        }
    }

    /// Each case's path and message as `serde_path_to_error` gave them
    /// over `serde_json::Value` (checked against it when this replaced it).
    #[test]
    fn an_error_names_the_path_to_it() {
        let also = |layer: Value| json!({"id": "a", "rules": [{"limit": 1, "also": [{"limit": 1}, layer]}]});
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
                "unknown field `zzz`, expected one of `id`, `rules`, `kind`, `tags`, `pair`",
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
            (also(json!({})), "rules[0].also[1]", "missing field `limit`"),
            (
                also(json!({"limit": 1, "x": 2})),
                "rules[0].also[1].x",
                "unknown field `x`, expected one of `limit`, `also`, `scope`",
            ),
            (
                also(json!({"limit": 1, "scope": "everyone"})),
                "rules[0].also[1].scope",
                "unknown variant `everyone`, expected `key` or `global`",
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
                json!({"id": "a", "tags": {"x": 1, "y": "z"}}),
                "tags.y",
                "invalid type: string \"z\", expected u32",
            ),
            (
                json!({"id": "a", "pair": [300, "x"]}),
                "pair[0]",
                "invalid value: integer `300`, expected u8",
            ),
            (
                json!({"id": "a", "pair": [1, "x", 3]}),
                "pair",
                "invalid length 3, expected fewer elements in array",
            ),
            (
                json!({"id": "a", "kind": {"new": "x"}}),
                "kind.new",
                "invalid type: string \"x\", expected u32",
            ),
            (
                json!({"id": "a", "kind": {"pair": [1, "x"]}}),
                "kind.pair[1]",
                "invalid type: string \"x\", expected u8",
            ),
            (
                json!({"id": "a", "kind": {"named": {"b": 1}}}),
                "kind.named.b",
                "unknown field `b`, expected `a`",
            ),
            (
                json!({"id": "a", "kind": {"named": {}}}),
                "kind.named",
                "missing field `a`",
            ),
            (
                json!({"id": "a", "kind": "named"}),
                "kind.named",
                "invalid type: unit variant, expected struct variant",
            ),
            (
                json!({"id": "a", "kind": {"nope": 1}}),
                "kind",
                "unknown variant `nope`, expected one of `unit`, `new`, `pair`, `named`",
            ),
            (
                json!({"id": "a", "kind": {"unit": null, "new": 1}}),
                "kind",
                "invalid value: map, expected map with a single key",
            ),
            (
                json!({"id": "a", "kind": true}),
                "kind",
                "invalid type: boolean `true`, expected string or map",
            ),
        ];
        for (value, path, message) in cases {
            assert_eq!(
                error(value.clone()),
                (path.into(), message.into()),
                "{value}"
            );
        }
    }

    /// The one difference from `serde_json::from_value`: a struct is an
    /// object, never its fields in order as an array. The words a caller
    /// makes of either message are the same (`expected a table, got a
    /// list`).
    #[test]
    fn a_struct_is_read_from_an_object_only() {
        assert_eq!(
            error(json!({"id": "a", "rules": [[1, null, null]]})),
            (
                "rules[0]".into(),
                "invalid type: sequence, expected struct Rule".into()
            )
        );
    }
}
