//! Forwarding requests to the origin, or answering them with the built-in
//! demo origin.

use serde_json::json;
use worker::{
    console_error, Fetch, Headers, Request, RequestInit, RequestRedirect, Response, Result,
};

use super::{now_ms, respond};
use crate::config::{Config, Origin};
use crate::http::problem::Problem;

/// What Sluice adds on the way back, and what the demo origin echoes.
pub struct Forward<'a> {
    pub rule_id: Option<&'a str>,
    pub key: Option<&'a str>,
    /// Fields added to the origin's response (RateLimit, Sluice-Shadow...).
    pub headers: Headers,
}

impl Forward<'_> {
    /// A request no rule limits.
    pub fn untouched() -> Forward<'static> {
        Forward {
            rule_id: None,
            key: None,
            headers: Headers::new(),
        }
    }
}

/// Sends the request on, untouched, and adds `forward.headers` to the
/// response.
pub async fn forward(req: Request, config: &Config, forward: Forward<'_>) -> Result<Response> {
    let response = match &config.origin {
        Origin::Demo => return demo(&req, forward),
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
    if forward.headers.entries().next().is_none() {
        return Ok(response);
    }
    let response = respond::with_mutable_headers(response);
    for (name, value) in forward.headers.entries() {
        response.headers().set(&name, &value)?;
    }
    Ok(response)
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
fn demo(req: &Request, forward: Forward<'_>) -> Result<Response> {
    let body = json!({
        "origin": "sluice demo",
        "method": req.method().to_string(),
        "path": req.path(),
        "rule": forward.rule_id,
        "key": forward.key,
        "time_ms": now_ms(),
    });
    respond::json(&body, forward.headers)
}
