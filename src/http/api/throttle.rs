//! `POST {prefix}/v1/throttle`: redis-cell's `CL.THROTTLE` over HTTP.

use super::checked_key;
use crate::from_tree;
use crate::http::body;
use crate::http::problem::Problem;
use crate::limit::gcra::{GcraPolicy, MAX_PERIOD_MS};

/// `POST {prefix}/v1/throttle`: redis-cell's `CL.THROTTLE key max_burst
/// count period quantity` over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleCall {
    pub key: String,
    pub policy: GcraPolicy,
    pub quantity: u32,
}

from_tree! {
    /// `{"key", "max_burst", "count", "period_s", "quantity"?}` as sent;
    /// `quantity` defaults to 1, and 0 only peeks.
    struct RawThrottle {
        key: String = required "key",
        max_burst: u64 = required "max_burst",
        count: u64 = required "count",
        period_s: u64 = required "period_s",
        quantity: Option<u32> = optional "quantity",
    }
}

pub fn parse_throttle_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<ThrottleCall, Problem> {
    let raw: RawThrottle = body::read(content_type, body)?;
    let key = checked_key(raw.key)?;
    let max_period_s = MAX_PERIOD_MS / 1000;
    let period_s = raw.period_s;
    if !(1..=max_period_s).contains(&period_s) {
        return Err(Problem::invalid(
            "period_s",
            format!("period_s must be from 1 to {max_period_s} seconds (30 days), got {period_s}"),
        ));
    }
    // `period_s` is checked above, in the seconds the caller wrote.
    let policy = GcraPolicy::new(raw.max_burst, raw.count, period_s * 1000)
        .map_err(|e| Problem::invalid(e.field(), e.to_string()))?;
    Ok(ThrottleCall {
        key,
        policy,
        quantity: raw.quantity.unwrap_or(1),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::http::api::tests::JSON;

    #[test]
    fn throttle_calls_parse_and_name_bad_fields() {
        let call = parse_throttle_request(
            JSON,
            br#"{"key":"user123","max_burst":15,"count":30,"period_s":60}"#,
        )
        .unwrap();
        assert_eq!((call.key.as_str(), call.quantity), ("user123", 1));
        assert_eq!(
            (
                call.policy.max_burst(),
                call.policy.count(),
                call.policy.period_ms()
            ),
            (15, 30, 60_000)
        );
        let field = |body: &str| {
            let problem = parse_throttle_request(JSON, body.as_bytes()).unwrap_err();
            serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let zero =
            parse_throttle_request(JSON, br#"{"key":"k","max_burst":1,"count":1,"period_s":0}"#)
                .unwrap_err()
                .to_json();
        assert!(
            zero.contains("seconds") && !zero.contains(" ms"),
            "period_s is in seconds: {zero}"
        );
        let cases = [
            (r#"{"max_burst":1,"count":1,"period_s":1}"#, "key"),
            (r#"{"key":"k","count":1,"period_s":1}"#, "max_burst"),
            (r#"{"key":"k","max_burst":1,"period_s":1}"#, "count"),
            (r#"{"key":"k","max_burst":1,"count":1}"#, "period_s"),
            (
                r#"{"key":"k","max_burst":-1,"count":1,"period_s":1}"#,
                "max_burst",
            ),
            (
                r#"{"key":"k","max_burst":2000000,"count":1,"period_s":1}"#,
                "max_burst",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":0,"period_s":1}"#,
                "count",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":1,"period_s":0}"#,
                "period_s",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":1,"period_s":99999999999999999}"#,
                "period_s",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":1,"period_s":1,"quantity":1.5}"#,
                "quantity",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":1,"period_s":1,"quantity":5000000000}"#,
                "quantity",
            ),
            (
                r#"{"key":"k","max_burst":1,"count":1,"period_s":1,"burst":1}"#,
                "burst",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(field(body), expected, "{body}");
        }
    }
}
