//! `POST {prefix}/v1/limit`: one key (`{"key", "limit", "window_ms",
//! "algorithm"?, "cost"?}`, or `"policies"` for several, read by
//! `key_limits.rs`), optionally as a reservation (`"reserve": true`), and
//! the answer; or several keys at once (`layers`, in `layers.rs`).

use super::checked_key;
use super::key_limits::{
    checked_cost, key_policies, limit_answer, KeyLimits, LimitRequest, RawPolicy,
};
use super::layers::{parse_layers, LayeredRequest, RawLayer};
use crate::bounds::MAX_RESERVATION_TTL_MS;
use crate::from_tree;
use crate::http::body;
use crate::http::problem::Problem;
use crate::json::Json;
use crate::ledger::Outcome;

/// How long a reservation waits for its settle before it is kept, unless
/// the call says (`reservation_ttl_ms`): long enough for any origin to
/// answer, short enough that a lost settle does not hold a unit in limbo
/// for long. Kept, not refunded: for the security use (failed logins), an
/// attempt whose answer was lost must not be free.
pub const RESERVATION_TTL_MS: u64 = 60_000;

/// A call to `POST {prefix}/v1/limit`: one key, or several `layers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitCall {
    One(LimitRequest),
    Layers(LayeredRequest),
}

from_tree! {
    /// `POST {prefix}/v1/limit` as sent. `limit`, `window_ms` and `algorithm`
    /// are the one-policy form, `policies` the named form, `layers` several
    /// keys; which one was used is checked after reading, so the error can say
    /// what to do.
    struct RawLimitRequest {
        key: Option<String> = optional "key",
        limit: Option<u64> = optional "limit",
        window_ms: Option<u64> = optional "window_ms",
        algorithm: Option<String> = optional "algorithm",
        policies: Option<Vec<RawPolicy>> = optional "policies",
        cost: Option<u64> = optional "cost",
        reserve: bool = or_default "reserve",
        reservation_ttl_ms: Option<u64> = optional "reservation_ttl_ms",
        layers: Option<Vec<RawLayer>> = optional "layers",
        local: Option<bool> = optional "local",
    }
}

/// Checks the content type and size, then reads and validates the body.
pub fn parse_limit_request(content_type: Option<&str>, body: &[u8]) -> Result<LimitCall, Problem> {
    let raw: RawLimitRequest = body::read(content_type, body)?;
    if let Some(layers) = raw.layers {
        let given = [
            ("key", raw.key.is_some()),
            ("limit", raw.limit.is_some()),
            ("window_ms", raw.window_ms.is_some()),
            ("algorithm", raw.algorithm.is_some()),
            ("policies", raw.policies.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, given)| *given) {
            return Err(Problem::invalid(
                field,
                format!(
                    "with \"layers\", each layer gives its key and limits: leave \"{field}\" out"
                ),
            ));
        }
        if raw.reserve || raw.reservation_ttl_ms.is_some() {
            return Err(Problem::invalid(
                "reserve",
                "a call with \"layers\" cannot be a reservation: reserve one key at a time",
            ));
        }
        let local = raw.local.unwrap_or(true);
        return parse_layers(layers, raw.cost, local).map(LimitCall::Layers);
    }
    let key = raw
        .key
        .ok_or_else(|| Problem::invalid("key", "key is required (or \"layers\")"))
        .and_then(checked_key)?;
    let limits = KeyLimits {
        limit: raw.limit,
        window_ms: raw.window_ms,
        algorithm: raw.algorithm,
        policies: raw.policies,
    };
    let named = limits.policies.is_some();
    let policies = key_policies(limits, "")?;
    let cost = checked_cost(raw.cost, &policies)?;
    if raw.reserve && cost == 0 {
        return Err(Problem::invalid(
            "reserve",
            "a peek (cost 0) reserves nothing; reserve with a cost of 1 or more",
        ));
    }
    let reserve = match (raw.reserve, raw.reservation_ttl_ms) {
        (false, None) => None,
        (false, Some(_)) => {
            return Err(Problem::invalid(
                "reservation_ttl_ms",
                "reservation_ttl_ms is how long a reservation waits for its settle; send it with \"reserve\": true",
            ))
        }
        (true, None) => Some(RESERVATION_TTL_MS),
        (true, Some(ttl)) if (1..=MAX_RESERVATION_TTL_MS).contains(&ttl) => Some(ttl),
        (true, Some(ttl)) => {
            return Err(Problem::invalid(
                "reservation_ttl_ms",
                format!("reservation_ttl_ms must be from 1 to {MAX_RESERVATION_TTL_MS} (a day), got {ttl}"),
            ))
        }
    };
    Ok(LimitCall::One(LimitRequest {
        key,
        policies,
        cost,
        named,
        local: raw.local.unwrap_or(true) && reserve.is_none(),
        reserve,
    }))
}

/// The answer to `POST {prefix}/v1/limit`: the single-policy form flat,
/// the `policies` form per policy with the names of those that refused;
/// `reservation` is the id of the admission a reserving call made.
pub fn limit_response(
    request: &LimitRequest,
    outcome: &Outcome,
    reservation: Option<&str>,
) -> Json {
    let mut answer = limit_answer(request, outcome);
    if let Some(id) = reservation.filter(|_| outcome.allowed) {
        answer.put("reservation", id);
    }
    // A refusal only reservations still in flight caused: a short wait
    // (`retry_after_ms`) may be enough, so the caller can tell it from a
    // quota its kept admissions used up.
    if outcome.pending {
        answer.put("pending", &true);
    }
    // A peek is always "allowed" (it takes nothing), so it also says
    // whether a request of cost 1 would pass now: every policy has a unit
    // left.
    if request.cost == 0 {
        let would_allow = outcome.policies.iter().all(|p| p.decision.remaining >= 1);
        answer.put("would_allow", &would_allow);
    }
    answer.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::http::api::tests::JSON;
    use crate::limit::{Policy, Spec};

    /// The one-key request a body makes.
    fn one(content_type: Option<&str>, body: &[u8]) -> LimitRequest {
        match parse_limit_request(content_type, body).unwrap() {
            LimitCall::One(request) => request,
            other => panic!("expected one key, got {other:?}"),
        }
    }
    use crate::limit::Retry;

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
            one(JSON, body.as_bytes())
        };
        let mut ledger = Ledger::new();
        let mut ask = |cost: u32, now: u64| {
            let call = request(cost);
            let (outcome, _) = ledger.check(
                &Ask {
                    specs: &call.policies,
                    cost,
                    ban: None,
                    lease: None,
                },
                now,
            );
            limit_response(&call, &outcome, None).value()
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
            let call = one(JSON, body);
            let ask = Ask {
                specs: &call.policies,
                cost: 3,
                ban: None,
                lease: None,
            };
            let (outcome, _) = Ledger::new().check(&ask, 0);
            assert_eq!(outcome.retry, Retry::Never);
            assert_eq!(retry_after_field(outcome.retry), None);
            let answer = limit_response(&call, &outcome, None).value();
            assert_eq!(answer["allowed"], false);
            assert_eq!(answer["retry_after_ms"], Value::Null);
            if per_policy {
                assert_eq!(answer["policies"][0]["retry_after_ms"], Value::Null);
                assert_eq!(answer["policies"][0]["allowed"], false);
            }
        }
    }

    #[test]
    fn a_refusal_only_pending_reservations_cause_says_pending_and_a_short_wait() {
        use crate::ledger::{Ask, Ledger, PENDING_RETRY_MS};
        let flat = br#"{"key":"k","limit":1,"window_ms":600000,"reserve":true}"#;
        let named =
            br#"{"key":"k","reserve":true,"policies":[{"name":"p","limit":1,"window_ms":600000}]}"#;
        for body in [&flat[..], &named[..]] {
            let call = one(JSON, body);
            let ask = Ask {
                specs: &call.policies,
                cost: 1,
                ban: None,
                lease: None,
            };
            let mut ledger = Ledger::new();
            let (first, _) = ledger.reserve(&ask, "r1", 60_000, 0);
            assert!(limit_response(&call, &first, Some("r1"))
                .value()
                .get("pending")
                .is_none());
            let (outcome, _) = ledger.reserve(&ask, "r2", 60_010, 10);
            let answer = limit_response(&call, &outcome, Some("r2")).value();
            assert_eq!(answer["allowed"], false);
            assert_eq!(answer["pending"], true);
            assert_eq!(answer["retry_after_ms"], PENDING_RETRY_MS);
            let reset = answer
                .get("reset_ms")
                .unwrap_or(&answer["policies"][0]["reset_ms"]);
            assert_eq!(
                reset, PENDING_RETRY_MS,
                "a refund may free a unit any moment"
            );
            ledger.settle("r1", true, 20);
            let (kept, _) = ledger.reserve(&ask, "r3", 60_030, 30);
            let answer = limit_response(&call, &kept, Some("r3")).value();
            assert!(answer.get("pending").is_none(), "kept units: {answer}");
            assert_eq!(answer["retry_after_ms"], 599_970);
        }
    }

    #[test]
    fn local_is_on_unless_false_and_never_for_a_reservation() {
        let local = |body: &str| one(JSON, body.as_bytes()).local;
        assert!(local(r#"{"key":"k","limit":5,"window_ms":1000}"#));
        assert!(!local(
            r#"{"key":"k","limit":5,"window_ms":1000,"local":false}"#
        ));
        assert!(!local(
            r#"{"key":"k","limit":5,"window_ms":1000,"reserve":true}"#
        ));
        assert_eq!(
            field_of(r#"{"key":"k","limit":5,"window_ms":1000,"local":"no"}"#),
            "local"
        );
    }

    #[test]
    fn a_reservation_lapses_after_60_s_or_the_ttl_asked() {
        let reserve = |body: &str| one(JSON, body.as_bytes()).reserve;
        let base = r#""key":"k","limit":3,"window_ms":10"#;
        assert_eq!(reserve(&format!("{{{base}}}")), None);
        assert_eq!(
            reserve(&format!(r#"{{{base},"reserve":true}}"#)),
            Some(RESERVATION_TTL_MS)
        );
        assert_eq!(
            reserve(&format!(
                r#"{{{base},"reserve":true,"reservation_ttl_ms":2000}}"#
            )),
            Some(2000)
        );
    }

    #[test]
    fn the_single_policy_form_takes_an_algorithm() {
        let r = one(
            JSON,
            br#"{"key":"k","limit":3,"window_ms":10,"algorithm":"fixed_window"}"#,
        );
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
        let r = one(
            Some("application/json; charset=utf-8"),
            br#"{"key":"u:1","limit":10,"window_ms":1000}"#,
        );
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
        let r = one(
            JSON,
            br#"{"key":"k","cost":2,"policies":[{"name":"s","limit":10,"window_ms":1000},{"name":"d","limit":1000,"window_ms":86400000,"algorithm":"fixed_window"}]}"#,
        );
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
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"reserve":"yes"}"#,
                "reserve",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"cost":0,"reserve":true}"#,
                "reserve",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"reservation_ttl_ms":1000}"#,
                "reservation_ttl_ms",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"reserve":true,"reservation_ttl_ms":0}"#,
                "reservation_ttl_ms",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"reserve":true,"reservation_ttl_ms":86400001}"#,
                "reservation_ttl_ms",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"reserve":true,"reservation_ttl_ms":1.5}"#,
                "reservation_ttl_ms",
            ),
            (
                r#"{"key":"k","limit":10,"window_ms":1000,"algorithm":"gcra"}"#,
                "algorithm",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a","limit":1}]}"#,
                "policies[0].window_ms",
            ),
            (
                r#"{"key":"k","policies":[{"name":"a","limit":1,"window_ms":1,"algorithm":7}]}"#,
                "policies[0].algorithm",
            ),
            (r#"{"key":"k""#, "body"),
            ("[1,2]", "body"),
            ("", "body"),
        ];
        for (body, field) in cases {
            assert_eq!(field_of(body), field, "for {body}");
        }
        let nine: Vec<String> = (0..9)
            .map(|i| format!(r#"{{"name":"p{i}","limit":1,"window_ms":1}}"#))
            .collect();
        let nine = format!(r#"{{"key":"k","policies":[{}]}}"#, nine.join(","));
        assert_eq!(field_of(&nine), "policies");
        let long_key = format!(r#"{{"key":"{}","limit":1,"window_ms":1}}"#, "k".repeat(513));
        assert_eq!(field_of(&long_key), "key");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(field_of(&deep), "body");
    }

    #[test]
    fn shape_errors_say_what_was_expected_and_given() {
        let problem =
            parse_limit_request(JSON, br#"{"key":"k","limit":2.5,"window_ms":1000}"#).unwrap_err();
        assert_eq!(
            problem.detail(),
            "limit: expected a non-negative whole number, got the number 2.5"
        );
        let problem = parse_limit_request(
            JSON,
            br#"{"key":"k","policies":[{"name":"a","limit":1,"window_ms":1,"windw":2}]}"#,
        )
        .unwrap_err();
        assert!(
            problem.detail().contains("unknown field \"windw\"")
                && problem.detail().contains("\"window_ms\""),
            "{}",
            problem.detail()
        );
        let algorithm = parse_limit_request(
            JSON,
            br#"{"key":"k","limit":1,"window_ms":1,"algorithm":"gcra"}"#,
        )
        .unwrap_err();
        assert!(algorithm.detail().contains("/v1/throttle"));
    }

    #[test]
    fn content_type_and_size_are_checked_first() {
        let body = br#"{"key":"k","limit":1,"window_ms":1}"#;
        for ct in [None, Some("text/plain"), Some("application/jsonx")] {
            let p = parse_limit_request(ct, body).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.to_json().contains("content-type"));
        }
        let huge = vec![b' '; crate::bounds::MAX_BODY_BYTES + 1];
        assert_eq!(parse_limit_request(JSON, &huge).unwrap_err().status, 413);
    }
}
