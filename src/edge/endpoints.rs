//! Sluice's own endpoints, below the configured prefix: health, the
//! decision API, redis-cell's throttle, and the admin API.

use serde_json::json;
use worker::{console_error, Env, Headers, Method, Request, Response, Result};

use super::client::Objects;
use super::{admin, isolate, respond};
use crate::http::api::{
    self, limit_response, parse_limit_request, parse_throttle_request, MAX_BODY_BYTES,
};
use crate::http::problem::Problem;
use crate::protocol::ThrottleRequest;
use crate::stats::Verdict;

/// The name the decision API's counts are kept under.
use crate::http::admin::API_RULE;

/// Serves `path`, the part of the URL below the prefix.
pub async fn serve(req: Request, env: &Env, objects: &Objects, path: &str) -> Result<Response> {
    let method = req.method();
    if let Some(below) = path.strip_prefix("/admin") {
        if below.is_empty() || below.starts_with('/') {
            return admin::serve(req, env, objects, below).await;
        }
    }
    match path {
        "/health" => match method {
            Method::Get | Method::Head => respond::json(&json!({"status": "ok"}), Headers::new()),
            _ => not_allowed("GET, HEAD"),
        },
        "/v1/limit" => match method {
            Method::Post => limit(req, objects).await,
            _ => not_allowed("POST"),
        },
        "/v1/throttle" => match method {
            Method::Post => throttle(req, objects).await,
            _ => not_allowed("POST"),
        },
        _ => not_found(path),
    }
}

/// `POST /v1/limit`: decide for the caller, who acts on the answer.
async fn limit(mut req: Request, objects: &Objects) -> Result<Response> {
    let content_type = req.headers().get("content-type")?;
    let request = match read_body(&mut req).await {
        Ok(body) => parse_limit_request(content_type.as_deref(), &body),
        Err(problem) => Err(problem),
    };
    let request = match request {
        Ok(request) => request,
        Err(problem) => return respond::problem(&problem),
    };
    let object = format!("api:{}", request.key);
    match objects
        .check(&object, &request.policies, request.cost, None)
        .await
    {
        Ok(outcome) => {
            isolate::record(API_RULE, verdict(outcome.allowed));
            let headers = Headers::new();
            respond::limit_headers(&headers, &outcome)?;
            respond::json(&limit_response(&request, &outcome), headers)
        }
        Err(e) => {
            isolate::record(API_RULE, Verdict::Failed);
            console_error!("sluice: decision for the API failed: {e}");
            unavailable()
        }
    }
}

/// `POST /v1/throttle`: redis-cell's `CL.THROTTLE` over HTTP.
async fn throttle(mut req: Request, objects: &Objects) -> Result<Response> {
    let content_type = req.headers().get("content-type")?;
    let call = match read_body(&mut req).await {
        Ok(body) => parse_throttle_request(content_type.as_deref(), &body),
        Err(problem) => Err(problem),
    };
    let call = match call {
        Ok(call) => call,
        Err(problem) => return respond::problem(&problem),
    };
    let request = ThrottleRequest {
        key: format!("api:{}", call.key),
        max_burst: call.policy.max_burst(),
        count: call.policy.count(),
        period_ms: call.policy.period_ms(),
        quantity: call.quantity,
    };
    match objects.throttle(&request).await {
        Ok(answer) => {
            isolate::record(API_RULE, verdict(!answer.limited));
            respond::json(&answer, Headers::new())
        }
        Err(e) => {
            isolate::record(API_RULE, Verdict::Failed);
            console_error!("sluice: throttle failed: {e}");
            unavailable()
        }
    }
}

pub fn verdict(allowed: bool) -> Verdict {
    if allowed {
        Verdict::Admitted
    } else {
        Verdict::Refused
    }
}

/// The body, refused with 413 when it is larger than any endpoint needs;
/// a declared length is checked before anything is read.
pub async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, Problem> {
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|len| len.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(api::too_large());
    }
    let body = req
        .bytes()
        .await
        .map_err(|_| Problem::invalid("body", "the body could not be read"))?;
    if body.len() > MAX_BODY_BYTES {
        return Err(api::too_large());
    }
    Ok(body)
}

pub fn not_found(path: &str) -> Result<Response> {
    respond::problem(&Problem::new(
        404,
        "not-found",
        format!("no Sluice endpoint at {path:?}"),
    ))
}

pub fn not_allowed(allow: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("allow", allow)?;
    respond::problem_with(
        &Problem::new(405, "method-not-allowed", format!("use {allow}")),
        headers,
    )
}

/// The answer when a Durable Object cannot decide: fail closed, and say
/// when to try again.
pub fn unavailable() -> Result<Response> {
    let headers = Headers::new();
    headers.set("retry-after", "1")?;
    respond::problem_with(
        &Problem::new(
            503,
            "unavailable",
            "the limiter could not reach a decision; retry shortly",
        ),
        headers,
    )
}
