//! Sluice's own endpoints, below the configured prefix: health and the
//! decision API.

use serde_json::json;
use worker::{console_error, Env, Headers, Method, Request, Response, Result};

use super::{client, respond};
use crate::http::api::{self, limit_response, parse_limit_request, MAX_BODY_BYTES};
use crate::http::problem::Problem;

/// Serves `path`, the part of the URL below the prefix.
pub async fn serve(req: Request, env: &Env, path: &str) -> Result<Response> {
    let method = req.method();
    match path {
        "/health" => match method {
            Method::Get | Method::Head => respond::json(&json!({"status": "ok"}), Headers::new()),
            _ => not_allowed("GET, HEAD"),
        },
        "/v1/limit" => match method {
            Method::Post => limit(req, env).await,
            _ => not_allowed("POST"),
        },
        _ => respond::problem(&Problem::new(
            404,
            "not-found",
            format!("no Sluice endpoint at {path:?}"),
        )),
    }
}

/// `POST /v1/limit`: decide for the caller, who acts on the answer.
async fn limit(mut req: Request, env: &Env) -> Result<Response> {
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
    match client::check(env, &object, &request.policies, request.cost).await {
        Ok(outcome) => {
            let headers = Headers::new();
            respond::limit_headers(&headers, &outcome)?;
            respond::json(&limit_response(&request, &outcome), headers)
        }
        Err(e) => {
            console_error!("sluice: decision for the API failed: {e}");
            unavailable()
        }
    }
}

/// The body, refused with 413 when it is larger than the API ever needs;
/// a declared length is checked before anything is read.
async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, Problem> {
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

fn not_allowed(allow: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("allow", allow)?;
    respond::problem_with(
        &Problem::new(405, "method-not-allowed", format!("use {allow}")),
        headers,
    )
}

/// The answer when a container object cannot decide: fail closed, and say
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
