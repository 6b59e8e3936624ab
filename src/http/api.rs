//! The decision API's request bodies and answers.
//!
//! `POST {prefix}/v1/limit` takes either one policy
//! (`{"key", "limit", "window_ms", "algorithm"?, "cost"?}`) or several
//! (`{"key", "policies": [{"name", "limit", "window_ms", "algorithm"?}, ...], "cost"?}`).
//! Everything is validated here, field by field, so a bad body gets a 400
//! that names the field instead of reaching a Durable Object.

use serde_json::{json, Map, Value};

use super::problem::Problem;
use crate::ledger::Outcome;
use crate::limit::gcra::{GcraPolicy, MAX_PERIOD_MS};
use crate::limit::lease::LeaseError;
use crate::limit::{Policy, Retry, Spec};

/// Largest body the API reads; anything larger is refused with 413 before
/// it is parsed.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Longest key the API accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// Most policies one request may carry.
pub const MAX_POLICIES: usize = 8;

/// The policy name used when a request gives `limit` and `window_ms`.
pub const DEFAULT_POLICY: &str = "default";

/// The slot `{prefix}/v1/throttle` keeps a key's GCRA state in. The
/// decision API may not name a policy so: each endpoint's state lives in
/// names the other cannot reach, so a call to one cannot reset the other.
pub const THROTTLE_SLOT: &str = "throttle";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRequest {
    pub key: String,
    pub policies: Vec<(String, Spec)>,
    pub cost: u32,
    /// Whether the request used the `policies` form, which is answered
    /// per policy.
    pub named: bool,
    /// Whether an admission is a reservation, to keep or refund with
    /// `POST {prefix}/v1/limit/settle`.
    pub reserve: bool,
}

/// How long a reservation waits for its settle before it is kept: long
/// enough for any origin to answer, short enough that a lost settle does
/// not hold a unit in limbo for long. Kept, not refunded: for the security
/// use (failed logins), an attempt whose answer was lost must not be free.
pub const RESERVATION_TTL_MS: u64 = 60_000;

/// `POST {prefix}/v1/limit/settle`: keep or refund a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleCall {
    pub key: String,
    pub reservation: String,
    pub keep: bool,
}

/// `{"key", "reservation", "keep"}`.
pub fn parse_settle_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<SettleCall, Problem> {
    let object = json_object(content_type, body)?;
    only_fields(&object, "", &["key", "reservation", "keep"])?;
    let key = key_field(&object)?;
    let reservation = match object.get("reservation") {
        Some(Value::String(id))
            if (1..=64).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            id.clone()
        }
        _ => {
            return Err(Problem::invalid(
                "reservation",
                "reservation is required: the id a reserving call answered",
            ))
        }
    };
    let keep = match object.get("keep") {
        Some(Value::Bool(keep)) => *keep,
        _ => {
            return Err(Problem::invalid(
                "keep",
                "keep is required: true to count the reservation, false to refund it",
            ))
        }
    };
    Ok(SettleCall {
        key,
        reservation,
        keep,
    })
}

/// Checks the content type and size, then parses the body.
pub fn parse_limit_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<LimitRequest, Problem> {
    json_object(content_type, body).and_then(|object| limit_request(&object))
}

/// A JSON object body, or the problem that says why not.
pub fn json_object(content_type: Option<&str>, body: &[u8]) -> Result<Map<String, Value>, Problem> {
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
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(Problem::invalid("body", "the body must be a JSON object")),
        Err(e) => Err(Problem::invalid(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// `POST {prefix}/v1/throttle`: redis-cell's `CL.THROTTLE key max_burst
/// count period quantity` over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleCall {
    pub key: String,
    pub policy: GcraPolicy,
    pub quantity: u32,
}

/// `{"key", "max_burst", "count", "period_s", "quantity"?}`; `quantity`
/// defaults to 1, and 0 only peeks.
pub fn parse_throttle_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<ThrottleCall, Problem> {
    let object = json_object(content_type, body)?;
    only_fields(
        &object,
        "",
        &["key", "max_burst", "count", "period_s", "quantity"],
    )?;
    let key = key_field(&object)?;
    let field = |name: &str, expected: &str| match object.get(name) {
        Some(value) => integer(value, name, expected),
        None => Err(Problem::invalid(name, format!("{name} is required"))),
    };
    let max_burst = field("max_burst", "an integer from 0 to 1000000")?;
    let count = field("count", "an integer from 1 to 1000000")?;
    let period_s = field("period_s", "a whole number of seconds from 1 to 2592000")?;
    let quantity = match object.get("quantity") {
        None => 1,
        Some(value) => u32::try_from(integer(value, "quantity", "a non-negative integer")?)
            .map_err(|_| Problem::invalid("quantity", "quantity is too large"))?,
    };
    let max_period_s = MAX_PERIOD_MS / 1000;
    if !(1..=max_period_s).contains(&period_s) {
        return Err(Problem::invalid(
            "period_s",
            format!("period_s must be from 1 to {max_period_s} seconds (30 days), got {period_s}"),
        ));
    }
    let period_ms = period_s * 1000;
    let policy = GcraPolicy::new(max_burst, count, period_ms).map_err(|e| {
        let name = if e.field() == "period" {
            "period_s"
        } else {
            e.field()
        };
        Problem::invalid(name, e.to_string())
    })?;
    Ok(ThrottleCall {
        key,
        policy,
        quantity,
    })
}

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

/// The longest a lease may be asked to last in one go: a day.
pub const MAX_LEASE_TTL_MS: u64 = 86_400_000;

/// `{"key", "limit", "ttl_ms", "owner"?, "lease_id"?}`.
pub fn parse_lease_request(content_type: Option<&str>, body: &[u8]) -> Result<LeaseCall, Problem> {
    let object = json_object(content_type, body)?;
    only_fields(
        &object,
        "",
        &["key", "limit", "ttl_ms", "owner", "lease_id"],
    )?;
    let key = key_field(&object)?;
    let limit = match object.get("limit") {
        Some(value) => integer(value, "limit", "an integer from 1 to 100000")?,
        None => {
            return Err(Problem::invalid(
                "limit",
                "limit is required (1 for a lock)",
            ))
        }
    };
    let limit = u32::try_from(limit)
        .ok()
        .filter(|n| (1..=100_000).contains(n))
        .ok_or_else(|| {
            Problem::invalid(
                "limit",
                format!("limit must be from 1 to 100000, got {limit}"),
            )
        })?;
    let ttl_ms = ttl_field(object.get("ttl_ms"), true)?;
    let owner = match object.get("owner") {
        None | Some(Value::Null) => None,
        Some(Value::String(owner)) if !owner.is_empty() && owner.len() <= 256 => {
            Some(owner.clone())
        }
        Some(_) => {
            return Err(Problem::invalid(
                "owner",
                "owner must be a string of 1 to 256 bytes",
            ))
        }
    };
    let lease_id = match object.get("lease_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 256 => Some(id.clone()),
        Some(_) => {
            return Err(Problem::invalid(
                "lease_id",
                "lease_id must be the id of a lease this key granted",
            ))
        }
    };
    Ok(LeaseCall {
        key,
        limit,
        ttl_ms,
        owner,
        lease_id,
    })
}

/// A renewal's body: `{"ttl_ms"}`, optional, 30 s by default. An empty
/// body is fine.
pub fn parse_renew_body(content_type: Option<&str>, body: &[u8]) -> Result<u64, Problem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(30_000);
    }
    let object = json_object(content_type, body)?;
    only_fields(&object, "", &["ttl_ms"])?;
    match object.get("ttl_ms") {
        None => Ok(30_000),
        value => ttl_field(value, false),
    }
}

/// The `key` query parameter of the lease routes, validated like a body key.
pub fn key_param(query: Option<String>) -> Result<String, Problem> {
    let mut object = Map::new();
    if let Some(key) = query {
        object.insert("key".into(), Value::String(key));
    }
    key_field(&object)
}

fn ttl_field(value: Option<&Value>, required: bool) -> Result<u64, Problem> {
    let Some(value) = value else {
        return if required {
            Err(Problem::invalid("ttl_ms", "ttl_ms is required"))
        } else {
            Ok(30_000)
        };
    };
    let ttl = integer(value, "ttl_ms", "a positive integer number of milliseconds")?;
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
            409,
            "lease-limit-conflict",
            format!(
                "this key's leases are held with limit {held}, not {}; ask with limit {held} until they are all released or lapsed",
                lease.limit
            ),
        )
        .with("field", "limit")
        .with("held-limit", held),
        LeaseError::NoSuchLease => Problem::new(
            404,
            "no-such-lease",
            "no live lease with that lease_id for that key; it may have lapsed or been released",
        )
        .with("field", "lease_id"),
    };
    Some(problem)
}

/// The answer to an acquire: the lease when granted, the occupancy and the
/// wait otherwise.
pub fn lease_response(outcome: &Outcome) -> Value {
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

pub fn too_large() -> Problem {
    Problem::new(
        413,
        "body-too-large",
        format!("the body must be at most {MAX_BODY_BYTES} bytes"),
    )
}

fn limit_request(object: &Map<String, Value>) -> Result<LimitRequest, Problem> {
    only_fields(
        object,
        "",
        &[
            "key",
            "limit",
            "window_ms",
            "algorithm",
            "policies",
            "cost",
            "reserve",
        ],
    )?;
    let key = key_field(object)?;
    let reserve = match object.get("reserve") {
        None => false,
        Some(Value::Bool(reserve)) => *reserve,
        Some(_) => return Err(Problem::invalid("reserve", "reserve must be true or false")),
    };
    let named = object.contains_key("policies");
    let policies = if named {
        for field in ["limit", "window_ms", "algorithm"] {
            if object.contains_key(field) {
                return Err(Problem::invalid(
                    field,
                    format!("give either \"policies\" or \"limit\" and \"window_ms\", not both (\"{field}\" was given; set algorithm per policy)"),
                ));
            }
        }
        policies_field(&object["policies"])?
    } else {
        vec![(DEFAULT_POLICY.to_string(), policy_fields(object, "")?)]
    };
    let smallest = policies.iter().map(|(_, p)| p.limit()).min().unwrap_or(0);
    let cost = match object.get("cost") {
        None => 1,
        Some(value) => {
            let cost = integer(value, "cost", "an integer from 0 to the limit")?;
            if cost > smallest {
                return Err(Problem::invalid(
                    "cost",
                    format!("cost {cost} exceeds the limit {smallest}: such a request could never be admitted"),
                ));
            }
            cost as u32
        }
    };
    if reserve && cost == 0 {
        return Err(Problem::invalid(
            "reserve",
            "a peek (cost 0) reserves nothing; reserve with a cost of 1 or more",
        ));
    }
    Ok(LimitRequest {
        key,
        policies,
        cost,
        named,
        reserve,
    })
}

fn key_field(object: &Map<String, Value>) -> Result<String, Problem> {
    match object.get("key") {
        None => Err(Problem::invalid("key", "key is required")),
        Some(Value::String(key)) if key.is_empty() => {
            Err(Problem::invalid("key", "key must not be empty"))
        }
        Some(Value::String(key)) if key.len() > MAX_KEY_BYTES => Err(Problem::invalid(
            "key",
            format!(
                "key must be at most {MAX_KEY_BYTES} bytes, got {}",
                key.len()
            ),
        )),
        Some(Value::String(key)) if key.chars().any(char::is_control) => Err(Problem::invalid(
            "key",
            "key must not contain control characters",
        )),
        Some(Value::String(key)) => Ok(key.clone()),
        Some(_) => Err(Problem::invalid("key", "key must be a string")),
    }
}

fn policies_field(value: &Value) -> Result<Vec<(String, Spec)>, Problem> {
    let Value::Array(items) = value else {
        return Err(Problem::invalid(
            "policies",
            "policies must be an array of {name, limit, window_ms}",
        ));
    };
    if items.is_empty() || items.len() > MAX_POLICIES {
        return Err(Problem::invalid(
            "policies",
            format!(
                "policies must hold 1 to {MAX_POLICIES} policies, got {}",
                items.len()
            ),
        ));
    }
    let mut policies: Vec<(String, Spec)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let prefix = format!("policies[{i}].");
        let Value::Object(object) = item else {
            return Err(Problem::invalid(
                &format!("policies[{i}]"),
                "each policy must be an object",
            ));
        };
        only_fields(
            object,
            &prefix,
            &["name", "limit", "window_ms", "algorithm"],
        )?;
        let name_field = format!("{prefix}name");
        let name = match object.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => {
                return Err(Problem::invalid(
                    &name_field,
                    "name is required and must be a string",
                ))
            }
        };
        validate_policy_name(&name).map_err(|e| Problem::invalid(&name_field, e))?;
        if name == THROTTLE_SLOT {
            return Err(Problem::invalid(
                &name_field,
                format!("{THROTTLE_SLOT:?} is reserved for {{prefix}}/v1/throttle's state; choose another name"),
            ));
        }
        if policies.iter().any(|(n, _)| *n == name) {
            return Err(Problem::invalid(
                &name_field,
                format!("policy name {name:?} is used twice"),
            ));
        }
        policies.push((name, policy_fields(object, &prefix)?));
    }
    Ok(policies)
}

/// Policy names travel in RateLimit headers as structured-field strings and
/// in problem bodies; keeping them to a plain alphabet keeps both simple.
pub fn validate_policy_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to 64 letters, digits, \"-\", \"_\", \".\" or \":\""
        ))
    }
}

/// `limit`, `window_ms` and `algorithm` (sliding_log by default; GCRA has
/// its own endpoint, since its parameters differ).
fn policy_fields(object: &Map<String, Value>, prefix: &str) -> Result<Spec, Problem> {
    let limit_field = format!("{prefix}limit");
    let window_field = format!("{prefix}window_ms");
    let required = |field: &str, name: &str| {
        object
            .get(name)
            .ok_or_else(|| Problem::invalid(field, format!("{name} is required")))
    };
    let limit = integer(
        required(&limit_field, "limit")?,
        &limit_field,
        "a positive integer",
    )?;
    let window = integer(
        required(&window_field, "window_ms")?,
        &window_field,
        "a positive integer number of milliseconds",
    )?;
    let policy = Policy::new(limit, window).map_err(|e| {
        let field = format!("{prefix}{}", e.field());
        Problem::invalid(&field, e.to_string())
    })?;
    match object.get("algorithm") {
        None => Ok(Spec::SlidingLog(policy)),
        Some(Value::String(name)) if name == "sliding_log" => Ok(Spec::SlidingLog(policy)),
        Some(Value::String(name)) if name == "fixed_window" => Ok(Spec::FixedWindow(policy)),
        Some(other) => Err(Problem::invalid(
            &format!("{prefix}algorithm"),
            format!("algorithm must be \"sliding_log\" or \"fixed_window\" (GCRA is POST /v1/throttle), got {other}"),
        )),
    }
}

fn integer(value: &Value, field: &str, expected: &str) -> Result<u64, Problem> {
    value
        .as_u64()
        .ok_or_else(|| Problem::invalid(field, format!("{field} must be {expected}, got {value}")))
}

fn only_fields(object: &Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), Problem> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(Problem::invalid(
            &format!("{prefix}{unknown}"),
            format!(
                "unknown field {unknown:?}; expected one of {}",
                known.join(", ")
            ),
        )),
    }
}

/// The answer body: the single-policy form flat, the `policies` form per
/// policy with the names of those that refused.
/// The answer to `POST {prefix}/v1/limit`; `reservation` is the id of the
/// admission a reserving call made.
pub fn limit_response(
    request: &LimitRequest,
    outcome: &Outcome,
    reservation: Option<&str>,
) -> Value {
    let mut answer = limit_answer(request, outcome);
    if let Some(id) = reservation.filter(|_| outcome.allowed) {
        answer["reservation"] = id.into();
    }
    // A peek is always "allowed" (it takes nothing), so it also says
    // whether a request of cost 1 would pass now: every policy has a unit
    // left.
    if request.cost == 0 {
        answer["would_allow"] = outcome
            .policies
            .iter()
            .all(|p| p.decision.remaining >= 1)
            .into();
    }
    answer
}

fn limit_answer(request: &LimitRequest, outcome: &Outcome) -> Value {
    if !request.named {
        if let Some(only) = outcome.policies.first() {
            let d = &only.decision;
            return json!({
                "allowed": outcome.allowed,
                "limit": d.limit,
                "remaining": d.remaining,
                "reset_ms": d.reset_ms,
                "retry_after_ms": wait_ms(d.retry),
            });
        }
    }
    let violated = outcome.violated_names();
    let policies: Vec<Value> = outcome
        .policies
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "allowed": p.decision.allowed,
                "limit": p.decision.limit,
                "window_ms": p.window_ms,
                "remaining": p.decision.remaining,
                "reset_ms": p.decision.reset_ms,
                "retry_after_ms": wait_ms(p.decision.retry),
            })
        })
        .collect();
    json!({
        "allowed": outcome.allowed,
        "violated": violated,
        "retry_after_ms": wait_ms(outcome.retry),
        "policies": policies,
    })
}

/// A wait in a body: its ms, or `null` for a request no wait can admit.
fn wait_ms(retry: Retry) -> Value {
    retry.ms().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Option<&str> = Some("application/json");

    fn field_of(body: &str) -> String {
        let problem = parse_limit_request(JSON, body.as_bytes()).unwrap_err();
        assert_eq!(problem.status, 400, "{body}");
        let json: Value = serde_json::from_str(&problem.to_json()).unwrap();
        json["field"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_peek_says_whether_one_more_would_pass() {
        use crate::ledger::{Ask, Ledger};
        let request = |cost: u32| {
            let body = format!(r#"{{"key":"k","limit":1,"window_ms":1000,"cost":{cost}}}"#);
            parse_limit_request(JSON, body.as_bytes()).unwrap()
        };
        let mut ledger = Ledger::new();
        let mut ask = |cost: u32, now: u64| {
            let call = request(cost);
            let (outcome, _) = ledger.check(
                "k",
                &Ask {
                    specs: &call.policies,
                    cost,
                    ban: None,
                    lease: None,
                },
                now,
            );
            limit_response(&call, &outcome, None)
        };
        assert_eq!(ask(0, 0)["would_allow"], true);
        assert_eq!(ask(1, 0)["would_allow"], Value::Null, "only a peek says it");
        let exhausted = ask(0, 1);
        assert_eq!(
            (
                &exhausted["allowed"],
                &exhausted["remaining"],
                &exhausted["would_allow"]
            ),
            (&json!(true), &json!(0), &json!(false))
        );
    }

    #[test]
    fn a_request_that_can_never_pass_says_null_and_no_retry_after() {
        use crate::http::headers::retry_after_field;
        use crate::ledger::{Ask, Ledger};
        // Parsing refuses a cost above the limit, so the ledger is asked
        // directly, as when an object's limit is lower than the caller's.
        let flat = br#"{"key":"k","limit":2,"window_ms":1000}"#;
        let named = br#"{"key":"k","policies":[{"name":"p","limit":2,"window_ms":1000}]}"#;
        for (body, per_policy) in [(&flat[..], false), (&named[..], true)] {
            let call = parse_limit_request(JSON, body).unwrap();
            let ask = Ask {
                specs: &call.policies,
                cost: 3,
                ban: None,
                lease: None,
            };
            let (outcome, _) = Ledger::new().check("k", &ask, 0);
            assert_eq!(outcome.retry, Retry::Never);
            assert_eq!(retry_after_field(outcome.retry), None);
            let answer = limit_response(&call, &outcome, None);
            assert_eq!(answer["allowed"], false);
            assert_eq!(answer["retry_after_ms"], Value::Null);
            if per_policy {
                assert_eq!(answer["policies"][0]["retry_after_ms"], Value::Null);
                assert_eq!(answer["policies"][0]["allowed"], false);
            }
        }
    }

    #[test]
    fn the_single_policy_form_takes_an_algorithm() {
        let r = parse_limit_request(
            JSON,
            br#"{"key":"k","limit":3,"window_ms":10,"algorithm":"fixed_window"}"#,
        )
        .unwrap();
        assert_eq!(
            r.policies,
            vec![(
                "default".to_string(),
                Spec::FixedWindow(Policy::new(3, 10).unwrap())
            )]
        );
    }

    #[test]
    fn parses_the_single_policy_form() {
        let r = parse_limit_request(
            Some("application/json; charset=utf-8"),
            br#"{"key":"u:1","limit":10,"window_ms":1000}"#,
        )
        .unwrap();
        assert_eq!(r.key, "u:1");
        assert_eq!(r.cost, 1);
        assert_eq!(
            r.policies,
            vec![(
                "default".to_string(),
                Spec::SlidingLog(Policy::new(10, 1000).unwrap())
            )]
        );
        assert!(!r.named);
    }

    #[test]
    fn parses_the_policies_form() {
        let r = parse_limit_request(
            JSON,
            br#"{"key":"k","cost":2,"policies":[{"name":"s","limit":10,"window_ms":1000},{"name":"d","limit":1000,"window_ms":86400000,"algorithm":"fixed_window"}]}"#,
        )
        .unwrap();
        assert_eq!(r.policies.len(), 2);
        assert!(matches!(r.policies[1].1, Spec::FixedWindow(_)));
        assert_eq!(r.cost, 2);
        assert!(r.named);
    }

    #[test]
    fn every_invalid_input_names_its_field() {
        let cases = [
            (r#"{"limit":10,"window_ms":1000}"#, "key"),
            (r#"{"key":"","limit":10,"window_ms":1000}"#, "key"),
            (r#"{"key":7,"limit":10,"window_ms":1000}"#, "key"),
            (r#"{"key":"a\u0000b","limit":10,"window_ms":1000}"#, "key"),
            (
                r#"{"key":"line\nbreak","limit":10,"window_ms":1000}"#,
                "key",
            ),
            (r#"{"key":"k","window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":0,"window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":-3,"window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":2.5,"window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":"10","window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":1e300,"window_ms":1000}"#, "limit"),
            (r#"{"key":"k","limit":10}"#, "window_ms"),
            (r#"{"key":"k","limit":10,"window_ms":0}"#, "window_ms"),
            (
                r#"{"key":"k","limit":10,"window_ms":2592000001}"#,
                "window_ms",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"cost":11}"#,
                "cost",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"cost":-1}"#,
                "cost",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"extra":1}"#,
                "extra",
            ),
            (r#"{"key":"k","limit":10,"policies":[]}"#, "limit"),
            (r#"{"key":"k","policies":[]}"#, "policies"),
            (r#"{"key":"k","policies":{}}"#, "policies"),
            (r#"{"key":"k","policies":[1]}"#, "policies[0]"),
            (
                r#"{"key":"k","policies":[{"name":"throttle","limit":1,"window_ms":1}]}"#,
                "policies[0].name",
            ),
            (
                r#"{"key":"k","policies":[{"limit":1,"window_ms":1}]}"#,
                "policies[0].name",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a b","limit":1,"window_ms":1}]}"#,
                "policies[0].name",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a","limit":1,"window_ms":1},{"name":"a","limit":1,"window_ms":1}]}"#,
                "policies[1].name",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a","limit":0,"window_ms":1}]}"#,
                "policies[0].limit",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a","limit":1,"window_ms":1,"x":0}]}"#,
                "policies[0].x",
            ),
            (r#"{"key":"k""#, "body"),
            ("[1,2]", "body"),
            ("", "body"),
        ];
        for (body, field) in cases {
            assert_eq!(field_of(body), field, "for {body}");
        }
        let long_key = format!(r#"{{"key":"{}","limit":1,"window_ms":1}}"#, "k".repeat(513));
        assert_eq!(field_of(&long_key), "key");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(field_of(&deep), "body");
    }

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
            serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
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
    fn content_type_and_size_are_checked_first() {
        let body = br#"{"key":"k","limit":1,"window_ms":1}"#;
        for ct in [None, Some("text/plain"), Some("application/jsonx")] {
            let p = parse_limit_request(ct, body).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.to_json().contains("content-type"));
        }
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(parse_limit_request(JSON, &huge).unwrap_err().status, 413);
    }
}
