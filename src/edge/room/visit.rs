//! The I/O around `crate::room::visit`: the isolate's view of each shard,
//! the room rule's join limit (asked as any rule's limit, through
//! `edge::gate`), a challenge's puzzle spent, the one call to a shard a
//! request may need, and then the origin (with a session and its
//! `Sluice-Room-Pass`; through the rule's own limits for a rule behind
//! the room) or the waiting page (with a ticket). The origin's
//! `Sluice-Room: end` is taken out of its answer and ends the session in
//! its shard before the answer goes on.

use std::cell::RefCell;

use worker::{console_error, Context, Headers, Response, Result};

use super::super::client::{random_pair, Objects};
use super::super::clock::now_ms;
use super::super::endpoints;
use super::super::gate::{decide, limited};
use super::super::incoming::ClientRequest;
use super::super::isolate;
use super::super::proxy::{self, Forward};
use super::super::respond;
use super::super::settings::Settings;
use crate::config::room::WaitingRoom;
use crate::config::Rule;
use crate::control::Control;
use crate::gate::{Matched, Reply};
use crate::http::problem::{Code, Problem};
use crate::http::Incoming;
use crate::objects::name::ObjectName;
use crate::objects::protocol::CheckRequest;
use crate::room::arrival::may_join;
use crate::room::challenge;
use crate::room::cookie::{self, Pass, Signed, Signer};
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

/// A request the waiting room `owner` (its rule and config) stands in
/// front of: one of the room's own paths, or of a rule behind it
/// (`matched.rule`, whose own limits apply once the visitor is in).
pub async fn serve(
    req: ClientRequest,
    ctx: &Context,
    objects: &Objects,
    settings: &Settings,
    (owner, config): (&Rule, &WaitingRoom),
    matched: Matched<'_>,
) -> Result<Response> {
    let rule = matched.rule;
    let behind = rule.room.is_none();
    if let Some(ip) = matched.ip {
        if settings.config.allow.contains(ip) || rule.allow.contains(ip) {
            let response = match behind {
                true => limited(req, ctx, objects, settings, matched, None).await?,
                false => proxy::forward(req, settings, Forward::untouched()).await?,
            };
            return without_room_field(response);
        }
        if rule.deny.contains(ip) {
            return respond::problem(&crate::gate::denied(&rule.id));
        }
    }
    if let Some(banned) = isolate::address_banned(matched.ip, settings.config.ipv6_prefix) {
        return respond::answer(&banned);
    }
    let Some(keys) = settings.room_keys(&owner.id) else {
        return respond::problem(&Problem::new(
            Code::Internal,
            "the waiting room has no signing key",
        ));
    };
    let room = Room {
        id: &owner.id,
        config,
        key: &keys.cookies,
    };
    let secure = req.url().starts_with("https:");
    let json = page::wants_json(req.header("accept").as_deref());
    let now = now_ms();
    let field = req.header("cookie").unwrap_or_default();
    let held = room.held(Some(&field), now);
    let answered = cookie::values(&field, &cookie::work_name(room.id)).next();
    let pick = random_pair().unwrap_or((0, 0));
    let newcomer = !matches!(held, Some(Signed::Ticket(_) | Signed::Session(_)));
    let id = (u64::from(pick.0) << 32) | u64::from(pick.1);
    let mut spend = None;
    if newcomer {
        let joins = may_join(req.method(), |name| req.header(name));
        match room.admit(joins, answered, now, id) {
            Ok(puzzle) => spend = puzzle,
            Err(step) => return render(&room, step, json, secure, answered.is_some()),
        }
    }
    let step = VIEWS.with(|views| room.plan(held, now, &views.borrow(), pick));
    let step = match step {
        Step::Ask { shard, holding } => {
            if let Holding::Nothing | Holding::Opened = holding {
                // A join: the room rule's own limit (and before the
                // opening its pre-queue cap), then the puzzle spent.
                let join = Matched {
                    rule: owner,
                    also: holding == Holding::Nothing,
                    ..matched
                };
                if let Reply::Answer(answer) =
                    decide(&req, ctx, objects, settings, join).await.reply
                {
                    return respond::answer(&answer);
                }
                if let Some(puzzle) = spend {
                    if !spent(objects, room.id, puzzle).await {
                        // A copy: refused, with a puzzle of its own.
                        let again = room.admit(true, None, now, id).err();
                        return render(&room, again.unwrap_or(Step::NoPlace), json, secure, true);
                    }
                }
            }
            VIEWS.with(|views| views.borrow_mut().asking(room.id, shard, now));
            ask(objects, &room, held, shard, holding).await
        }
        step => Some(step),
    };
    let Some(Step::Pass { pass, cookie }) = step else {
        let step = step.unwrap_or(Step::Ask {
            shard: 0,
            holding: Holding::Nothing,
        });
        return render(&room, step, json, secure, answered.is_some());
    };
    let pass_value = Signer {
        room: room.id,
        key: &keys.pass,
    }
    .pass(&pass);
    let response = match behind {
        true => limited(req, ctx, objects, settings, matched, Some(pass_value)).await?,
        false => {
            let session = format!("{}.{}", pass.shard, pass.id);
            let forward = Forward {
                rule_id: Some(room.id),
                key: Some(&session),
                headers: Headers::new(),
                room_pass: Some(pass_value),
            };
            proxy::forward(req, settings, forward).await?
        }
    };
    let response = passed(response, objects, &room, pass, cookie, secure).await?;
    match answered {
        Some(_) => with_cookie(response, &forget_work(room.id, secure)),
        None => Ok(response),
    }
}

/// Counts puzzle `id` of room `room` as spent: true the first time, false
/// for a copy (or when its object cannot say: refuse rather than admit).
async fn spent(objects: &Objects, room: &str, id: u64) -> bool {
    let (object, policies) = challenge::spent(room, id);
    let request = CheckRequest::new(object.as_str(), &policies, 1, None);
    match objects.check_request(&request).await {
        Ok(outcome) => outcome.allowed,
        Err(e) => {
            console_error!("sluice: could not spend a puzzle of {room}: {e}");
            false
        }
    }
}

/// The answer for a step that does not reach the origin; `forget` deletes
/// a work cookie the request brought.
fn render(room: &Room<'_>, step: Step, json: bool, secure: bool, forget: bool) -> Result<Response> {
    let response = match step {
        Step::Wait {
            standing,
            cookie,
            paused,
        } => waiting(
            room,
            standing,
            cookie.as_ref(),
            paused.as_deref(),
            json,
            secure,
        ),
        Step::Closed(control) => closed(room, &control, json),
        Step::Challenge(puzzle) => challenge(room, &puzzle, json, forget),
        Step::NoPlace => respond::problem(
            &Problem::new(
                Code::RoomRequired,
                format!(
                    "this needs a session of the waiting room {}: a page load joins it",
                    room.id
                ),
            )
            .with("room", room.id),
        ),
        Step::Pass { .. } | Step::Ask { .. } => {
            let mut response = endpoints::unavailable()?;
            response
                .headers_mut()
                .set("retry-after", &(room.config.refresh_ms / 1000).to_string())?;
            Ok(response)
        }
    }?;
    match forget {
        true => with_cookie(response, &forget_work(room.id, secure)),
        false => Ok(response),
    }
}

/// The challenge's page (or its JSON): `503`, no ticket. A client whose
/// answer is wrong, expired or spent already gets `400`, for JSON a
/// problem naming the work cookie, and the puzzle to solve instead.
fn challenge(room: &Room<'_>, puzzle: &str, json: bool, failed: bool) -> Result<Response> {
    let bits = room.config.work_bits.unwrap_or(0);
    let name = cookie::work_name(room.id);
    let headers = page_headers(json, page::challenge_policy())?;
    if failed && json {
        let problem = Problem::invalid(
            &name,
            "the answer solves no live puzzle of this room, or was used already: solve this one",
        );
        let problem = problem.with("puzzle", puzzle).with("work", bits);
        return respond::problem_with(&problem.with("cookie", name), headers);
    }
    let body = match json {
        true => page::challenge_json(puzzle, bits, &name),
        false => page::challenge_html(puzzle, bits, &name),
    };
    let status = if failed { 400 } else { 503 };
    Ok(Response::ok(body)?
        .with_status(status)
        .with_headers(headers))
}

/// A `Set-Cookie` that deletes the work cookie once it has served.
fn forget_work(room: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{}=; Path=/; Max-Age=0; SameSite=Strict{secure}",
        cookie::work_name(room)
    )
}

/// `response` with one more `Set-Cookie`.
fn with_cookie(response: Response, set: &str) -> Result<Response> {
    let mut response = respond::with_mutable_headers(response);
    response.headers_mut().append("set-cookie", set)?;
    Ok(response)
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

/// The answer to a visitor with a session: its cookie renewed, and its
/// session ended when the origin says so.
async fn passed(
    response: Response,
    objects: &Objects,
    room: &Room<'_>,
    pass: Pass,
    cookie: Option<Cookie>,
    secure: bool,
) -> Result<Response> {
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
    ticket: Option<&Cookie>,
    paused: Option<&str>,
    json: bool,
    secure: bool,
) -> Result<Response> {
    let refresh_s = page::refresh_s(standing, room.config.refresh_ms / 1000);
    let headers = page_headers(json, page::policy())?;
    let body = match json {
        true => page::json(standing, refresh_s, paused),
        false => page::html(standing, refresh_s, paused),
    };
    headers.set("retry-after", &refresh_s.to_string())?;
    if let Some(ticket) = ticket {
        headers.append(
            "set-cookie",
            &cookie::set_cookie(room.id, &ticket.value, ticket.max_age_s, secure),
        )?;
    }
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
    let headers = page_headers(false, page::policy())?;
    Ok(Response::ok(page::closed_html(&control.reason))?
        .with_status(answer.problem.status)
        .with_headers(headers))
}

/// What every page of the room (HTML under `policy`, or JSON) is sent
/// with: never cached, never sniffed, never telling where the visitor
/// came from.
fn page_headers(json: bool, policy: &str) -> Result<Headers> {
    let headers = Headers::new();
    headers.set("cache-control", "no-store")?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    let (kind, policy) = match json {
        true => (
            "application/json",
            "default-src 'none'; frame-ancestors 'none'",
        ),
        false => ("text/html; charset=utf-8", policy),
    };
    headers.set("content-type", kind)?;
    headers.set("content-security-policy", policy)?;
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
