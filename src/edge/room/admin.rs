//! `GET {prefix}/admin/rooms` and `GET {prefix}/admin/rooms/{rule}`: each
//! room's figures, asked of all its shards at once (`crate::room::figures`
//! sums them); `DELETE {prefix}/admin/rooms/{rule}`, a reset of the room's
//! line after a rehearsal (every shard's, then its figures); and a room's
//! state, written to and read from its shards for the rule state routes
//! (`edge::admin::rules`).

use crate::json;
use worker::{Headers, Response, Result};

use super::super::admin::views::{respond_parts, ShardState, StateView};
use super::super::client::Objects;
use super::super::clock::now_ms;
use super::super::quota::Shown;
use super::super::respond;
use super::visit;
use crate::config::room::WaitingRoom;
use crate::config::{Config, Rule};
use crate::control::{strictest, Control};
use crate::http::problem::{Code, Problem};
use crate::objects::name::ObjectName;
use crate::room::figures::{report, Report};
use crate::room::protocol::{Figures, RoomCall, RoomReply};
use crate::room::visit::terms;

/// One room's figures, after a reset of its line with `reset`; a 404
/// naming the field when `rule` is no rule, or no room.
pub async fn one(objects: &Objects, config: &Config, rule: &str, reset: bool) -> Result<Response> {
    let Some(found) = config.rules.iter().find(|r| r.id == rule) else {
        let rooms: Vec<&str> = rooms(config).map(|(r, _)| r.id.as_str()).collect();
        return respond::problem(
            &Problem::new(
                Code::NotFound,
                format!("no rule {rule:?}; the waiting rooms are {rooms:?}"),
            )
            .with("field", "rule"),
        );
    };
    let Some(room) = &found.room else {
        return respond::problem(
            &Problem::new(
                Code::NotFound,
                format!("rule {rule:?} is not a waiting room"),
            )
            .with("field", "rule"),
        );
    };
    let answers = ask(objects, &found.id, room, reset).await;
    let report = report(&found.id, room, answers, now_ms());
    respond::json(&report, Headers::new())
}

/// Every room's figures, in rule order.
pub async fn all(objects: &Objects, config: &Config) -> Result<Response> {
    let mut reports = Vec::new();
    for (rule, room) in rooms(config) {
        reports.push(figures(objects, &rule.id, room).await);
    }
    respond::json(&json!({ "rooms": reports }), Headers::new())
}

fn rooms(config: &Config) -> impl Iterator<Item = (&Rule, &WaitingRoom)> {
    config
        .rules
        .iter()
        .filter_map(|rule| Some((rule, rule.room.as_ref()?)))
}

/// The room's figures, every shard asked at once.
pub async fn figures<'a>(objects: &Objects, rule: &'a str, config: &WaitingRoom) -> Report<'a> {
    let answers = ask(objects, rule, config, false).await;
    report(rule, config, answers, now_ms())
}

/// Every shard's figures, after a reset of its line with `reset`, or why
/// it did not answer.
async fn ask(
    objects: &Objects,
    rule: &str,
    config: &WaitingRoom,
    reset: bool,
) -> Vec<std::result::Result<Figures, String>> {
    let calls: Vec<_> = (0..config.shards)
        .map(|shard| {
            let terms = terms(config, shard);
            let call = match reset {
                true => RoomCall::Reset(terms),
                false => RoomCall::Inspect(terms),
            };
            (ObjectName::room_shard(rule, shard), call)
        })
        .collect();
    let answers = objects.rooms(&calls).await.into_iter();
    answers
        .map(|answer| match answer {
            Ok(RoomReply::Figures(figures)) => Ok(figures),
            Ok(other) => Err(format!("the shard answered {}", other.name())),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

/// `PUT {prefix}/admin/rules/{rule}/state` of a waiting room: the state is
/// written to every shard (one call each, at once), which holds it in its
/// storage and applies it from its next decision; each answers the state
/// it replaced. This isolate keeps each shard's answer as its view, so it
/// applies the change at once; other isolates within their view's life.
/// A shard that did not answer is named (`503`, `failed`); sending the
/// change again is safe.
pub async fn write_state(
    objects: &Objects,
    rule: &str,
    config: &WaitingRoom,
    control: Control,
) -> Result<Response> {
    let calls: Vec<_> = (0..config.shards)
        .map(|shard| {
            let call = RoomCall::Control(terms(config, shard), control.clone());
            (ObjectName::room_shard(rule, shard), call)
        })
        .collect();
    let answers = objects.rooms(&calls).await;
    let now = now_ms();
    let mut previous = Vec::with_capacity(answers.len());
    for (shard, answer) in (0u32..).zip(answers) {
        previous.push(match answer {
            Ok(RoomReply::Control(held, status)) => {
                visit::remember(rule, shard, status, now);
                Ok(held)
            }
            Ok(other) => Err(format!("the shard answered {}", other.name())),
            Err(e) => Err(e.to_string()),
        });
    }
    let mut failed = Vec::new();
    let shards = (0u32..)
        .zip(&previous)
        .map(|(shard, answer)| match answer {
            Ok(held) => ShardState {
                previous: Some(Shown::of(held.as_ref())),
                ..ShardState::of(rule, shard)
            },
            Err(error) => {
                failed.push(shard);
                ShardState {
                    error: Some(error.clone()),
                    ..ShardState::of(rule, shard)
                }
            }
        })
        .collect();
    let mut view = StateView::new(rule, Some(&control), "shards");
    view.shards = Some(shards);
    respond_parts(&view, "shards", failed)
}

/// `GET {prefix}/admin/rules/{rule}[/state]` of a waiting room: each
/// shard's state, asked of all at once, and the strictest of them (shards
/// disagree only while a change is being written, or when it did not
/// reach them all: `agree` says so). A shard that does not answer is
/// named in its line; when none answers, `503`.
pub async fn read_state(objects: &Objects, rule: &str, config: &WaitingRoom) -> Result<Response> {
    let answers = ask(objects, rule, config, false).await.into_iter();
    let answers: Vec<_> = answers.map(|a| a.map(|f| f.status.control)).collect();
    let held: Vec<Option<&Control>> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().map(Option::as_ref))
        .collect();
    if held.is_empty() {
        let failed: Vec<u32> = (0..config.shards).collect();
        return respond_parts(&(), "shards", failed);
    }
    let strictest = strictest(held.iter().flatten().copied());
    let agree = held
        .iter()
        .all(|c| c.map(|c| c.state) == held[0].map(|c| c.state));
    let shards = (0u32..)
        .zip(&answers)
        .map(|(shard, answer)| match answer {
            Ok(control) => ShardState {
                state: Some(Shown::of(control.as_ref())),
                ..ShardState::of(rule, shard)
            },
            Err(error) => ShardState {
                error: Some(error.clone()),
                ..ShardState::of(rule, shard)
            },
        })
        .collect();
    let mut view = StateView::new(rule, strictest, "shards");
    view.agree = Some(agree);
    view.shards = Some(shards);
    respond::json(&view, Headers::new())
}
