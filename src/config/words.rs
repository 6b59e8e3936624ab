//! Serde's messages about the config's shape, in the user's words: it
//! speaks of `struct RawMatch`, `u64` and sequences, while the user wrote a
//! TOML table, a whole number or a list.

/// The message for a shape error from serde, and for a missing field the
/// field's name (serde reports it at the enclosing table).
pub(super) fn plain(message: &str) -> (Option<String>, String) {
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        return (Some(name.to_string()), format!("{name} is required"));
    }
    let mismatch = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "));
    if let Some((got, expected)) = mismatch {
        return (
            None,
            format!("expected {}, got {}", expectation(expected), value(got)),
        );
    }
    // `invalid length 0, expected struct RawConfig with 8 elements`: a list
    // where a table belongs.
    if let Some((_, expected)) = message
        .strip_prefix("invalid length ")
        .and_then(|rest| rest.split_once(", expected "))
    {
        return (
            None,
            format!("expected {}, got a list", expectation(expected)),
        );
    }
    (None, message.replace('`', "\""))
}

/// What serde expected, as the config's reader knows it.
fn expectation(expected: &str) -> &str {
    match expected {
        e if e.starts_with("struct ") || e == "a map" => "a table",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number",
        "a sequence" => "a list",
        other => other,
    }
}

/// What the user wrote, as serde describes it.
fn value(got: &str) -> String {
    let quoted = |prefix: &str| {
        got.strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_string())
    };
    match got {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        "null" | "unit value" => "nothing".into(),
        _ => quoted("floating point ")
            .map(|v| format!("the number {v}"))
            .or_else(|| quoted("integer ").map(|v| format!("the number {v}")))
            .or_else(|| quoted("boolean "))
            .or_else(|| {
                got.strip_prefix("string ")
                    .map(|v| format!("the string {v}"))
            })
            .unwrap_or_else(|| got.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn serde_shapes_become_the_users_words() {
        assert_eq!(
            plain("invalid length 0, expected struct RawConfig with 8 elements").1,
            "expected a table, got a list"
        );
        assert_eq!(
            plain("invalid type: string \"/api/*\", expected struct RawMatch").1,
            "expected a table, got the string \"/api/*\""
        );
        assert_eq!(
            plain("invalid type: floating point `10.0`, expected u64").1,
            "expected a whole number, got the number 10.0"
        );
        assert_eq!(
            plain("invalid value: integer `-1`, expected u8").1,
            "expected a whole number, got the number -1"
        );
        assert_eq!(
            plain("missing field `id`"),
            (Some("id".into()), "id is required".into())
        );
        assert_eq!(
            plain("unknown field `limt`, expected one of `id`, `limit`").1,
            "unknown field \"limt\", expected one of \"id\", \"limit\""
        );
    }
}
