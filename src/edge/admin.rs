//! The admin API below `{prefix}/admin/`: inspect and reset keys, manual
//! bans, stats (with the top refused keys) read from the hubs, the rules
//! as configured, and the dashboard page that calls them. It exists only
//! when the `ADMIN_TOKEN` secret is set
//! (otherwise every admin path is a 404, like any unknown path), and every
//! call must carry that token as a bearer token; a wrong or missing one
//! gets a 401 that says nothing about keys. A client with too many failures
//! is locked out for a while (`crate::isolate::lockout`).

use std::cell::RefCell;

use crate::json;
use crate::json::Json;
use worker::{console_error, Env, Headers, Method, Response, Result};

use super::client::Objects;
use super::clock::now_ms;
use super::dashboard;
use super::endpoints::{self, not_allowed, parsed_body};
use super::incoming::ClientRequest;
use super::settings::{settings, Settings};
use super::{bans, isolate, quota, respond, room, rules, stats};
use crate::config::listing;
use crate::config::lookup::{overridden_tier, override_tier, targets, whole_quota, Target};
use crate::config::override_body::{parse_override, OverrideRequest};
use crate::config::Config;
use crate::http::admin::AdminRoute;
use crate::http::auth::Token;
use crate::http::body;
use crate::http::cidr::client_network;
use crate::http::headers::retry_after;
use crate::http::key::client_ip;
use crate::http::params::Params;
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::isolate::lockout::{Lockout, CAPACITY, MAX_FAILURES};
use crate::ledger::Override;
use crate::limits::MAX_KEY_BYTES;
use crate::objects::name::Scope;
use crate::objects::protocol::WireOverride;

thread_local! {
    /// Failed authentications per client, this isolate's share of them.
    static LOCKOUT: RefCell<Lockout> = RefCell::new(Lockout::new(CAPACITY));
}

pub async fn serve(
    req: ClientRequest,
    env: &Env,
    objects: &Objects,
    path: &str,
) -> Result<Response> {
    let settings = settings(env).ok();
    let Some((settings, token)) = settings
        .as_deref()
        .and_then(|s| Some((s, s.admin_token.as_ref()?)))
    else {
        return endpoints::not_found(&format!("/admin{path}"));
    };
    let route = AdminRoute::parse(path);
    match route {
        Some(AdminRoute::Dashboard { file }) => dashboard::file(&req, env, file).await,
        Some(AdminRoute::DashboardHome) => dashboard::home(&settings.config.prefix),
        _ => {
            let mut response = api(req, env, objects, path, settings, token, route).await?;
            dashboard::protect_data(response.headers_mut())?;
            Ok(response)
        }
    }
}

/// An admin API call, once the token is known to be set.
async fn api(
    req: ClientRequest,
    env: &Env,
    objects: &Objects,
    path: &str,
    settings: &Settings,
    token: &Token,
    route: Option<AdminRoute>,
) -> Result<Response> {
    if let Some(refusal) = unauthorized(&req, settings, token)? {
        return Ok(refusal);
    }
    let Some(route) = route else {
        return endpoints::not_found(&format!("/admin{path}"));
    };
    let answer = call(req, env, objects, settings, route).await;
    answer.or_else(|e| {
        console_error!("sluice: admin call failed: {e}");
        endpoints::unavailable()
    })
}

/// The refusal for a caller without the admin token, or one locked out
/// after too many failures; `None` lets the call through.
fn unauthorized(
    req: &ClientRequest,
    settings: &Settings,
    token: &Token,
) -> Result<Option<Response>> {
    // Requests without a usable address (only seen locally: Cloudflare
    // always sets one) share one count.
    let client = client_ip(req)
        .map(|ip| client_network(ip, settings.config.ipv6_prefix))
        .unwrap_or_default();
    let now = now_ms();
    if let Some(wait_ms) = LOCKOUT.with(|lockout| lockout.borrow().locked(&client, now)) {
        let headers = Headers::new();
        headers.set("retry-after", &retry_after(wait_ms))?;
        let problem = Problem::new(
            Code::TooManyFailures,
            format!("{MAX_FAILURES} failed admin authentications from this client within a minute; try again later"),
        );
        return respond::problem_with(&problem, headers).map(Some);
    }
    let authorization = req.headers().get("authorization")?;
    if token.admits(authorization.as_deref()) {
        return Ok(None);
    }
    LOCKOUT.with(|lockout| lockout.borrow_mut().fail(&client, now));
    respond::bearer_challenge(
        "sluice-admin",
        "the admin API needs the admin token as a bearer token",
    )
    .map(Some)
}

/// An authenticated admin call, by route and method.
async fn call(
    req: ClientRequest,
    env: &Env,
    objects: &Objects,
    settings: &Settings,
    route: AdminRoute,
) -> Result<Response> {
    let config = &settings.config;
    let params = match Params::read(req.url(), route.params()) {
        Ok(params) => params,
        Err(problem) => return respond::problem(&problem),
    };
    match (req.known_method(), route) {
        (method, AdminRoute::Key { rule, key }) => {
            let targets = match targets(config, &rule, &key) {
                Ok(targets) => targets,
                Err(problem) => return respond::problem(&problem),
            };
            if let Some(parts) = whole_quota(config, &rule, &key) {
                return match method {
                    Some(Method::Get) => quota::inspect(objects, &rule, parts, &targets).await,
                    Some(Method::Delete) => quota::reset(objects, &rule, &targets).await,
                    _ => not_allowed("GET, DELETE"),
                };
            }
            match method {
                Some(Method::Get) => inspect_key(objects, &rule, &key, &targets).await,
                Some(Method::Delete) => reset_key(objects, &rule, &key, &targets).await,
                _ => not_allowed("GET, DELETE"),
            }
        }
        (method, AdminRoute::KeyBan { rule, key }) => {
            let targets = match bans::key_targets(config, &rule, &key) {
                Ok(targets) => targets,
                Err(problem) => return respond::problem(&problem),
            };
            let named = (rule.as_str(), key.as_str());
            match method {
                Some(Method::Put) => bans::put_on_key(&req, objects, named, &targets).await,
                Some(Method::Delete) => bans::lift_on_key(objects, named, &targets).await,
                _ => not_allowed("PUT, DELETE"),
            }
        }
        (Some(Method::Get), AdminRoute::Bans) => bans::list(objects, &params).await,
        (_, AdminRoute::Bans) => not_allowed("GET"),
        (Some(Method::Put), AdminRoute::Ban { key }) => {
            bans::put(&req, objects, config, &key).await
        }
        (Some(Method::Delete), AdminRoute::Ban { key }) => bans::lift(objects, config, &key).await,
        (_, AdminRoute::Ban { .. }) => not_allowed("PUT, DELETE"),
        (Some(Method::Get), AdminRoute::Stats) => stats::get(objects, &params).await,
        (_, AdminRoute::Stats) => not_allowed("GET"),
        (Some(Method::Get), AdminRoute::Metrics) => stats::metrics(objects, config).await,
        (_, AdminRoute::Metrics) => not_allowed("GET"),
        (Some(Method::Get), AdminRoute::Top) => stats::top(objects, config, &params).await,
        (_, AdminRoute::Top) => not_allowed("GET"),
        (Some(Method::Put), AdminRoute::Override { rule, key }) => {
            match parsed_body(&req, body::read::<OverrideRequest>).await? {
                Ok(body) => put_override(config, objects, &rule, &key, body).await,
                Err(problem) => respond::problem(&problem),
            }
        }
        (Some(Method::Delete), AdminRoute::Override { rule, key }) => {
            lift_override(config, objects, &rule, &key).await
        }
        (_, AdminRoute::Override { .. }) => not_allowed("PUT, DELETE"),
        (Some(Method::Get), AdminRoute::Rules) => {
            respond::json(&listing::of(config), Headers::new())
        }
        (_, AdminRoute::Rules) => not_allowed("GET"),
        (Some(Method::Get), AdminRoute::Rooms) => room::admin::all(objects, config).await,
        (Some(Method::Get), AdminRoute::Room { rule }) => {
            room::admin::one(objects, config, &rule, false).await
        }
        (Some(Method::Delete), AdminRoute::Room { rule }) => {
            room::admin::one(objects, config, &rule, true).await
        }
        (_, AdminRoute::Rooms) => not_allowed("GET"),
        (_, AdminRoute::Room { .. }) => not_allowed("GET, DELETE"),
        (Some(Method::Get), AdminRoute::Rule { rule }) => {
            rules::view(env, objects, config, &rule).await
        }
        (_, AdminRoute::Rule { .. }) => not_allowed("GET"),
        (_, AdminRoute::RuleState { rule }) => {
            rules::state(&req, env, objects, config, &rule).await
        }
        (_, AdminRoute::RuleOverride { rule }) => {
            rules::overridden(&req, objects, config, &rule).await
        }
        // Served before authentication, in `serve`.
        (_, AdminRoute::Dashboard { .. } | AdminRoute::DashboardHome) => {
            endpoints::not_found(req.path())
        }
    }
}

/// `PUT /admin/keys/{rule}/{key}/override`.
async fn put_override(
    config: &Config,
    objects: &Objects,
    rule: &str,
    key: &str,
    body: OverrideRequest,
) -> Result<Response> {
    let tier = match override_tier(config, rule) {
        Ok(tier) => tier,
        Err(problem) => return respond::problem(&problem),
    };
    if key.len() > MAX_KEY_BYTES {
        return respond::problem(&Problem::invalid(
            "key",
            format!("keys are at most {MAX_KEY_BYTES} bytes; a longer one is addressed by its sha256: form"),
        ));
    }
    let parsed = match parse_override(body, tier) {
        Ok(parsed) => parsed,
        Err(e) => return respond::problem(&Problem::invalid(&e.field, e.message)),
    };
    let now = now_ms();
    let overridden = Override {
        policies: parsed.policies,
        until_ms: parsed.for_ms.map(|ms| now.saturating_add(ms)),
        reason: parsed.reason,
        set_ms: now,
        whole: None,
    };
    let wire = WireOverride::encode(&overridden);
    let object = Scope::named(rule).object(key);
    let previous = objects
        .set_override(object.as_str(), Some(wire.clone()))
        .await?;
    isolate::forget_refusal(&object);
    respond::json(
        &json!({"object": object, "override": override_view(&wire), "replaced": previous.is_some()}),
        Headers::new(),
    )
}

/// `DELETE /admin/keys/{rule}/{key}/override`: 404 if there was none.
async fn lift_override(
    config: &Config,
    objects: &Objects,
    rule: &str,
    key: &str,
) -> Result<Response> {
    if let Err(problem) = overridden_tier(config, rule) {
        return respond::problem(&problem);
    }
    let object = Scope::named(rule).object(key);
    let Some(previous) = objects.set_override(object.as_str(), None).await? else {
        return respond::problem(&Problem::new(
            Code::NotFound,
            format!("no override on {key:?} for rule {rule:?}"),
        ));
    };
    isolate::forget_refusal(&object);
    respond::json(
        &json!({"object": object, "lifted": override_view(&previous)}),
        Headers::new(),
    )
}

/// An override as operators read it: policies with their limits and
/// windows, `unlimited`, and when it lapses.
fn override_view(o: &WireOverride) -> Json {
    let policies: Vec<Json> = o
        .decode()
        .map(|o| o.policies)
        .unwrap_or_default()
        .iter()
        .map(|(name, spec)| json!({"name": name, "limit": spec.limit(), "window_ms": spec.window_ms(), "algorithm": spec.algorithm()}))
        .collect();
    json!({
        "unlimited": o.policies.is_empty(),
        "policies": policies,
        "until_ms": o.until_ms,
        "until": o.until_ms.map(rfc3339),
        "reason": o.reason,
        "set_ms": o.set_ms,
        "source": "admin",
    })
}

/// A key's state: as it was for one object, and under `tiers` one entry
/// per tier for a tiered rule's id.
async fn inspect_key(
    objects: &Objects,
    rule: &str,
    key: &str,
    targets: &[Target],
) -> Result<Response> {
    let manual_ban = isolate::manual_ban(key.parse().ok(), &[key], now_ms());
    let mut states = Vec::with_capacity(targets.len());
    for target in targets {
        let state = objects
            .peek(target.object.as_str(), target.policies.as_deref())
            .await?;
        states.push(json!({
            "rule": target.scope.id(),
            "key": key,
            "object": target.object,
            "slots": state.slots,
            "ban": state.ban,
            "leases": state.leases,
            "manual_ban": manual_ban,
            "override": state.overridden.as_ref().map(override_view),
        }));
    }
    let body = match <[Json; 1]>::try_from(states) {
        Ok([one]) => one,
        Err(tiers) => json!({"rule": rule, "key": key, "tiers": tiers, "manual_ban": manual_ban}),
    };
    respond::json(&body, Headers::new())
}

/// Resets the key in every object the route names (every tier's, for a
/// tiered rule's id).
async fn reset_key(
    objects: &Objects,
    rule: &str,
    key: &str,
    targets: &[Target],
) -> Result<Response> {
    let mut answers = Vec::with_capacity(targets.len());
    for target in targets {
        let reset = objects.reset(target.object.as_str()).await?;
        isolate::forget_refusal(&target.object);
        objects
            .unban_everywhere(key, &target.scope.to_string())
            .await?;
        answers.push(json!({"object": target.object, "reset": reset}));
    }
    let body = match <[Json; 1]>::try_from(answers) {
        Ok([one]) => one,
        Err(tiers) => json!({"rule": rule, "key": key, "tiers": tiers}),
    };
    respond::json(&body, Headers::new())
}
