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
        let wanted = match unsigned_max(expected) {
            Some(max) => whole_number(got, max),
            None => expectation(expected, dialect).to_string(),
        };
        return (
            None,
            format!("expected {wanted}, got {}", value(got, dialect)),
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
        "a sequence" => dialect.sequence(),
        other => other,
    }
}

/// The largest value of an unsigned type serde names. A `u64`, so that
/// writing it takes no `u128` formatting into the wasm.
fn unsigned_max(expected: &str) -> Option<u64> {
    match expected {
        "u8" => Some(u8::MAX.into()),
        "u16" => Some(u16::MAX.into()),
        "u32" => Some(u32::MAX.into()),
        "u64" => Some(u64::MAX),
        "usize" => u64::try_from(usize::MAX).ok(),
        _ => None,
    }
}

/// What a field of an unsigned type takes, said about what was given: a
/// whole number that is too large hears its bound, anything else that the
/// number must be whole and not negative.
fn whole_number(got: &str, max: u64) -> String {
    let too_large = got
        .strip_prefix("integer `")
        .and_then(|n| n.strip_suffix('`'))
        .and_then(|n| n.parse::<u128>().ok())
        .is_some_and(|n| n > u128::from(max));
    if too_large {
        format!("a whole number up to {max}")
    } else {
        "a non-negative whole number".to_string()
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
            "expected a non-negative whole number, got the number 10.0"
        );
        assert_eq!(
            toml("invalid value: integer `-1`, expected u8").1,
            "expected a non-negative whole number, got the number -1"
        );
        assert_eq!(
            toml("invalid value: integer `256`, expected u8").1,
            "expected a whole number up to 255, got the number 256"
        );
        assert_eq!(
            toml("invalid type: string \"5\", expected u32").1,
            "expected a non-negative whole number, got the string \"5\""
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
