//! A shard's calls ([`RoomCall`]) and replies ([`RoomReply`]) read from
//! their JSON by hand, over [`crate::input::scan`], as the key objects'
//! are (`objects/protocol/read/`). A shard's storage row keeps its terms
//! and counters in the same JSON, read by the same readers.

use super::{Figures, RoomCall, RoomReply};
use crate::control::Control;
use crate::input::scan::{list, need, nullable, whole, FromScan, Malformed, Open, Read, Scan};
use crate::room::shard::{Counters, Holding, Number, Sample, Session, Status, Terms, Turn};

impl RoomCall {
    /// The call a body carries, or [`Malformed`] if it carries none.
    pub fn from_json(text: &str) -> Read<RoomCall> {
        whole(text, call)
    }
}

impl RoomReply {
    /// The reply a shard answered, or [`Malformed`].
    pub fn from_json(text: &str) -> Read<RoomReply> {
        whole(text, reply)
    }
}

impl Terms {
    pub fn read(scan: &mut Scan) -> Read<Terms> {
        let (mut places, mut per_minute, mut opens_at_ms) = (None, None, None);
        let (mut session_ms, mut grace_ms) = (None, None);
        let mut fields = scan.object()?;
        while let Some(field) = fields.key(scan)? {
            match &*field {
                "places" => places = Some(scan.u32()?),
                "per_minute" => per_minute = Some(scan.u32()?),
                "session_ms" => session_ms = Some(scan.u64()?),
                "grace_ms" => grace_ms = Some(scan.u64()?),
                "opens_at_ms" => opens_at_ms = nullable(scan, Scan::u64)?,
                _ => scan.skip()?,
            }
        }
        Ok(Terms {
            places: need(places)?,
            per_minute: need(per_minute)?,
            session_ms: need(session_ms)?,
            grace_ms: need(grace_ms)?,
            opens_at_ms,
        })
    }
}

impl Counters {
    pub fn read(scan: &mut Scan) -> Read<Counters> {
        let mut opened = None;
        let mut values = [None; 6];
        let mut fields = scan.object()?;
        while let Some(field) = fields.key(scan)? {
            let slot = match &*field {
                "opened" => {
                    opened = Some(scan.bool()?);
                    continue;
                }
                "next" => 0,
                "serving" => 1,
                "pre" => 2,
                "seed" => 3,
                "start" => 4,
                "up_ms" => 5,
                _ => {
                    scan.skip()?;
                    continue;
                }
            };
            values[slot] = Some(scan.u64()?);
        }
        let [next, serving, pre, seed, start, up_ms] = values;
        Ok(Counters {
            next: need(next)?,
            serving: need(serving)?,
            pre: need(pre)?,
            opened: need(opened)?,
            seed: need(seed)?,
            start: start.unwrap_or(0),
            up_ms: up_ms.unwrap_or(0),
        })
    }
}

/// The first of a pair written as an array, the second to read next.
fn pair<'a, T>(scan: &mut Scan<'a>, first: fn(&mut Scan<'a>) -> Read<T>) -> Read<(T, Open)> {
    let mut items = scan.array()?;
    items.more(scan)?;
    let value = first(scan)?;
    items.more(scan)?;
    Ok((value, items))
}

fn call(scan: &mut Scan) -> Read<RoomCall> {
    let (name, Some(object)) = scan.tag()? else {
        return Err(Malformed);
    };
    let call = if name == "inspect" {
        RoomCall::Inspect(Terms::read(scan)?)
    } else if name == "reset" {
        RoomCall::Reset(Terms::read(scan)?)
    } else {
        let (terms, items) = pair(scan, Terms::read)?;
        let call = match &*name {
            "visit" => RoomCall::Visit(terms, holding(scan)?),
            "end" => RoomCall::End(terms, scan.u64()?),
            "control" => RoomCall::Control(terms, Control::from_scan(scan)?),
            _ => return Err(Malformed),
        };
        items.close(scan)?;
        call
    };
    object.close(scan)?;
    Ok(call)
}

fn holding(scan: &mut Scan) -> Read<Holding> {
    let (name, object) = scan.tag()?;
    let Some(object) = object else {
        return match &*name {
            "nothing" => Ok(Holding::Nothing),
            "opened" => Ok(Holding::Opened),
            _ => Err(Malformed),
        };
    };
    let holding = match &*name {
        "ticket" => Holding::Ticket(number(scan)?),
        "session" => Holding::Session(scan.u64()?),
        "nothing" if scan.null() => Holding::Nothing,
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(holding)
}

fn number(scan: &mut Scan) -> Read<Number> {
    let (name, Some(object)) = scan.tag()? else {
        return Err(Malformed);
    };
    let number = match &*name {
        "pre" => Number::Pre(scan.u64()?),
        "place" => Number::Place(scan.u64()?),
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(number)
}

fn reply(scan: &mut Scan) -> Read<RoomReply> {
    let (name, Some(object)) = scan.tag()? else {
        return Err(Malformed);
    };
    let reply = if name == "figures" {
        RoomReply::Figures(figures(scan)?)
    } else {
        let reply = match &*name {
            "visit" => {
                let (turn, items) = pair(scan, turn)?;
                (RoomReply::Visit(turn, status(scan)?), items)
            }
            "ended" => {
                let (live, items) = pair(scan, Scan::bool)?;
                (RoomReply::Ended(live, status(scan)?), items)
            }
            "control" => {
                let (previous, items) = pair(scan, |scan| nullable(scan, Control::from_scan))?;
                (RoomReply::Control(previous, status(scan)?), items)
            }
            _ => return Err(Malformed),
        };
        reply.1.close(scan)?;
        reply.0
    };
    object.close(scan)?;
    Ok(reply)
}

fn turn(scan: &mut Scan) -> Read<Turn> {
    let (name, object) = scan.tag()?;
    let Some(object) = object else {
        return match &*name {
            "closed" => Ok(Turn::Closed),
            "not_open" => Ok(Turn::NotOpen),
            _ => Err(Malformed),
        };
    };
    let turn = match &*name {
        "session" => {
            let mut values = [None; 3];
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                let slot = match &*field {
                    "id" => 0,
                    "started_ms" => 1,
                    "expires_ms" => 2,
                    _ => {
                        scan.skip()?;
                        continue;
                    }
                };
                values[slot] = Some(scan.u64()?);
            }
            let [id, started_ms, expires_ms] = values;
            Turn::Session(Session {
                id: need(id)?,
                started_ms: need(started_ms)?,
                expires_ms: need(expires_ms)?,
            })
        }
        "wait" => {
            let (mut at, mut fresh) = (None, None);
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "number" => at = Some(number(scan)?),
                    "fresh" => fresh = Some(scan.bool()?),
                    _ => scan.skip()?,
                }
            }
            Turn::Wait {
                number: need(at)?,
                fresh: need(fresh)?,
            }
        }
        "closed" if scan.null() => Turn::Closed,
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(turn)
}

fn status(scan: &mut Scan) -> Read<Status> {
    let (mut counters, mut session_ms, mut control) = (None, None, None);
    let mut counts = [None; 5];
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        let slot = match &*field {
            "counters" => {
                counters = Some(Counters::read(scan)?);
                continue;
            }
            "session_ms" => {
                session_ms = Some(scan.u64()?);
                continue;
            }
            "control" => {
                control = nullable(scan, Control::from_scan)?;
                continue;
            }
            "places" => 0,
            "per_minute" => 1,
            "active" => 2,
            "offered" => 3,
            "admitted" => 4,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        counts[slot] = Some(scan.u32()?);
    }
    let [places, per_minute, active, offered, admitted] = counts;
    Ok(Status {
        counters: need(counters)?,
        places: need(places)?,
        per_minute: need(per_minute)?,
        session_ms: need(session_ms)?,
        active: need(active)?,
        offered: need(offered)?,
        admitted: need(admitted)?,
        control,
    })
}

fn figures(scan: &mut Scan) -> Read<Figures> {
    let (mut status_read, mut history, mut calls) = (None, None, None);
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "status" => status_read = Some(status(scan)?),
            "history" => history = Some(list(scan, sample)?),
            "calls" => calls = Some(scan.u64()?),
            _ => scan.skip()?,
        }
    }
    Ok(Figures {
        status: need(status_read)?,
        history: need(history)?,
        calls: need(calls)?,
    })
}

fn sample(scan: &mut Scan) -> Read<Sample> {
    let (mut minute_ms, mut waiting, mut active, mut admitted) = (None, None, None, None);
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "minute_ms" => minute_ms = Some(scan.u64()?),
            "waiting" => waiting = Some(scan.u64()?),
            "active" => active = Some(scan.u32()?),
            "admitted" => admitted = Some(scan.u32()?),
            _ => scan.skip()?,
        }
    }
    Ok(Sample {
        minute_ms: need(minute_ms)?,
        waiting: need(waiting)?,
        active: need(active)?,
        admitted: need(admitted)?,
    })
}
