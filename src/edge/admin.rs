//! The admin API below `{prefix}/admin/`: inspect and reset keys, manual
//! bans, stats (with the top refused keys) read from the hubs, the rules
//! as configured, and the dashboard page that calls them. It exists only
//! when the `ADMIN_TOKEN` secret is set
//! (otherwise every admin path is a 404, like any unknown path), and every
//! call must carry that token as a bearer token; a wrong or missing one
//! gets a 401 that says nothing about keys. A client with too many failures
//! is locked out for a while (`crate::lockout`).

use std::cell::RefCell;

use serde_json::json;
use worker::{console_error, Env, Headers, Method, Request, Response, Result};

use super::client::{hub_name, Objects};
use super::dashboard;
use super::endpoints::{self, not_allowed, read_body};
use super::incoming::Parts;
use super::settings::{settings, Settings};
use super::{isolate, now_ms, respond};
use crate::banlist::{BanRecord, MANUAL, MAX_MANUAL_BANS};
use crate::http::admin::{object_name, parse_manual_ban, AdminRoute, API_RULE};
use crate::http::api::json_object;
use crate::http::auth::authorized;
use crate::http::cidr::client_network;
use crate::http::headers::retry_after;
use crate::http::key::client_ip;
use crate::http::problem::Problem;
use crate::http::rules;
use crate::http::time::rfc3339;
use crate::lockout::{Lockout, CAPACITY, MAX_FAILURES};
use crate::report::HUBS;
use crate::stats::summarize;

thread_local! {
    /// Failed authentications per client, this isolate's share of them.
    static LOCKOUT: RefCell<Lockout> = RefCell::new(Lockout::new(CAPACITY));
}

pub async fn serve(req: Request, env: &Env, objects: &Objects, path: &str) -> Result<Response> {
    let settings = settings(env).ok();
    let Some((settings, token)) = settings
        .as_deref()
        .and_then(|s| Some((s, s.admin_token.as_deref()?)))
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
    mut req: Request,
    env: &Env,
    objects: &Objects,
    path: &str,
    settings: &Settings,
    token: &str,
    route: Option<AdminRoute>,
) -> Result<Response> {
    // Requests without a usable address (only seen locally: Cloudflare
    // always sets one) share one count.
    let client = client_ip(&Parts::of(&req))
        .map(|ip| client_network(ip, settings.config.ipv6_prefix))
        .unwrap_or_default();
    let now = now_ms();
    if let Some(wait_ms) = LOCKOUT.with(|lockout| lockout.borrow().locked(&client, now)) {
        let headers = Headers::new();
        headers.set("retry-after", &retry_after(wait_ms))?;
        let problem = Problem::new(
            429,
            "too-many-failures",
            format!("{MAX_FAILURES} failed admin authentications from this client within a minute; try again later"),
        );
        return respond::problem_with(&problem, headers);
    }
    let authorization = req.headers().get("authorization")?;
    if !authorized(authorization.as_deref(), token) {
        LOCKOUT.with(|lockout| lockout.borrow_mut().fail(&client, now));
        let headers = Headers::new();
        headers.set("www-authenticate", "Bearer realm=\"sluice-admin\"")?;
        let problem = Problem::new(
            401,
            "unauthorized",
            "the admin API needs the admin token as a bearer token",
        );
        return respond::problem_with(&problem, headers);
    }
    let Some(route) = route else {
        return endpoints::not_found(&format!("/admin{path}"));
    };
    if let AdminRoute::Key { rule, .. } = &route {
        if !known_rule(env, rule) {
            let problem = Problem::new(
                404,
                "not-found",
                format!("no rule {rule:?}: use a rule id, <rule>.<tier> for a tier, or {API_RULE} for the decision API"),
            )
            .with("field", "rule");
            return respond::problem(&problem);
        }
    }
    let answer = match (req.method(), route) {
        (Method::Get, AdminRoute::Key { rule, key }) => inspect_key(objects, &rule, &key).await,
        (Method::Delete, AdminRoute::Key { rule, key }) => reset_key(objects, &rule, &key).await,
        (_, AdminRoute::Key { .. }) => return not_allowed("GET, DELETE"),
        (Method::Get, AdminRoute::Bans) => list_bans(objects).await,
        (_, AdminRoute::Bans) => return not_allowed("GET"),
        (Method::Put, AdminRoute::Ban { key }) => {
            let content_type = req.headers().get("content-type")?;
            let ban = read_body(&mut req)
                .await
                .and_then(|body| json_object(content_type.as_deref(), &body))
                .and_then(|object| parse_manual_ban(&object));
            match ban {
                Ok(ban) => put_ban(objects, key, ban.for_ms, ban.reason).await,
                Err(problem) => return respond::problem(&problem),
            }
        }
        (Method::Delete, AdminRoute::Ban { key }) => lift_ban(objects, &key).await,
        (_, AdminRoute::Ban { .. }) => return not_allowed("PUT, DELETE"),
        (Method::Get, AdminRoute::Stats) => {
            let url = req.url()?;
            let param = |name: &str| {
                url.query_pairs()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, value)| value.parse::<u64>().ok())
            };
            let since = param("since").unwrap_or(0);
            let top_minutes = param("top_minutes").unwrap_or(10).clamp(1, 60);
            stats(objects, since, top_minutes).await
        }
        (_, AdminRoute::Stats) => return not_allowed("GET"),
        (Method::Get, AdminRoute::Rules) => {
            respond::json(&rules::listing(&settings.config), Headers::new())
        }
        (_, AdminRoute::Rules) => return not_allowed("GET"),
        // Served before authentication, in `serve`.
        (_, AdminRoute::Dashboard { .. } | AdminRoute::DashboardHome) => {
            return endpoints::not_found(&format!("/admin{path}"))
        }
    };
    answer.or_else(|e| {
        console_error!("sluice: admin call failed: {e}");
        endpoints::unavailable()
    })
}

async fn inspect_key(objects: &Objects, rule: &str, key: &str) -> Result<Response> {
    let object = object_name(rule, key);
    let state = objects.peek(&object).await?;
    let manual_ban = isolate::manual_ban(&[key], now_ms());
    let body = json!({
        "rule": rule,
        "key": key,
        "object": object,
                "slots": state.slots,
        "ban": state.ban,
        "leases": state.leases,
        "manual_ban": manual_ban,
    });
    respond::json(&body, Headers::new())
}

async fn reset_key(objects: &Objects, rule: &str, key: &str) -> Result<Response> {
    let object = object_name(rule, key);
    let reset = objects.reset(&object).await?;
    isolate::forget_refusal(&object);
    objects
        .unban_everywhere(key, &format!("rule:{rule}"))
        .await?;
    respond::json(&json!({"object": object, "reset": reset}), Headers::new())
}

/// Counts, top refused keys and the hubs' own figures, merged from every
/// hub after this isolate has sent what it holds. A hub that does not
/// answer is named in `unreachable`, and the rest still count.
async fn stats(objects: &Objects, since: u64, top_minutes: u64) -> Result<Response> {
    isolate::report(objects).await;
    let mut rows = Vec::new();
    let mut top = Vec::new();
    let mut shared = serde_json::Map::new();
    let mut unreachable = Vec::new();
    for (n, summary) in (0..HUBS).zip(objects.hub_summaries(since).await) {
        match summary {
            Ok(summary) => {
                shared.insert(hub_name(n), json!({"requests": summary.requests}));
                rows.extend(summary.stats);
                top.extend(summary.top);
            }
            Err(e) => {
                console_error!("sluice: hub {n} did not answer: {e}");
                unreachable.push(hub_name(n));
            }
        }
    }
    let mut body = serde_json::to_value(summarize(&rows, &top, since, top_minutes, now_ms()))?;
    body["shared"] = shared.into();
    body["unreachable"] = unreachable.into();
    body["isolate"] = isolate::figures();
    respond::json(&body, Headers::new())
}

/// Every ban that has not ended, from all hubs: manual bans and the bans
/// decisions started (as isolates reported them, this one first).
async fn list_bans(objects: &Objects) -> Result<Response> {
    isolate::report(objects).await;
    let mut seen = std::collections::BTreeMap::new();
    for summary in objects.hub_summaries(now_ms()).await {
        for ban in summary?.bans {
            seen.insert((ban.key.clone(), ban.source.clone()), ban);
        }
    }
    let bans: Vec<serde_json::Value> = seen
        .into_values()
        .map(|ban| {
            json!({
                "key": ban.key,
                "source": ban.source,
                "until_ms": ban.until_ms,
                "until": rfc3339(ban.until_ms),
                "reason": ban.reason,
            })
        })
        .collect();
    respond::json(&json!({ "bans": bans }), Headers::new())
}

async fn put_ban(objects: &Objects, key: String, for_ms: u64, reason: String) -> Result<Response> {
    let until_ms = now_ms().saturating_add(for_ms);
    let record = BanRecord {
        key,
        until_ms,
        reason,
        source: MANUAL.into(),
    };
    if !objects.ban_everywhere(&record).await? {
        return respond::problem(&Problem::new(
            409,
            "too-many-bans",
            format!("at most {MAX_MANUAL_BANS} manual bans may hold at once; lift one first"),
        ));
    }
    let body = json!({"key": record.key, "until_ms": until_ms, "until": rfc3339(until_ms), "reason": record.reason});
    isolate::remember_manual_ban(record);
    respond::json(&body, Headers::new())
}

async fn lift_ban(objects: &Objects, key: &str) -> Result<Response> {
    let removed = objects.unban_everywhere(key, MANUAL).await?;
    isolate::forget_manual_ban(key);
    if !removed {
        return respond::problem(&Problem::new(
            404,
            "not-found",
            format!("no manual ban on {key:?}"),
        ));
    }
    respond::json(&json!({"key": key, "removed": true}), Headers::new())
}

/// Whether `rule` names the decision API or a rule (or a rule's tier) of
/// the config, so that a typo answers 404 rather than an empty key.
fn known_rule(env: &Env, rule: &str) -> bool {
    if rule == API_RULE {
        return true;
    }
    let scope = format!("rule:{rule}");
    settings(env).is_ok_and(|settings| {
        settings
            .config
            .rules
            .iter()
            .flat_map(|r| &r.tiers)
            .any(|tier| tier.scope == scope)
    })
}
