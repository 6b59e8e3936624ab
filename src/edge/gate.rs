//! A request that a rule matched: allow and deny lists, the caller's tier
//! (JWT), its key, manual bans and the isolate's refusal cache, the key's
//! container, and then refuse, forward, or (in shadow mode) forward and
//! report.

use worker::{console_error, console_log, Context, Headers, Request, Response, Result};

use super::client::{new_lease_id, random_pair, Objects};
use super::delivery::{hold_until_delivered, release_on_drop};
use super::endpoints::verdict;
use super::incoming::Parts;
use super::proxy::{self, Forward};
use super::settings::Settings;
use super::{endpoints, isolate, now_ms, respond};
use crate::banlist::BanRecord;
use crate::config::{Global, OnError, OnInvalid, Rule, Tier};
use crate::http::admin::manual_ban_detail;
use crate::http::api::RESERVATION_TTL_MS;
use crate::http::cidr::client_network;
use crate::http::jwt::{self, Claims};
use crate::http::key::{client_ip, KeyInputs};
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::http::Incoming;
use crate::ledger::{LeaseAsk, Outcome};
use crate::limit::split;
use crate::protocol::{CheckRequest, QueueAsk, ReserveAsk, SettleRequest};
use crate::stats::Verdict;

/// The key of a rule whose quota every caller shares.
const GLOBAL_KEY: &str = "*";

/// The rule a request matched, and what the match gave keys to use.
pub struct Matched<'a> {
    pub rule: &'a Rule,
    /// The path as the rule compared it (canonical, folded per its `paths`).
    pub path: &'a str,
    pub params: &'a [(&'a str, &'a str)],
}

pub async fn limited(
    req: Request,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    matched: Matched<'_>,
) -> Result<Response> {
    let Matched { rule, path, params } = matched;
    let config = &settings.config;
    let parts = Parts::of(&req);
    let ip = client_ip(&parts);
    if let Some(ip) = ip {
        if config.allow.contains(ip) || rule.allow.contains(ip) {
            return proxy::forward(req, settings, Forward::untouched()).await;
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
    let Some(tier) = rule.tier_for(claims.as_ref()) else {
        return proxy::forward(req, settings, Forward::untouched()).await;
    };
    let inputs = KeyInputs {
        path,
        params,
        claims: claims.as_ref(),
        action: rule.action.as_deref(),
        ipv6_prefix: config.ipv6_prefix,
    };
    let key = match tier.key.build(&parts, &inputs) {
        _ if rule.global.is_some() => GLOBAL_KEY.to_string(),
        Ok(key) => key,
        Err(missing) => {
            let problem = Problem::new(Code::MissingKey, missing.to_string())
                .with("rule", rule.id.as_str())
                .with("field", missing.part.as_str());
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
        isolate::record(&rule.id, &key, Verdict::Refused);
        return manually_banned(rule, &ban, now);
    }
    if let Some(global) = rule.global.as_ref().filter(|g| g.parts.len() > 1) {
        let (object, outcome) =
            match split_check(objects, config.timeout_ms, rule, tier, global).await {
                Checked::Refused(outcome) => {
                    isolate::record(&rule.id, &key, Verdict::Refused);
                    return respond::refused(rule, &outcome, now_ms());
                }
                Checked::Decided(object, outcome) => (object, outcome),
                Checked::Failed(object, e) => {
                    return could_not_decide(req, settings, rule, &key, &object, e).await;
                }
            };
        return answer(
            req,
            ctx,
            objects,
            settings,
            rule,
            tier,
            Decided {
                key,
                object,
                outcome,
                reservation: None,
            },
        )
        .await;
    }
    let object = format!("{}:{key}", tier.scope);
    if !rule.shadow {
        if let Some(cached) = isolate::cached_refusal(&object, now) {
            isolate::record(&rule.id, &key, Verdict::Refused);
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
            reenter: None,
            strict_limit: false,
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
    if rule.count.is_some() {
        request.reserve = Some(ReserveAsk {
            id: new_lease_id()?,
            ttl_ms: RESERVATION_TTL_MS,
        });
    }
    match objects.with_timeout(deadline).check_request(&request).await {
        Ok(outcome) => {
            let decided = Decided {
                key,
                object,
                reservation: request.reserve.map(|r| r.id),
                outcome,
            };
            answer(req, ctx, objects, settings, rule, tier, decided).await
        }
        Err(e) => could_not_decide(req, settings, rule, &key, &object, e).await,
    }
}

/// What the key's container (or a part of a split quota) decided.
struct Decided {
    key: String,
    object: String,
    outcome: Outcome,
    /// The reservation an admission of a rule that counts by answer holds.
    reservation: Option<String>,
}

/// Refuses, forwards, or (in shadow mode) forwards and reports, after a
/// container decided.
async fn answer(
    req: Request,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    rule: &Rule,
    tier: &Tier,
    decided: Decided,
) -> Result<Response> {
    let Decided {
        key,
        object,
        outcome,
        reservation,
    } = decided;
    isolate::record(&rule.id, &key, verdict(outcome.allowed));
    if let Some(ban) = outcome.ban.as_ref().filter(|ban| ban.started) {
        isolate::ban_started(BanRecord {
            key: key.clone(),
            until_ms: ban.until_ms,
            reason: ban.reason.clone(),
            source: tier.scope.clone(),
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
    let settle_as = reservation
        .filter(|_| outcome.allowed)
        .zip(rule.count.as_ref())
        .map(|(id, counted)| (object.clone(), id, counted));
    let guard = outcome
        .lease
        .as_ref()
        .and_then(|l| l.lease.as_ref())
        .map(|lease| release_on_drop(ctx, objects.clone(), object, lease.id.clone()));
    let response = proxy::forward(req, settings, forward).await?;
    if let Some((object, reservation, counted)) = settle_as {
        settle(
            ctx,
            objects,
            object,
            reservation,
            counted.matches(response.status_code()),
        );
    }
    match guard {
        Some(guard) => hold_until_delivered(response, guard),
        None => Ok(response),
    }
}

/// Keeps the reservation when the origin's answer counts, refunds it
/// otherwise, in the background: the client has its answer already. A
/// settle that never arrives lapses into a kept reservation.
fn settle(ctx: &Context, objects: &Objects, key: String, reservation: String, keep: bool) {
    let objects = objects.clone();
    ctx.wait_until(async move {
        let request = SettleRequest {
            key,
            reservation,
            keep,
        };
        if let Err(e) = objects.settle(&request).await {
            console_error!("sluice: could not settle a reservation: {e}");
        }
    });
}

/// The rule's `on_error` when the container could not decide: logged,
/// counted, and then fail closed or fail open.
async fn could_not_decide(
    req: Request,
    settings: &Settings,
    rule: &Rule,
    key: &str,
    object: &str,
    e: worker::Error,
) -> Result<Response> {
    isolate::record(&rule.id, key, Verdict::Failed);
    console_error!(
        "sluice: rule {} could not decide for {object}: {e}",
        rule.id
    );
    match rule.on_error {
        OnError::Deny => endpoints::unavailable(),
        OnError::Allow => {
            let headers = Headers::new();
            headers.set("sluice-degraded", "fail-open")?;
            let forward = Forward {
                rule_id: Some(&rule.id),
                key: Some(key),
                headers,
            };
            proxy::forward(req, settings, forward).await
        }
    }
}

/// How a split quota's check went.
enum Checked {
    /// Every part tried is full (known from the isolate's cache or just
    /// found), and the refusal is the one that can be retried soonest.
    Refused(Outcome),
    Decided(String, Outcome),
    Failed(String, worker::Error),
}

/// A split quota: a random part, and one other when that part is full.
/// A part the isolate knows is full is skipped without a call, and a part
/// found full is remembered, so a flood after a sell-out costs no calls.
/// The answer announces the whole quota's limit; its `remaining` is the
/// answering part's, a lower bound of the whole's.
async fn split_check(
    objects: &Objects,
    timeout_ms: u64,
    rule: &Rule,
    tier: &Tier,
    global: &Global,
) -> Checked {
    let parts = u32::try_from(global.parts.len()).unwrap_or(split::MAX_PARTS);
    let object_of = |part: u32| format!("{}:{GLOBAL_KEY}#{part}", tier.scope);
    let (first, second) = match random_pair() {
        Ok((a, b)) => split::route(parts, a, b),
        Err(e) => return Checked::Failed(object_of(0), e),
    };
    let mut refused: Option<Outcome> = None;
    for part in [Some(first), second].into_iter().flatten() {
        let object = object_of(part);
        let now = now_ms();
        if !rule.shadow {
            if let Some(cached) = isolate::cached_refusal(&object, now) {
                refused = sooner(refused, cached);
                continue;
            }
        }
        let Some(specs) = global.parts.get(part as usize) else {
            continue;
        };
        let request = CheckRequest::new(&object, specs, 1, None);
        let mut outcome = match objects
            .with_timeout(timeout_ms)
            .check_request(&request)
            .await
        {
            Ok(outcome) => outcome,
            Err(e) => return Checked::Failed(object, e),
        };
        for (decision, (_, whole)) in outcome.policies.iter_mut().zip(&tier.policies) {
            decision.decision.limit = whole.limit();
        }
        if outcome.allowed || rule.shadow {
            return Checked::Decided(object, outcome);
        }
        isolate::cache_refusal(&object, &outcome, now_ms());
        refused = sooner(refused, outcome);
    }
    match refused {
        Some(outcome) => Checked::Refused(outcome),
        None => Checked::Failed(
            object_of(first),
            worker::Error::RustError("no part to try".into()),
        ),
    }
}

/// Of two refusals, the one that can be retried sooner.
fn sooner(a: Option<Outcome>, b: Outcome) -> Option<Outcome> {
    match a {
        Some(a) if a.retry_after_ms <= b.retry_after_ms => Some(a),
        _ => Some(b),
    }
}

/// A caller refused before any decision: deny-listed.
pub fn denied(rule_id: &str) -> Result<Response> {
    let problem =
        Problem::new(Code::Denied, "the client address is on a deny list").with("rule", rule_id);
    respond::problem(&problem)
}

/// The answer to a caller an operator banned: the rule's ban status (429
/// unless the rule says 403), with Retry-After at the ban's end.
fn manually_banned(rule: &Rule, ban: &BanRecord, now_ms: u64) -> Result<Response> {
    let status = rule.ban.map_or(429, |b| b.status);
    let until = rfc3339(ban.until_ms);
    let problem = Problem::new(
        Code::Banned { status },
        manual_ban_detail(&until, &ban.reason),
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
    // Another scheme (Basic, say) carries no JWT, but a Bearer header whose
    // token is malformed (empty, or with spaces inside) fails verification
    // like any other bad token.
    let Some(header) = parts.header("authorization") else {
        return Ok(None);
    };
    let scheme = header.trim_start().split(' ').next().unwrap_or("");
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    let token = jwt::bearer(header.trim()).unwrap_or("");
    match jwt::verify(token, key, now_ms() / 1000, &jwt_config.checks) {
        Ok(claims) => Ok(Some(claims)),
        Err(e) => match jwt_config.on_invalid {
            OnInvalid::Anonymous => Ok(None),
            OnInvalid::Reject => Err(Problem::new(
                Code::InvalidToken,
                format!("the bearer token was refused: {e}"),
            )),
        },
    }
}
