//! The decision API's bodies and answers, one module per route: `limit` (and
//! `layers`, each key's limits read by `key_limits`), `settle`, `throttle`
//! (redis-cell's `CL.THROTTLE`) and `leases`. Each body is read by
//! [`body::read`], then checked for what a type cannot say; a bad one is a
//! 400 naming its field, never a call to an object.

mod key_limits;
mod layers;
mod leases;
mod limit;
mod settle;
mod throttle;

use serde_json::Value;

use super::problem::{Code, Problem};
use crate::bounds::{MAX_KEY_BYTES, MAX_NAME_BYTES};
use crate::limit::Retry;
pub use key_limits::LimitRequest;
pub use layers::{layers_response, KeyLayer, LayeredRequest};
pub use leases::{lease_problem, lease_response, parse_lease_request, parse_renew_body, LeaseCall};
pub use limit::{limit_response, parse_limit_request, LimitCall, RESERVATION_TTL_MS};
pub use settle::{parse_settle_request, SettleCall};
pub use throttle::{parse_throttle_request, ThrottleCall};

/// The policy name used when a request gives `limit` and `window_ms`.
pub const DEFAULT_POLICY: &str = "default";

/// The slot `{prefix}/v1/throttle` keeps a key's GCRA state in. The
/// decision API may not name a policy so: each endpoint's state lives in
/// names the other cannot reach, so a call to one cannot reset the other.
pub const THROTTLE_SLOT: &str = "throttle";

/// Policy names travel in RateLimit headers as structured-field strings and
/// in problem bodies; keeping them to a plain alphabet keeps both simple.
fn check_policy_name(name: &str) -> Result<(), String> {
    let ok = (1..=MAX_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to {MAX_NAME_BYTES} letters, digits, \"-\", \"_\", \".\" or \":\""
        ))
    }
}

/// A key as the API takes it, in a body or the lease routes' query.
fn checked_key(key: String) -> Result<String, Problem> {
    checked_key_at(key, "key")
}

/// A key as the API takes it, at `field` of a body.
fn checked_key_at(key: String, field: &str) -> Result<String, Problem> {
    let problem = |detail: String| Err(Problem::invalid(field, detail));
    if key.is_empty() {
        problem("key must not be empty".into())
    } else if key.len() > MAX_KEY_BYTES {
        problem(format!(
            "key must be at most {MAX_KEY_BYTES} bytes, got {}",
            key.len()
        ))
    } else if key.chars().any(char::is_control) {
        problem("key must not contain control characters".into())
    } else {
        Ok(key)
    }
}

/// The `key` query parameter of the lease routes, validated like a body key.
pub fn key_param(query: Option<String>) -> Result<String, Problem> {
    match query {
        None => Err(Problem::invalid("key", "key is required")),
        Some(key) => checked_key(key),
    }
}

/// A wait in a body: its ms, or `null` for a request no wait can admit.
fn wait_ms(retry: Retry) -> Value {
    retry.ms().into()
}

/// The answer to a call whose policy `name` its key holds under another
/// algorithm or window.
pub fn policy_conflict(name: &str) -> Problem {
    Problem::new(
        Code::PolicyConflict,
        format!(
            "policy {name:?} of this key holds admissions under another algorithm or window; they keep counting until they expire, so use the same algorithm and window_ms, or another policy name"
        ),
    )
    .with("policy", name)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::http::problem::Problem;

    pub const JSON: Option<&str> = Some("application/json");

    pub fn problem_field(problem: Problem) -> String {
        assert_eq!(problem.status, 400, "{}", problem.to_json());
        serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
            .as_str()
            .unwrap()
            .to_string()
    }
}
