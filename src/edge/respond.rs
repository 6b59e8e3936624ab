//! Turning problems, decisions and JSON into `worker::Response`s.

use worker::{Headers, Response, Result};

use crate::gate::Answer;
use crate::http::headers::{limit_fields, Fields};
use crate::http::problem::{Code, Problem, CONTENT_TYPE};
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

/// A 401 asking for a bearer token of `realm`, as both token-guarded
/// surfaces (the decision API and the admin API) answer.
pub fn bearer_challenge(realm: &str, message: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("www-authenticate", &format!("Bearer realm=\"{realm}\""))?;
    problem_with(&Problem::new(Code::Unauthorized, message), headers)
}

pub fn json(value: &impl crate::json::Write, headers: Headers) -> Result<Response> {
    json_text(crate::json::to_string(value), headers)
}

/// `json`'s answer once the value is written: one copy for every type
/// answered, where each `json::<T>` inlined its own.
#[inline(never)]
fn json_text(text: String, headers: Headers) -> Result<Response> {
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(text)?.with_headers(headers))
}

/// The RateLimit fields for every policy of an outcome (none without a
/// policy), and `Retry-After` when it refused and waiting can help.
pub fn limit_headers(headers: &Headers, outcome: &Outcome) -> Result<()> {
    for (name, value) in limit_fields(outcome) {
        headers.set(name, &value)?;
    }
    Ok(())
}

/// A header set holding `fields`.
pub fn headers(fields: &Fields) -> Result<Headers> {
    let headers = Headers::new();
    for (name, value) in fields {
        headers.set(name, value)?;
    }
    Ok(headers)
}

/// A problem Sluice answers with, and its fields.
pub fn answer(answer: &Answer) -> Result<Response> {
    problem_with(&answer.problem, headers(&answer.fields)?)
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
