//! `POST {prefix}/v1/limit/settle`: keep or refund a reservation that
//! `POST {prefix}/v1/limit` made.

use super::checked_key;
use crate::bounds::MAX_RESERVATION_ID_BYTES;
use crate::from_tree;
use crate::http::body;
use crate::http::problem::Problem;

/// `POST {prefix}/v1/limit/settle`: keep or refund a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleCall {
    pub key: String,
    pub reservation: String,
    pub keep: bool,
}

from_tree! {
    /// `{"key", "reservation", "keep"}` as sent; the last two are checked by
    /// hand so that a missing one says what it is for.
    struct RawSettle {
        key: String = required "key",
        reservation: Option<String> = optional "reservation",
        keep: Option<bool> = optional "keep",
    }
}

pub fn parse_settle_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<SettleCall, Problem> {
    let raw: RawSettle = body::read(content_type, body)?;
    let key = checked_key(raw.key)?;
    let reservation = raw
        .reservation
        .filter(|id| {
            (1..=MAX_RESERVATION_ID_BYTES).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .ok_or_else(|| {
            Problem::invalid(
                "reservation",
                "reservation is required: the id a reserving call answered",
            )
        })?;
    let keep = raw.keep.ok_or_else(|| {
        Problem::invalid(
            "keep",
            "keep is required: true to count the reservation, false to refund it",
        )
    })?;
    Ok(SettleCall {
        key,
        reservation,
        keep,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::tests::{problem_field, JSON};

    #[test]
    fn settle_calls_parse_and_name_bad_fields() {
        let call =
            parse_settle_request(JSON, br#"{"key":"k","reservation":"r-1","keep":false}"#).unwrap();
        assert_eq!(
            call,
            SettleCall {
                key: "k".into(),
                reservation: "r-1".into(),
                keep: false
            }
        );
        let long = format!(
            r#"{{"key":"k","reservation":"{}","keep":true}}"#,
            "r".repeat(65)
        );
        for (body, expected) in [
            (r#"{"reservation":"r","keep":true}"#, "key"),
            (r#"{"key":"","reservation":"r","keep":true}"#, "key"),
            (r#"{"key":"k","keep":true}"#, "reservation"),
            (r#"{"key":"k","reservation":"","keep":true}"#, "reservation"),
            (
                r#"{"key":"k","reservation":"a b","keep":true}"#,
                "reservation",
            ),
            (r#"{"key":"k","reservation":7,"keep":true}"#, "reservation"),
            (long.as_str(), "reservation"),
            (r#"{"key":"k","reservation":"r"}"#, "keep"),
            (r#"{"key":"k","reservation":"r","keep":"yes"}"#, "keep"),
            (r#"{"key":"k","reservation":"r","keep":true,"id":1}"#, "id"),
        ] {
            let problem = parse_settle_request(JSON, body.as_bytes()).unwrap_err();
            assert_eq!(problem_field(problem), expected, "{body}");
        }
        let missing = parse_settle_request(JSON, br#"{"key":"k","reservation":"r"}"#);
        assert!(missing.unwrap_err().detail().contains("false to refund"));
    }
}
