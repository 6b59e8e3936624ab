//! Forwarding admitted requests to the origin, or answering them with the
//! built-in demo origin.

use serde_json::json;
use worker::{
    console_error, Fetch, Headers, Request, RequestInit, RequestRedirect, Response, Result,
};

use super::{now_ms, respond};
use crate::config::{Config, Origin};
use crate::http::problem::Problem;
use crate::ledger::Outcome;

/// What a rule decided about a request it admitted.
pub struct Admission<'a> {
    pub rule_id: &'a str,
    pub key: &'a str,
    pub outcome: &'a Outcome,
}

/// Sends the request on, untouched, and adds the RateLimit fields of the
/// rule that admitted it to the response.
pub async fn forward(
    req: Request,
    config: &Config,
    admission: Option<Admission<'_>>,
) -> Result<Response> {
    let response = match &config.origin {
        Origin::Demo => return demo(&req, admission),
        Origin::Route => Fetch::Request(req).send().await,
        Origin::Url(base) => match upstream(&req, base) {
            Ok(upstream) => Fetch::Request(upstream).send().await,
            Err(e) => Err(e),
        },
    };
    let response = match response {
        Ok(response) => response,
        Err(e) => {
            console_error!("sluice: origin unreachable: {e}");
            return respond::problem(&Problem::new(
                502,
                "origin-unreachable",
                "the origin could not be reached",
            ));
        }
    };
    match admission {
        None => Ok(response),
        Some(admission) => {
            let response = respond::with_mutable_headers(response);
            respond::limit_headers(response.headers(), admission.outcome)?;
            Ok(response)
        }
    }
}

/// The same request aimed at `base` + path + query.
fn upstream(req: &Request, base: &str) -> Result<Request> {
    let url = req.url()?;
    let target = match url.query() {
        Some(query) => format!("{base}{}?{query}", url.path()),
        None => format!("{base}{}", url.path()),
    };
    let mut init = RequestInit::new();
    init.with_method(req.method())
        .with_headers(req.headers().clone())
        .with_redirect(RequestRedirect::Manual)
        .with_body(req.inner().body().map(Into::into));
    Request::new_with_init(&target, &init)
}

/// The demo origin: a small JSON echo, so `npm run dev` shows Sluice
/// working with nothing else set up.
fn demo(req: &Request, admission: Option<Admission<'_>>) -> Result<Response> {
    let body = json!({
        "origin": "sluice demo",
        "method": req.method().to_string(),
        "path": req.path(),
        "rule": admission.as_ref().map(|a| a.rule_id),
        "key": admission.as_ref().map(|a| a.key),
        "time_ms": now_ms(),
    });
    let headers = Headers::new();
    if let Some(admission) = &admission {
        respond::limit_headers(&headers, admission.outcome)?;
    }
    respond::json(&body, headers)
}
