//! The admin API's manual bans: `PUT` and `DELETE {prefix}/admin/bans/{key}`
//! on a key, an address or a network, which every hub holds and every
//! isolate copies; and `GET {prefix}/admin/bans`, the bans the hubs list.

use std::collections::BTreeMap;

use serde_json::json;
use worker::{Headers, Response, Result};

use super::client::Objects;
use super::clock::now_ms;
use super::endpoints::parsed_body;
use super::incoming::ClientRequest;
use super::{isolate, respond};
use crate::config::Config;
use crate::http::admin::{ban_holds, ban_subject, parse_manual_ban};
use crate::http::key::client_ip;
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::isolate::banlist::{BanRecord, MANUAL, MAX_MANUAL_BANS};

/// `PUT /admin/bans/{key}`. A ban that would hold the caller itself is
/// refused: a manual ban on an address holds on the admin API too, so the
/// operator could not lift it.
pub async fn put(
    req: &ClientRequest,
    objects: &Objects,
    config: &Config,
    key: &str,
) -> Result<Response> {
    let subject = match ban_subject(key, config.ipv6_prefix) {
        Ok(subject) => subject,
        Err(problem) => return respond::problem(&problem),
    };
    if let Some(caller) = client_ip(req).filter(|ip| ban_holds(&subject, *ip, config.ipv6_prefix)) {
        return respond::problem(&Problem::invalid(
            "key",
            format!("a ban on {subject} would hold your own address {caller}, and a manual ban holds on the admin API too: you could not lift it"),
        ));
    }
    let ban = match parsed_body(req, parse_manual_ban).await? {
        Ok(ban) => ban,
        Err(problem) => return respond::problem(&problem),
    };
    let until_ms = now_ms().saturating_add(ban.for_ms);
    let record = BanRecord {
        key: subject,
        until_ms,
        reason: ban.reason,
        source: MANUAL.into(),
    };
    if !objects.ban_everywhere(&record).await? {
        return respond::problem(&Problem::new(
            Code::TooManyBans,
            format!("at most {MAX_MANUAL_BANS} manual bans may hold at once; lift one first"),
        ));
    }
    // `banned` says what is refused: for an IPv6 address, its group.
    let body = json!({"key": record.key, "banned": record.key, "until_ms": until_ms, "until": rfc3339(until_ms), "reason": record.reason});
    isolate::remember_manual_ban(record);
    respond::json(&body, Headers::new())
}

/// `DELETE /admin/bans/{key}`: 404 if there was none.
pub async fn lift(objects: &Objects, config: &Config, key: &str) -> Result<Response> {
    let subject = match ban_subject(key, config.ipv6_prefix) {
        Ok(subject) => subject,
        Err(problem) => return respond::problem(&problem),
    };
    let removed = objects.unban_everywhere(&subject, MANUAL).await?;
    isolate::forget_manual_ban(&subject);
    if !removed {
        return respond::problem(&Problem::new(
            Code::NotFound,
            format!("no manual ban on {subject:?}"),
        ));
    }
    respond::json(&json!({"key": subject, "removed": true}), Headers::new())
}

/// Every ban that has not ended, from all hubs: manual bans and the bans
/// decisions started (as isolates reported them, this one first).
pub async fn list(objects: &Objects) -> Result<Response> {
    isolate::report(objects).await;
    let mut seen = BTreeMap::new();
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
