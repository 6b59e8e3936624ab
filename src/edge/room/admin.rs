//! `GET {prefix}/admin/rooms` and `GET {prefix}/admin/rooms/{rule}`: each
//! room's figures, asked of all its shards at once (`crate::room::figures`
//! sums them).

use serde_json::json;
use worker::{Headers, Response, Result};

use super::super::client::Objects;
use super::super::clock::now_ms;
use super::super::respond;
use crate::config::room::WaitingRoom;
use crate::config::{Config, Rule};
use crate::http::problem::{Code, Problem};
use crate::objects::name::ObjectName;
use crate::room::figures::{report, Report};
use crate::room::protocol::{RoomCall, RoomReply};
use crate::room::visit::terms;

/// One room's figures; a 404 naming the field when `rule` is no rule, or
/// no room.
pub async fn one(objects: &Objects, config: &Config, rule: &str) -> Result<Response> {
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
    let report = figures(objects, &found.id, room).await;
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

async fn figures<'a>(objects: &Objects, rule: &'a str, config: &WaitingRoom) -> Report<'a> {
    let calls: Vec<_> = (0..config.shards)
        .map(|shard| {
            let call = RoomCall::Inspect(terms(config, shard));
            (ObjectName::room_shard(rule, shard), call)
        })
        .collect();
    let answers = objects
        .rooms(&calls)
        .await
        .into_iter()
        .map(|answer| match answer {
            Ok(RoomReply::Figures(figures)) => Ok(figures),
            Ok(other) => Err(format!("the shard answered {}", other.name())),
            Err(e) => Err(e.to_string()),
        })
        .collect();
    report(rule, config, answers, now_ms())
}
