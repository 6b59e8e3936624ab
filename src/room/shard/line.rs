//! One line for the whole room, over its shards (docs/algorithms.md, "One
//! line for the whole room").
//!
//! **Keys.** A ticket's key is when it joined: a shard keeps a point (a
//! place and its time) per second of arrivals at most and reads the places
//! between by interpolation. A drawn pre-queue's places spread evenly over
//! the minute before opening, so that the shards' draws interleave.
//!
//! **Heads.** What a shard knows of the others is each one's *head*: the
//! key of its oldest ticket not yet called, and how many wait. A head is
//! only ever learned from the shard itself, and a shard's head key only
//! grows (a ticket called, a newcomer behind), so what a shard knows is a
//! lower bound, never newer than the truth. The room's coordinator
//! (shard 0) gathers every head and hands out all of them once a round
//! while anyone waits; each gift carries its giver's knowledge too.
//!
//! **Calls.** A shard offers a place to its next ticket only when no head
//! it knows is older. So a called ticket never overtakes one that was
//! waiting when the caller last heard of its shard: only tickets that
//! joined since, by less than the age of that news.
//!
//! **Places that follow the line.** A shard whose next ticket may not be
//! called gives every place and start it has spare to the shard with the
//! oldest head it knows. What one shard gave another, and what it got from
//! it, are counts that only grow, kept by both: the giver takes what it
//! gave off its share at once, the taker adds what it got when it hears,
//! and hearing the same count twice or late changes nothing. So the
//! shards' places and starts never sum to more than the room's, whatever
//! is lost, repeated or reordered, and a place or start given was free
//! where it was given: a start given was not used in the giver's last
//! 60 s, and is used after it, so no 60 s of the room holds more than
//! `per_minute` starts.

use serde::{Deserialize, Serialize};

use super::{Change, Shard, RATE_WINDOW_MS};

/// The coordinator's rounds while anyone waits.
pub const ROUND_MS: u64 = 1_000;

/// At most one point per this much time.
const POINT_MS: u64 = 10;

/// A drawn pre-queue's keys spread over this much time before opening.
const PRE_SPAN_MS: u64 = 60_000;

/// Places and starts a minute, given or got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    pub places: u64,
    pub starts: u64,
}

impl Pair {
    fn max(self, other: Pair) -> Pair {
        Pair {
            places: self.places.max(other.places),
            starts: self.starts.max(other.starts),
        }
    }

    fn add(self, other: Pair) -> Pair {
        Pair {
            places: self.places.saturating_add(other.places),
            starts: self.starts.saturating_add(other.starts),
        }
    }

    fn covers(self, other: Pair) -> bool {
        self.places >= other.places && self.starts >= other.starts
    }
}

/// What a shard gave one peer and got from it, in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub gave: Pair,
    pub got: Pair,
    /// How much of `gave` the peer said it holds; memory only (after a
    /// restart every grant is sent again, which counts nothing twice).
    #[serde(skip)]
    pub acked: Pair,
}

/// A shard's line as others know it: the key of its oldest ticket not yet
/// called and how many wait (with nobody waiting, the moment it said so),
/// and how far its line has come (tickets handed out and called, which
/// only grows): of two heads of one shard, the further is the newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub key: u64,
    pub waiting: u64,
    pub line: u64,
    /// Places and starts it had free: a peer stuck without may ask it,
    /// and a giver gives it only what it lacked.
    pub spare: Pair,
}

/// A shard's gift to a peer: what it gave it in all, and what it knows of
/// every shard's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gift {
    pub from: u32,
    pub gave: Pair,
    pub heads: Vec<Option<Head>>,
}

/// The gathering, as one shard takes part in it; memory only.
#[derive(Debug, Clone, Copy, Default)]
pub struct Round {
    /// The coordinator's next round.
    pub due_ms: Option<u64>,
    /// When the shard last heard from a round.
    heard_ms: Option<u64>,
    /// When it last asked the coordinator for one.
    asked_ms: Option<u64>,
    /// When it last asked a peer for what it had spare.
    pulled_ms: Option<u64>,
    /// Whether the coordinator last heard that tickets wait here.
    told: bool,
}

impl Shard {
    /// The places and starts the shard holds: its share, plus what peers
    /// gave it, less what it gave them (of peers `0..shards` only).
    pub(super) fn caps(&self) -> Pair {
        let own = self.terms.own();
        let (mut places, mut starts) = (i128::from(own.places), i128::from(own.starts));
        for (_, grant) in self.grants.iter().filter(|(p, _)| self.is_peer(*p)) {
            places += i128::from(grant.got.places) - i128::from(grant.gave.places);
            starts += i128::from(grant.got.starts) - i128::from(grant.gave.starts);
        }
        let clamp = |n: i128| u64::try_from(n.max(0)).unwrap_or(u64::MAX);
        Pair {
            places: clamp(places),
            starts: clamp(starts),
        }
    }

    fn is_peer(&self, peer: u64) -> bool {
        peer < u64::from(self.terms.shards) && peer != u64::from(self.terms.shard)
    }

    /// Places and starts free now: sessions and offers take places, starts
    /// of the last 60 s and offers take starts.
    pub fn spare(&self, now: u64) -> Pair {
        let caps = self.caps();
        let offered = self.offers.len() as u64;
        let since = (now + 1).saturating_sub(RATE_WINDOW_MS);
        let started = self.log.held() - self.log.logged_before(since);
        Pair {
            places: caps
                .places
                .saturating_sub(self.sessions.len() as u64 + offered),
            starts: caps.starts.saturating_sub(started + offered),
        }
    }

    /// When the ticket of `place` joined, as the points tell: a point is
    /// added at the first join a second after the last, so the places
    /// between two points joined within that second of the first, spread
    /// evenly over it; places after the last point read as its time. A
    /// place's key so never falls as points are added.
    pub(super) fn key(&self, place: u64) -> u64 {
        let i = match self.points.find(place) {
            Ok(i) => i,
            Err(0) => return 0,
            Err(i) => i - 1,
        };
        let Some((p0, &t0)) = self.points.at(i) else {
            return 0;
        };
        let Some((p1, &t1)) = self.points.at(i + 1) else {
            return t0;
        };
        let mut span = t1.saturating_sub(t0);
        if p0 >= self.counters.pre {
            span = span.min(POINT_MS);
        }
        let offset = u128::from(span) * u128::from(place - p0) / u128::from(p1 - p0);
        t0 + offset as u64
    }

    /// A ticket joined at `place`, now: a point if the last is a second old.
    pub(super) fn joined(&mut self, now: u64, place: u64, out: &mut Vec<Change>) {
        let last = self
            .points
            .len()
            .checked_sub(1)
            .and_then(|i| self.points.at(i));
        if last.is_none_or(|(_, &ms)| now >= ms + POINT_MS) {
            self.points.insert(place, now);
            out.push(Change::Point { place, ms: now });
        }
    }

    /// At opening, the drawn places `start..pre` spread evenly over the
    /// minute before `opens_ms`, so that every shard's draw interleaves.
    pub(super) fn drawn(&mut self, opens_ms: u64, (start, pre): (u64, u64), out: &mut Vec<Change>) {
        if pre > start {
            for (place, ms) in [
                (start, opens_ms.saturating_sub(PRE_SPAN_MS)),
                (pre, opens_ms),
            ] {
                self.points.insert(place, ms);
                out.push(Change::Point { place, ms });
            }
        }
    }

    /// Forgets the points of places all called.
    pub(super) fn prune(&mut self, out: &mut Vec<Change>) {
        let serving = self.counters.serving;
        let called = |shard: &Shard| shard.points.at(1).is_some_and(|(p, _)| p <= serving);
        if !called(self) {
            return;
        }
        while called(self) {
            let first = self.points.at(0).map(|(p, _)| p).unwrap_or(serving);
            self.points.remove(first);
        }
        let place = self.points.at(0).map_or(serving, |(p, _)| p);
        out.push(Change::PointsBefore { place });
    }

    /// The shard's line now: before opening, its whole pre-queue, as old
    /// as a draw's first place.
    pub fn head(&self, now: u64) -> Head {
        let c = &self.counters;
        let (key, waiting) = match c.opened {
            true if c.serving < c.next => (self.key(c.serving), c.next - c.serving),
            false if c.pre > c.start => {
                let opens = self.terms.opens_at_ms.unwrap_or(now);
                (opens.saturating_sub(PRE_SPAN_MS), c.pre - c.start)
            }
            _ => (now, 0),
        };
        let line = c.serving.saturating_add(c.next).saturating_add(c.pre);
        Head {
            key,
            waiting,
            line,
            spare: self.spare(now),
        }
    }

    /// What the shard knows of every shard's line, its own as of now.
    pub fn heads(&self, now: u64) -> Vec<Option<Head>> {
        let mut heads = self.heads.clone();
        if let Some(own) = heads.get_mut(self.terms.shard as usize) {
            *own = Some(self.head(now));
        }
        heads
    }

    /// Tickets waiting in the room, as far as the shard knows.
    pub(super) fn room_waiting(&self) -> u64 {
        let own = self.counters.next.saturating_sub(self.counters.serving);
        let others = (0u64..).zip(&self.heads).filter(|(j, _)| self.is_peer(*j));
        own + others
            .filter_map(|(_, h)| h.map(|h| h.waiting))
            .sum::<u64>()
    }

    /// Whether a ticket of `key` may be called: no shard known to hold an
    /// older one (of equal keys, the lower shard's is the older).
    pub(super) fn callable(&self, key: u64) -> bool {
        (0u64..).zip(&self.heads).all(|(j, head)| {
            !self.is_peer(j) || head.is_none_or(|h| h.waiting == 0 || !self.older(&h, j, key))
        })
    }

    /// Whether peer `j`'s head `h` is older than this shard's ticket of
    /// `key`: the order is by key, then by shard, so that it is total.
    fn older(&self, h: &Head, j: u64, key: u64) -> bool {
        (h.key, j) < (key, u64::from(self.terms.shard))
    }

    /// Gives what the shard has spare, when its own next ticket may not be
    /// called (or it has none), to the shards known to hold older ones,
    /// oldest first, to each at most as much as waits there: the rest
    /// stays, for newcomers here.
    pub(super) fn give(&mut self, now: u64, out: &mut Vec<Change>) {
        if self.control.is_some() || !self.counters.opened {
            return;
        }
        let own = self.head(now);
        if own.waiting > 0 && self.callable(own.key) {
            return;
        }
        let older = |h: &Head, j| h.waiting > 0 && (own.waiting == 0 || self.older(h, j, own.key));
        let mut targets: Vec<(u64, u64, Head)> = (0u64..)
            .zip(&self.heads)
            .filter(|(j, _)| self.is_peer(*j))
            .filter_map(|(j, h)| h.filter(|h| older(h, j)).map(|h| (h.key, j, h)))
            .collect();
        targets.sort_unstable_by_key(|&(key, j, _)| (key, j));
        let mut spare = self.spare(now);
        for (_, peer, head) in targets {
            let gift = Pair {
                places: spare.places.min(head.waiting),
                starts: spare.starts.min(head.waiting),
            };
            if gift == Pair::default() {
                continue;
            }
            spare = Pair {
                places: spare.places - gift.places,
                starts: spare.starts - gift.starts,
            };
            let mut grant = self.grants.get(peer).copied().unwrap_or_default();
            grant.gave = grant.gave.add(gift);
            self.grants.insert(peer, grant);
            out.push(Change::Grant {
                peer: peer as u32,
                grant,
            });
        }
    }

    /// Heads answered by peers: learned, and what follows done.
    pub fn learn(
        &mut self,
        now: u64,
        heads: &[Option<Head>],
        draw: &mut impl FnMut() -> u64,
    ) -> Vec<Change> {
        self.operate(now, draw, |shard, _| shard.merge(heads)).1
    }

    /// Takes what others know of the line: for each shard, the newer of
    /// the two heads.
    fn merge(&mut self, heads: &[Option<Head>]) {
        for (j, (mine, theirs)) in (0u64..).zip(self.heads.iter_mut().zip(heads)) {
            let newer = theirs.filter(|t| mine.is_none_or(|m| t.line > m.line));
            if j != u64::from(self.terms.shard) && newer.is_some() {
                *mine = newer;
            }
        }
    }

    /// A peer's gift: what it gave in all, and its knowledge. Answers what
    /// this shard holds as got from it.
    pub fn receive(
        &mut self,
        now: u64,
        gift: &Gift,
        draw: &mut impl FnMut() -> u64,
    ) -> (Pair, Vec<Change>) {
        self.operate(now, draw, |shard, out| {
            shard.merge(&gift.heads);
            let peer = u64::from(gift.from);
            if !shard.is_peer(peer) {
                return Pair::default();
            }
            let mut grant = shard.grants.get(peer).copied().unwrap_or_default();
            if !grant.got.covers(gift.gave) {
                grant.got = grant.got.max(gift.gave);
                shard.grants.insert(peer, grant);
                out.push(Change::Grant {
                    peer: peer as u32,
                    grant,
                });
            }
            grant.got
        })
    }

    /// A round of the gathering reached the shard with every head; at the
    /// coordinator, a peer asks for a round (it is due at once). Answers
    /// the shard's head, which the coordinator learns.
    pub fn gather(
        &mut self,
        now: u64,
        heads: &[Option<Head>],
        draw: &mut impl FnMut() -> u64,
    ) -> (Head, Vec<Change>) {
        let changes = self
            .operate(now, draw, |shard, _| {
                shard.merge(heads);
                shard.round.heard_ms = Some(now);
                if shard.terms.shard == 0 {
                    shard.round.due_ms = Some(now);
                }
            })
            .1;
        let head = self.head(now);
        self.round.told = head.waiting > 0;
        (head, changes)
    }

    /// The coordinator's round is over: every head it gathered. The next
    /// is due in a round while anyone waits.
    pub fn gathered(
        &mut self,
        now: u64,
        heads: &[Option<Head>],
        draw: &mut impl FnMut() -> u64,
    ) -> Vec<Change> {
        self.operate(now, draw, |shard, _| {
            shard.merge(heads);
            shard.round.heard_ms = Some(now);
            let waiting = shard.room_waiting() > 0;
            shard.round.due_ms = waiting.then_some(now + ROUND_MS);
        })
        .1
    }

    /// Whether the coordinator's round is due.
    pub fn round_due(&self, now: u64) -> bool {
        self.round.due_ms.is_some_and(|at| at <= now)
    }

    /// Whether to ask the coordinator for a round: tickets wait here, and
    /// the coordinator was not told so, or no round came for two; not
    /// twice within a round.
    pub fn wants_round(&self, now: u64) -> bool {
        let old = |at: Option<u64>, rounds| at.is_none_or(|at| now >= at + rounds * ROUND_MS);
        let c = &self.counters;
        self.terms.shard != 0
            && c.opened
            && c.serving < c.next
            && (!self.round.told || old(self.round.heard_ms, 2))
            && old(self.round.asked_ms, 1)
    }

    /// The peer to ask for what it has spare, if any: the shard's next
    /// ticket may be called but it has no place or no start free, and a
    /// peer had some (the peer that had most); not twice within a tenth of
    /// a round.
    pub fn wants_gift(&self, now: u64) -> Option<u32> {
        let own = self.head(now);
        let spare = self.spare(now);
        let stuck = self.control.is_none()
            && self.counters.opened
            && own.waiting > 0
            && self.callable(own.key)
            && (spare.places == 0 || spare.starts == 0);
        let recent = self
            .round
            .pulled_ms
            .is_some_and(|at| now < at + ROUND_MS / 10);
        if !stuck || recent {
            return None;
        }
        let peers = (0u64..).zip(&self.heads).filter(|(j, _)| self.is_peer(*j));
        let has = |h: &Head| {
            if spare.places == 0 {
                h.spare.places
            } else {
                h.spare.starts
            }
        };
        let richest = peers.filter_map(|(j, h)| h.filter(|h| has(h) > 0).map(|h| (has(&h), j)));
        richest.max().map(|(_, j)| j as u32)
    }

    /// The shard asked a peer for what it has spare.
    pub fn pulled(&mut self, now: u64) {
        self.round.pulled_ms = Some(now);
    }

    /// The shard asked for a round, telling its head.
    pub fn asked_round(&mut self, now: u64) {
        self.round.asked_ms = Some(now);
        self.round.told = self.head(now).waiting > 0;
    }

    /// The gifts a peer has not said it holds: `(peer, gave in all)`.
    pub fn owed(&self) -> Vec<(u32, Pair)> {
        let owed = self
            .grants
            .iter()
            .filter(|(p, g)| self.is_peer(*p) && !g.acked.covers(g.gave));
        owed.map(|(p, g)| (p as u32, g.gave)).collect()
    }

    /// What the shard gave and got of peer `peer`.
    pub fn grant(&self, peer: u32) -> Grant {
        self.grants
            .get(u64::from(peer))
            .copied()
            .unwrap_or_default()
    }

    /// Peer `peer` holds `got` of what this shard gave it.
    pub fn acked(&mut self, peer: u32, got: Pair) {
        if let Some(grant) = self.grants.get_mut(u64::from(peer)) {
            grant.acked = grant.acked.max(got);
        }
    }
}
