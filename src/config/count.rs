//! Counting by answer (`count`): which of the origin's answers count.

use super::{error, json_text, ConfigError};

/// The origin's answers that count against a rule: statuses and classes
/// (`"5xx"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedStatuses {
    codes: Vec<u16>,
    /// Hundreds digits: 5 for `"5xx"`.
    classes: Vec<u16>,
}

impl CountedStatuses {
    pub fn matches(&self, status: u16) -> bool {
        self.codes.contains(&status) || self.classes.contains(&(status / 100))
    }
}

/// `count = "all"` (the default) or `count = { status = [401, 403, "5xx"] }`
/// for the rule's own layer. Counting by answer needs a refund, which a
/// policy that cannot give a unit back (GCRA) has not, and no lease, whose
/// slot a refused login would not give back sooner. A global quota may:
/// the part that admits a request holds its reservation, and the settle
/// goes to that part.
pub(super) fn validate_count(
    raw: Option<serde_json::Value>,
    concurrency: bool,
    refunds: bool,
    at: &str,
) -> Result<Option<CountedStatuses>, ConfigError> {
    let field = format!("{at}.count");
    let Some(counted) = parse_count(raw, &field)? else {
        return Ok(None);
    };
    let refuse = |why: &str| Err(error(&field, why.to_string()));
    if concurrency {
        return refuse("a concurrency limit already frees its slot when the answer comes; count by answer on a rule without concurrency");
    }
    if !refunds {
        return refuse("GCRA cannot give back a unit, so it cannot count by answer: use sliding_log or fixed_window");
    }
    Ok(Some(counted))
}

/// `count` as written at `field`: `None` for `"all"` (or no `count`),
/// else the statuses and classes that count.
pub(super) fn parse_count(
    raw: Option<serde_json::Value>,
    field: &str,
) -> Result<Option<CountedStatuses>, ConfigError> {
    use serde_json::Value;
    let statuses = match raw {
        None => return Ok(None),
        Some(Value::String(all)) if all == "all" => return Ok(None),
        Some(Value::Object(object)) => {
            if let Some(unknown) = object.keys().find(|k| *k != "status") {
                return Err(error(
                    &format!("{field}.{unknown}"),
                    "unknown field: count takes status",
                ));
            }
            match object.get("status") {
                Some(Value::Array(statuses)) if !statuses.is_empty() && statuses.len() <= 64 => {
                    statuses.clone()
                }
                _ => {
                    return Err(error(
                        &format!("{field}.status"),
                        "status must list 1 to 64 statuses (401) or classes (\"5xx\")",
                    ))
                }
            }
        }
        Some(_) => {
            return Err(error(
                field,
                "count is \"all\" or { status = [401, 403, \"5xx\"] }",
            ))
        }
    };
    let mut counted = CountedStatuses {
        codes: Vec::new(),
        classes: Vec::new(),
    };
    for status in statuses {
        match &status {
            Value::Number(n) if n.as_u64().is_some_and(|c| (100..=599).contains(&c)) => {
                counted.codes.push(n.as_u64().map_or(0, |c| c as u16));
            }
            Value::String(class)
                if class.len() == 3
                    && class.ends_with("xx")
                    && (b'1'..=b'5').contains(&class.as_bytes()[0]) =>
            {
                counted.classes.push(u16::from(class.as_bytes()[0] - b'0'));
            }
            other => {
                return Err(error(
                    &format!("{field}.status"),
                    format!(
                        "{} is not a status (100 to 599) or a class (\"4xx\")",
                        json_text(other)
                    ),
                ))
            }
        }
    }
    Ok(Some(counted))
}
