//! Sluice's own endpoints, below the configured prefix: health, the
//! decision API and redis-cell's throttle (the admin API, in `admin.rs`,
//! is routed beside them), and the helpers both answer with. Everything
//! under `/v1` (decisions, throttle, leases) sits behind the API token.

use crate::json;
use futures_util::StreamExt;
use worker::{console_error, Context, Env, Headers, Method, Response, Result};

use super::client::{new_lease_id, Objects};
use super::gate::settle_later;
use super::incoming::ClientRequest;
use super::respond::{self, handled, Handled, Reply};
use super::settings::settings;
use super::{blocks, isolate};
use crate::bounds::MAX_BODY_BYTES;
use crate::gate::{self, Passed, Stop, Try};
use crate::http::api::{
    self, key_param, layers_response, lease_response, limit_response, parse_lease_request,
    parse_limit_request, parse_renew_body, parse_settle_request, parse_throttle_request,
    LayeredRequest, LimitCall, LimitRequest,
};
use crate::http::auth::{api_gate, ApiAccess, ApiGate};
use crate::http::body::too_large;
use crate::http::headers::limit_fields;
use crate::http::problem::{Code, Problem};
use crate::http::url;
use crate::isolate::stats::Verdict;
use crate::ledger::{LeaseAsk, Outcome};
use crate::objects::protocol::{CheckRequest, ReserveAsk, SettleRequest, ThrottleRequest};

/// The name the decision API's counts are kept under.
use crate::objects::name::{Scope, API_SCOPE};

/// Serves `path`, the part of the URL below the prefix.
pub async fn serve(
    req: ClientRequest,
    env: &Env,
    ctx: &Context,
    objects: &Objects,
    path: &str,
) -> Result<Reply> {
    let method = req.known_method();
    if path == "/v1" || path.starts_with("/v1/") {
        if let Some(refused) = api_refusal(&req, env, path)? {
            return Ok(refused.into());
        }
    }
    // The decision API's answers are built in one crossing (`Reply`), so
    // it is routed before the rest.
    if path == "/v1/limit" && method == Some(Method::Post) {
        return handled(limit(req, ctx, objects).await);
    }
    let response = match path {
        "/health" => match method {
            Some(Method::Get | Method::Head) => {
                respond::json(&json!({"status": "ok"}), Headers::new())
            }
            _ => not_allowed("GET, HEAD"),
        },
        "/v1/limit" => not_allowed("POST"),
        "/v1/limit/settle" => match method {
            Some(Method::Post) => handled(settle(req, objects).await),
            _ => not_allowed("POST"),
        },
        "/v1/throttle" => match method {
            Some(Method::Post) => handled(throttle(req, objects).await),
            _ => not_allowed("POST"),
        },
        "/v1/leases" => match method {
            Some(Method::Post) => handled(acquire(req, objects).await),
            _ => not_allowed("POST"),
        },
        _ => match path.strip_prefix("/v1/leases/") {
            Some(rest) => handled(lease_route(req, objects, rest).await),
            None => not_found(path),
        },
    };
    response.map(Reply::from)
}

/// The answer to a call under `/v1` that may not go on: a 404 when the API
/// does not exist (no `API_TOKEN` and no `api = "open"`), a 401 without the
/// token. It comes before the method and path are looked at, so a caller
/// without the token cannot tell which routes exist.
fn api_refusal(req: &ClientRequest, env: &Env, path: &str) -> Result<Option<Response>> {
    let settings = settings(env).ok();
    let access = settings.as_ref().map_or(ApiAccess::Token, |s| s.config.api);
    let token = settings.as_ref().and_then(|s| s.api_token.as_ref());
    let authorization = req.headers().get("authorization")?;
    match api_gate(access, token, authorization.as_deref()) {
        ApiGate::Pass => Ok(None),
        ApiGate::Hidden => not_found(path).map(Some),
        ApiGate::Unauthorized => respond::bearer_challenge(
            "sluice-api",
            "the decision API needs the API token as a bearer token",
        )
        .map(Some),
    }
}

/// `POST /v1/leases`: a lease under a concurrency limit, or a lock.
async fn acquire(req: ClientRequest, objects: &Objects) -> Handled {
    let call = parsed_body(&req, parse_lease_request).await?;
    let mut request = CheckRequest::new(Scope::Api.object(&call.key).as_str(), &[], 1, None);
    request.lease = Some(LeaseAsk {
        name: "concurrency".into(),
        limit: call.limit,
        ttl_ms: call.ttl_ms,
        owner: call.owner,
        reenter: call.lease_id,
        strict_limit: true,
        new_id: new_lease_id()?,
    });
    match objects.check_request(&request).await {
        Ok(outcome) => {
            if let Some(problem) = api::lease_problem(&outcome) {
                return Err(problem.into());
            }
            isolate::record(API_SCOPE, &call.key, Verdict::decided(&outcome, false));
            let headers = Headers::new();
            respond::limit_headers(&headers, &outcome)?;
            Ok(respond::json(&lease_response(&outcome), headers)?)
        }
        Err(e) => {
            isolate::record(API_SCOPE, &call.key, Verdict::Failed);
            console_error!("sluice: lease for the API failed: {e}");
            Ok(unavailable()?)
        }
    }
}

/// `POST /v1/leases/{id}/renew` and `DELETE /v1/leases/{id}`, with the key
/// in the query (`?key=...`).
async fn lease_route(req: ClientRequest, objects: &Objects, rest: &str) -> Handled {
    let key = Scope::Api.object(&key_param(url::param(req.url(), "key"))?);
    let answer = match (req.known_method(), rest.strip_suffix("/renew")) {
        (Some(Method::Post), Some(id)) if !id.is_empty() && !id.contains('/') => {
            let ttl = parsed_body(&req, parse_renew_body).await?;
            objects.renew(key.as_str(), id, ttl).await
        }
        (Some(Method::Delete), None) if !rest.is_empty() && !rest.contains('/') => {
            objects.release(key.as_str(), rest).await
        }
        (_, Some(_)) => return Ok(not_allowed("POST")?),
        (_, None) => return Ok(not_allowed("DELETE")?),
    };
    let response = match answer {
        Ok(Some(lease)) => respond::json(
            &json!({
                "lease_id": lease.id,
                "fence": lease.fence,
                "expires_ms": lease.expires_ms,
                "holds": lease.holds,
                "released": req.known_method() == Some(Method::Delete) && lease.holds == 0,
            }),
            Headers::new(),
        ),
        Ok(None) => respond::problem(&Problem::new(
            Code::NoSuchLease,
            "no live lease with that id for that key; it may have lapsed or been released",
        )),
        Err(e) => {
            console_error!("sluice: lease call failed: {e}");
            unavailable()
        }
    };
    Ok(response?)
}

/// `POST /v1/limit`: decide for the caller, who acts on the answer.
async fn limit(req: ClientRequest, ctx: &Context, objects: &Objects) -> Handled<Reply> {
    Ok(match parsed_body(&req, parse_limit_request).await? {
        LimitCall::One(request) => limit_one(request, ctx, objects).await?,
        LimitCall::Layers(request) => limit_layers(request, ctx, objects).await?,
    })
}

/// One key's decision, a reservation if asked; a hot key's from the
/// isolate's admission blocks unless the call says `"local": false`.
async fn limit_one(request: LimitRequest, ctx: &Context, objects: &Objects) -> Result<Reply> {
    let Try {
        request: mut check,
        local,
        ..
    } = gate::api_check(&request);
    if let Some(ttl_ms) = request.reserve {
        check.reserve = Some(ReserveAsk {
            id: new_lease_id()?,
            ttl_ms,
        });
    }
    match blocks::check(objects, ctx, &check, local).await {
        Ok(Outcome {
            conflict: Some(name),
            ..
        }) => respond::problem(&api::policy_conflict(&name)).map(Reply::from),
        Ok(outcome) => {
            isolate::record(API_SCOPE, &request.key, Verdict::decided(&outcome, false));
            let reservation = check.reserve.as_ref().map(|r| r.id.as_str());
            let answer = limit_response(&request, &outcome, reservation);
            respond::json_with(&answer, &limit_fields(&outcome))
        }
        Err(e) => {
            isolate::record(API_SCOPE, &request.key, Verdict::Failed);
            console_error!("sluice: decision for the API failed: {e}");
            unavailable().map(Reply::from)
        }
    }
}

/// Several keys' decision, all or nothing: each key's object in turn,
/// every one but the last reserving (the last from the isolate's
/// admission blocks when hot); the reservations are kept once all
/// admitted and refunded when one refused or failed, in the background.
async fn limit_layers(request: LayeredRequest, ctx: &Context, objects: &Objects) -> Result<Reply> {
    let Some(mut climb) = gate::key_climb(&request, || new_lease_id().ok()) else {
        return unavailable().map(Reply::from);
    };
    while let Some(check) = climb.next_call() {
        let local = climb.next_local();
        let answer = blocks::check(objects, ctx, check, local).await;
        climb.answer(answer.map_err(|e| e.to_string()));
    }
    for settle in climb.settle_now() {
        settle_later(ctx, objects, settle);
    }
    let key = request
        .layers
        .first()
        .map_or("", |l| l.request.key.as_str());
    let (_, passed, stop) = climb.into_parts();
    let mut answers: Vec<Outcome> = passed
        .into_iter()
        .filter_map(|passed| match passed {
            Passed::Admitted { outcome, .. } => Some(outcome),
            Passed::Skipped { .. } => None,
        })
        .collect();
    match stop {
        Some(Stop::Failed { object, error }) => {
            isolate::record(API_SCOPE, key, Verdict::Failed);
            console_error!("sluice: decision for the API failed at {object}: {error}");
            return unavailable().map(Reply::from);
        }
        Some(Stop::Refused { outcome, .. }) => {
            if let Some(name) = &outcome.conflict {
                let layer = request
                    .layers
                    .get(answers.len())
                    .map_or("", |l| l.name.as_str());
                let problem = api::policy_conflict(name).with("layer", layer);
                return respond::problem(&problem).map(Reply::from);
            }
            answers.push(outcome);
        }
        None => {}
    }
    let announced = request.announced(&answers);
    isolate::record(API_SCOPE, key, Verdict::decided(&announced, false));
    let answer = layers_response(&request, &answers);
    respond::json_with(&answer, &limit_fields(&announced))
}

/// `POST /v1/limit/settle`: keep or refund a reservation.
async fn settle(req: ClientRequest, objects: &Objects) -> Handled {
    let call = parsed_body(&req, parse_settle_request).await?;
    let request = SettleRequest {
        key: Scope::Api.object(&call.key).to_string(),
        reservation: call.reservation,
        keep: call.keep,
    };
    let response = match objects.settle(&request).await {
        Ok(Some(answer)) => respond::json(&answer, Headers::new()),
        Ok(None) => respond::problem(
            &Problem::new(
                Code::NoSuchReservation,
                "no pending reservation with that id for that key; it may have lapsed (and been kept)",
            )
            .with("field", "reservation"),
        ),
        Err(e) => {
            console_error!("sluice: settle for the API failed: {e}");
            unavailable()
        }
    };
    Ok(response?)
}

/// `POST /v1/throttle`: redis-cell's `CL.THROTTLE` over HTTP.
async fn throttle(req: ClientRequest, objects: &Objects) -> Handled {
    let call = parsed_body(&req, parse_throttle_request).await?;
    let request = ThrottleRequest {
        key: Scope::Api.object(&call.key).to_string(),
        max_burst: call.policy.max_burst(),
        count: call.policy.count(),
        period_ms: call.policy.period_ms(),
        quantity: call.quantity,
    };
    let response = match objects.throttle(&request).await {
        Ok(answer) => {
            isolate::record(API_SCOPE, &call.key, Verdict::of(!answer.limited));
            respond::json(&answer, Headers::new())
        }
        Err(e) => {
            isolate::record(API_SCOPE, &call.key, Verdict::Failed);
            console_error!("sluice: throttle failed: {e}");
            unavailable()
        }
    };
    Ok(response?)
}

/// The body, refused with 413 when it is larger than any endpoint needs.
/// A declared length is checked before anything is read, and a chunked
/// body is read as a stream and dropped at the limit: buffering it whole
/// first would let one request take the isolate past its memory limit.
/// (Reading every body as a stream cost a hot key about a sixth of its
/// throughput: see BENCHMARKS.md.)
async fn read_body(req: &ClientRequest) -> std::result::Result<Vec<u8>, Problem> {
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|len| len.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let unreadable = |_| Problem::invalid("body", "the body could not be read");
    // A declared length within the limit is all the runtime will deliver,
    // so such a body is read in one call; only a body of unknown length
    // (chunked) is read as a stream, which costs a call per chunk.
    if declared.is_some() {
        let body = req.bytes().await.map_err(unreadable)?;
        return if body.len() > MAX_BODY_BYTES {
            Err(too_large())
        } else {
            Ok(body)
        };
    }
    let Some(mut stream) = req.chunks() else {
        return Ok(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(unreadable)?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The body, read and then parsed by `parse` with the request's content
/// type; the problem to answer when either fails.
pub async fn parsed_body<T>(
    req: &ClientRequest,
    parse: impl FnOnce(Option<&str>, &[u8]) -> std::result::Result<T, Problem>,
) -> Handled<T> {
    let content_type = req.headers().get("content-type")?;
    let body = read_body(req).await?;
    Ok(parse(content_type.as_deref(), &body)?)
}

pub fn not_found(path: &str) -> Result<Response> {
    respond::problem(&Problem::new(
        Code::NotFound,
        format!("no Sluice endpoint at {path:?}"),
    ))
}

pub fn not_allowed(allow: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("allow", allow)?;
    respond::problem_with(
        &Problem::new(Code::MethodNotAllowed, format!("use {allow}")),
        headers,
    )
}

/// The answer when a Durable Object cannot decide: fail closed, and say
/// when to try again.
pub fn unavailable() -> Result<Response> {
    respond::answer(&crate::gate::unavailable())
}
