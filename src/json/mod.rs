//! `json!` for the JSON the worker answers with: `json!({"key": value,
//! ...})`, each value anything serde can write, `null` or `[]`. What
//! `serde_json::json!` writes, built with less code: it inlines, for
//! every field, the value's conversion, a check that it cannot fail (a
//! panic path), the key's allocation, the insert and the drop of what
//! the insert gives back (about 80 fields in the admin API alone). Here
//! each field is one call, [`Object::put`], with one copy per type of
//! value. Tests keep `serde_json::json!`, whose nested literals they use.

mod write;

use serde::Serialize;
use serde_json::{Map, Value};

pub use write::{to_string, Fields, Text, Write};

/// An object being written by [`json!`](crate::json!).
#[derive(Default)]
pub struct Object(Map<String, Value>);

impl Object {
    /// Field `key` set to `value` as serde writes it (`null` if it could
    /// not be: only maps with keys that are not strings fail, which no
    /// answer holds).
    #[inline(never)]
    pub fn put<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.put_value(key, serde_json::to_value(value).unwrap_or_default());
    }

    #[inline(never)]
    pub fn put_value(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_string(), value);
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }
}

/// `value` as [`Write`] writes it, checked against what serde's derive of
/// the same type writes.
#[cfg(test)]
pub fn written<T: Write + Serialize + ?Sized>(value: &T) -> String {
    let ours = to_string(value);
    assert_eq!(ours, serde_json::to_string(value).unwrap());
    ours
}

/// A JSON object of literal keys: `json!({"allowed": true, "ban": null})`.
#[macro_export]
macro_rules! json {
    ({ $($fields:tt)* }) => {{
        let mut object = $crate::json::Object::default();
        $crate::json_fields!(object; $($fields)*);
        object.into_value()
    }};
}

/// The fields of [`json!`], one [`Object::put`] each.
#[macro_export]
#[doc(hidden)]
macro_rules! json_fields {
    ($object:ident;) => {};
    ($object:ident; $key:literal : null $(, $($rest:tt)*)?) => {
        $object.put_value($key, ::serde_json::Value::Null);
        $crate::json_fields!($object; $($($rest)*)?);
    };
    ($object:ident; $key:literal : [] $(, $($rest:tt)*)?) => {
        $object.put_value($key, ::serde_json::Value::Array(Vec::new()));
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
            "nested": crate::json!({"a": -1}),
        });
        assert_eq!(ours, theirs);
        assert_eq!(ours["nested"], serde_json::json!({"a": -1}));
    }
}
