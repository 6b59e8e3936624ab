//! The admin API's bans: `PUT` and `DELETE {prefix}/admin/bans/{key}` on a
//! key, an address or a network, which every hub holds and every isolate
//! copies; `PUT` and `DELETE {prefix}/admin/keys/{rule}/{key}/ban`, a ban of
//! one key on one rule, held in that key's own object; and
//! `GET {prefix}/admin/bans`, the bans the hubs list.

use crate::json;
use crate::json::Json;

use super::super::client::Objects;
use super::super::clock::now_ms;
use super::super::endpoints::parsed_body;
use super::super::incoming::ClientRequest;
use super::super::isolate;
use super::super::respond::{self, Handled};
use crate::config::lookup::{targets, Target};
use crate::config::Config;
use crate::http::admin::{ban_holds, ban_subject, key_fits, parse_manual_ban, BANS_LIMIT};
use crate::http::key::client_ip;
use crate::http::params::{cursor, Params};
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::isolate::banlist::{BanRecord, MANUAL, MAX_MANUAL_BANS};
use crate::isolate::pages::{merge_bans, BanCursor};
use crate::ledger::BanNotice;
use crate::objects::name::API_SCOPE;
use crate::objects::protocol::KeyBan;

/// `PUT /admin/bans/{key}`. A ban that would hold the caller itself is
/// refused: a manual ban on an address holds on the admin API too, so the
/// operator could not lift it.
pub async fn put(req: &ClientRequest, objects: &Objects, config: &Config, key: &str) -> Handled {
    let subject = ban_subject(key, config.ipv6_prefix)?;
    if let Some(caller) = client_ip(req).filter(|ip| ban_holds(&subject, *ip, config.ipv6_prefix)) {
        return Err(Problem::invalid(
            "key",
            format!("a ban on {subject} would hold your own address {caller}, and a manual ban holds on the admin API too: you could not lift it"),
        ).into());
    }
    let ban = parsed_body(req, parse_manual_ban).await?;
    let now = now_ms();
    let until_ms = now.saturating_add(ban.for_ms);
    let record = BanRecord {
        key: subject,
        until_ms,
        reason: ban.reason,
        source: MANUAL.into(),
        started_ms: now,
    };
    let (banned, replaced) = objects.ban_everywhere(&record).await?;
    if !banned {
        return Err(Problem::new(
            Code::TooManyBans,
            format!("at most {MAX_MANUAL_BANS} manual bans may hold at once; lift one first"),
        )
        .into());
    }
    // `banned` says what is refused: for an IPv6 address, its group.
    let body = json!({"key": record.key, "banned": record.key, "until_ms": until_ms, "until": rfc3339(until_ms), "reason": record.reason, "replaced": replaced});
    isolate::remember_manual_ban(record);
    respond::body(&body)
}

/// `DELETE /admin/bans/{key}`: 404 if there was none.
pub async fn lift(objects: &Objects, config: &Config, key: &str) -> Handled {
    let subject = ban_subject(key, config.ipv6_prefix)?;
    let removed = objects.unban_everywhere(&subject, MANUAL).await?;
    isolate::forget_manual_ban(&subject);
    if !removed {
        return Err(Problem::new(Code::NotFound, format!("no manual ban on {subject:?}")).into());
    }
    respond::body(&json!({"key": subject, "removed": true}))
}

/// `GET /admin/bans?limit=<1..100>&cursor=`: the bans in force, manual and
/// those rules started (as isolates reported them, this one first),
/// newest first, a page at a time. Each hub sends at most a page.
pub async fn list(objects: &Objects, params: &Params) -> Handled {
    let limit = params.whole(&BANS_LIMIT)?;
    let after = params.cursor::<BanCursor>()?;
    isolate::report(objects).await;
    let limit = u32::try_from(limit).unwrap_or(u32::MAX);
    let mut pages = Vec::new();
    for page in objects.hub_bans(limit, after).await {
        pages.push(page?);
    }
    let (bans, next) = merge_bans(pages, limit as usize);
    let page = BansPage {
        bans: bans.iter().map(ListedBan::of).collect(),
        next: next.as_ref().map(cursor),
    };
    respond::body(&page)
}

/// A page of `GET /admin/bans`.
struct BansPage<'a> {
    bans: Vec<ListedBan<'a>>,
    next: Option<String>,
}

crate::write_json!(BansPage<'_> { bans, next });

/// A ban as `GET /admin/bans` lists it.
struct ListedBan<'a> {
    key: &'a str,
    source: &'a str,
    until_ms: u64,
    until: String,
    reason: &'a str,
    /// `None` for a ban a hub of an earlier version listed, which kept no
    /// start.
    started_ms: Option<u64>,
    started: Option<String>,
}

crate::write_json!(ListedBan<'_> { key, source, until_ms, until, reason, started_ms, started });

impl<'a> ListedBan<'a> {
    fn of(ban: &'a BanRecord) -> ListedBan<'a> {
        let started_ms = (ban.started_ms > 0).then_some(ban.started_ms);
        ListedBan {
            key: &ban.key,
            source: &ban.source,
            until_ms: ban.until_ms,
            until: rfc3339(ban.until_ms),
            reason: &ban.reason,
            started_ms,
            started: started_ms.map(rfc3339),
        }
    }
}

/// The objects `{rule}/{key}` names for a ban of the key on that rule (every
/// tier's for a tiered rule's id). A global quota has no key of its own to
/// ban (its `*` is every caller), and decision-API keys carry their callers'
/// own policies: both are a 400 naming `rule`.
pub fn key_targets(
    config: &Config,
    rule: &str,
    key: &str,
) -> std::result::Result<Vec<Target>, Problem> {
    let id = rule.split_once('.').map_or(rule, |(id, _)| id);
    if rule == API_SCOPE {
        return Err(Problem::invalid(
            "rule",
            format!(
                "{API_SCOPE} keys are the decision API's callers' own; a ban is for a rule's keys"
            ),
        ));
    }
    if config
        .rules
        .iter()
        .any(|r| r.id == id && r.global.is_some())
    {
        return Err(Problem::invalid(
            "rule",
            format!("rule {id:?} is a global quota that every caller shares: ban an address or a network with PUT /admin/bans/{{address}}"),
        ));
    }
    key_fits(key)?;
    targets(config, rule, key)
}

/// One answer per object, or `{"rule", "key", "tiers": [...]}` for a
/// tiered rule's id.
fn per_target(rule: &str, key: &str, answers: Vec<Json>) -> Json {
    match <[Json; 1]>::try_from(answers) {
        Ok([one]) => one,
        Err(tiers) => json!({"rule": rule, "key": key, "tiers": tiers}),
    }
}

/// `PUT /admin/keys/{rule}/{key}/ban`: bans the key on that rule only, in
/// its own object, and lists it under the rule (at once: this isolate
/// reports it before answering).
pub async fn put_on_key(
    req: &ClientRequest,
    objects: &Objects,
    (rule, key): (&str, &str),
    targets: &[Target],
) -> Handled {
    let ban = parsed_body(req, parse_manual_ban).await?;
    let now = now_ms();
    let until_ms = now.saturating_add(ban.for_ms);
    let mut answers = Vec::with_capacity(targets.len());
    for target in targets {
        let set = KeyBan {
            until_ms,
            reason: ban.reason.clone(),
        };
        let previous = objects.set_ban(target.object.as_str(), Some(set)).await?;
        isolate::forget_refusal(&target.object);
        isolate::ban_started(BanRecord {
            key: key.to_string(),
            until_ms,
            reason: ban.reason.clone(),
            source: target.scope.to_string(),
            started_ms: now,
        });
        answers.push(json::sorted(&KeyBanned {
            rule: target.scope.id(),
            key,
            object: target.object.as_str(),
            until_ms,
            until: rfc3339(until_ms),
            reason: &ban.reason,
            replaced: previous,
        }));
    }
    isolate::report(objects).await;
    respond::body(&per_target(rule, key, answers))
}

/// What `PUT /admin/keys/{rule}/{key}/ban` answers for one object.
struct KeyBanned<'a> {
    rule: &'a str,
    key: &'a str,
    object: &'a str,
    until_ms: u64,
    until: String,
    reason: &'a str,
    /// The ban that was in force.
    replaced: Option<BanNotice>,
}

crate::write_json!(KeyBanned<'_> { rule, key, object, until_ms, until, reason, replaced });

/// `DELETE /admin/keys/{rule}/{key}/ban`: lifts the key's ban on that
/// rule, an operator's or the rule's own, keeping its log; 404 if none
/// was in force.
pub async fn lift_on_key(
    objects: &Objects,
    (rule, key): (&str, &str),
    targets: &[Target],
) -> Handled {
    let mut answers = Vec::with_capacity(targets.len());
    let mut any = false;
    for target in targets {
        let previous = objects.set_ban(target.object.as_str(), None).await?;
        isolate::forget_refusal(&target.object);
        objects
            .unban_everywhere(key, &target.scope.to_string())
            .await?;
        any |= previous.is_some();
        answers.push(json!({"rule": target.scope.id(), "key": key, "object": target.object, "lifted": previous}));
    }
    if !any {
        return Err(Problem::new(
            Code::NotFound,
            format!("no ban on {key:?} for rule {rule:?}"),
        )
        .into());
    }
    respond::body(&per_target(rule, key, answers))
}
