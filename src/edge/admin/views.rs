//! What the state routes answer about a rule: its state and where it is
//! kept, each part's or shard's line, and the `503` naming those that did
//! not answer a change. Both the rules' routes and a room's use them.

use worker::{Headers, Response, Result};

use super::super::quota::{part_key, Limit, Shown};
use super::super::respond;
use crate::config::lookup::Target;
use crate::control::{Control, RuleState};
use crate::http::problem::{Code, Problem};
use crate::objects::name::ObjectName;

/// A rule's state as the state routes answer it: where it is kept, and
/// for a global quota each part's, for a waiting room each shard's.
pub(in crate::edge) struct StateView<'a> {
    pub(in crate::edge) rule: &'a str,
    pub(in crate::edge) state: RuleState,
    pub(in crate::edge) reason: &'a str,
    pub(in crate::edge) set_ms: Option<u64>,
    /// `parts` (a global quota's objects), `shards` (a waiting room's) or
    /// `kv`.
    pub(in crate::edge) kept: &'static str,
    pub(in crate::edge) previous: Option<Shown<'a>>,
    /// The state the answering isolate applies (KV only).
    pub(in crate::edge) isolate: Option<Shown<'a>>,
    pub(in crate::edge) applies_within_ms: Option<u64>,
    pub(in crate::edge) parts: Option<Vec<PartView<'a>>>,
    /// Whether every shard that answered holds the same state (a room's
    /// `GET` only).
    pub(in crate::edge) agree: Option<bool>,
    pub(in crate::edge) shards: Option<Vec<ShardState<'a>>>,
}

crate::write_json!(StateView<'_> {
    rule,
    state,
    reason,
    set_ms,
    kept as "where",
    previous if Option::is_none,
    isolate if Option::is_none,
    applies_within_ms if Option::is_none,
    parts if Option::is_none,
    agree if Option::is_none,
    shards if Option::is_none,
});

impl<'a> StateView<'a> {
    pub(in crate::edge) fn new(
        rule: &'a str,
        control: Option<&'a Control>,
        kept: &'static str,
    ) -> StateView<'a> {
        let Shown {
            state,
            reason,
            set_ms,
        } = Shown::of(control);
        StateView {
            rule,
            state,
            reason,
            set_ms,
            kept,
            previous: None,
            isolate: None,
            applies_within_ms: None,
            parts: None,
            agree: None,
            shards: None,
        }
    }
}

/// One part's line in an answer: what it holds or held, or why it did
/// not answer.
pub(in crate::edge) struct PartView<'a> {
    pub(in crate::edge) key: &'a str,
    pub(in crate::edge) object: &'a ObjectName,
    pub(in crate::edge) state: Option<Shown<'a>>,
    pub(in crate::edge) previous: Option<Shown<'a>>,
    /// Its override's policies (`null`: none), for the override routes.
    pub(in crate::edge) policies: Option<Option<Vec<Limit<'a>>>>,
    pub(in crate::edge) replaced: Option<bool>,
    pub(in crate::edge) error: Option<String>,
}

crate::write_json!(PartView<'_> {
    key,
    object,
    state if Option::is_none,
    previous if Option::is_none,
    policies if Option::is_none,
    replaced if Option::is_none,
    error if Option::is_none,
});

impl<'a> PartView<'a> {
    pub(in crate::edge) fn of(target: &'a Target) -> PartView<'a> {
        PartView {
            key: part_key(target),
            object: &target.object,
            state: None,
            previous: None,
            policies: None,
            replaced: None,
            error: None,
        }
    }
}

/// One shard's line in an answer about the room's state: what it holds
/// or held, or why it did not answer.
pub(in crate::edge) struct ShardState<'a> {
    pub(in crate::edge) shard: u32,
    pub(in crate::edge) object: ObjectName,
    pub(in crate::edge) state: Option<Shown<'a>>,
    pub(in crate::edge) previous: Option<Shown<'a>>,
    pub(in crate::edge) error: Option<String>,
}

crate::write_json!(ShardState<'_> {
    shard,
    object,
    state if Option::is_none,
    previous if Option::is_none,
    error if Option::is_none,
});

impl ShardState<'_> {
    pub(in crate::edge) fn of(rule: &str, shard: u32) -> ShardState<'static> {
        ShardState {
            shard,
            object: ObjectName::room_shard(rule, shard),
            state: None,
            previous: None,
            error: None,
        }
    }
}

/// The answer to a change written to every part (or shard): `200` with
/// each one's line, or `503` naming those that did not answer (`failed`),
/// so that the operator sends it again: each write sets a value, so
/// sending it twice changes nothing more, and those that had it keep it.
pub(in crate::edge) fn respond_parts<F: Into<serde_json::Value> + ToString>(
    view: &impl crate::json::Write,
    noun: &str,
    failed: Vec<F>,
) -> Result<Response> {
    if failed.is_empty() {
        return respond::json(view, Headers::new());
    }
    let names: Vec<String> = failed.iter().map(ToString::to_string).collect();
    let problem = Problem::new(
        Code::Unavailable,
        format!(
            "{noun} {} did not answer; the others have the change: send it again",
            names.join(", ")
        ),
    )
    .with("failed", failed);
    let headers = Headers::new();
    headers.set("retry-after", "1")?;
    respond::problem_with(&problem, headers)
}
