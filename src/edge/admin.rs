//! The admin API below `{prefix}/admin/`: inspect and reset keys, manual
//! bans, and stats. It exists only when the `ADMIN_TOKEN` secret is set
//! (otherwise every admin path is a 404, like any unknown path), and every
//! call must carry that token as a bearer token; a wrong or missing one
//! gets a 401 that says nothing about keys.

use serde_json::json;
use worker::{console_error, Env, Headers, Method, Request, Response, Result};

use super::client::Objects;
use super::endpoints::{self, not_allowed, read_body};
use super::settings::settings;
use super::{isolate, now_ms, respond};
use crate::banlist::BanRecord;
use crate::http::admin::{ban_subject, parse_manual_ban, parse_since, targets, AdminRoute, Target};
use crate::http::api::json_object;
use crate::http::auth::authorized;
use crate::http::problem::Problem;
use crate::http::time::rfc3339;

/// The secret that holds the admin token.
pub const ADMIN_TOKEN: &str = "ADMIN_TOKEN";

pub async fn serve(mut req: Request, env: &Env, objects: &Objects, path: &str) -> Result<Response> {
    let token = env
        .secret(ADMIN_TOKEN)
        .map(|s| s.to_string())
        .unwrap_or_default();
    if token.is_empty() {
        return endpoints::not_found(&format!("/admin{path}"));
    }
    let authorization = req.headers().get("authorization")?;
    if !authorized(authorization.as_deref(), &token) {
        let headers = Headers::new();
        headers.set("www-authenticate", "Bearer realm=\"sluice-admin\"")?;
        let problem = Problem::new(
            401,
            "unauthorized",
            "the admin API needs the admin token as a bearer token",
        );
        return respond::problem_with(&problem, headers);
    }
    let Some(route) = AdminRoute::parse(path) else {
        return endpoints::not_found(&format!("/admin{path}"));
    };
    // Only a valid config gets here: the fetch handler answers 500 first.
    let settings = match settings(env) {
        Ok(settings) => settings,
        Err(_) => return endpoints::unavailable(),
    };
    let config = &settings.config;
    let targets = match &route {
        AdminRoute::Key { rule, key } => match targets(config, rule, key) {
            Ok(targets) => targets,
            Err(problem) => return respond::problem(&problem),
        },
        _ => Vec::new(),
    };
    let answer = match (req.method(), route) {
        (Method::Get, AdminRoute::Key { rule, key }) => {
            inspect_key(objects, &rule, &key, &targets).await
        }
        (Method::Delete, AdminRoute::Key { rule, key }) => {
            reset_key(objects, &rule, &key, &targets).await
        }
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
                Ok(ban) => {
                    let subject = ban_subject(&key, config.ipv6_prefix);
                    put_ban(objects, subject, ban.for_ms, ban.reason).await
                }
                Err(problem) => return respond::problem(&problem),
            }
        }
        (Method::Delete, AdminRoute::Ban { key }) => {
            lift_ban(objects, &ban_subject(&key, config.ipv6_prefix)).await
        }
        (_, AdminRoute::Ban { .. }) => return not_allowed("PUT, DELETE"),
        (Method::Get, AdminRoute::Stats) => {
            let since = req
                .url()?
                .query_pairs()
                .find(|(name, _)| name == "since")
                .map(|(_, value)| value.into_owned());
            let since = match parse_since(since.as_deref()) {
                Ok(since) => since,
                Err(problem) => return respond::problem(&problem),
            };
            isolate::flush_stats(objects).await;
            objects.stats(since).await.and_then(|stats| {
                let mut body = serde_json::to_value(&stats)?;
                body["isolate"] = isolate::figures();
                respond::json(&body, Headers::new())
            })
        }
        (_, AdminRoute::Stats) => return not_allowed("GET"),
    };
    answer.or_else(|e| {
        console_error!("sluice: admin call failed: {e}");
        endpoints::unavailable()
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
    let manual_ban = isolate::manual_ban(&[key], now_ms());
    let mut states = Vec::with_capacity(targets.len());
    for target in targets {
        let state = objects.peek(&target.object).await?;
        states.push(json!({
            "rule": target.rule,
            "key": key,
            "object": target.object,
            "slots": state.slots,
            "ban": state.ban,
            "leases": state.leases,
            "manual_ban": manual_ban,
        }));
    }
    let body = match <[serde_json::Value; 1]>::try_from(states) {
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
        let reset = objects.reset(&target.object).await?;
        isolate::forget_refusal(&target.object);
        objects.unban(key, &format!("rule:{}", target.rule)).await?;
        answers.push(json!({"object": target.object, "reset": reset}));
    }
    let body = match <[serde_json::Value; 1]>::try_from(answers) {
        Ok([one]) => one,
        Err(tiers) => json!({"rule": rule, "key": key, "tiers": tiers}),
    };
    respond::json(&body, Headers::new())
}

async fn list_bans(objects: &Objects) -> Result<Response> {
    let bans: Vec<serde_json::Value> = objects
        .bans()
        .await?
        .into_iter()
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
        source: "manual".into(),
    };
    objects.ban(&record).await?;
    // `banned` says what is refused: for an IPv6 address, its group.
    let body = json!({"key": record.key, "banned": record.key, "until_ms": until_ms, "until": rfc3339(until_ms), "reason": record.reason});
    isolate::remember_manual_ban(record);
    respond::json(&body, Headers::new())
}

async fn lift_ban(objects: &Objects, key: &str) -> Result<Response> {
    let removed = objects.unban(key, "manual").await?;
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
