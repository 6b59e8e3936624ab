//! The I/O around `crate::room::visit`: the isolate's view of each shard,
//! the one call to a shard a request may need, and then the origin (with
//! a session) or the waiting page (with a ticket). The origin's
//! `Sluice-Room: end` is taken out of its answer and ends the session in
//! its shard before the answer goes on.

use std::cell::RefCell;
use std::net::IpAddr;

use worker::{console_error, Headers, Response, Result};

use super::super::client::{random_pair, Objects};
use super::super::clock::now_ms;
use super::super::endpoints;
use super::super::incoming::ClientRequest;
use super::super::proxy::{self, Forward};
use super::super::respond;
use super::super::settings::Settings;
use crate::config::room::WaitingRoom;
use crate::config::Rule;
use crate::control::Control;
use crate::http::problem::{Code, Problem};
use crate::http::Incoming;
use crate::objects::name::ObjectName;
use crate::room::cookie::{self, Pass, Signed};
use crate::room::page::{self, Standing};
use crate::room::protocol::{RoomCall, RoomReply};
use crate::room::shard::{Holding, Status};
use crate::room::views::Views;
use crate::room::visit::{Cookie, Room, Step};

/// The field an origin answers with to end the session of the request it
/// answers. Sluice takes it out: visitors never see it.
pub const ROOM_FIELD: &str = "sluice-room";

thread_local! {
    static VIEWS: RefCell<Views> = RefCell::new(Views::default());
}

/// A request the waiting room of `rule` stands in front of.
pub async fn serve(
    req: ClientRequest,
    objects: &Objects,
    settings: &Settings,
    rule: &Rule,
    config: &WaitingRoom,
    ip: Option<IpAddr>,
) -> Result<Response> {
    if let Some(ip) = ip {
        if settings.config.allow.contains(ip) || rule.allow.contains(ip) {
            let response = proxy::forward(req, settings, Forward::untouched()).await?;
            return without_room_field(response);
        }
        if rule.deny.contains(ip) {
            return respond::problem(&crate::gate::denied(&rule.id));
        }
    }
    let Some(key) = settings.room_key(&rule.id) else {
        return respond::problem(&Problem::new(
            Code::Internal,
            "the waiting room has no signing key",
        ));
    };
    let room = Room {
        id: &rule.id,
        config,
        key,
    };
    let secure = req.url().starts_with("https:");
    let now = now_ms();
    let held = room.held(req.header("cookie").as_deref(), now);
    let pick = random_pair().unwrap_or((0, 0));
    let step = VIEWS.with(|views| room.plan(held, now, &views.borrow(), pick));
    let step = match step {
        Step::Ask { shard, holding } => {
            VIEWS.with(|views| views.borrow_mut().asking(room.id, shard, now));
            ask(objects, &room, held, shard, holding).await
        }
        step => Some(step),
    };
    match step {
        Some(Step::Pass { pass, cookie }) => {
            pass_on(req, objects, settings, &room, pass, cookie, secure).await
        }
        Some(Step::Wait {
            standing,
            cookie,
            paused,
        }) => {
            let json = page::wants_json(req.header("accept").as_deref());
            waiting(&room, standing, &cookie, paused.as_deref(), json, secure)
        }
        Some(Step::Closed(control)) => {
            let json = page::wants_json(req.header("accept").as_deref());
            closed(&room, &control, json)
        }
        Some(Step::Ask { .. }) | None => {
            let mut response = endpoints::unavailable()?;
            response
                .headers_mut()
                .set("retry-after", &(config.refresh_ms / 1000).to_string())?;
            Ok(response)
        }
    }
}

/// Asks shard `shard` and concludes; when it cannot answer, keeps what
/// holds without it: a session until its end, a ticket's place from the
/// last view of its shard. `None` when nothing does.
async fn ask(
    objects: &Objects,
    room: &Room<'_>,
    held: Option<Signed>,
    shard: u32,
    holding: Holding,
) -> Option<Step> {
    let call = RoomCall::Visit(room.terms(shard), holding);
    let answer = objects
        .room(&ObjectName::room_shard(room.id, shard), &call)
        .await;
    let now = now_ms();
    match answer {
        Ok(RoomReply::Visit(turn, status)) => {
            let step = room.conclude(held, shard, turn, &status, now);
            remember(room.id, shard, status, now);
            return Some(step);
        }
        Ok(other) => console_error!("sluice: room shard answered a visit with {}", other.name()),
        Err(e) => console_error!("sluice: room shard {shard} of {} failed: {e}", room.id),
    }
    VIEWS.with(|views| room.without_shard(held, now, &views.borrow()))
}

/// Forwards a visitor with a session; renews its cookie, and ends its
/// session when the origin says so.
async fn pass_on(
    req: ClientRequest,
    objects: &Objects,
    settings: &Settings,
    room: &Room<'_>,
    pass: Pass,
    cookie: Option<Cookie>,
    secure: bool,
) -> Result<Response> {
    let session = format!("{}.{}", pass.shard, pass.id);
    let forward = Forward {
        rule_id: Some(room.id),
        key: Some(&session),
        headers: Headers::new(),
    };
    let response = proxy::forward(req, settings, forward).await?;
    let field = response.headers().get(ROOM_FIELD)?;
    if field.is_none() && cookie.is_none() {
        return Ok(response);
    }
    let mut response = respond::with_mutable_headers(response);
    let headers = response.headers_mut();
    headers.delete(ROOM_FIELD)?;
    let ended = field.is_some_and(|value| value.trim().eq_ignore_ascii_case("end"));
    let set = if ended {
        end(objects, room, pass).await;
        cookie::set_cookie(room.id, "", 0, secure)
    } else if let Some(cookie) = cookie {
        cookie::set_cookie(room.id, &cookie.value, cookie.max_age_s, secure)
    } else {
        return Ok(response);
    };
    headers.append("set-cookie", &set)?;
    Ok(response)
}

/// Ends a session in its shard, which offers its place at once. On
/// failure the session lapses at its end, as an idle one does.
async fn end(objects: &Objects, room: &Room<'_>, pass: Pass) {
    let call = RoomCall::End(room.terms(pass.shard), pass.id);
    let shard = ObjectName::room_shard(room.id, pass.shard);
    match objects.room(&shard, &call).await {
        Ok(RoomReply::Ended(_, status)) => remember(room.id, pass.shard, status, now_ms()),
        Ok(other) => console_error!("sluice: room shard answered an end with {}", other.name()),
        Err(e) => console_error!("sluice: could not end a session of {}: {e}", room.id),
    }
}

/// Keeps what shard `shard` of room `room` answered as this isolate's view
/// of it: a visit's answer, an end's, an operator's change of state (so
/// that the isolate serving the change applies it at once).
pub fn remember(room: &str, shard: u32, status: Status, now: u64) {
    VIEWS.with(|views| views.borrow_mut().remember(room, shard, status, now));
}

/// The waiting page (or its JSON), with the ticket's cookie: `503` and
/// `Retry-After` say "come back then" to any client, and the page says it
/// to people, a paused room's page with the operator's reason.
fn waiting(
    room: &Room<'_>,
    standing: Standing,
    ticket: &Cookie,
    paused: Option<&str>,
    json: bool,
    secure: bool,
) -> Result<Response> {
    let refresh_s = room.config.refresh_ms / 1000;
    let headers = page_headers()?;
    let body = if json {
        headers.set("content-type", "application/json")?;
        headers.set(
            "content-security-policy",
            "default-src 'none'; frame-ancestors 'none'",
        )?;
        page::json(standing, refresh_s, paused)
    } else {
        headers.set("content-type", "text/html; charset=utf-8")?;
        headers.set("content-security-policy", page::policy())?;
        page::html(standing, refresh_s, paused)
    };
    headers.set("retry-after", &refresh_s.to_string())?;
    headers.append(
        "set-cookie",
        &cookie::set_cookie(room.id, &ticket.value, ticket.max_age_s, secure),
    )?;
    Ok(Response::ok(body)?.with_status(503).with_headers(headers))
}

/// A closed room's answer: `410`, code `closed`, without `Retry-After`, as
/// a closed rule answers (problem details, for a client that asks for
/// JSON), or for anyone else Sluice's page saying so. Whatever cookie the
/// visitor holds stays: a ticket keeps its place should the room open
/// again.
fn closed(room: &Room<'_>, control: &Control, json: bool) -> Result<Response> {
    let answer = crate::gate::halted(room.id, control);
    if json {
        return respond::answer(&answer);
    }
    let headers = page_headers()?;
    headers.set("content-type", "text/html; charset=utf-8")?;
    headers.set("content-security-policy", page::policy())?;
    Ok(Response::ok(page::closed_html(&control.reason))?
        .with_status(answer.problem.status)
        .with_headers(headers))
}

/// What every page of the room is sent with: never cached, never sniffed,
/// never telling where the visitor came from.
fn page_headers() -> Result<Headers> {
    let headers = Headers::new();
    headers.set("cache-control", "no-store")?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    Ok(headers)
}

/// The origin's answer without the room's field, for a caller the room
/// lets through untouched (an allow list).
fn without_room_field(response: Response) -> Result<Response> {
    if !response.headers().has(ROOM_FIELD)? {
        return Ok(response);
    }
    let mut response = respond::with_mutable_headers(response);
    response.headers_mut().delete(ROOM_FIELD)?;
    Ok(response)
}
