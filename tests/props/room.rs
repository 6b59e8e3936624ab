//! A waiting room's shard against visitors who arrive, refresh, copy each
//! other's tickets, leave without a word, get ended by the origin, and
//! against restarts: whatever the interleaving,
//! - live sessions plus unclaimed offers never exceed the places;
//! - no 60 s window holds more session starts than `per_minute`;
//! - places are offered in order (first come, first served), and a
//!   newcomer is let straight in only when nobody waits;
//! - a place gives at most one session, ever;
//! - a restart (the shard read back from what its changes stored) changes
//!   nothing, and an outage (time with no alarm and no call) takes nothing
//!   from an offer's grace;
//! - an operator's reset leaves nobody waiting, in or offered, and the
//!   promises above hold across it;
//! - while an operator holds the shard paused or closed, no session starts
//!   and no place is offered; a ticket not yet called keeps its place
//!   (paused: it waits; closed: it is turned away); a closed shard hands
//!   out no ticket.
//!
//! And once arrivals stop and the shard is open, every visitor who keeps
//! refreshing is let in, a shuffled pre-queue included, in order and
//! within the limits above; and the lottery is a permutation.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice::control::{Control, RuleState};
use sluice::room::lottery;
use sluice::room::shard::{
    Change, Counters, Holding, Number, Offer, Sample, Session, Shard, Stored, Terms, Turn,
    RATE_WINDOW_MS,
};

const GRACE_MS: u64 = 40_000;

#[derive(Debug, Clone)]
enum Step {
    Arrive,
    /// Visitor `pick` (of those not gone) comes back with what it holds.
    Refresh(usize),
    /// Someone comes with a copy of `pick`'s cookie.
    Copy(usize),
    /// The origin ends `pick`'s session.
    End(usize),
    /// `pick` leaves without a word and never comes back.
    Leave(usize),
    Alarm,
    Restart,
    /// Time passes; the alarm runs whenever it is due.
    Wait(u64),
    /// The runtime is down this long: no alarm, no call.
    Outage(u64),
    /// An operator resets the room: the line starts over.
    Reset,
    /// An operator sets the shard's state.
    Set(RuleState),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Arrive),
        6 => any::<usize>().prop_map(Step::Refresh),
        1 => any::<usize>().prop_map(Step::Copy),
        2 => any::<usize>().prop_map(Step::End),
        1 => any::<usize>().prop_map(Step::Leave),
        1 => Just(Step::Alarm),
        1 => Just(Step::Restart),
        4 => (0u64..25_000).prop_map(Step::Wait),
        1 => (5_000u64..60_000).prop_map(Step::Outage),
        1 => Just(Step::Reset),
        2 => prop_oneof![
            Just(RuleState::Open),
            Just(RuleState::Paused),
            Just(RuleState::Closed)
        ]
        .prop_map(Step::Set),
    ]
}

fn terms() -> impl Strategy<Value = Terms> {
    (1u32..5, 1u32..6, 20u64..200, any::<bool>()).prop_map(
        |(places, per_minute, session_s, pre)| Terms {
            places,
            per_minute,
            session_ms: session_s * 1000,
            grace_ms: GRACE_MS,
            opens_at_ms: pre.then_some(90_000),
        },
    )
}

/// What the model watches a shard do.
#[derive(Default)]
struct Watch {
    /// Start time of every session, by id.
    started: BTreeMap<u64, u64>,
    /// Sessions that ended or lapsed: never to be given again.
    over: BTreeSet<u64>,
    /// Places offered or let straight in, in the order it happened.
    called: Vec<u64>,
}

impl Watch {
    /// What one operation changed; `halted` when the shard was paused or
    /// closed both before and after it.
    fn saw(
        &mut self,
        changes: &[Change],
        shard: &Shard,
        halted: bool,
    ) -> Result<(), TestCaseError> {
        for change in changes {
            match *change {
                Change::Offer { place, .. } if !self.called.contains(&place) => {
                    prop_assert!(!halted, "place {place} offered while halted");
                    self.called.push(place);
                }
                Change::Session(s) if !self.started.contains_key(&s.id) => {
                    prop_assert!(!halted, "session {} started while halted", s.id);
                    prop_assert!(
                        !self.over.contains(&s.id),
                        "session {} given again after it ended",
                        s.id
                    );
                    self.started.insert(s.id, s.started_ms);
                    // Let straight in (never offered): it is the next place.
                    if !self.called.contains(&s.id) {
                        self.called.push(s.id);
                    }
                }
                Change::SessionGone { id } => {
                    self.over.insert(id);
                }
                _ => {}
            }
        }
        let status = shard.status();
        prop_assert!(
            status.active + status.offered <= shard.terms().places,
            "{} sessions and {} offers over {} places",
            status.active,
            status.offered,
            shard.terms().places
        );
        prop_assert!(
            self.called.windows(2).all(|w| w[0] < w[1]),
            "places called out of order: {:?}",
            self.called
        );
        let mut starts: Vec<u64> = self.started.values().copied().collect();
        starts.sort_unstable();
        let per_minute = shard.terms().per_minute as usize;
        for (i, &from) in starts.iter().enumerate() {
            let inside = starts[i..]
                .iter()
                .take_while(|&&t| t < from + RATE_WINDOW_MS)
                .count();
            prop_assert!(
                inside <= per_minute,
                "{inside} starts within 60 s of {from} (rate {per_minute})"
            );
        }
        Ok(())
    }
}

/// Storage as a map, applying changes as the object's SQL does.
#[derive(Default)]
struct Store {
    terms: Option<Terms>,
    counters: Counters,
    offers: BTreeMap<u64, Offer>,
    sessions: BTreeMap<u64, Session>,
    admitted: BTreeMap<u64, u32>,
    samples: BTreeMap<u64, Sample>,
    control: Option<Control>,
}

impl Store {
    fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            match *change {
                Change::Terms(t) => self.terms = Some(t),
                Change::Counters(c) => self.counters = c,
                Change::Offer { place, offer } => {
                    self.offers.insert(place, offer);
                }
                Change::OfferGone { place } => {
                    self.offers.remove(&place);
                }
                Change::Session(s) => {
                    self.sessions.insert(s.id, s);
                }
                Change::SessionGone { id } => {
                    self.sessions.remove(&id);
                }
                Change::Admitted { at_ms } => *self.admitted.entry(at_ms).or_default() += 1,
                Change::AdmittedBefore { at_ms } => self.admitted.retain(|&at, _| at > at_ms),
                Change::Sample(s) => {
                    self.samples.insert(s.minute_ms, s);
                }
                Change::SamplesBefore { minute_ms } => self.samples.retain(|&m, _| m >= minute_ms),
                Change::Control(ref control) => self.control.clone_from(control),
            }
        }
    }

    fn stored(&self) -> Stored {
        Stored {
            counters: self.counters,
            offers: self.offers.iter().map(|(p, o)| (*p, *o)).collect(),
            sessions: self.sessions.values().copied().collect(),
            admitted: self.admitted.iter().map(|(a, n)| (*a, *n)).collect(),
            history: self.samples.values().copied().collect(),
            control: self.control.clone(),
        }
    }
}

/// A shard, its storage and the model's eye on both.
struct Room {
    shard: Shard,
    store: Store,
    watch: Watch,
    now: u64,
    seeds: u64,
}

impl Room {
    fn new(terms: Terms) -> Room {
        Room {
            shard: Shard::new(terms),
            store: Store {
                terms: Some(terms),
                ..Store::default()
            },
            watch: Watch::default(),
            now: 0,
            seeds: 0,
        }
    }

    fn visit(&mut self, holding: Holding) -> Result<Turn, TestCaseError> {
        let halted = self.shard.control().map(|c| c.state);
        let before = self.shard.status();
        let seeds = &mut self.seeds;
        let (turn, changes) = self.shard.visit(self.now, holding, &mut || {
            *seeds += 1;
            0x5eed_0000 + *seeds
        });
        self.record(&changes, halted.is_some())?;
        let Some(state) = halted else {
            return Ok(turn);
        };
        // A ticket not yet called keeps its place, whatever the state.
        if let Holding::Ticket(number) = holding {
            let uncalled = before
                .place_of(number)
                .is_some_and(|place| place >= before.counters.serving);
            if uncalled {
                let kept = match state {
                    RuleState::Closed => Turn::Closed,
                    _ => Turn::Wait {
                        number,
                        fresh: false,
                    },
                };
                prop_assert_eq!(turn, kept);
            }
        }
        if state == RuleState::Closed {
            prop_assert!(
                matches!(turn, Turn::Closed | Turn::Session(_)),
                "closed, it answered {:?}",
                turn
            );
            let (c, b) = (self.shard.counters(), before.counters);
            prop_assert_eq!(
                (c.next.max(c.pre), c.pre),
                (b.next.max(b.pre), b.pre),
                "a ticket handed out while closed"
            );
        }
        Ok(turn)
    }

    fn end(&mut self, id: u64) -> Result<(), TestCaseError> {
        let halted = self.shard.control().is_some();
        let (_, changes) = self.shard.end(self.now, id, &mut || 1);
        self.record(&changes, halted)
    }

    fn alarm(&mut self) -> Result<(), TestCaseError> {
        let halted = self.shard.control().is_some();
        let changes = self.shard.tick(self.now, &mut || 2);
        self.record(&changes, halted)
    }

    /// The runtime is down `ms`, then its alarm runs: every offer standing
    /// before still stands.
    fn outage(&mut self, ms: u64) -> Result<(), TestCaseError> {
        let offered = self.store.offers.keys().copied().collect::<Vec<_>>();
        self.now += ms;
        self.alarm()?;
        let lost: Vec<_> = offered
            .iter()
            .filter(|p| !self.store.offers.contains_key(p))
            .collect();
        prop_assert!(lost.is_empty(), "offers {:?} lost to an outage", lost);
        Ok(())
    }

    fn reset(&mut self) -> Result<(), TestCaseError> {
        let halted = self.shard.control().is_some();
        let changes = self.shard.reset(self.now, &mut || 4);
        self.record(&changes, halted)?;
        prop_assert_eq!(self.shard.status().waiting(), 0);
        prop_assert_eq!(self.shard.status().active + self.shard.status().offered, 0);
        Ok(())
    }

    /// `ms` pass with the runtime up: the alarm runs when it is due.
    fn wait(&mut self, ms: u64) -> Result<(), TestCaseError> {
        let until = self.now + ms;
        while let Some(due) = self.shard.next_alarm().filter(|&due| due <= until) {
            prop_assert!(
                due > self.now || due < until,
                "the alarm at {} is due again at once",
                due
            );
            self.now = self.now.max(due).max(self.now + 1).min(until);
            self.alarm()?;
        }
        self.now = until;
        Ok(())
    }

    fn set(&mut self, state: RuleState) -> Result<(), TestCaseError> {
        let halted = self.shard.control().is_some();
        let control = Control {
            state,
            reason: String::new(),
            set_ms: self.now,
        };
        let (_, changes) = self.shard.set_control(self.now, control, &mut || 3);
        self.record(&changes, halted && state != RuleState::Open)
    }

    /// Changes storage as the object does, then has the model look at
    /// them; `halted` when the shard was paused or closed before the
    /// operation (and still is after it: an operation that opens it may
    /// offer places).
    fn record(&mut self, changes: &[Change], halted: bool) -> Result<(), TestCaseError> {
        self.store.apply(changes);
        let halted = halted && self.shard.control().is_some();
        self.watch.saw(changes, &self.shard, halted)
    }

    fn restart(&mut self) -> Result<(), TestCaseError> {
        let terms = self.store.terms.unwrap_or(self.shard.terms());
        let back = Shard::restore(terms, self.store.stored());
        prop_assert_eq!(back.status(), self.shard.status());
        prop_assert_eq!(back.next_alarm(), self.shard.next_alarm());
        self.shard = back;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Visitor {
    holding: Holding,
    gone: bool,
    /// Ever let in.
    admitted: bool,
}

/// What a visitor holds after `turn`: a closed room's answer leaves it
/// what it held.
fn held(turn: Turn, before: Holding) -> Holding {
    match turn {
        Turn::Session(s) => Holding::Session(s.id),
        Turn::Wait { number, .. } => Holding::Ticket(number),
        Turn::Closed | Turn::NotOpen => before,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_shard_keeps_its_promises(terms in terms(), steps in prop::collection::vec(step(), 1..160)) {
        let mut room = Room::new(terms);
        let mut visitors: Vec<Visitor> = Vec::new();
        let pick = |visitors: &[Visitor], n: usize| {
            let present: Vec<usize> = (0..visitors.len()).filter(|&i| !visitors[i].gone).collect();
            (!present.is_empty()).then(|| present[n % present.len()])
        };
        for step in steps {
            match step {
                Step::Arrive => {
                    let turn = room.visit(Holding::Nothing)?;
                    visitors.push(Visitor {
                        holding: held(turn, Holding::Nothing),
                        gone: false,
                        admitted: matches!(turn, Turn::Session(_)),
                    });
                }
                Step::Refresh(n) => {
                    if let Some(i) = pick(&visitors, n) {
                        let turn = room.visit(visitors[i].holding)?;
                        visitors[i].holding = held(turn, visitors[i].holding);
                        visitors[i].admitted |= matches!(turn, Turn::Session(_));
                    }
                }
                Step::Copy(n) => {
                    if let Some(i) = pick(&visitors, n) {
                        let before = visitors[i].holding;
                        let turn = room.visit(before)?;
                        // A copy of a ticket whose place became a session
                        // gets that very session. (A ticket whose turn
                        // passed joins at the back, and may get straight
                        // in on a place of its own: a copy of it is a
                        // newcomer again.)
                        let place = match before {
                            Holding::Ticket(number) => room.shard.status().place_of(number),
                            _ => None,
                        };
                        if let Turn::Session(s) = turn {
                            if place == Some(s.id) {
                                let again = room.visit(before)?;
                                prop_assert_eq!(again, Turn::Session(s));
                            }
                        }
                    }
                }
                Step::End(n) => {
                    if let Some(i) = pick(&visitors, n) {
                        if let Holding::Session(id) = visitors[i].holding {
                            room.end(id)?;
                            visitors[i].gone = true;
                        }
                    }
                }
                Step::Leave(n) => {
                    if let Some(i) = pick(&visitors, n) {
                        visitors[i].gone = true;
                    }
                }
                Step::Alarm => room.alarm()?,
                Step::Restart => room.restart()?,
                Step::Wait(ms) => room.wait(ms)?,
                Step::Outage(ms) => room.outage(ms)?,
                Step::Reset => room.reset()?,
                Step::Set(state) => room.set(state)?,
            }
        }

        // Arrivals stop and the operator opens the shard. Everyone still
        // here refreshes every 5 s and, once in, leaves through the
        // origin: all of them get in.
        room.set(RuleState::Open)?;
        let deadline = room.now + 3_600_000 + 200 * terms.session_ms;
        while visitors.iter().any(|v| !v.gone) {
            prop_assert!(room.now < deadline, "visitors still waiting: {:?}", visitors.iter().filter(|v| !v.gone).collect::<Vec<_>>());
            room.wait(5_000)?;
            for visitor in visitors.iter_mut().filter(|v| !v.gone) {
                let turn = room.visit(visitor.holding)?;
                visitor.holding = held(turn, visitor.holding);
                if let Turn::Session(s) = turn {
                    visitor.admitted = true;
                    room.end(s.id)?;
                    visitor.gone = true;
                }
            }
        }
    }

    #[test]
    fn the_lottery_is_a_permutation(n in 0u64..3_000, seed in any::<u64>()) {
        let mut places: Vec<u64> = (0..n).map(|j| lottery::place(seed, n, j).unwrap()).collect();
        places.sort_unstable();
        prop_assert_eq!(places, (0..n).collect::<Vec<_>>());
        prop_assert_eq!(lottery::place(seed, n, n), None);
    }

    #[test]
    fn a_pre_queue_is_served_in_the_lottery_order(pre in 1u64..40, places in 1u32..4, seed in any::<u64>()) {
        let terms = Terms {
            places,
            per_minute: 1_000,
            session_ms: 60_000,
            grace_ms: GRACE_MS,
            opens_at_ms: Some(1_000_000),
        };
        let mut shard = Shard::new(terms);
        let tickets: Vec<Number> = (0..pre)
            .map(|i| match shard.visit(i, Holding::Nothing, &mut || 0).0 {
                Turn::Wait { number, .. } => number,
                other => panic!("let in before opening: {other:?}"),
            })
            .collect();
        shard.tick(1_000_000, &mut || seed);
        // Everyone refreshes in join order, leaving as soon as they are in:
        // each gets the place the lottery gave its join number, once.
        let mut got: BTreeMap<u64, u64> = BTreeMap::new();
        let mut now = 1_000_000;
        while (got.len() as u64) < pre {
            now += 1_000;
            prop_assert!(now < 1_000_000 + 3_600_000, "the pre-queue is not served");
            for number in &tickets {
                let Number::Pre(j) = *number else { panic!("not a pre-queue ticket") };
                if got.contains_key(&j) {
                    continue;
                }
                match shard.visit(now, Holding::Ticket(*number), &mut || 0).0 {
                    Turn::Session(s) => {
                        got.insert(j, s.id);
                        shard.end(now, s.id, &mut || 0);
                    }
                    Turn::Wait { fresh, .. } => prop_assert!(!fresh, "a pre-queue ticket lost its place"),
                    Turn::Closed | Turn::NotOpen => prop_assert!(false, "closed by nobody"),
                }
            }
        }
        for (j, id) in &got {
            prop_assert_eq!(lottery::place(seed, pre, *j), Some(*id));
        }
        let mut ids: Vec<u64> = got.values().copied().collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..pre).collect::<Vec<_>>(), "every place served once");
    }
}
