//! What an isolate keeps between requests: the refusal cache, the copy of
//! the manual ban list, and the outbox of what it reports to the hubs. All
//! three are bounded, and all are only ever read or changed synchronously,
//! so no borrow is held across an await.

use std::cell::RefCell;
use std::net::IpAddr;

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::js_sys::Reflect;
use worker::{console_error, Context};

use super::blocks;
use super::client::{self, Objects};
use super::clock::now_ms;
use super::controls;
use crate::gate::Answer;
use crate::http::cidr::client_network;
use crate::isolate::banlist::{BanList, BanRecord};
use crate::isolate::refusals::{RefusalCache, CAPACITY};
use crate::isolate::report::Outbox;
use crate::isolate::stats::{Verdict, MAX_PENDING};
use crate::ledger::Outcome;
use crate::objects::name::ObjectName;

thread_local! {
    static REFUSALS: RefCell<RefusalCache> = RefCell::new(RefusalCache::new(CAPACITY));
    static BANS: RefCell<BanList> = RefCell::new(BanList::new());
    static OUTBOX: RefCell<Outbox> = RefCell::new(Outbox::new());
    /// The Analytics Engine dataset bound as [`ANALYTICS_BINDING`], looked
    /// up by the isolate's first request (`undefined` when there is none).
    static DATASET: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// The optional Analytics Engine dataset binding each decision is written
/// to (`[[analytics_engine_datasets]]` in wrangler.toml).
pub const ANALYTICS_BINDING: &str = "ANALYTICS";

/// One decision as a data point, in JavaScript: `writeDataPoint` queues it
/// and returns at once (the runtime sends it after the response); a
/// failure to write is no failure of the request.
#[wasm_bindgen(
    inline_js = "export function point(dataset, rule, outcome, key, near, shadow) {
  try {
    dataset.writeDataPoint({ indexes: [rule], blobs: [rule, outcome, key], doubles: [1, near, shadow] });
  } catch {}
}"
)]
extern "C" {
    fn point(dataset: &JsValue, rule: &str, outcome: &str, key: &str, near: f64, shadow: f64);
}

pub fn cached_refusal(object: &ObjectName, now_ms: u64) -> Option<Outcome> {
    REFUSALS.with(|cache| cache.borrow_mut().get(object.as_str(), now_ms))
}

pub fn cache_refusal(object: &ObjectName, outcome: &Outcome, now_ms: u64) {
    REFUSALS.with(|cache| cache.borrow_mut().insert(object.as_str(), outcome, now_ms));
}

/// Hands out the moment a cached refusal of `object` was just told.
pub fn invited(object: &ObjectName) {
    REFUSALS.with(|cache| cache.borrow_mut().invited(object.as_str()));
}

/// How many moments to ask `object` for, should it refuse.
pub fn invitations(object: &ObjectName) -> u32 {
    REFUSALS.with(|cache| cache.borrow().invitations(object.as_str()))
}

/// Whether a refusal of `object` holds, its batch spent or not.
pub fn refuses(object: &ObjectName, now_ms: u64) -> bool {
    REFUSALS.with(|cache| cache.borrow().holds(object.as_str(), now_ms))
}

/// Forgets a cached refusal, after an operator reset the object.
pub fn forget_refusal(object: &ObjectName) {
    REFUSALS.with(|cache| cache.borrow_mut().remove(object.as_str()));
}

/// The active manual ban on the client's address `ip` (or a network
/// holding it) or on any of `keys`.
pub fn manual_ban(ip: Option<IpAddr>, keys: &[&str], now_ms: u64) -> Option<BanRecord> {
    BANS.with(|bans| bans.borrow().find(ip, keys, now_ms).cloned())
}

/// An operator's ban on the client at `ip` (its address, or a network
/// holding it, IPv6 grouped by `ipv6_prefix`), as the answer that refuses
/// it: for paths no rule's own plan answers for (Sluice's endpoints, a
/// waiting room's visits of every kind).
pub fn address_banned(ip: Option<IpAddr>, ipv6_prefix: u8) -> Option<Answer> {
    let ip = ip.filter(|_| any_manual_ban())?;
    let network = client_network(ip, ipv6_prefix);
    let now = now_ms();
    let ban = manual_ban(Some(ip), &[&network], now)?;
    Some(crate::gate::manually_banned(429, &ban, now))
}

/// Whether this isolate knows of any manual ban, so that a request need
/// not name its network to look for one (its cost: BENCHMARKS.md).
pub fn any_manual_ban() -> bool {
    BANS.with(|bans| !bans.borrow().is_empty())
}

pub fn remember_manual_ban(record: BanRecord) {
    BANS.with(|bans| bans.borrow_mut().insert(record));
}

pub fn forget_manual_ban(key: &str) {
    BANS.with(|bans| bans.borrow_mut().remove(key));
}

/// What this isolate holds now, for operators: every figure is bounded.
pub fn figures() -> crate::json::Json {
    let refusals = REFUSALS.with(|cache| cache.borrow().len());
    let manual_bans = BANS.with(|bans| bans.borrow().len());
    let (pending_stats, followed_rules, pending_bans) =
        OUTBOX.with(|outbox| outbox.borrow().pending());
    crate::json!({
        "refusal_cache": refusals,
        "refusal_cache_capacity": CAPACITY,
        "manual_bans": manual_bans,
        "pending_stats": pending_stats,
        "pending_stats_capacity": MAX_PENDING,
        "pending_top_rules": followed_rules,
        "pending_bans": pending_bans,
        "rule_states": controls::held(),
        "object_calls": client::object_calls(),
        "blocks": blocks::figures(),
    })
}

/// Counts a decision of `rule` for `key`; a refusal also counts toward
/// the rule's top refused keys.
pub fn record(rule: &str, key: &str, verdict: Verdict) {
    OUTBOX.with(|outbox| {
        let mut outbox = outbox.borrow_mut();
        outbox.record(rule, now_ms(), verdict);
        if matches!(verdict, Verdict::Refused | Verdict::Shadow) {
            outbox.refused(rule, key);
        }
    });
    DATASET.with(|dataset| {
        if let Some(dataset) = dataset.borrow().as_ref().filter(|d| !d.is_undefined()) {
            let flag = |v: Verdict| f64::from(u8::from(verdict == v));
            point(
                dataset,
                rule,
                verdict.name(),
                key,
                flag(Verdict::Near),
                flag(Verdict::Shadow),
            );
        }
    });
}

/// Notes a ban a decision started, for the hubs' ban list; the ban itself
/// is held and enforced by the key's own object.
pub fn ban_started(record: BanRecord) {
    OUTBOX.with(|outbox| outbox.borrow_mut().ban_started(record));
}

/// Starts a report to a hub in the background when one is due (at once in
/// a new isolate, then every `every_ms`). The request that triggers it
/// never waits for it.
pub fn upkeep(objects: &Objects, ctx: &Context, every_ms: u64) {
    DATASET.with(|dataset| {
        let mut dataset = dataset.borrow_mut();
        if dataset.is_none() {
            let env: &JsValue = objects.env().as_ref();
            *dataset = Reflect::get(env, &ANALYTICS_BINDING.into()).ok();
        }
    });
    if OUTBOX.with(|outbox| outbox.borrow_mut().claim(now_ms(), every_ms)) {
        let objects = objects.clone();
        ctx.wait_until(async move { report(&objects).await });
    }
}

/// Sends what the isolate collected to a hub and takes the manual bans it
/// answers; on failure keeps both the report (for next time) and the last
/// ban list it had.
pub async fn report(objects: &Objects) {
    let report = OUTBOX.with(|outbox| outbox.borrow_mut().take(now_ms()));
    match objects.report(&report).await {
        Ok(answer) => BANS.with(|bans| bans.borrow_mut().replace(answer.manual_bans, now_ms())),
        Err(e) => {
            console_error!("sluice: could not report to a hub: {e}");
            OUTBOX.with(|outbox| outbox.borrow_mut().restore(report));
        }
    }
}
