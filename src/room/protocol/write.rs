//! The calls and replies written by hand ([`crate::json::Write`]): the
//! JSON serde's derives write, which the tests compare with.

use super::{Figures, RoomCall, RoomReply};
use crate::json::{Text, Write};
use crate::room::shard::{Counters, Holding, Number, Sample, Session, Status, Terms, Turn};

impl Write for RoomCall {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            RoomCall::Visit(terms, holding) => out.tagged(name, &(terms, holding)),
            RoomCall::End(terms, id) => out.tagged(name, &(terms, id)),
            RoomCall::Inspect(terms) | RoomCall::Reset(terms) => out.tagged(name, terms),
            RoomCall::Control(terms, control) => out.tagged(name, &(terms, control)),
        }
    }
}

impl Write for RoomReply {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            RoomReply::Visit(turn, status) => out.tagged(name, &(turn, status)),
            RoomReply::Ended(live, status) => out.tagged(name, &(live, status)),
            RoomReply::Figures(figures) => out.tagged(name, figures),
            RoomReply::Control(previous, status) => out.tagged(name, &(previous, status)),
        }
    }
}

crate::write_json!(Figures {
    status,
    history,
    calls
});
crate::write_json!(Terms {
    places,
    per_minute,
    session_ms,
    grace_ms,
    opens_at_ms
});
crate::write_json!(Counters {
    next,
    serving,
    pre,
    opened,
    seed,
    start,
    up_ms
});
crate::write_json!(Session {
    id,
    started_ms,
    expires_ms
});
crate::write_json!(Sample {
    minute_ms,
    waiting,
    active,
    admitted
});
crate::write_json!(Status {
    counters,
    places,
    per_minute,
    session_ms,
    active,
    offered,
    admitted,
    control,
});

impl Write for Number {
    fn write(&self, out: &mut Text) {
        match self {
            Number::Pre(n) => out.tagged("pre", n),
            Number::Place(n) => out.tagged("place", n),
        }
    }
}

impl Write for Holding {
    fn write(&self, out: &mut Text) {
        match self {
            Holding::Nothing => out.str("nothing"),
            Holding::Opened => out.str("opened"),
            Holding::Ticket(number) => out.tagged("ticket", number),
            Holding::Session(id) => out.tagged("session", id),
        }
    }
}

impl Write for Turn {
    fn write(&self, out: &mut Text) {
        match self {
            Turn::Session(session) => out.tagged("session", session),
            Turn::Wait { number, fresh } => {
                let mut outer = out.object();
                let mut fields = outer.at("wait").object();
                fields.field("number", number);
                fields.field("fresh", fresh);
                fields.end();
                outer.end();
            }
            Turn::Closed => out.str("closed"),
            Turn::NotOpen => out.str("not_open"),
        }
    }
}
