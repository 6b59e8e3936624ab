//! The key view of a split global quota, `{prefix}/admin/keys/{rule}/*`:
//! the whole quota (every part's state, added up) and each part; and its
//! reset, of every part. One part alone is `*#i`, served like any key.

use serde::Serialize;
use serde_json::json;
use worker::{Headers, Response, Result};

use super::client::Objects;
use super::{isolate, respond};
use crate::config::lookup::{whole_slots, Target};
use crate::ledger::{BanNotice, SlotReport};
use crate::limit::lease::Lease;
use crate::limit::Spec;
use crate::objects::name::GLOBAL_KEY;

/// `GET /admin/keys/{rule}/*` of a split quota: `slots` for the whole
/// quota, `parts` for each part (`*#0` …), as their objects report them.
pub async fn inspect(
    objects: &Objects,
    rule: &str,
    parts: &[Vec<(String, Spec)>],
    targets: &[Target],
) -> Result<Response> {
    let mut states = Vec::with_capacity(targets.len());
    let mut views = Vec::with_capacity(targets.len());
    for target in targets {
        let state = objects
            .peek(target.object.as_str(), target.policies.as_deref())
            .await?;
        states.push(state.slots.clone());
        views.push(Part {
            rule,
            key: part_key(target),
            object: target.object.as_str(),
            slots: state.slots,
            ban: state.ban,
            leases: state.leases,
        });
    }
    let body = json!({
        "rule": rule, "key": GLOBAL_KEY, "slots": whole_slots(parts, &states),
        "ban": null, "leases": [], "manual_ban": null, "override": null, "parts": views,
    });
    respond::json(&body, Headers::new())
}

/// One part of a split quota, as its object reports it.
#[derive(Serialize)]
struct Part<'a> {
    rule: &'a str,
    key: &'a str,
    object: &'a str,
    slots: Vec<SlotReport>,
    ban: Option<BanNotice>,
    leases: Vec<Lease>,
}

/// `DELETE /admin/keys/{rule}/*` of a split quota: every part reset.
pub async fn reset(objects: &Objects, rule: &str, targets: &[Target]) -> Result<Response> {
    let mut views = Vec::with_capacity(targets.len());
    for target in targets {
        let reset = objects.reset(target.object.as_str()).await?;
        isolate::forget_refusal(&target.object);
        views.push(json!({"key": part_key(target), "object": target.object, "reset": reset}));
    }
    respond::json(
        &json!({"rule": rule, "key": GLOBAL_KEY, "parts": views}),
        Headers::new(),
    )
}

/// A part's key, `*#i`, as its object is named.
fn part_key(target: &Target) -> &str {
    let name = target.object.as_str();
    name.rfind(':').map_or(name, |colon| &name[colon + 1..])
}
