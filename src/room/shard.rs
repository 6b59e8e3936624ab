//! One shard of a waiting room: its share of the places and of the
//! per-minute rate, its queue, its sessions. Pure: the time is an argument
//! and so is the randomness the opening draws; each operation answers the
//! [`Change`]s storage must apply, so that a restart reads back the same
//! shard (`Shard::restore`).
//!
//! **Places and offers.** Tickets are numbered when they are handed out
//! (`next`), and "now serving" (`serving`) says how far the queue has been
//! called: every place below it has been *offered*. An offer holds a place
//! for `grace_ms`; a visitor who comes back with that ticket in time gets a
//! session, one who does not loses the offer, and the place goes to the
//! next ticket. Visitors leave without saying so, and offers are how the
//! shard finds out without ever storing a ticket.
//!
//! **Exactness.** Live sessions plus live offers never exceed `places`: an
//! offer (or a visitor let straight in) is only made below it. The
//! per-minute rate counts sessions by the time they *start*: a claimed
//! offer is logged at its claim, and every offer still unclaimed counts as
//! starting now, so `logged in the last 60 s + unclaimed offers` never
//! exceeds `per_minute`. Offers are made while that holds and the log only
//! ever drops entries that have aged out, so every 60 s window holds at
//! most `per_minute` session starts. Counting an offer at the moment it was
//! made would not do: claimed 40 s later, it could land in a window with a
//! full minute's worth of later ones.
//!
//! **Order.** Offers go out in place order, and a newcomer is let straight
//! in only when nobody in the shard is waiting: first come, first served
//! within the shard.
//!
//! **Outages.** While offers wait, the shard runs at least every
//! [`BEAT_MS`] (its alarm), so a longer gap between two of its operations
//! is time the runtime was down: the offers' graces are moved on by it,
//! and a visitor whose turn came just before an outage keeps it.
//!
//! **Opening.** With `opens_at_ms`, tickets handed out before then are
//! join numbers of a pre-queue; at opening a seed is drawn and join number
//! `j` becomes place `lottery::place(seed, pre, j)`, and later arrivals
//! take places `pre`, `pre + 1`, ... behind them. Another `opens_at` still
//! ahead, or an operator's reset, starts the line over: numbers handed out
//! before `start` are no ticket, sessions end, and a new pre-queue begins.
//!
//! **A place is claimed once.** A session is named by its place, and only
//! a live offer turns into one: a second claim of a place that has a
//! session gets that same session, and a claim after the session ended
//! finds nothing (the visitor joins at the back).
//!
//! **An operator's state** (`halt`): paused or closed, the shard starts no
//! session at all, and its queue stands still until it is opened again.

mod halt;
mod keyed;
mod status;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::lottery;
use crate::control::Control;
use crate::limit::{Policy, SlidingLog};
use keyed::Keyed;
pub use status::Status;

/// The rate's window: `per_minute` session starts in any 60 s.
pub const RATE_WINDOW_MS: u64 = 60_000;

/// Minutes of figures a shard keeps for the dashboard.
pub const HISTORY_MINUTES: usize = 60;

/// While offers wait for their tickets, the shard's alarm runs it at least
/// this often; a gap of more than two of these is an outage.
pub const BEAT_MS: u64 = 2_000;

/// What a shard is given by the room's config: its shares and durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// Sessions plus unclaimed offers, at most.
    pub places: u32,
    /// Session starts in any 60 s, at most.
    pub per_minute: u32,
    /// A session lasts this long after its last renewal.
    pub session_ms: u64,
    /// How long an offer waits for its ticket to come back.
    pub grace_ms: u64,
    /// Before this, arrivals join the pre-queue; `None` opens at once.
    #[serde(default)]
    pub opens_at_ms: Option<u64>,
}

impl Terms {
    /// Refuses terms no config produces, so that a malformed call can
    /// never make a shard that admits nobody or divides by zero.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.places == 0 || self.per_minute == 0 {
            return Err("places and per_minute must be at least 1");
        }
        if Policy::new(u64::from(self.per_minute), RATE_WINDOW_MS).is_err() {
            return Err("per_minute is out of range");
        }
        if self.session_ms == 0 || self.grace_ms == 0 {
            return Err("session_ms and grace_ms must be at least 1");
        }
        Ok(())
    }

    fn rate(&self) -> Policy {
        Policy::clamped(u64::from(self.per_minute), RATE_WINDOW_MS)
    }
}

/// The shard's numbers; storage keeps them in one row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// The next place to hand out.
    pub next: u64,
    /// Every place below this has been offered.
    pub serving: u64,
    /// Join numbers handed out before opening (from `start`).
    pub pre: u64,
    pub opened: bool,
    /// The lottery's seed, drawn at opening.
    pub seed: u64,
    /// The line's first number: anything numbered below it belongs to a
    /// line started over since.
    #[serde(default)]
    pub start: u64,
    /// The shard was last seen running here, while offers waited.
    #[serde(default)]
    pub up_ms: u64,
}

/// A ticket's number within its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Number {
    /// A join number of the pre-queue, placed by the lottery at opening.
    Pre(u64),
    /// A place in the queue.
    Place(u64),
}

/// What a visitor brings to its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// Nothing valid: a newcomer, counted in the pre-queue's cap.
    Nothing,
    /// A newcomer the edge saw arrive after the opening, not counted in
    /// the pre-queue's cap: it may take a place, never a pre-queue number.
    Opened,
    Ticket(Number),
    /// A session, by id, to renew.
    Session(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The place it was claimed from.
    pub id: u64,
    pub started_ms: u64,
    /// It ends here unless renewed first.
    pub expires_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub made_ms: u64,
    /// It lapses here unless claimed first.
    pub until_ms: u64,
}

/// What a visit gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Turn {
    /// In: a new session, a renewed one, or the one the place already has.
    Session(Session),
    /// Waiting: the ticket brought (`fresh` false) or a new one at the
    /// back (`fresh` true).
    Wait { number: Number, fresh: bool },
    /// An operator closed the room: no session, no ticket.
    Closed,
    /// An `Opened` newcomer at a shard not open yet: nothing taken.
    NotOpen,
}

/// The shard's figures for one minute, for the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub minute_ms: u64,
    pub waiting: u64,
    pub active: u32,
    /// Sessions started in the 60 s before the sample.
    pub admitted: u32,
}

/// What storage must do after an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Terms(Terms),
    Counters(Counters),
    Offer {
        place: u64,
        offer: Offer,
    },
    /// An offer claimed or lapsed.
    OfferGone {
        place: u64,
    },
    /// A session started or renewed.
    Session(Session),
    /// A session ended or lapsed.
    SessionGone {
        id: u64,
    },
    /// One session start logged at `at_ms`.
    Admitted {
        at_ms: u64,
    },
    /// Logged starts at or before `at_ms` no longer count.
    AdmittedBefore {
        at_ms: u64,
    },
    Sample(Sample),
    /// Samples older than `minute_ms` are forgotten.
    SamplesBefore {
        minute_ms: u64,
    },
    /// The operator's state changed: store it, or with `None` (open)
    /// delete it.
    Control(Option<Control>),
}

#[derive(Debug, Clone)]
pub struct Shard {
    terms: Terms,
    counters: Counters,
    offers: Keyed<Offer>,
    sessions: Keyed<Session>,
    /// Session starts of the last 60 s.
    log: SlidingLog,
    history: VecDeque<Sample>,
    /// The operator's state when it is not open.
    control: Option<Control>,
}

/// What storage holds, to read a shard back.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    pub counters: Counters,
    pub offers: Vec<(u64, Offer)>,
    pub sessions: Vec<Session>,
    /// Logged session starts, `(at_ms, count)`, oldest first.
    pub admitted: Vec<(u64, u32)>,
    /// Oldest first.
    pub history: Vec<Sample>,
    /// The operator's state, if one was stored.
    pub control: Option<Control>,
}

impl Shard {
    pub fn new(terms: Terms) -> Shard {
        Shard::restore(terms, Stored::default())
    }

    /// The shard storage describes, under `terms`.
    pub fn restore(terms: Terms, stored: Stored) -> Shard {
        let mut log = SlidingLog::new(terms.rate());
        for (at_ms, count) in stored.admitted {
            log.record(at_ms, count);
        }
        let mut offers = Keyed::new();
        for (place, offer) in stored.offers {
            offers.insert(place, offer);
        }
        let mut sessions = Keyed::new();
        for session in stored.sessions {
            sessions.insert(session.id, session);
        }
        let surplus = stored.history.len().saturating_sub(HISTORY_MINUTES);
        Shard {
            terms,
            counters: stored.counters,
            offers,
            sessions,
            log,
            history: stored.history.into_iter().skip(surplus).collect(),
            control: stored.control.filter(Control::halts),
        }
    }

    pub fn terms(&self) -> Terms {
        self.terms
    }

    /// Takes the terms a call brings (a deploy may change the config);
    /// sessions and offers beyond new, smaller shares stay until they end,
    /// and no new ones are made until the shard is below them. An opened
    /// shard given another `opens_at`, still ahead, starts its line over.
    pub fn set_terms(&mut self, now: u64, terms: Terms) -> Vec<Change> {
        if terms == self.terms {
            return Vec::new();
        }
        let ahead = terms.opens_at_ms.is_some_and(|at| at > now);
        let again = ahead && self.counters.opened && terms.opens_at_ms != self.terms.opens_at_ms;
        self.terms = terms;
        self.log.set_policy(terms.rate());
        let mut out = vec![Change::Terms(terms)];
        if again {
            self.restart_line(now, &mut out);
        }
        out
    }

    /// An operator's reset after a rehearsal: the line starts over.
    pub fn reset(&mut self, now: u64, draw: &mut dyn FnMut() -> u64) -> Vec<Change> {
        let mut out = self.tick(now, draw);
        self.restart_line(now, &mut out);
        out
    }

    /// Sessions end, offers and tickets are gone, and a pre-queue begins
    /// anew if `opens_at` is ahead; the last minute's starts still count.
    fn restart_line(&mut self, now: u64, out: &mut Vec<Change>) {
        for (id, _) in self.sessions.iter_mut() {
            out.push(Change::SessionGone { id });
        }
        for (place, _) in self.offers.iter_mut() {
            out.push(Change::OfferGone { place });
        }
        self.sessions = Keyed::new();
        self.offers = Keyed::new();
        let c = &mut self.counters;
        let start = c.next.max(c.pre);
        (c.start, c.next, c.serving, c.pre) = (start, start, start, start);
        c.opened = self.terms.opens_at_ms.is_none_or(|at| at <= now);
        out.push(Change::Counters(self.counters));
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// A visitor's request: join, claim an offer, or renew a session.
    pub fn visit(
        &mut self,
        now: u64,
        holding: Holding,
        draw: &mut dyn FnMut() -> u64,
    ) -> (Turn, Vec<Change>) {
        self.operate(now, draw, |shard, out| match holding {
            Holding::Session(id) => match shard.sessions.get_mut(id) {
                Some(session) => {
                    session.expires_ms = session
                        .expires_ms
                        .max(now.saturating_add(shard.terms.session_ms));
                    out.push(Change::Session(*session));
                    Turn::Session(*session)
                }
                None => shard.join(now, out),
            },
            Holding::Ticket(number) => shard.claim(now, number, out),
            Holding::Opened if !shard.counters.opened && !shard.closed() => Turn::NotOpen,
            Holding::Nothing | Holding::Opened => shard.join(now, out),
        })
    }

    /// The origin ended session `id`: its place goes to the next ticket at
    /// once. True if it was live.
    pub fn end(&mut self, now: u64, id: u64, draw: &mut dyn FnMut() -> u64) -> (bool, Vec<Change>) {
        self.operate(now, draw, |shard, out| {
            let ended = shard.sessions.remove(id).is_some();
            if ended {
                out.push(Change::SessionGone { id });
                shard.offer(now, out);
            }
            ended
        })
    }

    /// Lapses, expiries, offers and the opening that are due: the alarm's
    /// work, and every call's first step.
    pub fn tick(&mut self, now: u64, draw: &mut dyn FnMut() -> u64) -> Vec<Change> {
        self.operate(now, draw, |_, _| ()).1
    }

    /// The shard's figures, as of its last operation.
    pub fn status(&self) -> Status {
        Status {
            counters: self.counters,
            places: self.terms.places,
            per_minute: self.terms.per_minute,
            session_ms: self.terms.session_ms,
            active: count(self.sessions.len()),
            offered: count(self.offers.len()),
            admitted: u32::try_from(self.log.held()).unwrap_or(u32::MAX),
            control: self.control.clone(),
        }
    }

    /// The last hour's samples, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &Sample> {
        self.history.iter()
    }

    /// When something is next due: an offer lapses, a session ends, the
    /// room opens, or, with tickets waiting, the rate frees a start; with
    /// offers out, the next beat. While halted, offers do not lapse and
    /// nothing is offered.
    pub fn next_alarm(&self) -> Option<u64> {
        let moving = self.control.is_none();
        let offers = self.offers.values().map(|o| o.until_ms).filter(|_| moving);
        let sessions = self.sessions.values().map(|s| s.expires_ms);
        let opening = self.terms.opens_at_ms.filter(|_| !self.counters.opened);
        let waiting = moving && self.counters.opened && self.counters.serving < self.counters.next;
        let rate = self.log.oldest_expiry().filter(|_| waiting);
        let beat = (moving && self.offers.len() > 0)
            .then_some(self.counters.up_ms.saturating_add(BEAT_MS));
        offers
            .chain(sessions)
            .chain(opening)
            .chain(rate)
            .chain(beat)
            .min()
    }

    /// Runs `op` after the due work, then offers what it freed; answers
    /// its result and every change, the counters once at the end.
    fn operate<T>(
        &mut self,
        now: u64,
        draw: &mut dyn FnMut() -> u64,
        op: impl FnOnce(&mut Shard, &mut Vec<Change>) -> T,
    ) -> (T, Vec<Change>) {
        let before = self.counters;
        let mut out = self.due(now, draw);
        let result = op(self, &mut out);
        self.done(now, before, &mut out);
        (result, out)
    }

    /// `operate`'s work before the operation, apart from it so that the
    /// wasm holds one copy whatever the operation.
    fn due(&mut self, now: u64, draw: &mut dyn FnMut() -> u64) -> Vec<Change> {
        let mut out = Vec::new();
        self.open_if_due(now, draw);
        self.catch_up(now, &mut out);
        self.lapse(now, &mut out);
        self.offer(now, &mut out);
        out
    }

    /// `operate`'s work after it: the sample, and the counters if changed.
    fn done(&mut self, now: u64, before: Counters, out: &mut Vec<Change>) {
        self.sample(now, out);
        if self.counters != before {
            out.push(Change::Counters(self.counters));
        }
    }

    fn open_if_due(&mut self, now: u64, draw: &mut dyn FnMut() -> u64) {
        let due = self.terms.opens_at_ms.is_none_or(|at| now >= at);
        if due && !self.counters.opened {
            self.counters.opened = true;
            self.counters.seed = draw();
            self.counters.next = self.counters.next.max(self.counters.pre);
        }
    }

    /// Offers standing when the runtime was down: the time it was down
    /// does not count against their grace (a gap longer than two beats,
    /// which the alarm keeps while offers wait, is an outage). The beat
    /// is kept in storage only while offers wait.
    fn catch_up(&mut self, now: u64, out: &mut Vec<Change>) {
        if self.offers.len() == 0 {
            return;
        }
        let down = now.saturating_sub(self.counters.up_ms);
        if down > 2 * BEAT_MS && self.counters.up_ms > 0 {
            for (place, offer) in self.offers.iter_mut() {
                offer.until_ms = offer.until_ms.saturating_add(down);
                out.push(Change::Offer {
                    place,
                    offer: *offer,
                });
            }
        }
        if down >= BEAT_MS {
            self.counters.up_ms = now;
        }
    }

    /// Drops offers, sessions and logged starts whose time has passed. A
    /// halted shard's offers stand still: their tickets cannot claim them
    /// until it opens again, so they must not lose them meanwhile.
    fn lapse(&mut self, now: u64, out: &mut Vec<Change>) {
        let frozen = self.control.is_some();
        self.offers.retain(|place, offer| {
            let live = frozen || offer.until_ms > now;
            if !live {
                out.push(Change::OfferGone { place });
            }
            live
        });
        self.sessions.retain(|id, session| {
            let live = session.expires_ms > now;
            if !live {
                out.push(Change::SessionGone { id });
            }
            live
        });
        let held = self.log.held();
        self.log.expire(now);
        if self.log.held() < held {
            out.push(Change::AdmittedBefore {
                at_ms: now.saturating_sub(RATE_WINDOW_MS),
            });
        }
    }

    /// Whether one more session may start now: the operator has not
    /// halted the shard, a place is free, and the rate allows it with
    /// every unclaimed offer counted as starting now. Every offer and
    /// every straight entry passes here.
    fn may_start(&mut self, now: u64) -> bool {
        if self.control.is_some() {
            return false;
        }
        let offered = count(self.offers.len());
        let busy = count(self.sessions.len()).saturating_add(offered);
        busy < self.terms.places && self.log.decide(now, offered.saturating_add(1)).allowed
    }

    /// Offers places to the tickets next in line while the shard may.
    fn offer(&mut self, now: u64, out: &mut Vec<Change>) {
        while self.counters.opened
            && self.counters.serving < self.counters.next
            && self.may_start(now)
        {
            if self.offers.len() == 0 {
                self.counters.up_ms = now;
            }
            let place = self.counters.serving;
            self.counters.serving += 1;
            let offer = Offer {
                made_ms: now,
                until_ms: now.saturating_add(self.terms.grace_ms),
            };
            self.offers.insert(place, offer);
            out.push(Change::Offer { place, offer });
        }
    }

    /// A ticket comes back: its session, its offer claimed, still waiting,
    /// or (its turn passed unclaimed, or it names nothing here) a new
    /// ticket at the back. Closed: its place's session if it has one, else
    /// nothing, the place kept for when the shard opens again.
    fn claim(&mut self, now: u64, number: Number, out: &mut Vec<Change>) -> Turn {
        let Some(place) = self.counters.place_of(number) else {
            if self.closed() {
                return Turn::Closed;
            }
            return match number {
                Number::Pre(j)
                    if !self.counters.opened
                        && (self.counters.start..self.counters.pre).contains(&j) =>
                {
                    Turn::Wait {
                        number,
                        fresh: false,
                    }
                }
                _ => self.join(now, out),
            };
        };
        if let Some(session) = self.sessions.get(place) {
            return Turn::Session(*session);
        }
        if self.closed() {
            return Turn::Closed;
        }
        if self.control.is_some() && self.offers.get(place).is_some() {
            // Its turn came before the pause: it keeps the offer, and
            // claims it once the shard opens again.
            return Turn::Wait {
                number,
                fresh: false,
            };
        }
        if self.offers.remove(place).is_some() {
            out.push(Change::OfferGone { place });
            return Turn::Session(self.start(now, place, out));
        }
        if place >= self.counters.serving {
            return Turn::Wait {
                number,
                fresh: false,
            };
        }
        self.join(now, out)
    }

    /// A newcomer: a pre-queue join number before opening; straight in
    /// when nobody waits and the shard may start a session; else a ticket
    /// at the back. Closed: nothing.
    fn join(&mut self, now: u64, out: &mut Vec<Change>) -> Turn {
        if self.closed() {
            return Turn::Closed;
        }
        let c = &mut self.counters;
        if !c.opened {
            c.pre += 1;
            return Turn::Wait {
                number: Number::Pre(c.pre - 1),
                fresh: true,
            };
        }
        let place = c.next;
        c.next += 1;
        if self.counters.serving == place && self.may_start(now) {
            self.counters.serving += 1;
            return Turn::Session(self.start(now, place, out));
        }
        Turn::Wait {
            number: Number::Place(place),
            fresh: true,
        }
    }

    /// A session starts from `place`, logged against the rate.
    fn start(&mut self, now: u64, place: u64, out: &mut Vec<Change>) -> Session {
        let at_ms = self.log.admit(now, 1);
        out.push(Change::Admitted { at_ms });
        let session = Session {
            id: place,
            started_ms: now,
            expires_ms: now.saturating_add(self.terms.session_ms),
        };
        self.sessions.insert(place, session);
        out.push(Change::Session(session));
        session
    }

    /// One sample per minute, taken by the first operation of the minute.
    fn sample(&mut self, now: u64, out: &mut Vec<Change>) {
        let minute_ms = now - now % 60_000;
        if self
            .history
            .back()
            .is_some_and(|s| s.minute_ms >= minute_ms)
        {
            return;
        }
        let status = self.status();
        let sample = Sample {
            minute_ms,
            waiting: status.waiting(),
            active: status.active,
            admitted: status.admitted,
        };
        self.history.push_back(sample);
        out.push(Change::Sample(sample));
        if self.history.len() > HISTORY_MINUTES {
            self.history.pop_front();
            if let Some(oldest) = self.history.front() {
                out.push(Change::SamplesBefore {
                    minute_ms: oldest.minute_ms,
                });
            }
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
