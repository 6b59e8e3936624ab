//! Turning problems, decisions and JSON into `worker::Response`s, and a
//! decision's answer into the runtime's `Response` in one crossing.

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::{web_sys, Headers, IntoResponse, Response, Result};

use crate::gate::Answer;
use crate::http::headers::{limit_fields, Fields};
use crate::http::problem::{Code, Problem, CONTENT_TYPE};
use crate::ledger::Outcome;

/// Where a handler stops short of its answer: a problem the caller is told
/// (problem+json), or the runtime failing under it. `?` stops at either.
pub enum Failure {
    Problem(Problem),
    Runtime(worker::Error),
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Failure {
        Failure::Problem(problem)
    }
}

impl From<worker::Error> for Failure {
    fn from(error: worker::Error) -> Failure {
        Failure::Runtime(error)
    }
}

/// A handler's answer, or where it stopped.
pub type Handled<T = Response> = std::result::Result<T, Failure>;

/// The handler's answer, or its problem answered; the runtime's failure
/// stays an error.
pub fn handled<T: From<Response>>(answer: Handled<T>) -> Result<T> {
    match answer {
        Ok(answer) => Ok(answer),
        Err(Failure::Problem(stop)) => problem(&stop).map(T::from),
        Err(Failure::Runtime(error)) => Err(error),
    }
}

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

/// `value` as a JSON answer with no other headers, a handler's.
pub fn body(value: &impl crate::json::Write) -> Handled {
    Ok(json(value, Headers::new())?)
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

/// What the worker answers the runtime with: a `worker::Response`, or a
/// `Response` the runtime already holds, built whole by [`json_with`].
pub enum Reply {
    Built(web_sys::Response),
    Worker(Response),
}

impl From<Response> for Reply {
    fn from(response: Response) -> Reply {
        Reply::Worker(response)
    }
}

impl IntoResponse for Reply {
    fn into_raw(
        self,
    ) -> std::result::Result<web_sys::Response, impl Into<Box<dyn std::error::Error>>> {
        Ok::<_, worker::Error>(match self {
            Reply::Built(response) => response,
            Reply::Worker(response) => response.into(),
        })
    }
}

/// `value` as a JSON answer (200) with `fields` set in order, then its
/// content type: the same answer as `json` given a header set holding
/// `fields`, but made by one call into JavaScript, where `json`'s took a
/// dozen crossings of the wasm boundary (two header sets, a `set` per
/// field, the body's `Uint8Array` and its copy, the `ResponseInit`, the
/// `Response`), each with its strings decoded (BENCHMARKS.md).
pub fn json_with(value: &impl crate::json::Write, fields: &Fields) -> Result<Reply> {
    json_text_with(crate::json::to_string(value), fields)
}

/// `json_with`'s answer once the value is written, once for every type.
#[inline(never)]
fn json_text_with(body: String, fields: &Fields) -> Result<Reply> {
    let fields = fields
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .chain([("content-type", "application/json")]);
    // Names and values go over as one string, each ended by a NUL, which
    // no field may hold: a value that held one would have failed `set`.
    let mut joined = String::new();
    for (name, value) in fields {
        if value.contains('\0') {
            return Err(worker::Error::RustError(format!(
                "the {name} field holds a NUL"
            )));
        }
        for text in [name, value] {
            joined.push_str(text);
            joined.push('\0');
        }
    }
    Ok(Reply::Built(built(200, &joined, &body)?))
}

#[wasm_bindgen(inline_js = "export function built(status, fields, body) {
  const headers = new Headers();
  const texts = fields.split('\\0');
  for (let i = 0; i + 1 < texts.length; i += 2) headers.set(texts[i], texts[i + 1]);
  return new Response(body, { status, headers });
}")]
extern "C" {
    /// A `Response` of `status` with `body`, and the header fields in
    /// `fields`: each name and value ended by a NUL, set in order. Throws
    /// as `Headers.set` does on a field it refuses.
    #[wasm_bindgen(catch)]
    fn built(
        status: u16,
        fields: &str,
        body: &str,
    ) -> std::result::Result<web_sys::Response, JsValue>;
}
