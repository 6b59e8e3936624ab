//! The admin API's counts and top refused keys, read from every hub after
//! this isolate has sent what it holds: `GET {prefix}/admin/stats` (counts
//! per rule, never lists of keys or bans) and `GET {prefix}/admin/top` (one
//! rule's most refused keys, a page at a time). A hub that does not answer
//! is named in `unreachable`, and the rest still count.

use serde_json::Value;

use crate::json;
use worker::{console_error, Headers, Response};

use super::super::client::{hub_name, Objects};
use super::super::clock::now_ms;
use super::super::respond::{self, Handled};
use super::super::{isolate, quota, room};
use crate::config::lookup::global_quota;
use crate::config::Config;
use crate::http::admin::{RULE, SINCE, TOP_LIMIT, TOP_MINUTES};
use crate::http::metrics::{exposition, Figures};
use crate::http::params::{cursor, Params};
use crate::http::problem::{Code, Problem};
use crate::isolate::pages::{page_top, TopCursor};
use crate::isolate::report::HUBS;
use crate::isolate::stats::summarize;
use crate::isolate::top::{merge_all, CAPACITY};
use crate::objects::name::API_SCOPE;

/// `GET /admin/stats?since=<ms>`: per rule, counts since `since` and per
/// minute of the last hour; how many bans are in force; the hubs' and
/// this isolate's own figures.
pub async fn get(objects: &Objects, params: &Params) -> Handled {
    let since = params.whole(&SINCE)?;
    isolate::report(objects).await;
    let (mut totals, mut recent) = (Vec::new(), Vec::new());
    let (mut manual_bans, mut rule_bans) = (0, 0);
    let mut shared = serde_json::Map::new();
    let mut unreachable = Vec::new();
    for (n, stats) in (0..HUBS).zip(objects.hub_stats(since).await) {
        match stats {
            Ok(stats) => {
                let requests = [("requests".to_string(), stats.requests.into())];
                shared.insert(hub_name(n), Value::Object(requests.into_iter().collect()));
                totals.extend(stats.totals);
                recent.extend(stats.recent);
                // Every hub holds every manual ban; each lists the rules'
                // bans its reports brought.
                manual_bans = manual_bans.max(stats.manual_bans);
                rule_bans += stats.rule_bans;
            }
            Err(e) => {
                console_error!("sluice: hub {n} did not answer: {e}");
                unreachable.push(hub_name(n));
            }
        }
    }
    let answer = summarize(&totals, &recent, since, now_ms());
    let body = json!({
        "since_ms": answer.since_ms,
        "now_ms": answer.now_ms,
        "rules": answer.rules,
        "bans": json!({"manual": manual_bans, "rule": rule_bans}),
        "shared": shared,
        "unreachable": unreachable,
        "isolate": isolate::figures(),
    });
    respond::body(&body)
}

/// `GET /admin/metrics`: Prometheus's text format, after this isolate
/// has sent what it holds: the hubs' counts since they began, the bans in
/// force, each room's waiting and active, each global quota's whole.
pub async fn metrics(objects: &Objects, config: &Config) -> Handled {
    isolate::report(objects).await;
    let (mut totals, mut bans, mut unreachable) = (Vec::new(), (0, 0), 0);
    for stats in objects.hub_stats(0).await {
        match stats {
            Ok(stats) => {
                totals.extend(stats.totals);
                bans = (bans.0.max(stats.manual_bans), bans.1 + stats.rule_bans);
            }
            Err(_) => unreachable += 1,
        }
    }
    let decisions = summarize(&totals, &[], 0, now_ms()).rules;
    let mut rooms = Vec::new();
    let mut quotas = Vec::new();
    for rule in &config.rules {
        if let Some(room) = &rule.room {
            let figures = room::admin::figures(objects, &rule.id, room).await;
            rooms.push((rule.id.as_str(), figures.waiting, figures.active));
        }
        let layers = rule.also.iter().filter(|l| l.global.is_some());
        let names = rule.global.iter().map(|_| rule.id.clone());
        for name in names.chain(layers.map(|l| format!("{}.{}", rule.id, l.id))) {
            if let Ok(quota) = global_quota(config, &name) {
                quotas.push((name, quota::whole(objects, &quota).await));
            }
        }
    }
    let quotas = quotas
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let text = exposition(&Figures {
        decisions: &decisions,
        bans,
        hubs_unreachable: unreachable,
        rooms,
        quotas,
    });
    let headers = Headers::new();
    headers.set("content-type", "text/plain; version=0.0.4; charset=utf-8")?;
    Ok(Response::ok(text)?.with_headers(headers))
}

/// `GET /admin/top?rule=<id>&top_minutes=<1..60>&limit=<1..32>&cursor=`:
/// the keys `rule` refused most in the last `top_minutes`, largest first,
/// a page at a time.
pub async fn top(objects: &Objects, config: &Config, params: &Params) -> Handled {
    let rule = known_rule(config, params.text(RULE))?;
    let minutes = params.whole(&TOP_MINUTES)?;
    let limit = params.whole(&TOP_LIMIT)?;
    let after = params.cursor::<TopCursor>()?;
    isolate::report(objects).await;
    let since = now_ms().saturating_sub(minutes.saturating_mul(60_000));
    let mut parts = Vec::new();
    let mut unreachable = Vec::new();
    for (n, top) in (0..HUBS).zip(objects.hub_top(rule, since).await) {
        match top {
            Ok(top) => parts.push(top),
            Err(e) => {
                console_error!("sluice: hub {n} did not answer: {e}");
                unreachable.push(hub_name(n));
            }
        }
    }
    let ranked = merge_all(&parts, CAPACITY).ranked();
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let (keys, next) = page_top(ranked, after.as_ref(), limit);
    let body = json!({
        "rule": rule, "top_minutes": minutes, "keys": keys,
        "next": next.as_ref().map(cursor), "unreachable": unreachable,
    });
    respond::body(&body)
}

/// The rule `rule` names, as stats count it: a rule's id, or the decision
/// API's [`API_SCOPE`].
fn known_rule<'a>(config: &Config, rule: Option<&'a str>) -> std::result::Result<&'a str, Problem> {
    let Some(rule) = rule else {
        return Err(Problem::invalid(
            RULE,
            format!("rule is required: a rule's id, or {API_SCOPE} for the decision API"),
        ));
    };
    if rule == API_SCOPE || config.rules.iter().any(|r| r.id == rule) {
        return Ok(rule);
    }
    Err(Problem::new(
        Code::NotFound,
        format!(
            "no rule {rule:?}: use a rule's id (not a tier's), or {API_SCOPE} for the decision API"
        ),
    )
    .with("field", RULE))
}
