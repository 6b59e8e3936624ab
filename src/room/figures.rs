//! `GET {prefix}/admin/rooms/{rule}`: a room's figures, per shard and
//! summed, from each shard's answer (or the reason it gave none).

use serde::Serialize;

use super::protocol::Figures;
use super::shard::Status;
use crate::config::room::WaitingRoom;
use crate::control::{strictest, RuleState};
use crate::http::time::rfc3339;

#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub rule: &'a str,
    pub active_limit: u32,
    pub per_minute_limit: u32,
    pub session_ms: u64,
    pub refresh_ms: u64,
    pub opens_at: Option<String>,
    /// Whether every shard that answered has opened.
    pub open: bool,
    /// The operator's state: the strictest any shard that answered holds
    /// (they differ only while a change is being written), and its reason.
    pub state: RuleState,
    pub reason: String,
    /// Sums over the shards that answered.
    pub waiting: u64,
    pub active: u64,
    pub offered: u64,
    pub admitted_last_minute: u64,
    /// A newcomer's estimated wait: the mean over the shards that
    /// answered, since a newcomer's shard is drawn at random.
    pub wait_s: u64,
    /// Shards that did not answer; the sums leave them out.
    pub unanswered: u32,
    pub shards: Vec<ShardFigures>,
    /// The last hour, summed over shards by minute, oldest first.
    pub history: Vec<Minute>,
}

crate::write_json!(Report<'_> {
    rule,
    active_limit,
    per_minute_limit,
    session_ms,
    refresh_ms,
    opens_at,
    open,
    state,
    reason,
    waiting,
    active,
    offered,
    admitted_last_minute,
    wait_s,
    unanswered,
    shards,
    history,
});

#[derive(Debug, Serialize)]
pub struct ShardFigures {
    pub shard: u32,
    #[serde(flatten)]
    pub answer: ShardAnswer,
}

/// The shard, then its answer's fields beside it (serde's `flatten` of
/// an untagged enum).
impl crate::json::Write for ShardFigures {
    fn write(&self, out: &mut crate::json::Text) {
        let mut fields = out.object();
        fields.field("shard", &self.shard);
        match &self.answer {
            ShardAnswer::Figures {
                places,
                per_minute,
                open,
                state,
                serving,
                next,
                waiting,
                active,
                offered,
                admitted_last_minute,
                wait_s,
                calls,
            } => {
                fields.field("places", places);
                fields.field("per_minute", per_minute);
                fields.field("open", open);
                fields.field("state", state);
                fields.field("serving", serving);
                fields.field("next", next);
                fields.field("waiting", waiting);
                fields.field("active", active);
                fields.field("offered", offered);
                fields.field("admitted_last_minute", admitted_last_minute);
                fields.field("wait_s", wait_s);
                fields.field("calls", calls);
            }
            ShardAnswer::Error { error } => fields.field("error", error),
        }
        fields.end();
    }
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ShardAnswer {
    Figures {
        places: u32,
        per_minute: u32,
        open: bool,
        state: RuleState,
        serving: u64,
        next: u64,
        waiting: u64,
        active: u32,
        offered: u32,
        admitted_last_minute: u32,
        wait_s: u64,
        calls: u64,
    },
    Error {
        error: String,
    },
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Minute {
    pub minute_ms: u64,
    pub waiting: u64,
    pub active: u64,
    pub admitted: u64,
}

crate::write_json!(Minute {
    minute_ms,
    waiting,
    active,
    admitted
});

/// How long a newcomer to a shard in `status` waits: until the opening
/// before it, nothing while there is room and nobody waits, else behind
/// everyone waiting.
pub fn newcomer_wait_s(status: &Status, opens_at_ms: Option<u64>, now: u64) -> u64 {
    if !status.counters.opened {
        return opens_at_ms
            .unwrap_or(now)
            .saturating_sub(now)
            .div_ceil(1000);
    }
    let waiting = status.waiting();
    let busy = u64::from(status.active) + u64::from(status.offered);
    if waiting == 0 && busy < u64::from(status.places) {
        return 0;
    }
    status.wait_s(waiting + 1)
}

/// The report for room `rule`, from shard `i`'s answer at `answers[i]`.
pub fn report<'a>(
    rule: &'a str,
    room: &WaitingRoom,
    answers: Vec<Result<Figures, String>>,
    now: u64,
) -> Report<'a> {
    let mut report = Report {
        rule,
        active_limit: room.active,
        per_minute_limit: room.per_minute,
        session_ms: room.session_ms,
        refresh_ms: room.refresh_ms,
        opens_at: room.opens_at_ms.map(rfc3339),
        open: true,
        state: RuleState::Open,
        reason: String::new(),
        waiting: 0,
        active: 0,
        offered: 0,
        admitted_last_minute: 0,
        wait_s: 0,
        unanswered: 0,
        shards: Vec::with_capacity(answers.len()),
        history: Vec::new(),
    };
    // Whole minutes, so at most an hour's of them: a sorted Vec.
    let mut minutes: Vec<Minute> = Vec::new();
    let mut waits = Vec::new();
    if let Some(control) = strictest(answers.iter().flatten().flat_map(|f| &f.status.control)) {
        report.state = control.state;
        report.reason.clone_from(&control.reason);
    }
    for (shard, answer) in (0u32..).zip(answers) {
        let answer = match answer {
            Ok(figures) => {
                let s = figures.status;
                let wait_s = newcomer_wait_s(&s, room.opens_at_ms, now);
                waits.push(wait_s);
                report.open &= s.counters.opened;
                report.waiting += s.waiting();
                report.active += u64::from(s.active);
                report.offered += u64::from(s.offered);
                report.admitted_last_minute += u64::from(s.admitted);
                for sample in &figures.history {
                    let found = minutes.binary_search_by_key(&sample.minute_ms, |m| m.minute_ms);
                    let i = found.unwrap_or_else(|i| {
                        let minute = Minute {
                            minute_ms: sample.minute_ms,
                            ..Minute::default()
                        };
                        minutes.insert(i, minute);
                        i
                    });
                    let minute = &mut minutes[i];
                    minute.waiting += sample.waiting;
                    minute.active += u64::from(sample.active);
                    minute.admitted += u64::from(sample.admitted);
                }
                ShardAnswer::Figures {
                    places: s.places,
                    per_minute: s.per_minute,
                    open: s.counters.opened,
                    state: s.control.as_ref().map_or(RuleState::Open, |c| c.state),
                    serving: s.counters.serving,
                    next: s.counters.next,
                    waiting: s.waiting(),
                    active: s.active,
                    offered: s.offered,
                    admitted_last_minute: s.admitted,
                    wait_s,
                    calls: figures.calls,
                }
            }
            Err(error) => {
                report.unanswered += 1;
                ShardAnswer::Error { error }
            }
        };
        report.shards.push(ShardFigures { shard, answer });
    }
    if !waits.is_empty() {
        report.wait_s = waits.iter().sum::<u64>() / waits.len() as u64;
    }
    report.history = minutes;
    report
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::room::shard::Sample;

    fn room() -> WaitingRoom {
        WaitingRoom {
            active: 6,
            per_minute: 12,
            session_ms: 300_000,
            shards: 2,
            refresh_ms: 20_000,
            opens_at_ms: None,
            secret: "ROOM_SECRET".into(),
            pass_secret: "ROOM_SECRET".into(),
            work_bits: None,
        }
    }

    #[test]
    fn shards_are_summed_and_a_silent_one_is_named() {
        let sample = |minute_ms, waiting| Sample {
            minute_ms,
            waiting,
            active: 3,
            admitted: 2,
        };
        let answers = vec![
            Ok(Figures {
                status: Status::sample(10, 20, 3),
                history: vec![sample(0, 5), sample(60_000, 8)],
                calls: 4,
            }),
            Ok(Figures {
                status: Status::sample(5, 5, 1),
                history: vec![sample(60_000, 1)],
                calls: 2,
            }),
            Err("ROOM did not answer within 2000 ms".into()),
        ];
        let report = report("shop", &room(), answers, 0);
        let value = serde_json::to_value(&report).unwrap();
        assert_eq!(value["waiting"], 10);
        assert_eq!(value["active"], 4);
        assert_eq!(value["admitted_last_minute"], 12);
        assert_eq!(value["unanswered"], 1);
        // Shard 0: 11th in line at 6 a minute; shard 1: straight in.
        assert_eq!(value["shards"][0]["wait_s"], 110);
        assert_eq!(value["shards"][1]["wait_s"], 0);
        assert_eq!(value["wait_s"], 55);
        assert_eq!(
            value["shards"][2],
            json!({"shard": 2, "error": "ROOM did not answer within 2000 ms"})
        );
        assert_eq!(
            value["history"],
            json!([
                {"minute_ms": 0, "waiting": 5, "active": 3, "admitted": 2},
                {"minute_ms": 60_000, "waiting": 9, "active": 6, "admitted": 4},
            ])
        );
    }

    #[test]
    fn the_room_shows_the_strictest_state_its_shards_hold() {
        use crate::control::Control;
        let figures = |state: Option<RuleState>| Figures {
            status: Status {
                control: state.map(|state| Control {
                    state,
                    reason: format!("{state:?}"),
                    set_ms: 1,
                }),
                ..Status::sample(0, 0, 0)
            },
            history: Vec::new(),
            calls: 0,
        };
        let answers = vec![
            Ok(figures(None)),
            Ok(figures(Some(RuleState::Paused))),
            Err("down".into()),
        ];
        let value = serde_json::to_value(report("shop", &room(), answers, 0)).unwrap();
        assert_eq!(
            (&value["state"], &value["reason"]),
            (&json!("paused"), &json!("Paused"))
        );
        assert_eq!(value["shards"][0]["state"], "open");
        assert_eq!(value["shards"][1]["state"], "paused");
        let open = report("shop", &room(), vec![Ok(figures(None))], 0);
        assert_eq!((open.state, open.reason.as_str()), (RuleState::Open, ""));
    }

    #[test]
    fn before_opening_a_newcomer_waits_for_the_opening() {
        let mut s = Status::sample(0, 0, 0);
        s.counters.opened = false;
        assert_eq!(newcomer_wait_s(&s, Some(10_500), 1_000), 10);
        assert_eq!(newcomer_wait_s(&Status::sample(0, 0, 3), None, 0), 60 / 6);
    }
}
