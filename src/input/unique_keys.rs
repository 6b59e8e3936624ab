//! JSON in which no object holds a key twice.
//!
//! RFC 8259 leaves a repeated key's meaning open, and parsers disagree:
//! serde_json keeps the last copy, others the first or refuse. A document
//! with both copies can say one thing to Sluice and another to whatever
//! reads it next (a `sub` to the origin, a `key` to a log), so JWTs and API
//! bodies with one are refused rather than read.

use std::collections::BTreeSet;

use super::scan::{Read, Scan};

/// The path of the first key that an object holds twice (`key`,
/// `policies[1].name`), in document order, with escapes decoded (`"s\u0075b"`
/// is `sub`); `None` when every object's keys are unique. Meant for a text
/// already parsed: what is not JSON answers `None`, and the caller's own
/// parse says why. Walked with the objects' small reader
/// ([`super::scan`]), not a serde visitor over `serde_json`, which cost
/// the wasm a reader of its own.
pub fn repeated_key(json: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(json).ok()?;
    walk(&mut Scan::new(text), "").ok().flatten()
}

/// The first repeated key's path within the next value, which is at `at`.
fn walk(scan: &mut Scan, at: &str) -> Read<Option<String>> {
    if let Ok(mut object) = scan.object() {
        let mut seen = BTreeSet::new();
        while let Some(key) = object.key(scan)? {
            let path = if at.is_empty() {
                key.to_string()
            } else {
                format!("{at}.{key}")
            };
            if !seen.insert(key.into_owned()) {
                return Ok(Some(path));
            }
            if let Some(found) = walk(scan, &path)? {
                return Ok(Some(found));
            }
        }
    } else if let Ok(mut array) = scan.array() {
        let mut i = 0usize;
        while array.item(scan)? {
            if let Some(found) = walk(scan, &format!("{at}[{i}]"))? {
                return Ok(Some(found));
            }
            i += 1;
        }
    } else {
        scan.skip()?;
    }
    Ok(None)
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
