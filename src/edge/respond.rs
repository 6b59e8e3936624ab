//! Turning problems, decisions and JSON into `worker::Response`s.

use serde::Serialize;
use worker::{Headers, Response, Result};

use crate::http::headers::{ratelimit, ratelimit_policy, retry_after};
use crate::http::problem::{Problem, CONTENT_TYPE};
use crate::ledger::Outcome;

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

/// The RateLimit fields for every policy of an outcome, and `Retry-After`
/// when it refused.
pub fn limit_headers(headers: &Headers, outcome: &Outcome) -> Result<()> {
    headers.set("ratelimit-policy", &ratelimit_policy(&outcome.policies))?;
    headers.set("ratelimit", &ratelimit(&outcome.policies))?;
    if !outcome.allowed {
        headers.set("retry-after", &retry_after(outcome.retry_after_ms()))?;
    }
    Ok(())
}

/// The 429 for a refused proxied request.
pub fn refused(rule_id: &str, outcome: &Outcome) -> Result<Response> {
    let violated: Vec<&str> = outcome.violated().map(|p| p.name.as_str()).collect();
    let detail = format!(
        "rate limit {rule_id} exceeded; retry in {} s",
        retry_after(outcome.retry_after_ms())
    );
    let headers = Headers::new();
    limit_headers(&headers, outcome)?;
    problem_with(&Problem::quota_exceeded(detail, violated), headers)
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
