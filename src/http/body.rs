//! An API body read into the struct its endpoint expects, the way the
//! config is read: unknown fields refused, and a shape error naming its
//! field as a JSON path (`policies[0].limit`), in the caller's words. What a
//! type cannot say (ranges, names, fields that go together) each endpoint
//! checks next, on the struct.

use serde_json::Value;

use super::problem::{Code, Problem};
use crate::bounds::MAX_BODY_BYTES;
use crate::input::tree::{self, Dialect, FromTree, Unreadable, REPEATED};

/// The body as a `T`, or the problem that says why not: the content type,
/// the size, then the JSON and its shape, in that order.
pub fn read<T: FromTree>(content_type: Option<&str>, body: &[u8]) -> Result<T, Problem> {
    tree::from_value(json_object(content_type, body)?).map_err(shape_problem)
}

/// The body as a JSON object, or the problem that says why not: the
/// content type, the size, then the JSON. Kept out of line so that each
/// body type's [`read`] holds only its own reading, not a copy of this per
/// endpoint. A body of a field or two may be read from it by hand
/// ([`fields`]).
#[inline(never)]
pub fn json_object(content_type: Option<&str>, body: &[u8]) -> Result<Value, Problem> {
    let media_type = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|ct| ct.trim().to_ascii_lowercase());
    if media_type.as_deref() != Some("application/json") {
        return Err(Problem::invalid(
            "content-type",
            "the body must be JSON, sent with Content-Type: application/json",
        ));
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    // Read as a JSON value first, as the config is: what is not JSON at all
    // (truncated, too deep, a number out of range, a lone surrogate) is a
    // body error, and only a well-formed object is read field by field.
    // A key twice in one object is refused, naming it: a proxy or log before
    // Sluice may have read the other copy.
    let text = std::str::from_utf8(body)
        .map_err(|_| Problem::invalid("body", "the body is not valid JSON: it is not UTF-8"))?;
    let object = text.trim_start().starts_with('{');
    match tree::parse(text) {
        Ok(value) if object => Ok(value),
        Err(Unreadable::Syntax(line, column)) => Err(Problem::invalid(
            "body",
            format!("the body is not valid JSON at line {line} column {column}"),
        )),
        Err(Unreadable::Repeated(field)) if object => {
            Err(Problem::invalid(&field, format!("{field}: {REPEATED}")))
        }
        _ => Err(Problem::invalid("body", "the body must be a JSON object")),
    }
}

/// A JSON object's fields, for a body read by hand: refuses a field not in
/// `known` (400 naming it), as [`read`] refuses unknown fields. Reading a
/// body of one or two fields this way costs the worker less code than a
/// body type of its own, whose deserialisation is monomorphised for it.
pub fn fields(object: Value, known: &[&str]) -> Result<serde_json::Map<String, Value>, Problem> {
    let Value::Object(map) = object else {
        return Err(Problem::invalid("body", "the body must be a JSON object"));
    };
    if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(Problem::invalid(
            unknown,
            format!(
                "unknown field {unknown:?}: expected one of {}",
                known.join(", ")
            ),
        ));
    }
    Ok(map)
}

/// The 413 for a body larger than [`MAX_BODY_BYTES`].
pub fn too_large() -> Problem {
    Problem::new(
        Code::BodyTooLarge,
        format!("the body must be at most {MAX_BODY_BYTES} bytes"),
    )
}

/// A field of the wrong type, missing or unknown, named by its path. Out
/// of line for the same reason as [`json_object`].
#[inline(never)]
fn shape_problem(e: tree::Error) -> Problem {
    let message = e.words(Dialect::Json);
    match e.field() {
        Some(field) if e.is_missing() => Problem::invalid(&field, message),
        Some(field) => Problem::invalid(&field, format!("{field}: {message}")),
        None => Problem::invalid("body", message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_tree;

    from_tree! {
        #[derive(Debug)]
        struct Outer {
            name: String = required "name",
            count: Option<u32> = optional "count",
            items: Option<Vec<Inner>> = optional "items",
        }
    }

    from_tree! {
        #[derive(Debug)]
        struct Inner {
            size: u64 = required "size",
        }
    }

    const JSON: Option<&str> = Some("application/json");

    fn error(body: &str) -> (String, String) {
        let problem = read::<Outer>(JSON, body.as_bytes()).unwrap_err();
        assert_eq!(problem.status, 400, "{body}");
        let json: Value = serde_json::from_str(&problem.to_json()).unwrap();
        (
            json["field"].as_str().unwrap().to_string(),
            problem.detail().to_string(),
        )
    }

    #[test]
    fn every_shape_error_names_its_field_in_the_callers_words() {
        let ok: Outer = read(JSON, br#" {"name":"a","items":[{"size":1}]} "#).unwrap();
        let sizes: Vec<u64> = ok
            .items
            .unwrap_or_default()
            .iter()
            .map(|i| i.size)
            .collect();
        assert_eq!((ok.name.as_str(), ok.count, sizes), ("a", None, vec![1]));
        let cases = [
            (r#"{}"#, "name", "name is required"),
            (
                r#"{"name":"a","items":[{}]}"#,
                "items[0].size",
                "size is required",
            ),
            (
                r#"{"name":7}"#,
                "name",
                "name: expected a string, got the number 7",
            ),
            (
                r#"{"name":"a","count":-1}"#,
                "count",
                "count: expected a non-negative whole number, got the number -1",
            ),
            (
                r#"{"name":"a","count":5000000000}"#,
                "count",
                "count: expected a whole number up to 4294967295, got the number 5000000000",
            ),
            (
                r#"{"name":"a","items":{}}"#,
                "items",
                "items: expected an array, got an object",
            ),
            (
                r#"{"name":"a","items":[1]}"#,
                "items[0]",
                "items[0]: expected an object, got the number 1",
            ),
            (
                r#"{"name":"a","extra":1}"#,
                "extra",
                "extra: unknown field \"extra\", expected one of \"name\", \"count\", \"items\"",
            ),
            (
                r#"{"name":"a","items":[{"size":1,"x":0}]}"#,
                "items[0].x",
                "items[0].x: unknown field \"x\", expected \"size\"",
            ),
        ];
        for (body, field, detail) in cases {
            assert_eq!(error(body), (field.to_string(), detail.to_string()));
        }
    }

    #[test]
    fn what_is_not_a_json_object_is_a_body_error() {
        for body in [
            "",
            "[\"a\"]",
            "7",
            r#"{"name":"a""#,
            r#"{"name":"a"} x"#,
            r#"{"name":"\ud800"}"#,
            r#"{"name":"a","count":1e400}"#,
        ] {
            assert_eq!(error(body).0, "body", "{body:?}");
        }
        let deep = format!(
            r#"{{"name":"a","items":{}{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(error(&deep).0, "body");
        assert_eq!(
            error("{\"name\":\"a\",\n\"count\":01}").1,
            "the body is not valid JSON at line 2 column 11"
        );
    }

    #[test]
    fn a_key_twice_in_one_object_is_refused_naming_it() {
        for (body, field) in [
            (r#"{"name":"a","name":"b"}"#, "name"),
            (r#"{"name":"a","n\u0061me":"b"}"#, "name"),
            (
                r#"{"name":"a","items":[{"size":1},{"size":1,"size":2}]}"#,
                "items[1].size",
            ),
            (r#"{"name":"a","extra":{"x":1,"x":1}}"#, "extra.x"),
        ] {
            let (named, detail) = error(body);
            assert_eq!(named, field, "{body}");
            assert!(detail.contains("more than once"), "{detail}");
        }
        let same_name_elsewhere = br#"{"name":"a","items":[{"size":1},{"size":2}]}"#;
        assert!(read::<Outer>(JSON, same_name_elsewhere).is_ok());
    }

    #[test]
    fn content_type_and_size_are_checked_first() {
        let body = br#"{"name":"a"}"#;
        for ct in [None, Some("text/plain"), Some("application/jsonx")] {
            let p = read::<Outer>(ct, body).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.to_json().contains("content-type"));
        }
        assert!(read::<Outer>(Some("Application/JSON; charset=utf-8"), body).is_ok());
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(read::<Outer>(JSON, &huge).unwrap_err().status, 413);
    }
}
