//! The JSON the worker writes: [`Write`] for each type (`write.rs`; structs
//! declared with [`wire!`](crate::wire!)), and `json!({"key": value, ...})`
//! for an answer's object, its fields written as text and sorted by key at
//! the end, as the `serde_json::Value` it once built sorted them.

pub mod wire;
mod write;

pub use write::{to_string, Fields, Text, Write};

/// `value` as `serde_json` wrote it once made a `Value`: every object's
/// fields in the order of their keys.
pub fn sorted<T: Write + ?Sized>(value: &T) -> Json {
    let mut out = Text::sorted();
    value.write(&mut out);
    Json(out.into_string())
}

/// JSON text, written: what [`json!`](crate::json!) makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json(String);

impl Json {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
impl Json {
    /// The value the text holds, for tests that read its fields.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap()
    }
}

impl Write for Json {
    fn write(&self, out: &mut Text) {
        out.raw(&self.0);
    }
}

/// An object being written by [`json!`](crate::json!): each field's value
/// written as it comes, the fields put in key order at the end.
pub struct Object {
    values: Text,
    /// Each field's key and where its value is in `values`.
    fields: Vec<(&'static str, usize, usize)>,
}

impl Default for Object {
    fn default() -> Object {
        Object {
            values: Text::sorted(),
            fields: Vec::new(),
        }
    }
}

impl Object {
    /// Field `key` set to `value`.
    #[inline(never)]
    pub fn put<T: Write + ?Sized>(&mut self, key: &'static str, value: &T) {
        let start = self.values.len();
        value.write(&mut self.values);
        self.fields.push((key, start, self.values.len()));
    }

    /// Field `key` set to text that is JSON already.
    #[inline(never)]
    pub fn put_raw(&mut self, key: &'static str, json: &str) {
        let start = self.values.len();
        self.values.raw(json);
        self.fields.push((key, start, self.values.len()));
    }

    /// The object, its fields sorted by key.
    #[inline(never)]
    pub fn finish(mut self) -> Json {
        crate::short_sort::sort_by_key(&mut self.fields, |&(key, _, _)| key);
        let values = self.values.as_str();
        let mut out = Text::with_capacity(values.len() + 16 * self.fields.len() + 2);
        let mut fields = out.object();
        for &(key, start, end) in &self.fields {
            fields.at(key).raw(&values[start..end]);
        }
        fields.end();
        Json(out.into_string())
    }
}

/// `value` as [`Write`] writes it, read back as a tree, for tests that
/// look at its fields.
#[cfg(test)]
pub fn value_of<T: Write + ?Sized>(value: &T) -> serde_json::Value {
    serde_json::from_str(&to_string(value)).unwrap()
}

/// `value` as [`Write`] writes it, checked against what serde's derive of
/// the same type writes.
#[cfg(test)]
pub fn written<T: Write + serde::Serialize + ?Sized>(value: &T) -> String {
    let ours = to_string(value);
    assert_eq!(ours, serde_json::to_string(value).unwrap());
    ours
}

/// A JSON object of literal keys: `json!({"allowed": true, "ban": null})`.
#[macro_export]
macro_rules! json {
    ({ $($fields:tt)* }) => {
        $crate::json_object!({ $($fields)* }).finish()
    };
}

/// [`json!`]'s object before it is finished, for a caller that adds
/// fields to it ([`Object::put`]).
#[macro_export]
macro_rules! json_object {
    ({ $($fields:tt)* }) => {{
        let mut object = $crate::json::Object::default();
        $crate::json_fields!(object; $($fields)*);
        object
    }};
}

/// The fields of [`json!`], one [`Object::put`] each.
#[macro_export]
#[doc(hidden)]
macro_rules! json_fields {
    ($object:ident;) => {};
    ($object:ident; $key:literal : null $(, $($rest:tt)*)?) => {
        $object.put_raw($key, "null");
        $crate::json_fields!($object; $($($rest)*)?);
    };
    ($object:ident; $key:literal : [] $(, $($rest:tt)*)?) => {
        $object.put_raw($key, "[]");
        $crate::json_fields!($object; $($($rest)*)?);
    };
    ($object:ident; $key:literal : $value:expr $(, $($rest:tt)*)?) => {
        $object.put($key, &$value);
        $crate::json_fields!($object; $($($rest)*)?);
    };
}

/// [`Write`] for a struct, its fields written in the order listed, as
/// serde's derive writes them: `field`, `field as "key"` for a field
/// renamed on the wire, `field if skip` for one left out when
/// `skip(&self.field)` holds (serde's `skip_serializing_if`).
#[macro_export]
macro_rules! write_json {
    ($type:ty { $($field:ident $(as $key:literal)? $(if $skip:path)?),* $(,)? }) => {
        impl $crate::json::Write for $type {
            fn write(&self, out: &mut $crate::json::Text) {
                let mut fields = out.object();
                $(
                    if !($($skip(&self.$field) ||)? false) {
                        fields.field($crate::write_json!(@key $field $($key)?), &self.$field);
                    }
                )*
                fields.end();
            }
        }
    };
    (@key $field:ident) => {
        stringify!($field)
    };
    (@key $field:ident $key:literal) => {
        $key
    };
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// The same fields through both macros.
    macro_rules! both {
        ($($fields:tt)*) => {
            (crate::json!($($fields)*), serde_json::json!($($fields)*))
        };
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let name = String::from("day");
        let policies: Vec<Value> = vec![serde_json::json!({"limit": 1})];
        let none: Option<u64> = None;
        let (ours, theirs) = both!({
            "name": name,
            "limit": 5u64,
            "allowed": true,
            "retry": none,
            "ban": null,
            "leases": [],
            "policies": policies,
            "pair": [1, 2],
        });
        assert_eq!(ours.as_str(), serde_json::to_string(&theirs).unwrap());
        assert!(ours
            .as_str()
            .ends_with(r#""pair":[1,2],"policies":[{"limit":1}],"retry":null}"#));
    }

    #[derive(serde::Serialize)]
    struct Inner {
        z: u32,
        a: Option<&'static str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        m: Vec<Inner>,
    }

    crate::write_json!(Inner { z, a, m if Vec::is_empty });

    /// A struct in `json!` is written as serde_json wrote it once made a
    /// `Value`: its fields, and those of everything in it, sorted by key;
    /// alone, in the order declared, as serde's derive writes it.
    #[test]
    fn a_struct_in_json_is_sorted_as_a_value_sorts_it() {
        let inner = || Inner {
            z: 1,
            a: Some("x"),
            m: vec![Inner {
                z: 2,
                a: None,
                m: Vec::new(),
            }],
        };
        let ours = crate::json!({"inner": inner(), "b": crate::json!({"y": 1, "c": [inner()]})});
        let theirs = serde_json::json!({"inner": inner(), "b": {"y": 1, "c": [inner()]}});
        assert_eq!(ours.as_str(), serde_json::to_string(&theirs).unwrap());
        assert_eq!(
            crate::json::sorted(&inner()).as_str(),
            serde_json::to_value(inner()).unwrap().to_string()
        );
        assert_eq!(
            crate::json::written(&inner()),
            r#"{"z":1,"a":"x","m":[{"z":2,"a":null}]}"#
        );
    }
}
