//! The simulation `props::blocks` runs: a key's object serving one call at
//! a time from a queue, isolates with clocks of their own, and messages
//! with latency, loss and duplicates between them. True time is the
//! object's clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use sluice::gate::local::{Call, Local, LocalBlocks};
use sluice::isolate::flights::AGAIN;
use sluice::ledger::blocks::BlockReport;
use sluice::ledger::{Ask, Ledger, Outcome, Override};
use sluice::limit::gcra::GcraPolicy;
use sluice::limit::{Policy, Spec};
use sluice::objects::protocol::{CheckRequest, ReserveAsk, SettleRequest};

use crate::support::Rows;

const T0: u64 = 1_700_000_000_000;
const KEY: &str = "k";
const POLICY: &str = "p";
/// How long an isolate waits for an answer before it takes its call as
/// failed (the request fails: neither admitted nor refused).
const TIMEOUT_MS: u64 = 400;
/// A GCRA's emission interval here: 100 a second.
const T_MS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Log,
    Window,
    Cell,
}

/// An isolate's clock and its distance from the object.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub offset_ms: i64,
    pub drift_ppm: i64,
    /// Readings are whole ticks, rounded down.
    pub tick_ms: u64,
    /// A reading is the clock at the isolate's last I/O, up to this old.
    pub stale_ms: u64,
    /// One way, each message; up to 9 ms more at random.
    pub latency_ms: u64,
}

#[derive(Debug, Clone)]
pub struct Setup {
    pub kind: Kind,
    pub limit: u64,
    pub window_ms: u64,
    pub clocks: Vec<Clock>,
    /// How long the object takes over each call.
    pub service_ms: u64,
    /// The chance, in percent, that a message is lost, and that a call is
    /// delivered twice.
    pub faults_pct: u64,
    pub seed: u64,
}

#[derive(Debug, Clone)]
pub enum Act {
    /// `n` requests of `cost` at isolate `iso` at once; reservations (kept
    /// unless settled) when `reserve`.
    Arrive {
        iso: usize,
        n: u32,
        cost: u32,
        reserve: bool,
    },
    /// Requests of 1 at isolate `iso`, one every `every_ms` from now,
    /// `count` of them (among the other acts).
    Stream {
        iso: usize,
        every_ms: u64,
        count: u64,
    },
    /// Time passes, and whatever happens in it.
    Wait { ms: u64 },
    /// One of `iso`'s reservations (the `pick`-th) is kept or refunded: by
    /// its blocks if they hold it, else by a call to the object.
    Settle { iso: usize, pick: usize, keep: bool },
    /// `iso` dies: nothing it holds is reported, nothing reaches it.
    Die { iso: usize },
    /// The object restarts from its rows.
    Restart,
    /// The object's alarm.
    Sweep,
    /// An operator resets the key.
    Reset,
    /// The config's limit changes (and a log's window, to 1 s when `wide`,
    /// else 200 ms); each isolate takes it at a request of its own, at
    /// random.
    Config { limit: u64, wide: bool },
    /// An operator's override of the limit, or none.
    Override { limit: Option<u64> },
    /// `iso`'s clock steps by `ms`: a small step back (under 5 ms, at
    /// most one in two seconds) unseen; a larger one while it decides
    /// (it reads the clock before and after); forward, any.
    Step { iso: usize, ms: i64 },
}

/// Refusals of one isolate's requests, and those an exact limiter given
/// the real admissions would have admitted, by what made them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refusals {
    pub total: u64,
    pub room_left: u64,
    /// Blocks of the refused request's own isolate, which holds them (or
    /// whose answer or report is on the way).
    pub own: u64,
    /// Blocks whose holder lost them: a grant or report lost on the way,
    /// or the holder died.
    pub lost: u64,
    /// Other isolates' blocks.
    pub others: u64,
    /// Its own isolate's blocks, after it was decided again `AGAIN` times,
    /// each time refused while racing an ask of its isolate, the last of
    /// which brought a block too: the one exception to "never its own"
    /// (docs/algorithms.md, "Admission blocks").
    pub exhausted: u64,
    /// No block: what the object counts beyond the real times otherwise
    /// (a unit it admitted whose answer was lost, times stamped late, a
    /// GCRA's charge kept).
    pub other: u64,
}

#[derive(Debug, Clone, Copy)]
enum Cause {
    Own,
    Lost,
    Others,
    Other,
}

/// One unit admitted, with the policy it was decided under.
#[derive(Debug, Clone, Copy)]
struct Unit {
    id: u64,
    at: u64,
    limit: u64,
    window: u64,
    /// Resets before it: a reset starts a key afresh.
    epoch: usize,
}

/// A reservation an isolate knows it was admitted, not settled yet.
struct Reserved {
    id: String,
    iso: usize,
    gen: u32,
    units: Vec<u64>,
}

/// A call an isolate made, not answered yet.
struct Out {
    id: u64,
    call: Call,
    /// The client's request it decides (not a report of blocks due), and
    /// how many times it was decided again.
    client: Option<(CheckRequest, u32)>,
}

/// A refusal waiting for the ask it raced to land
/// (`LocalBlocks::answered`), as `edge/blocks` waits.
struct Parked {
    iso: usize,
    gen: u32,
    call: Call,
    request: CheckRequest,
    again: u32,
    cause: Option<Cause>,
}

struct Iso {
    gen: u32,
    blocks: LocalBlocks,
    clock: Clock,
    steps_ms: i64,
    small_step_ms: Option<u64>,
    /// The moment (true time) of its last I/O: readings never go back.
    frozen: u64,
    /// The config it runs.
    spec: Spec,
    /// Blocks it was granted and has not reported, with their specs.
    have: Vec<(u64, Spec)>,
    calls: Vec<Out>,
}

impl Iso {
    fn new(gen: u32, clock: Clock, spec: Spec, now: u64) -> Iso {
        Iso {
            gen,
            blocks: LocalBlocks::new(holder(gen)),
            clock,
            steps_ms: 0,
            small_step_ms: None,
            frozen: now,
            spec,
            have: Vec::new(),
            calls: Vec::new(),
        }
    }
}

/// The holder id of an isolate's `gen`eration (each one's is its own).
fn holder(gen: u32) -> String {
    format!("iso-{gen}")
}

enum Msg {
    Check {
        iso: usize,
        gen: u32,
        call: u64,
        request: Box<CheckRequest>,
    },
    Settle {
        id: String,
        keep: bool,
        units: Vec<u64>,
    },
}

enum Event {
    /// A message reaches the object's queue.
    Arrives(Msg),
    /// The object is done with the call it was serving.
    Served,
    Answer {
        iso: usize,
        gen: u32,
        call: u64,
        outcome: Box<Outcome>,
        grants: Vec<(u64, Spec)>,
        units: Vec<u64>,
        cause: Option<Cause>,
    },
    Timeout {
        iso: usize,
        gen: u32,
        call: u64,
    },
    /// A client's request of 1 reaches isolate `iso`.
    Request {
        iso: usize,
    },
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

fn spec(kind: Kind, limit: u64, window_ms: u64) -> Spec {
    match kind {
        Kind::Log => Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
        Kind::Window => Spec::FixedWindow(Policy::new(limit, window_ms).unwrap()),
        Kind::Cell => Spec::Gcra(GcraPolicy::new(limit - 1, 1_000 / T_MS, 1_000).unwrap()),
    }
}

pub struct Sim {
    kind: Kind,
    config: Spec,
    overridden: Option<Spec>,
    widest_ms: u64,
    now: u64,
    ledger: Ledger,
    rows: Rows,
    isos: Vec<Iso>,
    generation: u32,
    /// Each event and when it happens, by the order it was scheduled in.
    events: Vec<Option<(u64, Event)>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    queue: VecDeque<Msg>,
    busy: bool,
    rng: Rng,
    service_ms: u64,
    faults_pct: u64,
    next_call: u64,
    next_unit: u64,
    next_reservation: u64,
    units: Vec<Unit>,
    /// The window each of the object's decisions read its log through,
    /// and when: a shorter one forgets what a longer one would count.
    windows: Vec<(u64, u64)>,
    resets: usize,
    reserved: Vec<Reserved>,
    parked: Vec<Parked>,
    /// The latest moment anything could still count: leases' ends and
    /// admissions.
    last: u64,
    refusals: Vec<Refusals>,
}

impl Sim {
    pub fn new(setup: Setup) -> Sim {
        let config = spec(setup.kind, setup.limit, setup.window_ms);
        let isos: Vec<Iso> = (0..setup.clocks.len())
            .map(|i| Iso::new(i as u32, setup.clocks[i], config, T0))
            .collect();
        Sim {
            kind: setup.kind,
            config,
            overridden: None,
            widest_ms: config.window_ms(),
            now: T0,
            ledger: Ledger::new(),
            rows: Rows::default(),
            generation: isos.len() as u32,
            refusals: vec![Refusals::default(); isos.len()],
            isos,
            events: Vec::new(),
            heap: BinaryHeap::new(),
            queue: VecDeque::new(),
            busy: false,
            rng: Rng(setup.seed | 1),
            service_ms: setup.service_ms,
            faults_pct: setup.faults_pct,
            next_call: 0,
            next_unit: 0,
            next_reservation: 0,
            units: Vec::new(),
            windows: Vec::new(),
            resets: 0,
            reserved: Vec::new(),
            parked: Vec::new(),
            last: T0,
        }
    }

    pub fn refusals(&self) -> &[Refusals] {
        &self.refusals
    }

    pub fn run(&mut self, act: Act) {
        match act {
            Act::Arrive {
                iso,
                n,
                cost,
                reserve,
            } => {
                for _ in 0..n {
                    self.arrive(iso, cost, reserve);
                }
            }
            Act::Stream {
                iso,
                every_ms,
                count,
            } => {
                for k in 0..count {
                    self.schedule(self.now + k * every_ms, Event::Request { iso });
                }
            }
            Act::Wait { ms } => self.advance(self.now + ms),
            Act::Settle { iso, pick, keep } => self.settle(iso, pick, keep),
            Act::Die { iso } => self.die(iso),
            Act::Restart => {
                let ids = |ledger: &Ledger| {
                    let mut ids: Vec<u64> = ledger.blocks().iter().map(|b| b.id).collect();
                    ids.sort_unstable();
                    ids
                };
                let restarted = self.rows.load();
                assert_eq!(
                    ids(&restarted),
                    ids(&self.ledger),
                    "the rows hold the blocks"
                );
                self.ledger = restarted;
                self.advance(self.now + 1);
            }
            Act::Sweep => {
                let expired = self.ledger.sweep(self.now);
                self.rows.delete(expired);
            }
            Act::Reset => {
                let (writes, expired) = self.ledger.reset(self.now);
                self.rows.delete(expired);
                self.rows.write(writes);
                self.resets += 1;
            }
            Act::Config { limit, wide } => {
                let window = match (self.kind, wide) {
                    (Kind::Log, true) => 1_000,
                    (Kind::Log, false) => 200,
                    _ => self.config.window_ms(),
                };
                self.config = spec(self.kind, limit, window);
                self.widest_ms = self.widest_ms.max(self.config.window_ms());
            }
            Act::Override { limit } => {
                let set = limit.map(|limit| spec(self.kind, limit, self.config.window_ms()));
                let next = set.map(|spec| Override {
                    policies: vec![(POLICY.to_string(), spec)],
                    until_ms: None,
                    reason: String::new(),
                    set_ms: self.now,
                    whole: None,
                });
                let (_, writes, expired) = self.ledger.set_override(next);
                self.rows.write(writes);
                self.rows.delete(expired);
                self.overridden = set;
                if let Some(spec) = set {
                    self.widest_ms = self.widest_ms.max(spec.window_ms());
                }
            }
            Act::Step { iso, ms } => self.step(iso, ms),
        }
    }

    fn step(&mut self, iso: usize, ms: i64) {
        if ms < -4 {
            self.arrive(iso, 1, false);
            self.isos[iso].steps_ms += ms;
            self.arrive(iso, 1, false);
        } else if ms < 0 {
            let now = self.now;
            let clock = &mut self.isos[iso];
            if clock.small_step_ms.is_none_or(|at| now >= at + 2_000) {
                clock.steps_ms += ms;
                clock.small_step_ms = Some(now);
            }
        } else {
            self.isos[iso].steps_ms += ms;
        }
    }

    /// Isolate `iso`'s clock now.
    fn read(&mut self, iso: usize) -> u64 {
        let stale = self.rng.below(self.isos[iso].clock.stale_ms + 1);
        let at = &mut self.isos[iso];
        at.frozen = at.frozen.max(self.now.saturating_sub(stale));
        let elapsed = at.frozen as i64 - T0 as i64;
        let drift = elapsed * at.clock.drift_ppm / 1_000_000;
        let reading = (T0 as i64 + at.clock.offset_ms + elapsed + drift + at.steps_ms) as u64;
        reading - reading % at.clock.tick_ms
    }

    fn latency(&mut self, iso: usize) -> u64 {
        self.isos[iso].clock.latency_ms + self.rng.below(10)
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.heap.push(Reverse((at, self.events.len())));
        self.events.push(Some((at, event)));
    }

    fn advance(&mut self, until: u64) {
        while let Some(&Reverse((at, seq))) = self.heap.peek() {
            if at > until {
                break;
            }
            self.heap.pop();
            self.now = self.now.max(at);
            let (_, event) = self.events[seq].take().expect("each event once");
            self.handle(event);
        }
        self.now = self.now.max(until);
    }

    /// Runs until nothing is on the way.
    pub fn settle_down(&mut self) {
        while !self.heap.is_empty() {
            self.advance(self.now + 5_000);
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Arrives(msg) => {
                self.queue.push_back(msg);
                if !self.busy {
                    self.serve_next();
                }
            }
            Event::Served => {
                self.busy = false;
                if !self.queue.is_empty() {
                    self.serve_next();
                }
            }
            Event::Answer {
                iso,
                gen,
                call,
                outcome,
                grants,
                units,
                cause,
            } => self.answer(iso, gen, call, *outcome, grants, units, cause),
            Event::Request { iso } => self.arrive(iso, 1, false),
            Event::Timeout { iso, gen, call } => {
                if self.isos[iso].gen != gen {
                    return;
                }
                let Some(at) = self.isos[iso].calls.iter().position(|c| c.id == call) else {
                    return;
                };
                let out = self.isos[iso].calls.remove(at);
                self.isos[iso].blocks.answered(&out.call, None);
                self.unpark(iso);
            }
        }
    }

    fn arrive(&mut self, iso: usize, cost: u32, reserve: bool) {
        if self.rng.below(2) == 0 {
            self.isos[iso].spec = self.config;
        }
        let specs = [(POLICY.to_string(), self.isos[iso].spec)];
        let mut request = CheckRequest::new(KEY, &specs, cost, None);
        if reserve {
            self.next_reservation += 1;
            request.reserve = Some(ReserveAsk {
                id: format!("r{}", self.next_reservation),
                ttl_ms: 2_000,
            });
        }
        self.decide(iso, request, 0);
    }

    /// As `edge/blocks` decides a check: from a block, or by a call; then
    /// the blocks due are reported.
    fn decide(&mut self, iso: usize, request: CheckRequest, again: u32) {
        let reading = self.read(iso);
        let decided = self.isos[iso].blocks.decide(&request, true, reading);
        for due in self.isos[iso].blocks.due(reading, KEY) {
            self.send(iso, due, None);
        }
        match decided {
            Local::Admitted(_) => self.admit_locally(iso, &request),
            Local::Call(call) => self.send(iso, call, Some((request, again))),
        }
    }

    /// Refusals of `iso` whose raced ask landed (answered, or timed out):
    /// decided again when it brought a block, else answered.
    fn unpark(&mut self, iso: usize) {
        let gen = self.isos[iso].gen;
        if self.isos[iso].blocks.asking(KEY) {
            return;
        }
        let alive: Vec<Parked> = std::mem::take(&mut self.parked)
            .into_iter()
            .filter(|p| self.isos[p.iso].gen == p.gen)
            .collect();
        let (ready, waiting): (Vec<Parked>, Vec<Parked>) = alive
            .into_iter()
            .partition(|p| p.iso == iso && p.gen == gen);
        self.parked = waiting;
        for parked in ready {
            let again = self.isos[iso].blocks.again(&parked.call);
            if parked.again < AGAIN && again {
                self.decide(iso, parked.request, parked.again + 1);
            } else if again && matches!(parked.cause, Some(Cause::Own)) {
                self.refusals[iso].total += 1;
                self.refusals[iso].room_left += 1;
                self.refusals[iso].exhausted += 1;
            } else {
                self.refused(iso, parked.cause);
            }
        }
    }

    fn admit_locally(&mut self, iso: usize, request: &CheckRequest) {
        let have = &self.isos[iso].have;
        assert!(!have.is_empty(), "admitted from no block it holds");
        let limit = have.iter().map(|(_, s)| s.limit()).max().unwrap_or(0);
        let window = have.iter().map(|(_, s)| s.window_ms()).min().unwrap_or(0);
        let units: Vec<u64> = (0..request.cost)
            .map(|_| self.unit(self.now, limit, window))
            .collect();
        if let Some(r) = &request.reserve {
            let gen = self.isos[iso].gen;
            self.reserved.push(Reserved {
                id: r.id.clone(),
                iso,
                gen,
                units,
            });
        }
    }

    fn unit(&mut self, at: u64, limit: u64, window: u64) -> u64 {
        self.next_unit += 1;
        self.units.push(Unit {
            id: self.next_unit,
            at,
            limit,
            window,
            epoch: self.resets,
        });
        self.last = self.last.max(at);
        self.next_unit
    }

    fn send(&mut self, iso: usize, call: Call, client: Option<(CheckRequest, u32)>) {
        let reported: Vec<u64> = call.request.reports.iter().map(|r| r.id).collect();
        self.isos[iso].have.retain(|(id, _)| !reported.contains(id));
        self.next_call += 1;
        let id = self.next_call;
        let gen = self.isos[iso].gen;
        let request = call.request.clone();
        self.isos[iso].calls.push(Out { id, call, client });
        self.schedule(self.now + TIMEOUT_MS, Event::Timeout { iso, gen, call: id });
        if self.rng.pct(self.faults_pct) {
            return;
        }
        let at = self.now + self.latency(iso);
        if self.rng.pct(self.faults_pct) {
            let again = at + self.latency(iso);
            let msg = Msg::Check {
                iso,
                gen,
                call: id,
                request: Box::new(request.clone()),
            };
            self.schedule(again, Event::Arrives(msg));
        }
        let msg = Msg::Check {
            iso,
            gen,
            call: id,
            request: Box::new(request),
        };
        self.schedule(at, Event::Arrives(msg));
    }

    fn settle(&mut self, iso: usize, pick: usize, keep: bool) {
        let gen = self.isos[iso].gen;
        let mine: Vec<usize> = (0..self.reserved.len())
            .filter(|&i| self.reserved[i].iso == iso && self.reserved[i].gen == gen)
            .collect();
        if mine.is_empty() {
            return;
        }
        let reserved = self.reserved.swap_remove(mine[pick % mine.len()]);
        let request = SettleRequest {
            key: KEY.to_string(),
            reservation: reserved.id.clone(),
            keep,
        };
        if self.isos[iso].blocks.settle(&request) {
            if !keep {
                self.units.retain(|u| !reserved.units.contains(&u.id));
            }
            return;
        }
        if self.rng.pct(self.faults_pct) {
            return;
        }
        let at = self.now + self.latency(iso);
        let msg = Msg::Settle {
            id: reserved.id,
            keep,
            units: reserved.units,
        };
        self.schedule(at, Event::Arrives(msg));
    }

    fn die(&mut self, iso: usize) {
        let clock = self.isos[iso].clock;
        let steps = self.isos[iso].steps_ms;
        let frozen = self.isos[iso].frozen;
        self.isos[iso] = Iso::new(self.generation, clock, self.config, frozen);
        self.isos[iso].steps_ms = steps;
        self.generation += 1;
    }

    fn serve_next(&mut self) {
        let msg = self.queue.pop_front().expect("a call to serve");
        self.busy = true;
        let done = self.now + self.service_ms;
        self.schedule(done, Event::Served);
        match msg {
            Msg::Settle { id, keep, units } => {
                let (settled, writes, expired) = self.ledger.settle(&id, keep, self.now);
                self.rows.write(writes);
                self.rows.delete(expired);
                if settled.is_some_and(|s| !s.kept && !s.repeated) {
                    self.units.retain(|u| !units.contains(&u.id));
                }
            }
            Msg::Check {
                iso,
                gen,
                call,
                request,
            } => {
                let answer = self.serve(iso, gen, call, &request);
                if !self.rng.pct(self.faults_pct) {
                    let at = done + self.latency(iso);
                    self.schedule(at, answer);
                }
            }
        }
    }

    /// A check as `edge/limiter` serves it: reports first, then the
    /// decision, then the blocks asked for, the rows merged.
    fn serve(&mut self, iso: usize, gen: u32, call: u64, request: &CheckRequest) -> Event {
        let now = self.now;
        let specs = request.policies().expect("policies read back");
        let reports = request.reports().expect("reports read back");
        let held = |ledger: &Ledger, id: u64| ledger.blocks().iter().any(|b| b.id == id);
        let known: Vec<u64> = reports
            .iter()
            .map(|r| r.id)
            .filter(|&id| held(&self.ledger, id))
            .collect();
        let taken = self.ledger.take_reports(&reports, &specs, None, now);
        assert!(
            known.iter().all(|&id| !held(&self.ledger, id)),
            "a report of a block the object holds was refused at {now}: {reports:?}"
        );
        let ask = Ask {
            specs: &specs,
            cost: request.cost,
            ban: None,
            lease: None,
        };
        let (mut outcome, mut writes) = match &request.reserve {
            Some(r) => self.ledger.reserve(&ask, &r.id, now + r.ttl_ms, now),
            None => self.ledger.check(&ask, now),
        };
        self.windows
            .push((now, self.in_force(specs[0].1).window_ms()));
        let mut grants = Vec::new();
        if let Some(block) = request.block.as_ref().filter(|_| outcome.allowed) {
            let (granted, charged) =
                self.ledger
                    .grant_blocks(&specs, &block.holder, block.rate, now);
            for grant in &granted {
                let block = self.ledger.blocks().iter().find(|b| b.id == grant.id);
                let block = block.expect("granted");
                self.last = self.last.max(block.until_ms);
                grants.push((block.id, block.spec));
            }
            outcome.blocks = granted;
            writes.extend(charged);
        }
        let (writes, expired) = taken.rows(writes);
        self.rows.write(writes);
        self.rows.delete(expired);
        let mut units = Vec::new();
        let mut cause = None;
        if request.cost > 0 && outcome.allowed {
            let in_force = self.in_force(specs[0].1);
            for _ in 0..request.cost {
                units.push(self.unit(now, in_force.limit(), in_force.window_ms()));
            }
        } else if request.cost > 0 {
            cause = self.cause(iso, gen, call, request);
        }
        Event::Answer {
            iso,
            gen,
            call,
            outcome: Box::new(outcome),
            grants,
            units,
            cause,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn answer(
        &mut self,
        iso: usize,
        gen: u32,
        call: u64,
        outcome: Outcome,
        grants: Vec<(u64, Spec)>,
        units: Vec<u64>,
        cause: Option<Cause>,
    ) {
        if self.isos[iso].gen != gen {
            return;
        }
        let Some(at) = self.isos[iso].calls.iter().position(|c| c.id == call) else {
            return;
        };
        let out = self.isos[iso].calls.remove(at);
        let isolate = &mut self.isos[iso];
        let look = isolate.blocks.answered(&out.call, Some(&outcome));
        isolate.have.extend(grants);
        match out.client {
            Some(_) if outcome.allowed => {
                if let Some(r) = &out.call.request.reserve {
                    self.reserved.push(Reserved {
                        id: r.id.clone(),
                        iso,
                        gen,
                        units,
                    });
                }
            }
            Some((request, again)) if look => self.parked.push(Parked {
                iso,
                gen,
                call: out.call,
                request,
                again,
                cause,
            }),
            Some(_) => self.refused(iso, cause),
            None => {}
        }
        self.unpark(iso);
    }

    /// A request its isolate answers refused.
    fn refused(&mut self, iso: usize, cause: Option<Cause>) {
        let stats = &mut self.refusals[iso];
        stats.total += 1;
        let Some(cause) = cause else {
            return;
        };
        stats.room_left += 1;
        match cause {
            Cause::Own => stats.own += 1,
            Cause::Lost => stats.lost += 1,
            Cause::Others => stats.others += 1,
            Cause::Other => stats.other += 1,
        }
    }

    fn in_force(&self, asked: Spec) -> Spec {
        self.overridden.unwrap_or(asked)
    }

    /// For a request the object just refused: `None` when an exact
    /// limiter given the real admissions refuses it too; otherwise the
    /// blocks whose removal lets the object admit it, its isolate's own
    /// first.
    fn cause(&mut self, iso: usize, gen: u32, call: u64, request: &CheckRequest) -> Option<Cause> {
        if !self.room_left(request) {
            return None;
        }
        assert!(
            !self.admits_without(request, &[]),
            "the rows decide as the object did"
        );
        let name = holder(gen);
        let theirs: Vec<u64> = self
            .ledger
            .blocks()
            .iter()
            .filter(|b| b.holder == name)
            .map(|b| b.id)
            .collect();
        let own: Vec<u64> = theirs
            .iter()
            .copied()
            .filter(|&id| self.holds(iso, gen, id, call))
            .collect();
        let all: Vec<u64> = self.ledger.blocks().iter().map(|b| b.id).collect();
        if !own.is_empty() && self.admits_without(request, &own) {
            Some(Cause::Own)
        } else if theirs.len() > own.len() && self.admits_without(request, &theirs) {
            Some(Cause::Lost)
        } else if !all.is_empty() && self.admits_without(request, &all) {
            Some(Cause::Others)
        } else {
            Some(Cause::Other)
        }
    }

    /// Whether isolate `iso` (still generation `gen`) holds block `id`,
    /// or its grant (in the answer it will take) or report is on the way,
    /// as its call `refusing` is refused.
    fn holds(&self, iso: usize, gen: u32, id: u64, refusing: u64) -> bool {
        let isolate = &self.isos[iso];
        if isolate.gen != gen {
            return false;
        }
        // The answer an isolate takes of a call is the first to reach it
        // before it stops waiting (of one delivered twice, one); the
        // refused call's is its refusal.
        let first = |call: u64| {
            let pending = self.events.iter().enumerate();
            pending
                .filter_map(move |(seq, e)| match e {
                    Some((
                        at,
                        Event::Answer {
                            iso: i,
                            gen: g,
                            call: c,
                            ..
                        },
                    ))
                    | Some((
                        at,
                        Event::Timeout {
                            iso: i,
                            gen: g,
                            call: c,
                        },
                    )) if *i == iso && *g == gen && *c == call => Some((*at, seq)),
                    _ => None,
                })
                .min()
        };
        let taken = |call: u64, at: (u64, usize)| {
            call != refusing
                && isolate.calls.iter().any(|c| c.id == call)
                && first(call) == Some(at)
        };
        let reports = |m: &Msg| match m {
            Msg::Check {
                iso: i,
                gen: g,
                request,
                ..
            } => *i == iso && *g == gen && request.reports.iter().any(|r| r.id == id),
            Msg::Settle { .. } => false,
        };
        isolate.have.iter().any(|(b, _)| *b == id)
            || self.queue.iter().any(reports)
            || self
                .events
                .iter()
                .enumerate()
                .any(|(seq, event)| match event {
                    Some((_, Event::Arrives(msg))) => reports(msg),
                    Some((at, Event::Answer { call, grants, .. })) => {
                        grants.iter().any(|(b, _)| *b == id) && taken(*call, (*at, seq))
                    }
                    _ => false,
                })
    }

    /// Whether the object, its blocks `ids` given back whole, would admit
    /// `request` now (a copy of it, read from its rows).
    fn admits_without(&self, request: &CheckRequest, ids: &[u64]) -> bool {
        let mut copy = self.rows.load();
        let reports: Vec<BlockReport> = ids
            .iter()
            .map(|&id| {
                let block = self.ledger.blocks().iter().find(|b| b.id == id);
                let block = block.expect("a block the object holds");
                BlockReport {
                    id,
                    holder: block.holder.clone(),
                    policy: block.policy.clone(),
                    times: Vec::new(),
                    pending: Vec::new(),
                    strikes: 0,
                }
            })
            .collect();
        let specs = request.policies().expect("policies read back");
        copy.take_reports(&reports, &specs, None, self.now);
        let ask = Ask {
            specs: &specs,
            cost: request.cost,
            ban: None,
            lease: None,
        };
        let outcome = match &request.reserve {
            Some(r) => copy.reserve(&ask, &r.id, self.now + r.ttl_ms, self.now).0,
            None => copy.check(&ask, self.now).0,
        };
        outcome.allowed
    }

    /// Whether an exact limiter of the policy in force, given the real
    /// admissions since the last reset, would admit `request` now.
    fn room_left(&mut self, request: &CheckRequest) -> bool {
        let now = self.now;
        let asked = request.policies().expect("policies read back")[0].1;
        let spec = self.in_force(asked);
        let cost = u64::from(request.cost);
        let mut times: Vec<u64> = self
            .units
            .iter()
            .filter(|u| u.epoch == self.resets)
            .map(|u| u.at)
            .collect();
        times.sort_unstable();
        match self.kind {
            Kind::Log => {
                let window = spec.window_ms();
                let held = times.iter().filter(|&&t| t + window > now).count() as u64;
                held + cost <= spec.limit()
            }
            Kind::Window => {
                let (slots, _) = self.ledger.peek(now);
                let open = slots.into_iter().find(|s| s.used > 0 && s.reset_ms > 0);
                let held = open.map_or(0, |slot| {
                    let opened = now + slot.reset_ms - slot.window_ms;
                    let inside = |t: &&u64| (opened..opened + slot.window_ms).contains(*t);
                    times.iter().filter(inside).count() as u64
                });
                held + cost <= spec.limit()
            }
            Kind::Cell => {
                let tat = times.iter().fold(0, |tat: u64, &t| tat.max(t) + T_MS);
                tat.max(now) + cost * T_MS <= now + T_MS * spec.limit()
            }
        }
    }

    /// Every unit's real time keeps its algorithm's promise (see the
    /// module's note), within each span between resets.
    pub fn check_promise(&self) -> Result<(), String> {
        for epoch in 0..=self.resets {
            let mut units: Vec<Unit> = self
                .units
                .iter()
                .filter(|u| u.epoch == epoch)
                .copied()
                .collect();
            units.sort_by_key(|u| u.at);
            match self.kind {
                Kind::Log => within_windows(&units, &self.windows, 1)?,
                Kind::Window => within_windows(&units, &[], 2)?,
                Kind::Cell => on_schedule(&units)?,
            }
        }
        Ok(())
    }

    /// A fixed window's own promise: the units whose real times fall in
    /// the window open at the object (every one of them was charged to
    /// it) are at most the highest limit they were decided under.
    pub fn check_open_window(&mut self) -> Result<(), String> {
        if self.kind != Kind::Window {
            return Ok(());
        }
        let (slots, _) = self.ledger.peek(self.now);
        let Some(slot) = slots.into_iter().find(|s| s.used > 0 && s.reset_ms > 0) else {
            return Ok(());
        };
        let opened = self.now + slot.reset_ms - slot.window_ms;
        let inside: Vec<&Unit> = self
            .units
            .iter()
            .filter(|u| u.epoch == self.resets && (opened..opened + slot.window_ms).contains(&u.at))
            .collect();
        let allowed = inside.iter().map(|u| u.limit).max().unwrap_or(0);
        if inside.len() as u64 <= allowed {
            return Ok(());
        }
        Err(format!(
            "{} units in the window from {opened} at {}: {inside:?}",
            inside.len(),
            self.now
        ))
    }

    /// Once every isolate has died, the key is whole after the last
    /// lease's end and a window: the limit in force admitted at once.
    pub fn whole_after_every_isolate_died(&mut self) -> Result<(), String> {
        for iso in 0..self.isos.len() {
            self.die(iso);
        }
        self.settle_down();
        self.now = self.now.max(self.last) + self.widest_ms + 1;
        let expired = self.ledger.sweep(self.now);
        self.rows.delete(expired);
        if !self.ledger.blocks().is_empty() {
            return Err(format!("blocks left: {:?}", self.ledger.blocks()));
        }
        let specs = [(POLICY.to_string(), self.config)];
        let whole = self.in_force(self.config).limit() as u32;
        let ask = Ask {
            specs: &specs,
            cost: whole,
            ban: None,
            lease: None,
        };
        let (outcome, _) = self.ledger.check(&ask, self.now);
        match outcome.allowed {
            true => Ok(()),
            false => Err(format!("the key is not whole: {outcome:?}")),
        }
    }
}

/// No run of units (sorted) closer together than the shortest window they
/// were decided under holds more than `factor` times the highest limit
/// they were decided under: the shortest window the object read its log
/// through meanwhile too (`windows`, sorted), as a log re-read through a
/// shorter window forgets what a longer one counts again.
fn within_windows(units: &[Unit], windows: &[(u64, u64)], factor: u64) -> Result<(), String> {
    for i in 0..units.len() {
        let mut shortest = u64::MAX;
        let mut highest = 0;
        let mut read = windows.partition_point(|&(at, _)| at < units[i].at);
        for j in i..units.len() {
            shortest = shortest.min(units[j].window);
            while read < windows.len() && windows[read].0 <= units[j].at {
                shortest = shortest.min(windows[read].1);
                read += 1;
            }
            if units[j].at - units[i].at >= shortest {
                break;
            }
            highest = highest.max(units[j].limit);
            if (j - i + 1) as u64 > factor * highest {
                return Err(format!(
                    "{} units in {} ms, limit {highest}: {:?}",
                    j - i + 1,
                    units[j].at - units[i].at,
                    &units[i..=j]
                ));
            }
        }
    }
    Ok(())
}

/// Every run of units from the i-th to the j-th spans at least
/// `(j − i + 1)·T − τ`, τ the highest tolerance they were decided under.
fn on_schedule(units: &[Unit]) -> Result<(), String> {
    for j in 0..units.len() {
        let mut limit = 0;
        for i in (0..=j).rev() {
            limit = limit.max(units[i].limit);
            let run = (j - i + 1) as u64;
            let span = units[j].at - units[i].at;
            if run * T_MS > span + T_MS * limit {
                return Err(format!(
                    "units {i}..={j} span {span} ms: {:?}",
                    &units[i..=j]
                ));
            }
        }
    }
    Ok(())
}
