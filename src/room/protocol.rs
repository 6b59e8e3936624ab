//! What the worker and a room's shard say to each other: one JSON body per
//! internal `fetch`, tagged as `objects::protocol`'s calls are. Every call
//! carries the shard's terms, so a shard always runs the deployed config
//! and keeps it for its alarm. Variants hold their values by position
//! (`{"visit": [terms, holding]}`): a variant with named fields is a struct
//! of its own to serde, and each struct's reader costs the wasm about 2 KB.
//! Written by hand (`write.rs`, the JSON serde's derives write) and read by
//! hand (`read.rs`).

mod read;
mod write;

use serde::Serialize;

use super::shard::{Holding, Sample, Status, Terms, Turn};
use crate::control::Control;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomCall {
    /// A visitor's request; answered with [`RoomReply::Visit`].
    Visit(Terms, Holding),
    /// The origin ended a session, by id; answered with [`RoomReply::Ended`].
    End(Terms, u64),
    /// An operator's look; answered with [`RoomReply::Figures`].
    Inspect(Terms),
    /// An operator's state for the room (open, paused, closed); answered
    /// with [`RoomReply::Control`].
    Control(Terms, Control),
    /// An operator's reset of the room's line; answered with
    /// [`RoomReply::Figures`].
    Reset(Terms),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomReply {
    Visit(Turn, Status),
    /// Whether the session was live, and the shard after.
    Ended(bool, Status),
    Figures(Figures),
    /// The state the shard held before (`None`: open), and the shard after.
    Control(Option<Control>, Status),
}

/// A shard's figures for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figures {
    pub status: Status,
    /// The last hour, a sample a minute, oldest first.
    pub history: Vec<Sample>,
    /// Calls this instance of the shard has served, so that tests and the
    /// benchmarks can see what waiting visitors cost it.
    pub calls: u64,
}

impl RoomCall {
    pub fn terms(&self) -> Terms {
        match self {
            RoomCall::Visit(terms, _)
            | RoomCall::End(terms, _)
            | RoomCall::Inspect(terms)
            | RoomCall::Control(terms, _)
            | RoomCall::Reset(terms) => *terms,
        }
    }

    /// The call's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            RoomCall::Visit(..) => "visit",
            RoomCall::End(..) => "end",
            RoomCall::Inspect(_) => "inspect",
            RoomCall::Control(..) => "control",
            RoomCall::Reset(_) => "reset",
        }
    }
}

impl RoomReply {
    /// The reply's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            RoomReply::Visit(..) => "visit",
            RoomReply::Ended(..) => "ended",
            RoomReply::Figures(_) => "figures",
            RoomReply::Control(..) => "control",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::RuleState;
    use crate::room::shard::{Counters, Number, Session};

    #[test]
    fn calls_travel_as_json() {
        let terms = Terms {
            places: 5,
            per_minute: 10,
            session_ms: 300_000,
            grace_ms: 44_000,
            opens_at_ms: None,
        };
        let call = RoomCall::Visit(terms, Holding::Ticket(Number::Pre(3)));
        let text = crate::json::written(&call);
        assert!(text.starts_with(r#"{"visit":[{"places":5,"#), "{text}");
        assert!(text.ends_with(r#"},{"ticket":{"pre":3}}]}"#), "{text}");
        assert_eq!(RoomCall::from_json(&text).unwrap(), call);
        assert_eq!(call.terms(), terms);
        for bad in [
            r#"{"visit":[{}]}"#,
            r#"{"visit":[{"places":1,"per_minute":1,"session_ms":1,"grace_ms":1}]}"#,
            r#"{"end":[{"places":1,"per_minute":1,"session_ms":1,"grace_ms":1},1,2]}"#,
            r#"{"inspect":[{"places":1,"per_minute":1,"session_ms":1,"grace_ms":1}]}"#,
            r#"{"visit":[{"places":1,"per_minute":1,"session_ms":1,"grace_ms":1},"ticket"]}"#,
        ] {
            assert!(RoomCall::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_call_and_reply_round_trips() {
        let terms = Terms {
            places: 5,
            per_minute: 10,
            session_ms: 300_000,
            grace_ms: 44_000,
            opens_at_ms: Some(7),
        };
        let control = Control {
            state: RuleState::Paused,
            reason: "stock count".into(),
            set_ms: 5,
        };
        for call in [
            RoomCall::Visit(terms, Holding::Nothing),
            RoomCall::Visit(terms, Holding::Opened),
            RoomCall::Visit(terms, Holding::Ticket(Number::Place(9))),
            RoomCall::Visit(terms, Holding::Session(4)),
            RoomCall::End(terms, 7),
            RoomCall::Inspect(terms),
            RoomCall::Control(terms, control.clone()),
            RoomCall::Reset(terms),
        ] {
            let text = crate::json::written(&call);
            assert_eq!(RoomCall::from_json(&text).unwrap(), call, "{text}");
        }
        let status = |control: Option<Control>| Status {
            counters: Counters {
                next: 1,
                serving: 2,
                pre: 3,
                opened: true,
                seed: 4,
                start: 1,
                up_ms: 6,
            },
            places: 5,
            per_minute: 6,
            session_ms: 7,
            active: 8,
            offered: 9,
            admitted: 10,
            control,
        };
        let session = Session {
            id: 1,
            started_ms: 2,
            expires_ms: 3,
        };
        let wait = Turn::Wait {
            number: Number::Pre(2),
            fresh: true,
        };
        for reply in [
            RoomReply::Visit(Turn::Session(session), status(None)),
            RoomReply::Visit(wait, status(Some(control.clone()))),
            RoomReply::Visit(Turn::Closed, status(None)),
            RoomReply::Visit(Turn::NotOpen, status(None)),
            RoomReply::Ended(true, status(None)),
            RoomReply::Figures(Figures {
                status: status(None),
                history: vec![Sample {
                    minute_ms: 60_000,
                    waiting: 1,
                    active: 2,
                    admitted: 3,
                }],
                calls: 4,
            }),
            RoomReply::Control(Some(control.clone()), status(Some(control))),
            RoomReply::Control(None, status(None)),
        ] {
            let text = crate::json::written(&reply);
            assert_eq!(RoomReply::from_json(&text).unwrap(), reply, "{text}");
        }
    }
}
