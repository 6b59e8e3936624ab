//! A type read out of a parsed JSON value, with the path of the first
//! error (`rules[0].also[1].limit`), for the config and the API bodies.
//!
//! Each type is read by hand ([`FromTree`]) with [`Fields`], which takes
//! an object's fields by name; [`from_tree!`](crate::from_tree!) writes
//! that reader for a struct from one list of its fields and keys. serde's derived readers, over a
//! `Deserializer` of our own that added the path, cost the wasm a
//! visitor, a field-name matcher and a `MapAccess` loop per type, all
//! inlined into the config's reader and each endpoint's (BENCHMARKS.md);
//! here the shared work (the object's keys, unknown fields, the order of
//! errors) is one non-generic function, and each type only names its
//! fields.
//!
//! The values read, the messages and the paths are those serde's derived
//! readers gave over this module's `Deserializer` before (and
//! `serde_path_to_error` before that), so `words::plain` turns them into
//! the writer's words as before: the first error in the order of the
//! object's keys (serde_json's map keeps them sorted), then the first
//! missing field in the order the type names them; `null` is no value
//! for an optional field, and a value of the wrong type for any other.
//!
//! A `Value` holds one copy of a repeated key, so refusing one is the
//! caller's, on the text (`http::body` does, with `unique_keys`). Object
//! calls and stored rows need no path and are not read through a `Value`
//! (2-4 times slower to parse): they are read by hand over [`super::scan`].

use std::fmt;

use serde_json::{Map, Value};

/// `value` read as a `T`, or the first error and where it was found.
pub fn from_value<T: FromTree>(value: Value) -> Result<T, Error> {
    T::from_tree(value)
}

/// A type read from a JSON value, its errors placed by [`Error`]'s path.
pub trait FromTree: Sized {
    fn from_tree(value: Value) -> Result<Self, Error>;
}

/// An error and the path to where it was found.
#[derive(Debug)]
pub struct Error {
    /// Innermost first: each object or array the error comes out of adds
    /// its step at the end.
    steps: Vec<Step>,
    message: String,
}

#[derive(Debug)]
enum Step {
    Key(String),
    Index(usize),
}

impl Error {
    fn new(message: String) -> Error {
        Error {
            steps: Vec::new(),
            message,
        }
    }

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

/// `invalid type: null, expected u32`, worded as serde words it.
fn mismatch(what: &str, found: &Value, expected: &str) -> Error {
    Error::new(format!(
        "invalid {what}: {}, expected {expected}",
        described(found)
    ))
}

fn wrong_type(found: &Value, expected: &str) -> Error {
    mismatch("type", found, expected)
}

/// What was found, as serde describes a JSON value: `null` for nothing,
/// a float as JSON writes it.
fn described(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".to_string(),
        Value::Object(_) => "map".to_string(),
    }
}

impl FromTree for Value {
    fn from_tree(value: Value) -> Result<Value, Error> {
        Ok(value)
    }
}

impl FromTree for String {
    fn from_tree(value: Value) -> Result<String, Error> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(wrong_type(&other, "a string")),
        }
    }
}

impl FromTree for bool {
    fn from_tree(value: Value) -> Result<bool, Error> {
        match value {
            Value::Bool(b) => Ok(b),
            other => Err(wrong_type(&other, "a boolean")),
        }
    }
}

/// A whole number from 0 to `max`, serde's `name` for its type (`u8`)
/// in the error: a value out of range, negative included, is an invalid
/// value, a fraction or anything else an invalid type.
fn unsigned(value: &Value, max: u64, name: &str) -> Result<u64, Error> {
    match value {
        Value::Number(n) if n.is_u64() || n.is_i64() => match n.as_u64() {
            Some(n) if n <= max => Ok(n),
            _ => Err(mismatch("value", value, name)),
        },
        other => Err(wrong_type(other, name)),
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl FromTree for $t {
            fn from_tree(value: Value) -> Result<$t, Error> {
                unsigned(&value, <$t>::MAX.into(), stringify!($t)).map(|n| n as $t)
            }
        }
    )*};
}

unsigned!(u8, u16, u32, u64);

impl<T: FromTree> FromTree for Vec<T> {
    fn from_tree(value: Value) -> Result<Vec<T>, Error> {
        let Value::Array(items) = value else {
            return Err(wrong_type(&value, "a sequence"));
        };
        // A loop rather than `collect` into a `Result`, whose adapter is
        // a larger copy for each type of item.
        let mut read = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            read.push(T::from_tree(item).map_err(|e| e.at(Step::Index(i)))?);
        }
        Ok(read)
    }
}

/// A struct and its [`FromTree`], each field named once with its key and
/// how [`Fields`] takes it (`optional`, `required` or `or_default`):
///
/// ```ignore
/// from_tree! {
///     struct RawBan {
///         after: u64 = required "after",
///         duration: String = required "for",
///         max: Option<String> = optional "max",
///     }
/// }
/// ```
///
/// serde's name for the type (`struct RawBan`) is what an error says was
/// expected where the value is not an object.
#[macro_export]
macro_rules! from_tree {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$field_meta:meta])* $field_vis:vis $field:ident: $ty:ty = $how:ident $key:literal),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$field_meta])* $field_vis $field: $ty),*
        }

        impl $crate::input::tree::FromTree for $name {
            fn from_tree(value: ::serde_json::Value) -> Result<$name, $crate::input::tree::Error> {
                const NAMES: &[&str] = &[$($key),*];
                let mut fields = $crate::input::tree::Fields::new(
                    value,
                    concat!("struct ", stringify!($name)),
                    NAMES,
                )?;
                let read = $name {
                    $($field: fields.$how($key)),*
                };
                fields.finish().map(|()| read)
            }
        }
    };
}

/// An object's fields, taken one by one by name as a type reads itself.
/// An error is kept, not returned, until [`Fields::finish`], which
/// answers the one serde would have met first.
pub struct Fields {
    names: &'static [&'static str],
    /// Each named field's value, with the place of its key in the object.
    values: Vec<Option<(usize, Value)>>,
    /// The error of the earliest key, and that key's place.
    first: Option<(usize, Error)>,
    /// The first required field absent, in the order the type reads them.
    missing: Option<&'static str>,
}

impl Fields {
    /// `value`'s fields, which must be among `names`; `expected` is what
    /// serde calls the type (`struct RawRule`), for an error about a
    /// value that is not an object.
    pub fn new(
        value: Value,
        expected: &str,
        names: &'static [&'static str],
    ) -> Result<Fields, Error> {
        let Value::Object(map) = value else {
            return Err(wrong_type(&value, expected));
        };
        Ok(Fields::of(map, names))
    }

    fn of(map: Map<String, Value>, names: &'static [&'static str]) -> Fields {
        let mut fields = Fields {
            names,
            values: names.iter().map(|_| None).collect(),
            first: None,
            missing: None,
        };
        for (place, (key, value)) in map.into_iter().enumerate() {
            match names.iter().position(|name| *name == key) {
                Some(i) => fields.values[i] = Some((place, value)),
                None if fields.first.is_none() => {
                    let e = Error::new(unknown_field(&key, names));
                    fields.first = Some((place, e.at(Step::Key(key))));
                }
                None => {}
            }
        }
        fields
    }

    /// Field `name`; `None` when absent or `null`.
    pub fn optional<T: FromTree>(&mut self, name: &'static str) -> Option<T> {
        match self.take(name)? {
            (_, Value::Null) => None,
            (place, value) => self.kept(place, name, T::from_tree(value)),
        }
    }

    /// Field `name`, which must be there (even `null` is read as a `T`).
    /// The default stands in for it until [`Fields::finish`] refuses it.
    pub fn required<T: FromTree + Default>(&mut self, name: &'static str) -> T {
        match self.take(name) {
            Some((place, value)) => self.kept(place, name, T::from_tree(value)),
            None => {
                self.missing.get_or_insert(name);
                None
            }
        }
        .unwrap_or_default()
    }

    /// Field `name`, or the default when absent (`null` is read as a `T`).
    pub fn or_default<T: FromTree + Default>(&mut self, name: &'static str) -> T {
        match self.take(name) {
            Some((place, value)) => self.kept(place, name, T::from_tree(value)),
            None => None,
        }
        .unwrap_or_default()
    }

    /// The first error in the order of the object's keys, else the first
    /// required field missing.
    pub fn finish(self) -> Result<(), Error> {
        match (self.first, self.missing) {
            (Some((_, e)), _) => Err(e),
            (None, Some(name)) => Err(Error::new(format!("missing field `{name}`"))),
            (None, None) => Ok(()),
        }
    }

    fn take(&mut self, name: &str) -> Option<(usize, Value)> {
        let i = self.names.iter().position(|n| *n == name)?;
        self.values[i].take()
    }

    fn kept<T>(&mut self, place: usize, name: &str, read: Result<T, Error>) -> Option<T> {
        match read {
            Ok(value) => Some(value),
            Err(e) => {
                self.note(place, name, e);
                None
            }
        }
    }

    /// Out of line: one copy, not one in each type's `kept`.
    #[inline(never)]
    fn note(&mut self, place: usize, name: &str, e: Error) {
        if self.first.as_ref().is_none_or(|(first, _)| place < *first) {
            self.first = Some((place, e.at(Step::Key(name.to_string()))));
        }
    }
}

/// serde's words for a field not in `names`.
fn unknown_field(key: &str, names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => format!("unknown field `{key}`, there are no fields"),
        [one] => format!("unknown field `{key}`, expected {one}"),
        [a, b] => format!("unknown field `{key}`, expected {a} or {b}"),
        all => format!("unknown field `{key}`, expected one of {}", all.join(", ")),
    }
}

#[cfg(test)]
mod tests {
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

    fn error(value: Value) -> (String, String) {
        let e = from_value::<Config>(value.clone()).expect_err(&value.to_string());
        (e.path(), e.message().to_string())
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
                (path.into(), message.into()),
                "{value}"
            );
        }
    }

    #[test]
    fn an_unknown_field_lists_the_known_ones_as_serde_does() {
        assert_eq!(
            unknown_field("b", &[]),
            "unknown field `b`, there are no fields"
        );
        assert_eq!(
            unknown_field("b", &["a"]),
            "unknown field `b`, expected `a`"
        );
        assert_eq!(
            unknown_field("c", &["a", "b"]),
            "unknown field `c`, expected `a` or `b`"
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
            let hand = from_value::<Config>(value.clone()).map_err(|e| e.message().to_string());
            let serde = serde_json::from_value::<Config>(value).map_err(|e| e.to_string());
            prop_assert_eq!(hand, serde);
        }
    }
}
