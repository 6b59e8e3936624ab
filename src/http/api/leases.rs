//! `POST {prefix}/v1/leases` and its renewals: leases under a
//! concurrency limit, and locks; and the answers to an acquire.

use super::{checked_key, wait_ms};
use crate::bounds::{
    DEFAULT_LEASE_TTL_MS, MAX_CONCURRENCY, MAX_LEASE_LABEL_BYTES, MAX_LEASE_TTL_MS,
};
use crate::from_tree;
use crate::http::body;
use crate::http::problem::{Code, Problem};
use crate::json;
use crate::ledger::Outcome;
use crate::limit::lease::LeaseError;

/// `POST {prefix}/v1/leases`: a lease under a concurrency limit, or a lock
/// (limit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseCall {
    pub key: String,
    pub limit: u32,
    pub ttl_ms: u64,
    /// A label for operators; it grants nothing.
    pub owner: Option<String>,
    /// The lease to re-enter: its id, returned by the acquire that granted
    /// it, is the proof of holding it.
    pub lease_id: Option<String>,
}

from_tree! {
    /// `{"key", "limit", "ttl_ms", "owner"?, "lease_id"?}` as sent.
    struct RawLease {
        key: String = required "key",
        limit: Option<u64> = optional "limit",
        ttl_ms: Option<u64> = optional "ttl_ms",
        owner: Option<String> = optional "owner",
        lease_id: Option<String> = optional "lease_id",
    }
}

pub fn parse_lease_request(content_type: Option<&str>, body: &[u8]) -> Result<LeaseCall, Problem> {
    let raw: RawLease = body::read(content_type, body)?;
    let key = checked_key(raw.key)?;
    let limit = raw
        .limit
        .ok_or_else(|| Problem::invalid("limit", "limit is required (1 for a lock)"))?;
    let limit = u32::try_from(limit)
        .ok()
        .filter(|n| (1..=MAX_CONCURRENCY).contains(n))
        .ok_or_else(|| {
            Problem::invalid(
                "limit",
                format!("limit must be from 1 to {MAX_CONCURRENCY}, got {limit}"),
            )
        })?;
    let ttl_ms = raw
        .ttl_ms
        .ok_or_else(|| Problem::invalid("ttl_ms", "ttl_ms is required"))
        .and_then(checked_ttl)?;
    let label = |value: Option<String>, field: &str, detail: String| match value {
        Some(text) if text.is_empty() || text.len() > MAX_LEASE_LABEL_BYTES => {
            Err(Problem::invalid(field, detail))
        }
        other => Ok(other),
    };
    let owner = label(
        raw.owner,
        "owner",
        format!("owner must be a string of 1 to {MAX_LEASE_LABEL_BYTES} bytes"),
    )?;
    let lease_id = label(
        raw.lease_id,
        "lease_id",
        "lease_id must be the id of a lease this key granted".into(),
    )?;
    Ok(LeaseCall {
        key,
        limit,
        ttl_ms,
        owner,
        lease_id,
    })
}

from_tree! {
    /// A renewal's body, `{"ttl_ms"?}` as sent.
    struct RawRenew {
        ttl_ms: Option<u64> = optional "ttl_ms",
    }
}

/// A renewal's `ttl_ms`: optional, [`DEFAULT_LEASE_TTL_MS`] by default. An
/// empty body is fine.
pub fn parse_renew_body(content_type: Option<&str>, body: &[u8]) -> Result<u64, Problem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DEFAULT_LEASE_TTL_MS);
    }
    let raw: RawRenew = body::read(content_type, body)?;
    raw.ttl_ms.map_or(Ok(DEFAULT_LEASE_TTL_MS), checked_ttl)
}

fn checked_ttl(ttl: u64) -> Result<u64, Problem> {
    if (1..=MAX_LEASE_TTL_MS).contains(&ttl) {
        Ok(ttl)
    } else {
        Err(Problem::invalid(
            "ttl_ms",
            format!("ttl_ms must be from 1 to {MAX_LEASE_TTL_MS}, got {ttl}"),
        ))
    }
}

/// Why an acquire was not tried, as the problem to answer: the request is at
/// fault, not the key's occupancy.
pub fn lease_problem(outcome: &Outcome) -> Option<Problem> {
    let lease = outcome.lease.as_ref()?;
    let problem = match lease.error? {
        LeaseError::LimitMismatch { held } => Problem::new(
            Code::LeaseLimitConflict,
            format!(
                "this key's leases are held with limit {held}, not {}; ask with limit {held} until they are all released or lapsed",
                lease.limit
            ),
        )
        .with("field", "limit")
        .with("held-limit", held),
        LeaseError::NoSuchLease => Problem::new(
            Code::NoSuchLease,
            "no live lease with that lease_id for that key; it may have lapsed or been released",
        )
        .with("field", "lease_id"),
    };
    Some(problem)
}

/// The answer to an acquire: the lease when granted, the occupancy and the
/// wait otherwise.
pub fn lease_response(outcome: &Outcome) -> json::Json {
    let lease = outcome.lease.as_ref();
    let held = lease.and_then(|l| l.lease.as_ref());
    json!({
        "granted": outcome.allowed,
        "lease_id": held.map(|l| l.id.as_str()),
        "fence": held.map(|l| l.fence),
        "expires_ms": held.map(|l| l.expires_ms),
        "holds": held.map(|l| l.holds),
        "in_flight": lease.map_or(0, |l| l.in_flight),
        "retry_after_ms": wait_ms(outcome.retry),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::key_param;
    use crate::http::api::tests::{problem_field, JSON};

    #[test]
    fn lease_calls_parse_and_name_bad_fields() {
        let call = parse_lease_request(
            JSON,
            br#"{"key":"job","limit":1,"ttl_ms":5000,"owner":"w1"}"#,
        )
        .unwrap();
        assert_eq!(
            call,
            LeaseCall {
                key: "job".into(),
                limit: 1,
                ttl_ms: 5000,
                owner: Some("w1".into()),
                lease_id: None
            }
        );
        let field = |body: &str| {
            let problem = parse_lease_request(JSON, body.as_bytes()).unwrap_err();
            serde_json::from_str::<serde_json::Value>(&problem.to_json()).unwrap()["field"]
                .as_str()
                .unwrap()
                .to_string()
        };
        for (body, expected) in [
            (r#"{"limit":1,"ttl_ms":1}"#, "key"),
            (r#"{"key":"k","ttl_ms":1}"#, "limit"),
            (r#"{"key":"k","limit":0,"ttl_ms":1}"#, "limit"),
            (r#"{"key":"k","limit":100001,"ttl_ms":1}"#, "limit"),
            (r#"{"key":"k","limit":1}"#, "ttl_ms"),
            (r#"{"key":"k","limit":1,"ttl_ms":0}"#, "ttl_ms"),
            (r#"{"key":"k","limit":1,"ttl_ms":86400001}"#, "ttl_ms"),
            (r#"{"key":"k","limit":1,"ttl_ms":1,"owner":""}"#, "owner"),
            (r#"{"key":"k","limit":1,"ttl_ms":1,"owner":7}"#, "owner"),
            (
                r#"{"key":"k","limit":1,"ttl_ms":1,"lease_id":""}"#,
                "lease_id",
            ),
            (
                r#"{"key":"k","limit":1,"ttl_ms":1,"lease_id":5}"#,
                "lease_id",
            ),
            (r#"{"key":"k","limit":1,"ttl_ms":1,"lease":"x"}"#, "lease"),
        ] {
            assert_eq!(field(body), expected, "{body}");
        }
        assert_eq!(parse_renew_body(None, b""), Ok(30_000));
        assert_eq!(parse_renew_body(JSON, br#"{"ttl_ms":900}"#), Ok(900));
        assert!(parse_renew_body(JSON, br#"{"ttl_ms":0}"#).is_err());
        assert_eq!(key_param(Some("k".into())), Ok("k".into()));
        assert!(key_param(None).is_err());
        assert!(key_param(Some(String::new())).is_err());
    }

    #[test]
    fn renewals_take_an_optional_ttl_and_nothing_else() {
        assert_eq!(parse_renew_body(None, b"  "), Ok(DEFAULT_LEASE_TTL_MS));
        assert_eq!(parse_renew_body(JSON, b"{}"), Ok(DEFAULT_LEASE_TTL_MS));
        assert_eq!(parse_renew_body(JSON, br#"{"ttl_ms":900}"#), Ok(900));
        for body in [
            r#"{"ttl_ms":0}"#,
            r#"{"ttl_ms":86400001}"#,
            r#"{"ttl_ms":"1s"}"#,
        ] {
            let problem = parse_renew_body(JSON, body.as_bytes()).unwrap_err();
            assert_eq!(problem_field(problem), "ttl_ms", "{body}");
        }
        let unknown = parse_renew_body(JSON, br#"{"ttl":900}"#).unwrap_err();
        assert_eq!(problem_field(unknown), "ttl");
    }
}
