//! The admin API below `{prefix}/admin/`, routed by `crate::http::admin`:
//! keys (`keys`), bans (`bans`), stats and top keys (`stats`), rules' live
//! state and quotas (`rules`), rooms (`room::admin`), and the dashboard. It
//! exists only when `ADMIN_TOKEN` is set (otherwise every admin path is a
//! 404) and every call carries that token; too many failures lock a client
//! out for a while (`crate::isolate::lockout`).

mod bans;
mod keys;
pub(super) mod rules;
mod stats;
pub(in crate::edge) mod views;

use std::cell::RefCell;

use worker::{console_error, Env, Headers, Method, Response, Result};

use super::client::Objects;
use super::clock::now_ms;
use super::dashboard;
use super::endpoints::{self, not_allowed, parsed_body};
use super::incoming::ClientRequest;
use super::respond::{self, Handled};
use super::settings::{settings, Settings};
use super::{quota, room};
use crate::config::listing;
use crate::config::lookup::{targets, whole_quota};
use crate::config::override_body::OverrideRequest;
use crate::http::admin::AdminRoute;
use crate::http::auth::Token;
use crate::http::body;
use crate::http::cidr::client_network;
use crate::http::headers::retry_after;
use crate::http::key::client_ip;
use crate::http::params::Params;
use crate::http::problem::{Code, Problem};
use crate::isolate::lockout::{Lockout, CAPACITY, MAX_FAILURES};

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
    let answer = respond::handled(call(req, env, objects, settings, route).await);
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
) -> Handled {
    let config = &settings.config;
    let params = Params::read(req.url(), route.params())?;
    match (req.known_method(), route) {
        (method, AdminRoute::Key { rule, key }) => {
            let targets = targets(config, &rule, &key)?;
            Ok(match (method, whole_quota(config, &rule, &key)) {
                (Some(Method::Get), Some(parts)) => {
                    quota::inspect(objects, &rule, parts, &targets).await?
                }
                (Some(Method::Delete), Some(_)) => quota::reset(objects, &rule, &targets).await?,
                (Some(Method::Get), None) => keys::inspect(objects, &rule, &key, &targets).await?,
                (Some(Method::Delete), None) => keys::reset(objects, &rule, &key, &targets).await?,
                _ => not_allowed("GET, DELETE")?,
            })
        }
        (method, AdminRoute::KeyBan { rule, key }) => {
            let targets = bans::key_targets(config, &rule, &key)?;
            let named = (rule.as_str(), key.as_str());
            match method {
                Some(Method::Put) => bans::put_on_key(&req, objects, named, &targets).await,
                Some(Method::Delete) => bans::lift_on_key(objects, named, &targets).await,
                _ => Ok(not_allowed("PUT, DELETE")?),
            }
        }
        (Some(Method::Put), AdminRoute::Ban { key }) => {
            bans::put(&req, objects, config, &key).await
        }
        (Some(Method::Delete), AdminRoute::Ban { key }) => bans::lift(objects, config, &key).await,
        (Some(Method::Put), AdminRoute::Override { rule, key }) => {
            let body = parsed_body(&req, body::read::<OverrideRequest>).await?;
            keys::put_override(config, objects, &rule, &key, body).await
        }
        (Some(Method::Delete), AdminRoute::Override { rule, key }) => {
            keys::lift_override(config, objects, &rule, &key).await
        }
        (_, AdminRoute::Ban { .. } | AdminRoute::Override { .. }) => {
            Ok(not_allowed("PUT, DELETE")?)
        }
        (_, AdminRoute::RuleState { rule }) => {
            rules::state(&req, env, objects, config, &rule).await
        }
        (_, AdminRoute::RuleOverride { rule }) => {
            rules::overridden(&req, objects, config, &rule).await
        }
        // Served before authentication, in `serve`.
        (_, AdminRoute::Dashboard { .. } | AdminRoute::DashboardHome) => {
            Ok(endpoints::not_found(req.path())?)
        }
        (Some(Method::Delete), AdminRoute::Room { rule }) => {
            Ok(room::admin::one(objects, config, &rule, true).await?)
        }
        (method, AdminRoute::Room { .. }) if method != Some(Method::Get) => {
            Ok(not_allowed("GET, DELETE")?)
        }
        (method, _) if method != Some(Method::Get) => Ok(not_allowed("GET")?),
        (_, AdminRoute::Bans) => bans::list(objects, &params).await,
        (_, AdminRoute::Stats) => stats::get(objects, &params).await,
        (_, AdminRoute::Metrics) => stats::metrics(objects, config).await,
        (_, AdminRoute::Top) => stats::top(objects, config, &params).await,
        (_, AdminRoute::Rules) => respond::body(&listing::of(config)),
        (_, AdminRoute::Rooms) => Ok(room::admin::all(objects, config).await?),
        (_, AdminRoute::Room { rule }) => {
            Ok(room::admin::one(objects, config, &rule, false).await?)
        }
        (_, AdminRoute::Rule { rule }) => rules::view(env, objects, config, &rule).await,
    }
}
