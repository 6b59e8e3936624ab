//! A request that a rule matched: allow and deny lists, the caller's tier
//! (JWT), its key, manual bans and the isolate's refusal cache, the key's
//! container, and then refuse, forward, or (in shadow mode) forward and
//! report.

use worker::{console_error, console_log, Context, Headers, Request, Response, Result};

use super::client::{new_lease_id, Objects};
use super::delivery::{hold_until_delivered, release_on_drop};
use super::endpoints::verdict;
use super::incoming::Parts;
use super::proxy::{self, Forward};
use super::settings::Settings;
use super::{endpoints, isolate, now_ms, respond};
use crate::banlist::BanRecord;
use crate::config::{OnError, OnInvalid, Rule};
use crate::http::cidr::client_network;
use crate::http::jwt::{self, Claims};
use crate::http::key::{client_ip, KeyInputs};
use crate::http::problem::Problem;
use crate::http::time::rfc3339;
use crate::http::Incoming;
use crate::ledger::LeaseAsk;
use crate::protocol::{CheckRequest, QueueAsk};
use crate::stats::Verdict;

pub async fn limited(
    req: Request,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    rule: &Rule,
    params: &[(&str, &str)],
) -> Result<Response> {
    let config = &settings.config;
    let parts = Parts::of(&req);
    let ip = client_ip(&parts);
    if let Some(ip) = ip {
        if config.allow.contains(ip) || rule.allow.contains(ip) {
            return proxy::forward(req, config, Forward::untouched()).await;
        }
        if rule.deny.contains(ip) {
            return denied(&rule.id);
        }
    }
    let claims = match caller(&parts, settings, rule) {
        Ok(claims) => claims,
        Err(problem) => {
            let headers = Headers::new();
            headers.set("www-authenticate", "Bearer error=\"invalid_token\"")?;
            return respond::problem_with(&problem, headers);
        }
    };
    let Some(tier) = rule.tier_for(claims.is_some()) else {
        return proxy::forward(req, config, Forward::untouched()).await;
    };
    let inputs = KeyInputs {
        params,
        claims: claims.as_ref(),
        action: rule.action.as_deref(),
        ipv6_prefix: config.ipv6_prefix,
    };
    let key = match tier.key.build(&parts, &inputs) {
        Ok(key) => key,
        Err(missing) => {
            let problem = Problem::new(400, "missing-key", missing.to_string())
                .with("rule", rule.id.as_str());
            return respond::problem(&problem);
        }
    };
    let now = now_ms();
    let network = ip.map(|ip| client_network(ip, config.ipv6_prefix));
    let candidates: Vec<&str> = network
        .iter()
        .map(String::as_str)
        .chain([key.as_str()])
        .collect();
    if let Some(ban) = isolate::manual_ban(&candidates, now) {
        isolate::record(&rule.id, Verdict::Refused);
        return manually_banned(rule, &ban, now);
    }
    let object = format!("{}:{key}", tier.scope);
    if !rule.shadow {
        if let Some(cached) = isolate::cached_refusal(&object, now) {
            isolate::record(&rule.id, Verdict::Refused);
            return respond::refused(rule, &cached, now);
        }
    }
    let ban = rule.ban.as_ref().map(|b| &b.policy);
    let mut request = CheckRequest::new(&object, &tier.policies, 1, ban);
    let mut deadline = config.timeout_ms;
    if let Some(concurrency) = &rule.concurrency {
        request.lease = Some(LeaseAsk {
            name: format!("{}.concurrency", rule.id),
            limit: concurrency.limit,
            ttl_ms: concurrency.lease_ttl_ms,
            owner: None,
            new_id: new_lease_id()?,
        });
        if concurrency.max_wait_ms > 0 {
            request.queue = Some(QueueAsk {
                max_wait_ms: concurrency.max_wait_ms,
                max_len: concurrency.max_queue,
            });
            deadline += concurrency.max_wait_ms;
        }
    }
    let outcome = match objects.with_timeout(deadline).check_request(&request).await {
        Ok(outcome) => outcome,
        Err(e) => {
            isolate::record(&rule.id, Verdict::Failed);
            console_error!(
                "sluice: rule {} could not decide for {object}: {e}",
                rule.id
            );
            return match rule.on_error {
                OnError::Deny => endpoints::unavailable(),
                OnError::Allow => {
                    let headers = Headers::new();
                    headers.set("sluice-degraded", "fail-open")?;
                    let forward = Forward {
                        rule_id: Some(&rule.id),
                        key: Some(&key),
                        headers,
                    };
                    proxy::forward(req, config, forward).await
                }
            };
        }
    };
    isolate::record(&rule.id, verdict(outcome.allowed));
    if let Some(ban) = outcome.ban.as_ref().filter(|ban| ban.started) {
        let record = BanRecord {
            key: key.clone(),
            until_ms: ban.until_ms,
            reason: ban.reason.clone(),
            source: tier.scope.clone(),
        };
        let objects = objects.clone();
        ctx.wait_until(async move {
            if let Err(e) = objects.ban(&record).await {
                console_error!("sluice: could not list a ban: {e}");
            }
        });
    }
    let headers = Headers::new();
    if rule.shadow {
        let verdict = respond::shadow_header(&outcome);
        if !outcome.allowed {
            console_log!(
                "sluice: shadow rule {} would refuse {object}: {verdict}",
                rule.id
            );
        }
        headers.set("sluice-shadow", &verdict)?;
    } else if !outcome.allowed {
        let now = now_ms();
        // Under a ban policy, refusals must reach the object to count toward
        // a ban; only the ban itself is answered from the isolate. A refused
        // lease may free up any moment, so it is never cached.
        let cacheable = rule.ban.is_none() || outcome.ban.is_some();
        if cacheable && outcome.refusal_holds_until_retry() {
            isolate::cache_refusal(&object, &outcome, now);
        }
        return respond::refused(rule, &outcome, now);
    } else {
        respond::limit_headers(&headers, &outcome)?;
    }
    let forward = Forward {
        rule_id: Some(&rule.id),
        key: Some(&key),
        headers,
    };
    let guard = outcome
        .lease
        .as_ref()
        .and_then(|l| l.lease.as_ref())
        .map(|lease| release_on_drop(ctx, objects.clone(), object, lease.id.clone()));
    let response = proxy::forward(req, config, forward).await?;
    match guard {
        Some(guard) => hold_until_delivered(response, guard),
        None => Ok(response),
    }
}

/// A caller refused before any decision: deny-listed.
pub fn denied(rule_id: &str) -> Result<Response> {
    let problem =
        Problem::new(403, "denied", "the client address is on a deny list").with("rule", rule_id);
    respond::problem(&problem)
}

/// The answer to a caller an operator banned: the rule's ban status (429
/// unless the rule says 403), with Retry-After at the ban's end.
fn manually_banned(rule: &Rule, ban: &BanRecord, now_ms: u64) -> Result<Response> {
    let status = rule.ban.map_or(429, |b| b.status);
    let until = rfc3339(ban.until_ms);
    let problem = Problem::new(
        status,
        "banned",
        format!("banned by an operator until {until}: {}", ban.reason),
    )
    .with("banned-until", until);
    let headers = Headers::new();
    headers.set(
        "retry-after",
        &crate::http::headers::retry_after(ban.until_ms.saturating_sub(now_ms)),
    )?;
    respond::problem_with(&problem, headers)
}

/// The verified claims of a registered caller; `None` for an anonymous one.
/// A token that fails verification is never treated as registered.
fn caller(
    parts: &Parts<'_>,
    settings: &Settings,
    rule: &Rule,
) -> std::result::Result<Option<Claims>, Problem> {
    let (Some(jwt_config), Some(key)) = (&settings.config.jwt, &settings.jwt_key) else {
        return Ok(None);
    };
    if !rule.uses_jwt() {
        return Ok(None);
    }
    let Some(token) = parts
        .header("authorization")
        .and_then(|h| jwt::bearer(&h).map(str::to_string))
    else {
        return Ok(None);
    };
    match jwt::verify(&token, key, now_ms() / 1000, jwt_config.leeway_s) {
        Ok(claims) => Ok(Some(claims)),
        Err(e) => match jwt_config.on_invalid {
            OnInvalid::Anonymous => Ok(None),
            OnInvalid::Reject => Err(Problem::new(
                401,
                "invalid-token",
                format!("the bearer token was refused: {e}"),
            )),
        },
    }
}
