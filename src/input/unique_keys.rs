//! JSON in which no object holds a key twice.
//!
//! RFC 8259 leaves a repeated key's meaning open, and parsers disagree:
//! serde_json keeps the last copy, others the first or refuse. A document
//! with both copies can say one thing to Sluice and another to whatever
//! reads it next (a `sub` to the origin, a `key` to a log), so JWTs and API
//! bodies with one are refused rather than read.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The path of the first key that an object holds twice (`key`,
/// `policies[1].name`), in document order, with escapes decoded (`"s\u0075b"`
/// is `sub`); `None` when every object's keys are unique. Meant for a text
/// already parsed: what is not JSON answers `None`, and the caller's own
/// parse says why.
pub fn repeated_key(json: &[u8]) -> Option<String> {
    let found = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(json);
    // The error only stops the walk; `found` says whether it was a repeat.
    let _ = Walk {
        at: String::new(),
        found: &found,
    }
    .deserialize(&mut reader);
    found.into_inner()
}

/// One value of the document, at path `at`; it keeps nothing but the
/// first repeated key's path.
struct Walk<'f> {
    at: String,
    found: &'f RefCell<Option<String>>,
}

impl<'f> Walk<'f> {
    fn below(&self, step: String) -> Walk<'f> {
        Walk {
            at: step,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(self.below(format!("{}[{i}]", self.at)))?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let at = if self.at.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.at)
            };
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(at);
                return Err(de::Error::custom("repeated key"));
            }
            map.next_value_seed(self.below(at))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(
                repeated_key(json.as_bytes()).as_deref(),
                Some(repeated),
                "{json}"
            );
        }
    }

    #[test]
    fn the_same_name_in_different_objects_is_no_repeat() {
        for json in [
            r#"{"a":{"a":1},"b":[{"a":1},{"a":2}],"sub":"x"}"#,
            r#"{}"#,
            r#"[]"#,
            r#"7"#,
            r#"{"a":"a","A":"a"}"#,
            "not json",
            r#"{"a":1"#,
        ] {
            assert_eq!(repeated_key(json.as_bytes()), None, "{json}");
        }
    }
}
