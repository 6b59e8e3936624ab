//! Turning problems, decisions and JSON into `worker::Response`s.

use serde::Serialize;
use worker::{Headers, Response, Result};

use crate::config::Rule;
use crate::http::headers::{ratelimit, ratelimit_policy, retry_after_field};
use crate::http::problem::{Code, Problem, CONTENT_TYPE};
use crate::http::time::rfc3339;
use crate::ledger::Outcome;
use crate::limit::NEVER;

pub fn problem(problem: &Problem) -> Result<Response> {
    problem_with(problem, Headers::new())
}

pub fn problem_with(problem: &Problem, headers: Headers) -> Result<Response> {
    headers.set("content-type", CONTENT_TYPE)?;
    Ok(Response::ok(problem.to_json())?
        .with_status(problem.status)
        .with_headers(headers))
}

pub fn json(value: &impl Serialize, headers: Headers) -> Result<Response> {
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(serde_json::to_string(value)?)?.with_headers(headers))
}

/// The RateLimit fields for every policy of an outcome (none without a
/// policy), and `Retry-After` when it refused and waiting can help.
pub fn limit_headers(headers: &Headers, outcome: &Outcome) -> Result<()> {
    if let Some(value) = ratelimit_policy(outcome) {
        headers.set("ratelimit-policy", &value)?;
    }
    if let Some(value) = ratelimit(outcome) {
        headers.set("ratelimit", &value)?;
    }
    if !outcome.allowed {
        if let Some(value) = retry_after_field(outcome.retry_after_ms) {
            headers.set("retry-after", &value)?;
        }
    }
    Ok(())
}

/// The answer to a request a rule refused: banned (429 or 403, as the rule
/// says) or over quota (429).
pub fn refused(rule: &Rule, outcome: &Outcome, now_ms: u64) -> Result<Response> {
    let headers = Headers::new();
    limit_headers(&headers, outcome)?;
    let problem = match &outcome.ban {
        Some(ban) => {
            let status = rule.ban.map_or(429, |b| b.status);
            let until = rfc3339(ban.until_ms.max(now_ms));
            // Retry-After is when a request can pass: the ban's end, or
            // later when the rule's window is still full then.
            let pass_ms = now_ms.saturating_add(outcome.retry_after_ms);
            let detail = if outcome.retry_after_ms != NEVER && pass_ms > ban.until_ms {
                format!(
                    "banned by rule {} until {until}: {}; the rule's limit admits requests again from {}",
                    rule.id,
                    ban.reason,
                    rfc3339(pass_ms)
                )
            } else {
                format!("banned by rule {} until {until}: {}", rule.id, ban.reason)
            };
            Problem::new(Code::Banned { status }, detail)
                .with("banned-until", until)
                .with("offences", ban.offences)
        }
        None => {
            let violated = outcome.violated_names();
            let detail = match retry_after_field(outcome.retry_after_ms) {
                Some(secs) => format!(
                    "rate limit {} exceeded; retry in {secs} s",
                    violated.join(", ")
                ),
                None => format!(
                    "rate limit {} exceeded; the request costs more than the limit and can never be admitted",
                    violated.join(", ")
                ),
            };
            Problem::quota_exceeded(detail, violated)
        }
    };
    problem_with(&problem, headers)
}

/// What a shadow rule would have done, for the `Sluice-Shadow` field:
/// `allow`, or `refuse` with the policies and the retry time.
pub fn shadow_header(outcome: &Outcome) -> String {
    if outcome.allowed {
        return "allow".to_string();
    }
    let violated = outcome.violated_names();
    let banned = if outcome.ban.is_some() { ";banned" } else { "" };
    let retry = retry_after_field(outcome.retry_after_ms)
        .map(|secs| format!(";retry={secs}"))
        .unwrap_or_default();
    format!("refuse;violated=\"{}\"{retry}{banned}", violated.join(" "))
}

/// A response whose headers can be changed: responses from `fetch` carry
/// immutable headers, so they are copied into a fresh set.
pub fn with_mutable_headers(response: Response) -> Response {
    let copy = Headers::new();
    for (name, value) in response.headers().entries() {
        // Names and values came from a valid header set, so appending them
        // again cannot fail.
        let _ = copy.append(&name, &value);
    }
    response.with_headers(copy)
}
