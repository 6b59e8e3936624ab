//! Serde's messages about an input's shape, in the writer's words: it
//! speaks of `struct RawMatch`, `u64` and sequences, while the writer wrote
//! a TOML table or a JSON object, a whole number, a list or an array.

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

/// The message for a shape error from serde, and for a missing field the
/// field's name (serde reports it at the enclosing table).
pub fn plain(message: &str, dialect: Dialect) -> (Option<String>, String) {
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
            format!(
                "expected {}, got {}",
                expectation(expected, dialect),
                value(got, dialect)
            ),
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
            format!(
                "expected {}, got {}",
                expectation(expected, dialect),
                dialect.sequence()
            ),
        );
    }
    (None, message.replace('`', "\""))
}

/// What serde expected, as the writer knows it.
fn expectation(expected: &str, dialect: Dialect) -> &str {
    match expected {
        e if e.starts_with("struct ") || e == "a map" => dialect.map(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number",
        "a sequence" => dialect.sequence(),
        other => other,
    }
}

/// What the writer wrote, as serde describes it.
fn value(got: &str, dialect: Dialect) -> String {
    let quoted = |prefix: &str| {
        got.strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_string())
    };
    match got {
        "sequence" => dialect.sequence().into(),
        "map" => dialect.map().into(),
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
    use super::{plain, Dialect};

    fn toml(message: &str) -> (Option<String>, String) {
        plain(message, Dialect::Toml)
    }

    #[test]
    fn serde_shapes_become_the_users_words() {
        assert_eq!(
            toml("invalid length 0, expected struct RawConfig with 8 elements").1,
            "expected a table, got a list"
        );
        assert_eq!(
            toml("invalid type: string \"/api/*\", expected struct RawMatch").1,
            "expected a table, got the string \"/api/*\""
        );
        assert_eq!(
            toml("invalid type: floating point `10.0`, expected u64").1,
            "expected a whole number, got the number 10.0"
        );
        assert_eq!(
            toml("invalid value: integer `-1`, expected u8").1,
            "expected a whole number, got the number -1"
        );
        assert_eq!(
            toml("missing field `id`"),
            (Some("id".into()), "id is required".into())
        );
        assert_eq!(
            plain(
                "invalid type: sequence, expected struct RawPolicy",
                Dialect::Json
            )
            .1,
            "expected an object, got an array"
        );
        assert_eq!(
            toml("unknown field `limt`, expected one of `id`, `limit`").1,
            "unknown field \"limt\", expected one of \"id\", \"limit\""
        );
    }
}
