//! What an isolate keeps between requests: the refusal cache, the copy of
//! the manual ban list, and the stats tally. All three are bounded, and all
//! three are only ever read or changed synchronously, so no borrow is held
//! across an await.

use std::cell::RefCell;

use worker::{console_error, Context};

use super::client::Objects;
use super::now_ms;
use crate::banlist::{BanList, BanRecord};
use crate::ledger::Outcome;
use crate::refusals::{RefusalCache, CAPACITY};
use crate::stats::{Tally, Verdict, MAX_PENDING};

thread_local! {
    static REFUSALS: RefCell<RefusalCache> = RefCell::new(RefusalCache::new(CAPACITY));
    static BANS: RefCell<BanList> = RefCell::new(BanList::new());
    static TALLY: RefCell<Tally> = RefCell::new(Tally::new());
}

pub fn cached_refusal(object: &str, now_ms: u64) -> Option<Outcome> {
    REFUSALS.with(|cache| cache.borrow_mut().get(object, now_ms))
}

pub fn cache_refusal(object: &str, outcome: &Outcome, now_ms: u64) {
    REFUSALS.with(|cache| cache.borrow_mut().insert(object, outcome, now_ms));
}

/// Forgets a cached refusal, after an operator reset the object.
pub fn forget_refusal(object: &str) {
    REFUSALS.with(|cache| cache.borrow_mut().remove(object));
}

/// The manual ban on any of `candidates`, if one is active.
pub fn manual_ban(candidates: &[&str], now_ms: u64) -> Option<BanRecord> {
    BANS.with(|bans| bans.borrow().find(candidates, now_ms).cloned())
}

pub fn remember_manual_ban(record: BanRecord) {
    BANS.with(|bans| bans.borrow_mut().insert(record));
}

pub fn forget_manual_ban(key: &str) {
    BANS.with(|bans| bans.borrow_mut().remove(key));
}

/// What this isolate holds now, for operators: every figure is bounded.
pub fn figures() -> serde_json::Value {
    let refusals = REFUSALS.with(|cache| cache.borrow().len());
    let manual_bans = BANS.with(|bans| bans.borrow().len());
    let pending_stats = TALLY.with(|tally| tally.borrow().pending());
    serde_json::json!({
        "refusal_cache": refusals,
        "refusal_cache_capacity": CAPACITY,
        "manual_bans": manual_bans,
        "pending_stats": pending_stats,
        "pending_stats_capacity": MAX_PENDING,
    })
}

pub fn record(rule: &str, verdict: Verdict) {
    TALLY.with(|tally| tally.borrow_mut().record(rule, now_ms(), verdict));
}

/// Sends the tally to the registry now; the admin stats call uses it so its
/// answer includes this isolate's latest counts.
pub async fn flush_stats(objects: &Objects) {
    let rows = TALLY.with(|tally| tally.borrow_mut().take(now_ms()));
    if !rows.is_empty() {
        if let Err(e) = objects.record_stats(&rows).await {
            console_error!("sluice: could not flush stats: {e}");
        }
    }
}

/// Keeps the isolate's shared state fresh: fetches the manual ban list on
/// the isolate's first request (awaited, so bans hold from the start),
/// refreshes it in the background afterwards, and flushes the stats tally
/// in the background when due.
pub async fn upkeep(objects: &Objects, ctx: &Context) {
    let now = now_ms();
    if BANS.with(|bans| bans.borrow().is_unknown()) {
        refresh_bans(objects).await;
    } else if BANS.with(|bans| bans.borrow_mut().claim_refresh(now)) {
        let objects = objects.clone();
        ctx.wait_until(async move { refresh_bans(&objects).await });
    }
    if TALLY.with(|tally| tally.borrow().due(now)) {
        let objects = objects.clone();
        ctx.wait_until(async move { flush_stats(&objects).await });
    }
}

async fn refresh_bans(objects: &Objects) {
    match objects.bans().await {
        Ok(records) => BANS.with(|bans| bans.borrow_mut().replace(records, now_ms())),
        Err(e) => {
            console_error!("sluice: could not fetch the ban list: {e}");
            // Try again at the next interval rather than on every request.
            BANS.with(|bans| bans.borrow_mut().replace(Vec::new(), now_ms()));
        }
    }
}
