//! A rule's live control, below `{prefix}/admin/rules/`: its state
//! (`{rule}/state`), a global quota's whole limit (`{rule}/override`) and
//! the rule's view (`{rule}`). What a global quota's or global layer's parts
//! hold is written to each part, a room's state to each shard
//! (`room::admin`), any other rule's state to Workers KV (`controls.rs`).

use worker::{Env, Method, Response, Result};

use super::super::client::Objects;
use super::super::clock::now_ms;
use super::super::endpoints::{not_allowed, parsed_body};
use super::super::incoming::ClientRequest;
use super::super::quota::{limits, part_key, peek_parts, Shown};
use super::super::respond::{self, Handled};
use super::super::{controls, isolate, quota, room};
use super::views::{respond_parts, PartView, StateView};
use crate::config::lookup::{global_quota, state_holders, GlobalQuota, Target};
use crate::config::override_body::OverrideRequest;
use crate::config::quota_override::parse_quota_override;
use crate::config::{Config, Rule};
use crate::control::{agree, strictest, Control};
use crate::http::admin::parse_state;
use crate::http::body;
use crate::http::problem::{Code, Problem};
use crate::isolate::states::REFRESH_MS;
use crate::ledger::Override;
use crate::objects::protocol::WireOverride;

/// How long KV may take to show a write at every location.
const KV_PROPAGATION_MS: u64 = 60_000;

/// `{prefix}/admin/rules/{rule}/state`: `GET` and `PUT`.
pub async fn state(
    req: &ClientRequest,
    env: &Env,
    objects: &Objects,
    config: &Config,
    id: &str,
) -> Handled {
    let (rule, method) = match route(req, config, id, &[Method::Get, Method::Put]) {
        Ok(found) => found,
        Err(answer) => return Ok(answer?),
    };
    if method == Method::Get {
        return read(env, objects, config, rule).await;
    }
    let control = parsed_body(req, |ct, body| parse_state(ct, body, now_ms())).await?;
    if let Some(config) = &rule.room {
        return Ok(room::admin::write_state(objects, &rule.id, config, control).await?);
    }
    match parts_of(config, rule) {
        Some(parts) => write_parts(objects, &rule.id, &parts, control).await,
        None => write_kv(env, config, &rule.id, control).await,
    }
}

/// `GET {prefix}/admin/rules/{rule}`: a global quota's sale (a global
/// rule's, or a global layer's as `{rule}.{layer}`), or another rule's
/// state.
pub async fn view(env: &Env, objects: &Objects, config: &Config, id: &str) -> Handled {
    if id.contains('.') {
        return sale(objects, id, &global_quota(config, id)?).await;
    }
    read(env, objects, config, find(config, id)?).await
}

/// A global quota's sale, summed over its parts.
async fn sale(objects: &Objects, id: &str, quota: &GlobalQuota<'_>) -> Handled {
    let read = peek_parts(objects, &quota.targets).await;
    Ok(quota::sale(id, &quota.global.parts, &quota.targets, read)?)
}

/// A global quota's sale (its state and override included), a waiting
/// room's state in its shards, or another rule's state.
async fn read(env: &Env, objects: &Objects, config: &Config, rule: &Rule) -> Handled {
    if let Some(room) = &rule.room {
        return Ok(room::admin::read_state(objects, &rule.id, room).await?);
    }
    if let Ok(quota) = global_quota(config, &rule.id) {
        return sale(objects, &rule.id, &quota).await;
    }
    match parts_of(config, rule) {
        Some(parts) => read_parts(objects, &rule.id, &parts).await,
        None => read_kv(env, &rule.id).await,
    }
}

/// The state of a rule with global layers, as their parts hold it: the
/// strictest, whether those that answered agree, and each part's (or that
/// it did not answer). The layers' sales are their own views
/// (`{rule}.{layer}`).
async fn read_parts(objects: &Objects, rule: &str, targets: &[Target]) -> Handled {
    let read = peek_parts(objects, targets).await;
    let controls: Vec<Option<&Control>> = read
        .iter()
        .flatten()
        .map(|state| state.control.as_ref())
        .collect();
    let parts = targets
        .iter()
        .zip(&read)
        .map(|(target, state)| match state {
            Some(state) => PartView {
                state: Some(Shown::of(state.control.as_ref())),
                ..PartView::of(target)
            },
            None => PartView {
                error: Some("did not answer".to_string()),
                ..PartView::of(target)
            },
        })
        .collect();
    let view = StateView {
        parts: Some(parts),
        agree: Some(agree(&controls)),
        ..StateView::new(rule, strictest(controls.iter().copied().flatten()), "parts")
    };
    respond::body(&view)
}

/// `{prefix}/admin/rules/{rule}/override`: `GET`, `PUT` and `DELETE`, for a
/// global quota only: a global rule's, or a global layer's
/// (`{rule}.{layer}`).
pub async fn overridden(
    req: &ClientRequest,
    objects: &Objects,
    config: &Config,
    id: &str,
) -> Handled {
    let methods = [Method::Get, Method::Put, Method::Delete];
    let Some(method) = req.known_method().filter(|m| methods.contains(m)) else {
        return Ok(not_allowed("GET, PUT, DELETE")?);
    };
    let quota = global_quota(config, id)?;
    let targets = &quota.targets;
    match method {
        Method::Put => {
            let raw = parsed_body(req, body::read::<OverrideRequest>).await?;
            let parsed = match parse_quota_override(raw, &quota) {
                Ok(parsed) => parsed,
                Err(e) => return Err(Problem::invalid(&e.field, e.message).into()),
            };
            let now = now_ms();
            let overrides = (0..targets.len()).map(|i| parsed.part(i, now)).collect();
            let whole = SetOverride {
                policy: &parsed.policy,
                limit: parsed.limit,
                reason: &parsed.reason,
                set_ms: now,
            };
            write_overrides(objects, id, targets, overrides, Some(whole)).await
        }
        Method::Delete => {
            let none = vec![None; targets.len()];
            write_overrides(objects, id, targets, none, None).await
        }
        _ => sale(objects, id, &quota).await,
    }
}

/// The rule a route names and the method it was called with, or the
/// answer when the route does not take that method (`405`) or names no
/// rule (`404`).
fn route<'a>(
    req: &ClientRequest,
    config: &'a Config,
    id: &str,
    methods: &[Method],
) -> std::result::Result<(&'a Rule, Method), Result<Response>> {
    let Some(method) = req.known_method().filter(|m| methods.contains(m)) else {
        let allow: Vec<&str> = methods.iter().map(Method::as_ref).collect();
        return Err(not_allowed(&allow.join(", ")));
    };
    find(config, id)
        .map(|rule| (rule, method))
        .map_err(|problem| respond::problem(&problem))
}

/// The rule `id` names; a tier or the decision API is no rule to control.
fn find<'a>(config: &'a Config, id: &str) -> std::result::Result<&'a Rule, Problem> {
    config.rules.iter().find(|r| r.id == id).ok_or_else(|| {
        Problem::new(
            Code::NotFound,
            format!("no rule {id:?}: a rule is controlled as a whole, by its id (not a tier's, not _api)"),
        )
        .with("field", "rule")
    })
}

/// The objects that hold a rule's state: a global rule's parts (or its
/// one object), or its global layers'; `None` when KV holds it.
fn parts_of(config: &Config, rule: &Rule) -> Option<Vec<Target>> {
    Some(state_holders(config, rule)).filter(|parts| !parts.is_empty())
}

/// Writes `control` to every part, each answering the state it replaced;
/// the isolate forgets what it remembers of the parts (a "full" refusal
/// as much as a paused one), so that it asks them from the next request.
async fn write_parts(
    objects: &Objects,
    rule: &str,
    targets: &[Target],
    control: Control,
) -> Handled {
    let mut answers = Vec::with_capacity(targets.len());
    for target in targets {
        let answer = objects
            .set_control(target.object.as_str(), control.clone())
            .await;
        isolate::forget_refusal(&target.object);
        answers.push(answer);
    }
    let parts = targets
        .iter()
        .zip(&answers)
        .map(|(target, answer)| match answer {
            Ok(previous) => PartView {
                previous: Some(Shown::of(previous.as_ref())),
                ..PartView::of(target)
            },
            Err(e) => PartView {
                error: Some(e.to_string()),
                ..PartView::of(target)
            },
        })
        .collect();
    let view = StateView {
        parts: Some(parts),
        ..StateView::new(rule, Some(&control), "parts")
    };
    Ok(respond_parts(&view, "parts", failed(targets, &answers))?)
}

/// Writes the state of a rule that is not a global quota to KV.
async fn write_kv(env: &Env, config: &Config, rule: &str, control: Control) -> Handled {
    if let Some(problem) = unbound(env) {
        return Err(problem.into());
    }
    let previous = controls::write(env, config, rule, control.clone()).await?;
    let view = StateView {
        previous: Some(Shown::of(previous.as_ref())),
        applies_within_ms: Some(KV_PROPAGATION_MS + REFRESH_MS),
        ..StateView::new(rule, Some(&control), "kv")
    };
    respond::body(&view)
}

/// The state of a rule that is not a global quota, as KV holds it, and as
/// this isolate applies it.
async fn read_kv(env: &Env, rule: &str) -> Handled {
    if let Some(problem) = unbound(env) {
        return Err(problem.into());
    }
    let states = controls::read(env).await?;
    let applied = controls::rule_state(rule, now_ms());
    let view = StateView {
        isolate: Some(Shown::of(applied.as_ref())),
        ..StateView::new(rule, states.get(rule), "kv")
    };
    respond::body(&view)
}

/// The 500 for a deployment without the states' KV namespace.
fn unbound(env: &Env) -> Option<Problem> {
    (!controls::bound(env)).then(|| {
        Problem::new(
            Code::InvalidConfig,
            format!("no KV namespace is bound as {}: add the [[kv_namespaces]] binding of wrangler.toml and deploy (docs/operations.md)", controls::BINDING),
        )
        .with("field", controls::BINDING)
    })
}

/// An override of a global quota as set: the policy it changed and its
/// whole limit.
struct SetOverride<'a> {
    policy: &'a str,
    limit: u64,
    reason: &'a str,
    set_ms: u64,
}

crate::write_json!(SetOverride<'_> { policy, limit, reason, set_ms });

struct OverrideView<'a> {
    rule: &'a str,
    whole: Option<SetOverride<'a>>,
    parts: Vec<PartView<'a>>,
}

crate::write_json!(OverrideView<'_> { rule, whole as "override", parts });

/// Sets (or with `None` lifts) each part's override, each answering whether
/// it replaced one. Lifting where no part held one is a 404.
async fn write_overrides(
    objects: &Objects,
    rule: &str,
    targets: &[Target],
    overrides: Vec<Option<Override>>,
    whole: Option<SetOverride<'_>>,
) -> Handled {
    let mut answers = Vec::with_capacity(targets.len());
    for (target, next) in targets.iter().zip(&overrides) {
        let wire = next.as_ref().map(WireOverride::encode);
        let answer = objects.set_override(target.object.as_str(), wire).await;
        isolate::forget_refusal(&target.object);
        answers.push(answer);
    }
    let replaced = answers.iter().flatten().filter(|p| p.is_some()).count();
    if whole.is_none() && answers.iter().all(Result::is_ok) && replaced == 0 {
        return Err(Problem::new(
            Code::NotFound,
            format!("rule {rule:?} has no override to lift"),
        )
        .into());
    }
    let parts = targets
        .iter()
        .zip(&overrides)
        .zip(&answers)
        .map(|((target, next), answer)| match answer {
            Ok(previous) => PartView {
                policies: Some(next.as_ref().map(|o| limits(&o.policies))),
                replaced: Some(previous.is_some()),
                ..PartView::of(target)
            },
            Err(e) => PartView {
                error: Some(e.to_string()),
                ..PartView::of(target)
            },
        })
        .collect();
    let view = OverrideView { rule, whole, parts };
    Ok(respond_parts(&view, "parts", failed(targets, &answers))?)
}

/// The parts a change did not reach.
fn failed<'t, T>(targets: &'t [Target], answers: &[Result<T>]) -> Vec<&'t str> {
    targets
        .iter()
        .zip(answers)
        .filter(|(_, answer)| answer.is_err())
        .map(|(target, _)| part_key(target))
        .collect()
}
