//! A request a waiting room's rule matched, decided without I/O, as
//! `gate` decides a rate-limited one: [`Room::plan`] says what it needs
//! (pass, the waiting page, or one call to its shard) and
//! [`Room::conclude`] turns the shard's answer into a pass or a page.
//! `edge/room/visit.rs` does the I/O between them.
//!
//! What costs a call: a newcomer (to join or pass straight in), a ticket
//! whose turn may have come (a place below "now serving"), a ticket whose
//! shard the isolate has not seen for [`STATUS_TTL_MS`], and a session due
//! for renewal (at most once a minute). A waiting visitor's refresh is
//! answered from the isolate's view of its shard; an admitted visitor's
//! requests are checked by the cookie's signature alone.
//!
//! An operator's state comes with each shard's status: a paused room's
//! page says so (the shard lets nobody in), a closed room answers `410`,
//! to a ticket from the isolate's view and to a newcomer from a fresh
//! view of its shard, both without a call; sessions pass as ever.
//!
//! A newcomer first passes [`Room::admit`]: only a page load or an API
//! call takes a place (`arrival`), not before the pre-queue opens, and
//! with a challenge only with a solved puzzle; then the edge asks the
//! room rule's join limit, and only then the shard.

use super::challenge;
use super::cookie::{self, Pass, Signed, Signer, Ticket};
use super::page::Standing;
use super::shard::{Holding, Number, Status, Terms, Turn};
use super::views::{Views, STATUS_TTL_MS};
use crate::bounds::DAY_MS;
use crate::config::room::{WaitingRoom, PRE_QUEUE_OPENS_MS};
use crate::control::{Control, RuleState};
use crate::http::jwt::Hs256Key;
use crate::limit::split::share;

/// A ticket is kept a day after its holder joined, or after the room
/// opened for a pre-queue ticket: longer than anyone waits at one go.
pub const TICKET_TTL_MS: u64 = DAY_MS;

/// Sessions are renewed through their shard at most this often.
pub const RENEW_EVERY_MS: u64 = 60_000;

/// One room: its rule's id, its config, the key its cookies are signed
/// with.
pub struct Room<'a> {
    pub id: &'a str,
    pub config: &'a WaitingRoom,
    pub key: &'a Hs256Key,
}

/// A cookie to set: its value and how long it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie {
    pub value: String,
    pub max_age_s: u64,
}

/// What a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// To the origin, with a session; `cookie` renews the visitor's.
    Pass { pass: Pass, cookie: Option<Cookie> },
    /// The waiting page, and the ticket's cookie (none for a newcomer
    /// the pre-queue does not take yet); `paused` holds the operator's
    /// reason while the room is paused.
    Wait {
        standing: Standing,
        cookie: Option<Cookie>,
        paused: Option<String>,
    },
    /// A newcomer without a solved puzzle: this one to solve.
    Challenge(String),
    /// Not a page load nor an API call, and no session: no place, no
    /// call (`arrival`).
    NoPlace,
    /// The room is closed: `410`, no cookie set, so that a ticket keeps
    /// its place should the room open again.
    Closed(Control),
    /// One call to shard `shard`, then [`Room::conclude`].
    Ask { shard: u32, holding: Holding },
}

/// Shard `shard`'s terms: its share of the places and of the rate (the
/// shares differ by at most one and sum to the room's), and the room's
/// durations.
pub fn terms(config: &WaitingRoom, shard: u32) -> Terms {
    let part = |total: u32| share(u64::from(total), config.shards, shard) as u32;
    Terms {
        places: part(config.active),
        per_minute: part(config.per_minute),
        session_ms: config.session_ms,
        grace_ms: grace_ms(config),
        opens_at_ms: config.opens_at_ms,
    }
}

/// How long an offer waits: two refreshes of the page and two status
/// lifetimes, so that a visitor whose page keeps refreshing cannot miss
/// its turn even when one refresh is lost.
pub fn grace_ms(config: &WaitingRoom) -> u64 {
    2 * config.refresh_ms + 2 * STATUS_TTL_MS
}

impl Room<'_> {
    pub fn terms(&self, shard: u32) -> Terms {
        terms(self.config, shard)
    }

    /// How often a session is renewed: once a minute, or twice per session
    /// for one shorter than two minutes, so it never lapses while in use.
    pub fn renew_every_ms(&self) -> u64 {
        RENEW_EVERY_MS.min(self.config.session_ms / 2)
    }

    /// The signer of the room's cookies and puzzles.
    pub fn signer(&self) -> Signer<'_> {
        Signer {
            room: self.id,
            key: self.key,
        }
    }

    /// The room's cookie a request brings, if one is signed by this room
    /// and still good: a ticket of an existing shard, not past its day; a
    /// session not past its end. Anything else is no cookie: the visitor
    /// joins at the back.
    pub fn held(&self, cookie_field: Option<&str>, now: u64) -> Option<Signed> {
        let name = cookie::name(self.id);
        let signer = self.signer();
        cookie::values(cookie_field?, &name).find_map(|value| {
            let signed = signer.read(value)?;
            let good = match signed {
                Signed::Ticket(t) => t.shard < self.config.shards && now < self.ticket_ends(&t),
                Signed::Session(p) => p.shard < self.config.shards && now < p.expires_ms,
                Signed::Puzzle(_) => false,
            };
            good.then_some(signed)
        })
    }

    /// Whether a newcomer may ask to join: `Ok` with the id of the puzzle
    /// it solved (to spend) if the room has a challenge, or the answer
    /// it gets instead: no place for a request that is no page load nor
    /// API call (`joins`), the page without a ticket before the
    /// pre-queue opens, a puzzle (numbered `id`) for one without a good
    /// `answered` one.
    pub fn admit(
        &self,
        joins: bool,
        answered: Option<&str>,
        now: u64,
        id: u64,
    ) -> Result<Option<u64>, Step> {
        if !joins {
            return Err(Step::NoPlace);
        }
        if let Some(at) = self.config.opens_at_ms {
            if now.saturating_add(PRE_QUEUE_OPENS_MS) < at {
                return Err(self.before_opening(now));
            }
        }
        let Some(bits) = self.config.work_bits else {
            return Ok(None);
        };
        let signer = self.signer();
        match answered.and_then(|a| challenge::solved(&signer, bits, a, now)) {
            Some(puzzle) => Ok(Some(puzzle.id)),
            None => Err(Step::Challenge(challenge::issue(&signer, bits, now, id))),
        }
    }

    /// The page before opening, without a ticket.
    fn before_opening(&self, now: u64) -> Step {
        let opens_at_ms = self.config.opens_at_ms.unwrap_or(now);
        Step::Wait {
            standing: Standing::BeforeOpening {
                opens_at_ms,
                opens_in_s: opens_at_ms.saturating_sub(now).div_ceil(1000),
            },
            cookie: None,
            paused: None,
        }
    }

    /// What a request holding `held` needs, by the isolate's `views` of
    /// the shards. `pick` is two random numbers that place a newcomer: of
    /// two shards drawn at random, the one the isolate last saw with fewer
    /// waiting (the first, when it has not seen both). Two choices halve
    /// how far from arrival order the shards let visitors in
    /// (`examples/room_order.rs`).
    pub fn plan(&self, held: Option<Signed>, now: u64, views: &Views, pick: (u32, u32)) -> Step {
        match held {
            Some(Signed::Session(pass)) => {
                if now >= pass.renewed_ms.saturating_add(self.renew_every_ms()) {
                    Step::Ask {
                        shard: pass.shard,
                        holding: Holding::Session(pass.id),
                    }
                } else {
                    Step::Pass { pass, cookie: None }
                }
            }
            Some(Signed::Ticket(ticket)) => {
                let ask = Step::Ask {
                    shard: ticket.shard,
                    holding: Holding::Ticket(ticket.number),
                };
                match views.fresh(self.id, ticket.shard, now) {
                    Some(status) => self.waiting(ticket, status, now).unwrap_or(ask),
                    None => ask,
                }
            }
            Some(Signed::Puzzle(_)) | None => {
                let shards = self.config.shards.max(1);
                let (a, b) = (pick.0 % shards, pick.1 % shards);
                let waiting = |shard| views.last(self.id, shard).map(|s| s.waiting());
                let shard = match (waiting(a), waiting(b)) {
                    (Some(wa), Some(wb)) if wb < wa => b,
                    _ => a,
                };
                let closed = views
                    .fresh(self.id, shard, now)
                    .and_then(|status| status.in_state(RuleState::Closed));
                if let Some(control) = closed {
                    return Step::Closed(control.clone());
                }
                // Once the room opens by this isolate's clock, a newcomer
                // is not counted in the pre-queue's cap, and so may take
                // no pre-queue number (a shard whose clock is behind
                // answers `NotOpen`).
                let opened = self.config.opens_at_ms.is_some_and(|at| now >= at);
                let holding = if opened {
                    Holding::Opened
                } else {
                    Holding::Nothing
                };
                Step::Ask { shard, holding }
            }
        }
    }

    /// What still holds when the shard cannot answer: a session until its
    /// end (unrenewed), a ticket's place by the last view of its shard,
    /// however old. `None` when nothing does.
    pub fn without_shard(&self, held: Option<Signed>, now: u64, views: &Views) -> Option<Step> {
        match held? {
            Signed::Session(pass) => Some(Step::Pass { pass, cookie: None }),
            Signed::Ticket(ticket) => {
                let status = views.last(self.id, ticket.shard)?;
                self.waiting(ticket, status, now)
            }
            Signed::Puzzle(_) => None,
        }
    }

    /// What shard `shard`'s answer means for a request that held `held`.
    pub fn conclude(
        &self,
        held: Option<Signed>,
        shard: u32,
        turn: Turn,
        status: &Status,
        now: u64,
    ) -> Step {
        match turn {
            Turn::Session(session) => {
                let pass = Pass {
                    shard,
                    id: session.id,
                    expires_ms: session.expires_ms,
                    renewed_ms: now,
                };
                let cookie = Cookie {
                    value: self.signer().write(&Signed::Session(pass)),
                    max_age_s: session.expires_ms.saturating_sub(now) / 1000,
                };
                Step::Pass {
                    pass,
                    cookie: Some(cookie),
                }
            }
            Turn::NotOpen => self.before_opening(now),
            Turn::Closed => Step::Closed(status.in_state(RuleState::Closed).cloned().unwrap_or(
                Control {
                    state: RuleState::Closed,
                    reason: String::new(),
                    set_ms: 0,
                },
            )),
            Turn::Wait { number, fresh } => {
                let ticket = match held {
                    Some(Signed::Ticket(t)) if !fresh && t.shard == shard && t.number == number => {
                        t
                    }
                    _ => Ticket {
                        shard,
                        number,
                        joined_ms: now,
                        seen: status.counters.serving,
                    },
                };
                // The shard said wait, so the place is not below its "now
                // serving"; should the view disagree, the shard knows best.
                self.waiting(ticket, status, now).unwrap_or_else(|| {
                    self.wait(
                        ticket,
                        status,
                        Standing::InLine {
                            position: 1,
                            wait_s: status.wait_s(1),
                            drawn: matches!(ticket.number, Number::Pre(_)),
                        },
                        now,
                    )
                })
            }
        }
    }

    /// The waiting page for `ticket` by `status`; `None` when its turn may
    /// have come (or the view cannot place it), which only its shard can
    /// tell. A closed shard's answer, whatever the ticket.
    fn waiting(&self, ticket: Ticket, status: &Status, now: u64) -> Option<Step> {
        if let Some(control) = status.in_state(RuleState::Closed) {
            return Some(Step::Closed(control.clone()));
        }
        if !status.counters.opened {
            let opens_at_ms = self.config.opens_at_ms.unwrap_or(now);
            let standing = Standing::BeforeOpening {
                opens_at_ms,
                opens_in_s: opens_at_ms.saturating_sub(now).div_ceil(1000),
            };
            return Some(self.wait(ticket, status, standing, now));
        }
        let place = status.place_of(ticket.number)?;
        let serving = status.counters.serving.max(ticket.seen);
        if place < serving {
            return None;
        }
        let position = place - serving + 1;
        let standing = Standing::InLine {
            position,
            wait_s: status.wait_s(position),
            drawn: matches!(ticket.number, Number::Pre(_)),
        };
        Some(self.wait(ticket, status, standing, now))
    }

    fn wait(&self, ticket: Ticket, status: &Status, standing: Standing, now: u64) -> Step {
        let ticket = Ticket {
            seen: ticket.seen.max(status.counters.serving),
            ..ticket
        };
        Step::Wait {
            standing,
            cookie: Some(Cookie {
                value: self.signer().write(&Signed::Ticket(ticket)),
                max_age_s: self.ticket_ends(&ticket).saturating_sub(now) / 1000,
            }),
            paused: status
                .in_state(RuleState::Paused)
                .map(|control| control.reason.clone()),
        }
    }

    fn ticket_ends(&self, ticket: &Ticket) -> u64 {
        let from = ticket.joined_ms.max(self.config.opens_at_ms.unwrap_or(0));
        from.saturating_add(TICKET_TTL_MS)
    }
}

#[cfg(test)]
mod tests;
