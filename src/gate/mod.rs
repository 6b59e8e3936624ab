//! A request that a rule matched, decided without I/O. [`plan`] turns the
//! request into what it needs (an answer at once, or a question to one key
//! object, or to one or two parts of a split quota), and [`Ask::conclude`]
//! turns an object's outcome into what the isolate keeps, reports and
//! answers. `edge/gate.rs` only does the I/O between them, so every branch
//! of the request path runs in host tests (`tests.rs`).

mod conclude;
mod halt;
mod layers;
pub mod local;
mod plan;
#[cfg(test)]
mod tests;

pub use conclude::{manually_banned, sooner, unavailable};
pub use halt::halted;
pub use layers::{api_check, key_climb, Climb, KeyCall, Layered, Passed, Stack, Stop};
pub use plan::{denied, plan, Arrival, Ask, Chance, Judged, Known, Matched, Memory, Plan, Try};

use crate::config::count::CountedStatuses;
use crate::http::headers::Fields;
use crate::http::problem::Problem;
use crate::isolate::banlist::BanRecord;
use crate::isolate::stats::Verdict;
use crate::ledger::Outcome;
use crate::objects::name::ObjectName;
use crate::objects::protocol::SettleRequest;

/// Everything that follows from one request's decision; the edge applies
/// it in this order, then builds the reply.
#[derive(Debug, PartialEq)]
pub struct Conclusion {
    /// The rule's verdict for a key, for the isolate's outbox; `None` when
    /// the request never reached a decision (denied, bad token, no key).
    pub record: Option<(String, Verdict)>,
    /// A ban this decision started, for the hubs' ban list.
    pub ban_started: Option<BanRecord>,
    /// A refusal the isolate answers itself until its retry time.
    pub cache: Option<(ObjectName, Outcome)>,
    /// The object whose cached refusal this answer told its next moment:
    /// the isolate hands that moment out, so the next refusal is told the
    /// one after.
    pub invited: Option<ObjectName>,
    pub log: Option<Log>,
    pub reply: Reply,
    /// Reservations of a rule's layers to keep or refund at once, in the
    /// background: every layer has answered, so what they hold is known
    /// (the origin's answer settles only layers that count by it).
    pub settle_now: Vec<SettleRequest>,
}

impl Conclusion {
    /// Just a reply: nothing recorded, cached, logged or settled.
    fn reply(reply: Reply) -> Conclusion {
        Conclusion {
            record: None,
            ban_started: None,
            cache: None,
            invited: None,
            log: None,
            reply,
            settle_now: Vec::new(),
        }
    }
}

/// A line for the Workers log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Log {
    Info(String),
    Error(String),
}

/// The response to build.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// Sluice answers; the origin never sees the request.
    Answer(Answer),
    /// The origin answers, with fields added.
    Forward(Pass),
}

/// A problem Sluice answers with, and the fields that go with it
/// (RateLimit, Retry-After, WWW-Authenticate).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub problem: Problem,
    pub fields: Fields,
}

impl From<Problem> for Answer {
    fn from(problem: Problem) -> Answer {
        Answer {
            problem,
            fields: Fields::new(),
        }
    }
}

impl Reply {
    /// Forward with nothing added: no rule limits this request.
    pub fn untouched() -> Reply {
        Reply::Forward(Pass::default())
    }
}

/// A request sent on to the origin.
#[derive(Debug, Default, PartialEq)]
pub struct Pass {
    /// Fields added to the origin's response (RateLimit, Sluice-Shadow...).
    pub fields: Fields,
    /// The key the rule limited, for the demo origin to echo with the
    /// rule's id; `None` when no rule limits the request.
    pub key: Option<String>,
    /// A lease to release once the response is delivered: object, lease id.
    pub release: Option<(ObjectName, String)>,
    /// Reservations to keep or refund by the origin's status, one per
    /// layer that counts by answer.
    pub settle: Vec<Settle>,
}

/// A reservation the origin's answer keeps (when it counts) or refunds.
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    pub object: ObjectName,
    pub reservation: String,
    pub counted: CountedStatuses,
}

impl Settle {
    /// Whether an answer with `status` keeps the reservation.
    pub fn keeps(&self, status: u16) -> bool {
        self.counted.matches(status)
    }
}
