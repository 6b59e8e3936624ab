//! A key's admin routes: `{prefix}/admin/keys/{rule}/{key}` (inspect,
//! reset) and its `/override` (set, lift).

use super::super::client::Objects;
use super::super::clock::now_ms;
use super::super::isolate;
use super::super::respond::{self, Handled};
use crate::config::lookup::{overridden_tier, override_tier, Target};
use crate::config::override_body::{parse_override, OverrideRequest};
use crate::config::Config;
use crate::http::admin::key_fits;
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::json;
use crate::json::Json;
use crate::ledger::Override;
use crate::objects::name::Scope;
use crate::objects::protocol::WireOverride;

/// `PUT /admin/keys/{rule}/{key}/override`.
pub async fn put_override(
    config: &Config,
    objects: &Objects,
    rule: &str,
    key: &str,
    body: OverrideRequest,
) -> Handled {
    let tier = override_tier(config, rule)?;
    key_fits(key)?;
    let parsed = parse_override(body, tier).map_err(|e| Problem::invalid(&e.field, e.message))?;
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
    respond::body(
        &json!({"object": object, "override": override_view(&wire), "replaced": previous.is_some()}),
    )
}

/// `DELETE /admin/keys/{rule}/{key}/override`: 404 if there was none.
pub async fn lift_override(config: &Config, objects: &Objects, rule: &str, key: &str) -> Handled {
    if let Err(problem) = overridden_tier(config, rule) {
        return Err(problem.into());
    }
    let object = Scope::named(rule).object(key);
    let Some(previous) = objects.set_override(object.as_str(), None).await? else {
        return Err(Problem::new(
            Code::NotFound,
            format!("no override on {key:?} for rule {rule:?}"),
        )
        .into());
    };
    isolate::forget_refusal(&object);
    respond::body(&json!({"object": object, "lifted": override_view(&previous)}))
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
pub async fn inspect(objects: &Objects, rule: &str, key: &str, targets: &[Target]) -> Handled {
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
    respond::body(&body)
}

/// Resets the key in every object the route names (every tier's, for a
/// tiered rule's id).
pub async fn reset(objects: &Objects, rule: &str, key: &str, targets: &[Target]) -> Handled {
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
    respond::body(&body)
}
