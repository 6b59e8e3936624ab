//! The I/O around `crate::gate`: the isolate's memory and randomness for
//! the plan, the calls to key objects it asks for (each layer of a stacked
//! rule in turn), and then what the conclusion says: record, cache, log,
//! keep or refund the layers' reservations, answer or forward, release and
//! settle.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use worker::{console_error, console_log, Context, Response, Result};

use super::client::{new_lease_id, random_pair, Objects};
use super::clock::now_ms;
use super::delivery::{hold_until_delivered, release_on_drop};
use super::incoming::ClientRequest;
use super::proxy::{self, Forward};
use super::settings::Settings;
use super::{blocks, controls, isolate, respond};
use crate::control::Control;
use crate::gate::{self, Arrival, Conclusion, Known, Log, Matched, Pass, Plan, Reply, Stack};
use crate::isolate::banlist::BanRecord;
use crate::ledger::Outcome;
use crate::objects::name::{ObjectName, Scope};
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

    fn invitations(&self, object: &ObjectName) -> u32 {
        isolate::invitations(object)
    }

    fn refuses(&self, object: &ObjectName, now_ms: u64) -> bool {
        isolate::refuses(object, now_ms)
    }

    fn rule_state(&self, rule: &str, now_ms: u64) -> Option<Control> {
        controls::rule_state(rule, now_ms)
    }

    fn block_part(&self, scope: &Scope, parts: u32, now_ms: u64) -> Option<u32> {
        blocks::usable_part(scope, parts, now_ms)
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

/// A request a rule matched: decided, then refused or forwarded (with
/// the request's `Sluice-Room-Pass` when it holds a room's session).
pub async fn limited(
    req: ClientRequest,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    matched: Matched<'_>,
    room_pass: Option<String>,
) -> Result<Response> {
    let rule = matched.rule;
    let conclusion = decide(&req, ctx, objects, settings, matched).await;
    match conclusion.reply {
        Reply::Answer(answer) => respond::answer(&answer),
        Reply::Forward(pass) => {
            pass_on(req, ctx, objects, settings, &rule.id, pass, room_pass).await
        }
    }
}

/// A matched request's decision: planned, its layers asked, and what the
/// conclusion says recorded, cached, logged and settled in the isolate.
/// A waiting room's join limit is decided so too. Boxed, so that its two
/// callers share one copy of it in the wasm.
pub fn decide<'a>(
    req: &'a ClientRequest,
    ctx: &'a Context,
    objects: &'a Objects,
    settings: &'a Settings,
    matched: Matched<'a>,
) -> Pin<Box<dyn Future<Output = Conclusion> + 'a>> {
    Box::pin(decided(req, ctx, objects, settings, matched))
}

async fn decided(
    req: &ClientRequest,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    matched: Matched<'_>,
) -> Conclusion {
    let rule = matched.rule;
    let known = Known {
        config: &settings.config,
        jwt_key: settings.jwt_key.as_ref(),
        memory: &Isolate,
    };
    let arrival = Arrival {
        matched,
        request: req,
        now_ms: now_ms(),
    };
    let conclusion = match gate::plan(&known, arrival, &mut Random) {
        Plan::Done(conclusion) => conclusion,
        Plan::Ask(ask) => climb(objects, ctx, Stack::single(ask)).await,
        Plan::Stack(stack) => climb(objects, ctx, stack).await,
    };
    apply(&rule.id, &conclusion);
    for request in &conclusion.settle_now {
        settle_later(ctx, objects, request.clone());
    }
    conclusion
}

/// Makes the calls the plan names, in turn (a hot key's from the
/// isolate's admission blocks where the plan allows), until its layers
/// have all answered or one refused; a split quota's part found full is
/// remembered, so a flood after a sell-out costs no calls.
async fn climb(objects: &Objects, ctx: &Context, mut stack: Stack<'_>) -> Conclusion {
    let client = objects.with_timeout(stack.deadline_ms);
    while let Some(request) = stack.next_call() {
        let local = stack.next_local();
        let answer = blocks::check(&client, ctx, request, local).await;
        if let Some((part, full)) = stack.answer(answer.map_err(|e| e.to_string())) {
            isolate::cache_refusal(&part, &full, now_ms());
        }
    }
    stack.conclude(now_ms())
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
    if let Some(object) = &conclusion.invited {
        isolate::invited(object);
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
    room_pass: Option<String>,
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
        room_pass,
    };
    let response = proxy::forward(req, settings, forward).await?;
    for settle in settle {
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
/// answer already (or, for a layer, will have it without waiting). A
/// settle that never arrives lapses into a kept reservation.
pub fn settle_later(ctx: &Context, objects: &Objects, request: SettleRequest) {
    // Held pending in this isolate's blocks: settled here, no call.
    if blocks::settle(&request) {
        return;
    }
    let objects = objects.clone();
    ctx.wait_until(async move {
        if let Err(e) = objects.settle(&request).await {
            console_error!("sluice: could not settle a reservation: {e}");
        }
    });
}
