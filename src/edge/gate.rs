//! The I/O around `crate::gate`: the isolate's memory and randomness for
//! the plan, the calls to key objects it asks for, and then what the
//! conclusion says: record, cache, log, answer or forward, release and
//! settle.

use std::net::IpAddr;

use worker::{console_error, console_log, Context, Response, Result};

use super::client::{new_lease_id, random_pair, Objects};
use super::clock::now_ms;
use super::delivery::{hold_until_delivered, release_on_drop};
use super::incoming::ClientRequest;
use super::proxy::{self, Forward};
use super::settings::Settings;
use super::{controls, isolate, respond};
use crate::control::Control;
use crate::gate::{self, Arrival, Ask, Conclusion, Judged, Known, Log, Matched, Pass, Plan, Reply};
use crate::isolate::banlist::BanRecord;
use crate::ledger::Outcome;
use crate::objects::name::ObjectName;
use crate::objects::protocol::SettleRequest;

/// The isolate's memory, as the plan reads it.
struct Isolate;

impl gate::Memory for Isolate {
    fn manual_ban(&self, ip: Option<IpAddr>, keys: &[&str], now_ms: u64) -> Option<BanRecord> {
        isolate::manual_ban(ip, keys, now_ms)
    }

    fn cached_refusal(&self, object: &ObjectName, now_ms: u64) -> Option<Outcome> {
        isolate::cached_refusal(object, now_ms)
    }

    fn rule_state(&self, rule: &str, now_ms: u64) -> Option<Control> {
        controls::rule_state(rule, now_ms)
    }
}

/// The platform's randomness (`crypto.getRandomValues`).
struct Random;

impl gate::Chance for Random {
    fn id(&mut self) -> Option<String> {
        new_lease_id().ok()
    }

    fn pair(&mut self) -> Option<(u32, u32)> {
        random_pair().ok()
    }
}

pub async fn limited(
    req: ClientRequest,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    matched: Matched<'_>,
) -> Result<Response> {
    let rule = matched.rule;
    let known = Known {
        config: &settings.config,
        jwt_key: settings.jwt_key.as_ref(),
        memory: &Isolate,
    };
    let arrival = Arrival {
        matched,
        request: &req,
        now_ms: now_ms(),
    };
    let conclusion = match gate::plan(&known, arrival, &mut Random) {
        Plan::Done(conclusion) => conclusion,
        Plan::Ask(ask) => ask_objects(objects, ask).await,
    };
    apply(&rule.id, &conclusion);
    match conclusion.reply {
        Reply::Answer(answer) => respond::answer(&answer),
        Reply::Forward(pass) => pass_on(req, ctx, objects, settings, &rule.id, pass).await,
    }
}

/// Asks each object the plan names until one decides; a split quota's
/// part found full is remembered, so a flood after a sell-out costs no
/// calls.
async fn ask_objects(objects: &Objects, ask: Ask<'_>) -> Conclusion {
    let mut refused: Option<Outcome> = None;
    let client = objects.with_timeout(ask.deadline_ms);
    for attempt in &ask.tries {
        let outcome = match client.check_request(&attempt.request).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let object = attempt.object.clone();
                return ask.failed(&object, &e.to_string());
            }
        };
        match ask.judge(outcome) {
            Judged::Decided(outcome) => {
                let object = attempt.object.clone();
                return ask.conclude(object, outcome, now_ms());
            }
            Judged::Full(outcome) => {
                isolate::cache_refusal(&attempt.object, &outcome, now_ms());
                refused = gate::sooner(refused, outcome);
            }
        }
    }
    ask.all_full(refused, now_ms())
}

/// What the isolate keeps and logs from a conclusion.
fn apply(rule_id: &str, conclusion: &Conclusion) {
    if let Some((key, verdict)) = &conclusion.record {
        isolate::record(rule_id, key, *verdict);
    }
    if let Some(ban) = &conclusion.ban_started {
        isolate::ban_started(ban.clone());
    }
    if let Some((object, outcome)) = &conclusion.cache {
        isolate::cache_refusal(object, outcome, now_ms());
    }
    match &conclusion.log {
        Some(Log::Info(line)) => console_log!("{line}"),
        Some(Log::Error(line)) => console_error!("{line}"),
        None => {}
    }
}

/// Forwards to the origin with the fields added; releases a lease once
/// the response is delivered, and settles a reservation by its status.
async fn pass_on(
    req: ClientRequest,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    rule_id: &str,
    pass: Pass,
) -> Result<Response> {
    let Pass {
        fields,
        key,
        release,
        settle,
    } = pass;
    let guard = release.map(|(object, id)| release_on_drop(ctx, objects.clone(), object, id));
    let forward = Forward {
        rule_id: key.as_ref().map(|_| rule_id),
        key: key.as_deref(),
        headers: respond::headers(&fields)?,
    };
    let response = proxy::forward(req, settings, forward).await?;
    if let Some(settle) = settle {
        let request = SettleRequest {
            keep: settle.keeps(response.status_code()),
            key: settle.object.to_string(),
            reservation: settle.reservation,
        };
        settle_later(ctx, objects, request);
    }
    match guard {
        Some(guard) => hold_until_delivered(response, guard),
        None => Ok(response),
    }
}

/// Keeps or refunds a reservation in the background: the client has its
/// answer already. A settle that never arrives lapses into a kept
/// reservation.
fn settle_later(ctx: &Context, objects: &Objects, request: SettleRequest) {
    let objects = objects.clone();
    ctx.wait_until(async move {
        if let Err(e) = objects.settle(&request).await {
            console_error!("sluice: could not settle a reservation: {e}");
        }
    });
}
