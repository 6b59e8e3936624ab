//! Calls from the worker to container objects.

use worker::{Env, Method, Request, RequestInit, Response, Result};

use crate::ledger::Outcome;
use crate::limit::Policy;
use crate::protocol::CheckRequest;

/// The Durable Object namespace binding in wrangler.toml.
pub const BINDING: &str = "LIMITER";

/// Checks `cost` units for `key` in the key's own container object. The
/// object is named after the key, so each key gets one object.
pub async fn check(
    env: &Env,
    key: &str,
    policies: &[(String, Policy)],
    cost: u32,
) -> Result<Outcome> {
    let body = serde_json::to_string(&CheckRequest::new(key, policies, cost))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init("https://container/check", &init)?;
    let mut response = send(env, key, request).await?;
    response.json().await
}

async fn send(env: &Env, key: &str, request: Request) -> Result<Response> {
    let stub = env.durable_object(BINDING)?.id_from_name(key)?.get_stub()?;
    let response = stub.fetch_with_request(request).await?;
    if response.status_code() != 200 {
        return Err(worker::Error::RustError(format!(
            "container answered {}",
            response.status_code()
        )));
    }
    Ok(response)
}
