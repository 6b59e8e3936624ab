//! JSON read into a tree ([`parse`], over [`super::scan`], the one JSON
//! reader in the wasm), and a type read out of the tree ([`FromTree`]) with
//! the path of its first error (`rules[0].also[1].limit`) in the writer's
//! words, for the config, the API bodies and JWTs. Object calls and stored
//! rows need no path and are read over `scan` directly.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use super::scan::{Malformed, Read, Scan};

/// Why a text is not the JSON it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Not JSON: where reading it stopped, line and column from 1.
    Syntax(usize, usize),
    /// An object holds this key twice (its path, `policies[1].limit`):
    /// RFC 8259 leaves which copy counts open and readers disagree, so a
    /// proxy or the origin may read the other one.
    Repeated(String),
}

/// What is wrong with a key that [`Unreadable::Repeated`] names.
pub const REPEATED: &str = "the key appears more than once in its object; JSON readers disagree on which copy counts, so send it once";

/// `text` as one JSON value: refused where it is not JSON (nesting deeper
/// than [`super::scan::MAX_DEPTH`] included), then where an object holds
/// a key twice (the first in document order).
pub fn parse(text: &str) -> Result<Value, Unreadable> {
    let mut scan = Scan::new(text);
    let mut repeated = None;
    let read = value(&mut scan, None, &mut repeated).and_then(|v| scan.rest().map(|()| v));
    match (read, repeated) {
        (Err(Malformed), _) => {
            let (line, column) = scan.line_column();
            Err(Unreadable::Syntax(line, column))
        }
        (Ok(_), Some(path)) => Err(Unreadable::Repeated(path)),
        (Ok(value), None) => Ok(value),
    }
}

/// Where a value is, as a chain of steps up to the root.
struct At<'p> {
    up: Option<&'p At<'p>>,
    key: Option<&'p str>,
    index: usize,
}

impl At<'_> {
    fn path(&self) -> String {
        let mut steps = vec![self];
        while let Some(up) = steps[steps.len() - 1].up {
            steps.push(up);
        }
        let mut path = String::new();
        for step in steps.iter().rev() {
            match step.key {
                Some(key) if path.is_empty() => path.push_str(key),
                Some(key) => {
                    let _ = write!(path, ".{key}");
                }
                None => {
                    let _ = write!(path, "[{}]", step.index);
                }
            }
        }
        path
    }
}

/// The next value, noting the first key repeated in an object.
fn value(scan: &mut Scan, at: Option<&At>, repeated: &mut Option<String>) -> Read<Value> {
    Ok(match scan.peek().ok_or(Malformed)? {
        b'{' => {
            let mut map = Map::new();
            let mut object = scan.object()?;
            while let Some(key) = object.key(scan)? {
                let here = At {
                    up: at,
                    key: Some(&key),
                    index: 0,
                };
                if repeated.is_none() && map.contains_key(&*key) {
                    *repeated = Some(here.path());
                }
                let value = value(scan, Some(&here), repeated)?;
                map.insert(key.into_owned(), value);
            }
            Value::Object(map)
        }
        b'[' => {
            let mut items = Vec::new();
            let mut array = scan.array()?;
            while array.item(scan)? {
                let here = At {
                    up: at,
                    key: None,
                    index: items.len(),
                };
                items.push(value(scan, Some(&here), repeated)?);
            }
            Value::Array(items)
        }
        b'"' => Value::String(scan.string()?),
        b't' | b'f' => Value::Bool(scan.bool()?),
        b'n' if scan.null() => Value::Null,
        _ => Value::Number(number(scan.number()?)?),
    })
}

/// A number as `serde_json` holds it: an integer without a fraction or an
/// exponent that fits a `u64` or, negative, an `i64`; else a float.
fn number(text: &str) -> Read<Number> {
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(n) = text.parse::<u64>() {
            return Ok(n.into());
        }
        // `-0` is a float to serde_json, as it is to JavaScript.
        if let Ok(n @ ..=-1) = text.parse::<i64>() {
            return Ok(n.into());
        }
    }
    Number::from_f64(float(text)).ok_or(Malformed)
}

/// A float read as `serde_json` reads one (without its `float_roundtrip`
/// feature): its digits as an integer, scaled by powers of ten, so exact
/// for the usual few digits; not `str::parse`, whose tables cost the wasm
/// more than the reader (BENCHMARKS.md). Infinite (so refused) when out of
/// range.
fn float(text: &str) -> f64 {
    let (negative, text) = text.strip_prefix('-').map_or((false, text), |t| (true, t));
    let (mantissa, exponent) = text.split_once(['e', 'E']).unwrap_or((text, ""));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let (sign, exponent) = match exponent.strip_prefix('-') {
        Some(digits) => (-1, digits),
        None => (1, exponent.trim_start_matches('+')),
    };
    let mut scale = sign
        * exponent
            .bytes()
            .fold(0i32, |e, d| (e * 10 + i32::from(d - b'0')).min(99_999));
    let mut significand = 0u64;
    let push = |n: u64, d: u8| n.checked_mul(10)?.checked_add(u64::from(d - b'0'));
    for d in whole.bytes() {
        match push(significand, d) {
            Some(n) => significand = n,
            None => scale += 1,
        }
    }
    for d in fraction.bytes() {
        if let Some(n) = push(significand, d) {
            significand = n;
            scale -= 1;
        }
    }
    let mut f = significand as f64;
    while scale != 0 && f != 0.0 && f.is_finite() {
        let step = scale.clamp(-22, 22);
        if step > 0 {
            f *= 10f64.powi(step);
        } else {
            f /= 10f64.powi(-step);
        }
        scale -= step;
    }
    if negative {
        -f
    } else {
        f
    }
}

/// `value` read as a `T`, or the first error and where it was found.
pub fn from_value<T: FromTree>(value: Value) -> Result<T, Error> {
    T::from_tree(value)
}

/// A type read from a JSON value, its errors placed by [`Error`]'s path.
pub trait FromTree: Sized {
    fn from_tree(value: Value) -> Result<Self, Error>;
}

/// The notation the input was written in, which names maps and sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The config: a TOML table in wrangler.toml (or the same as JSON).
    Toml,
    /// An API body.
    Json,
}

impl Dialect {
    fn map(self) -> &'static str {
        match self {
            Dialect::Toml => "a table",
            Dialect::Json => "an object",
        }
    }

    fn sequence(self) -> &'static str {
        match self {
            Dialect::Toml => "a list",
            Dialect::Json => "an array",
        }
    }
}

/// An error and the path to where it was found.
#[derive(Debug)]
pub struct Error {
    /// Innermost first: each object or array the error comes out of adds
    /// its step at the end.
    steps: Vec<Step>,
    kind: Kind,
}

#[derive(Debug)]
enum Step {
    Key(String),
    Index(usize),
}

#[derive(Debug)]
enum Kind {
    /// A required field is absent.
    Missing(&'static str),
    /// A key the type does not name.
    Unknown(String, &'static [&'static str]),
    /// A value of the wrong kind or out of range.
    Wrong(Wanted, Value),
}

/// What a field takes.
#[derive(Debug)]
enum Wanted {
    Map,
    Sequence,
    /// A whole number from 0 to the bound.
    Whole(u64),
    Words(&'static str),
}

impl Error {
    fn new(kind: Kind) -> Error {
        Error {
            steps: Vec::new(),
            kind,
        }
    }

    fn wrong(wanted: Wanted, found: Value) -> Error {
        Error::new(Kind::Wrong(wanted, found))
    }

    fn at(mut self, step: Step) -> Error {
        self.steps.push(step);
        self
    }

    /// Whether the error is a required field that is absent, which
    /// [`Error::field`] names.
    pub fn is_missing(&self) -> bool {
        matches!(self.kind, Kind::Missing(_))
    }

    /// The field at fault as a path, keys joined by dots and indexes in
    /// brackets (`items[0].size`), a missing field's name last; `None`
    /// for the whole value.
    pub fn field(&self) -> Option<String> {
        let mut path = String::new();
        for step in self.steps.iter().rev() {
            match step {
                Step::Index(i) => {
                    let _ = write!(path, "[{i}]");
                }
                Step::Key(key) if path.is_empty() => path.push_str(key),
                Step::Key(key) => {
                    let _ = write!(path, ".{key}");
                }
            }
        }
        if let Kind::Missing(name) = self.kind {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
        }
        (!path.is_empty()).then_some(path)
    }

    /// What is wrong, in the writer's words.
    pub fn words(&self, dialect: Dialect) -> String {
        let (wanted, found) = match &self.kind {
            Kind::Missing(name) => return format!("{name} is required"),
            Kind::Unknown(key, names) => {
                let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                let message = match quoted.as_slice() {
                    [] => format!("unknown field `{key}`, there are no fields"),
                    [one] => format!("unknown field `{key}`, expected {one}"),
                    [a, b] => format!("unknown field `{key}`, expected {a} or {b}"),
                    all => format!("unknown field `{key}`, expected one of {}", all.join(", ")),
                };
                return message.replace('`', "\"");
            }
            Kind::Wrong(wanted, found) => (wanted, found),
        };
        let wanted = match wanted {
            Wanted::Map => dialect.map(),
            Wanted::Sequence => dialect.sequence(),
            Wanted::Words(words) => words,
            Wanted::Whole(max) => match found {
                Value::Number(n) if n.as_u64().is_some_and(|n| n > *max) => {
                    return format!("expected a whole number up to {max}, got the number {n}")
                }
                _ => "a non-negative whole number",
            },
        };
        let found = match found {
            Value::Null => "nothing".to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => format!("the number {n}"),
            Value::String(s) => format!("the string {s:?}"),
            Value::Array(_) => dialect.sequence().to_string(),
            Value::Object(_) => dialect.map().to_string(),
        };
        format!("expected {wanted}, got {found}")
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
            other => Err(Error::wrong(Wanted::Words("a string"), other)),
        }
    }
}

impl FromTree for bool {
    fn from_tree(value: Value) -> Result<bool, Error> {
        match value {
            Value::Bool(b) => Ok(b),
            other => Err(Error::wrong(Wanted::Words("a boolean"), other)),
        }
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl FromTree for $t {
            fn from_tree(value: Value) -> Result<$t, Error> {
                match value.as_u64().map(<$t>::try_from) {
                    Some(Ok(n)) => Ok(n),
                    _ => Err(Error::wrong(Wanted::Whole(<$t>::MAX.into()), value)),
                }
            }
        }
    )*};
}

unsigned!(u8, u16, u32, u64);

impl<T: FromTree> FromTree for Vec<T> {
    fn from_tree(value: Value) -> Result<Vec<T>, Error> {
        let Value::Array(items) = value else {
            return Err(Error::wrong(Wanted::Sequence, value));
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
                let mut fields = $crate::input::tree::Fields::new(value, NAMES)?;
                let read = $name {
                    $($field: fields.$how($key)),*
                };
                fields.finish().map(|()| read)
            }
        }
    };
}

/// An object's fields, taken one by one by name as a type reads itself.
/// An error is kept, not returned, until [`Fields::finish`], which answers
/// the first in the order of the object's keys (sorted, as the tree's map
/// keeps them), else the first required field absent in the order the
/// type reads them. `null` is no value for an optional field, and a value
/// of the wrong type for any other.
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
    /// `value`'s fields, which must be among `names`.
    pub fn new(value: Value, names: &'static [&'static str]) -> Result<Fields, Error> {
        let Value::Object(map) = value else {
            return Err(Error::wrong(Wanted::Map, value));
        };
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
                    let e = Error::new(Kind::Unknown(key.clone(), names));
                    fields.first = Some((place, e.at(Step::Key(key))));
                }
                None => {}
            }
        }
        Ok(fields)
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
            (None, Some(name)) => Err(Error::new(Kind::Missing(name))),
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

#[cfg(test)]
mod tests;
