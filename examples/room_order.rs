//! How far from arrival order a sharded waiting room calls its visitors,
//! against one queue for the whole room.
//!
//! Run with `cargo run --release --example room_order`. It replays the
//! same seeded arrivals (to the millisecond) through rooms of 1 to 64
//! shards: the shards are `sluice::room::shard::Shard`, the code the
//! Durable Objects run, with the room's gathering (shard 0 asks every
//! shard for its head once a second while anyone waits, and hands out what
//! it learned the round before) and the shards' gifts of places and starts
//! to each other (delivered at once: between objects a call takes
//! milliseconds). A newcomer joins the one of two random shards with fewer
//! waiting, as the worker places it; every visitor refreshes every 20 s
//! and, once in, stays a random while (exponential, mean 60 s) and leaves
//! through the origin. Each visitor's stay is the same in every room.
//!
//! A visitor is *called* when a place is offered to it (or it is let
//! straight in). The table gives the share of visitors a later arrival was
//! called before, and a more than 1 s later one; how many later arrivals
//! were called first; how much later each visitor was called than one
//! queue calls it; and the gifts between shards per visitor called. It
//! also checks the room's limits at every step: never more than 500
//! sessions and offers, never more than 600 starts in any 60 s.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use sluice::config::room::WaitingRoom;
use sluice::room::shard::{Change, Gift, Holding, Shard, Turn, RATE_WINDOW_MS, ROUND_MS};
use sluice::room::visit::terms;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

const ACTIVE: u32 = 500;
const PER_MINUTE: u32 = 600;
const REFRESH_MS: u64 = 20_000;
const SESSION_MEAN_S: f64 = 60.0;
/// The shards' alarms and the coordinator's rounds, in the simulation.
const TICK_MS: u64 = ROUND_MS;

struct Visitor {
    arrive: u64,
    /// How long it stays once in.
    stay: u64,
    shard: u32,
    holding: Holding,
    called: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Tick,
    /// A shard's alarm, as the object sets it.
    Alarm(u32),
    Arrive(usize),
    Refresh(usize),
    Leave(usize),
}

struct Room {
    shards: Vec<Shard>,
    /// Per shard, which visitor holds each place.
    holder: Vec<HashMap<u64, usize>>,
    visitors: Vec<Visitor>,
    /// Every session start, for the rate's check.
    starts: Vec<u64>,
    gifts: u64,
    calls: u64,
    pulls: u64,
    kinds: [u64; 4],
    events: BinaryHeap<Reverse<(u64, Event)>>,
    /// Each shard's alarm, as last set.
    alarms: Vec<Option<u64>>,
}

fn draw() -> impl FnMut() -> u64 {
    || 7
}

impl Room {
    /// What shard `s`'s operation changed: places offered call their
    /// holders. Then, as the objects' alarms do at once, each shard with
    /// work asks for a round, runs the coordinator's, sends its gifts;
    /// what those change is noted in turn.
    fn note(&mut self, s: u32, now: u64, changes: Vec<Change>) {
        let mut work = vec![(s, changes)];
        let mut steps = 0;
        while let Some((s, changes)) = work.pop() {
            steps += 1;
            if steps > 10_000 && std::env::var("DEBUG").is_ok() {
                for (i, sh) in self.shards.iter().enumerate() {
                    let st = sh.status();
                    eprintln!("{now} shard {i} head {:?} places {} starts {} active {} offered {} admitted {} knows {:?}", sh.head(now), st.places, st.per_minute, st.active, st.offered, st.admitted, sh.heads(now).iter().map(|h| h.map(|h| (h.key, h.waiting))).collect::<Vec<_>>());
                }
                panic!("loop");
            }
            for change in changes {
                match change {
                    Change::Offer { place, .. } => {
                        if let Some(&id) = self.holder[s as usize].get(&place) {
                            self.visitors[id].called.get_or_insert(now);
                        }
                    }
                    Change::Admitted { at_ms } => self.starts.push(at_ms),
                    _ => {}
                }
            }
            let shard = &mut self.shards[s as usize];
            if shard.wants_round(now) {
                shard.asked_round(now);
                let heads = shard.heads(now);
                let (_, changes) = self.shards[0].gather(now, &heads, &mut draw());
                self.calls += 1;
                work.push((0, changes));
            }
            if let Some(peer) = self.shards[s as usize].wants_gift(now) {
                self.shards[s as usize].pulled(now);
                let heads = self.shards[s as usize].heads(now);
                let (head, changes) = self.shards[peer as usize].gather(now, &heads, &mut draw());
                self.calls += 1;
                self.pulls += 1;
                work.push((peer, changes));
                let mut known = vec![None; self.shards.len()];
                known[peer as usize] = Some(head);
                let changes = self.shards[s as usize].learn(now, &known, &mut draw());
                work.push((s, changes));
            }
            if s == 0 && self.shards[0].round_due(now) {
                let known = self.shards[0].heads(now);
                let mut heads = known.clone();
                for peer in 1..self.shards.len() {
                    let (head, changes) = self.shards[peer].gather(now, &known, &mut draw());
                    self.calls += 1;
                    heads[peer] = Some(head);
                    work.push((peer as u32, changes));
                }
                let changes = self.shards[0].gathered(now, &heads, &mut draw());
                work.push((0, changes));
            }
            for (peer, gave) in self.shards[s as usize].owed() {
                if std::env::var("DEBUG").is_ok() {
                    let g = self.shards[s as usize].grant(peer);
                    let kind = match (gave.places > g.acked.places, gave.starts > g.acked.starts) {
                        (true, true) => 0,
                        (true, false) => 1,
                        (false, true) => 2,
                        _ => 3,
                    };
                    self.kinds[kind] += 1;
                    let _ = g;
                }
                let heads = self.shards[s as usize].heads(now);
                let gift = Gift {
                    from: s,
                    gave,
                    heads,
                };
                let (got, changes) = self.shards[peer as usize].receive(now, &gift, &mut draw());
                self.shards[s as usize].acked(peer, got);
                self.gifts += 1;
                self.calls += 1;
                work.push((peer, changes));
            }
            let due = self.shards[s as usize].next_alarm();
            if due != self.alarms[s as usize] {
                self.alarms[s as usize] = due;
                if let Some(at) = due {
                    self.events.push(Reverse((at.max(now), Event::Alarm(s))));
                }
            }
        }
    }

    fn visit(&mut self, id: usize, now: u64) -> Turn {
        let v = &self.visitors[id];
        let (s, holding) = (v.shard, v.holding);
        let (turn, changes) = self.shards[s as usize].visit(now, holding, &mut draw());
        match turn {
            Turn::Session(session) => {
                self.visitors[id].called.get_or_insert(now);
                self.visitors[id].holding = Holding::Session(session.id);
            }
            Turn::Wait { number, fresh } => {
                assert!(
                    holding == Holding::Nothing || !fresh,
                    "a visitor who keeps refreshing never loses its place"
                );
                if let Some(place) = self.shards[s as usize].status().place_of(number) {
                    self.holder[s as usize].insert(place, id);
                }
                self.visitors[id].holding = Holding::Ticket(number);
            }
            Turn::Closed => unreachable!("nobody closes the simulated room"),
        }
        self.note(s, now, changes);
        turn
    }

    /// The room's limits, checked once a tick.
    fn tick(&mut self, now: u64) {
        let busy: u32 = self
            .shards
            .iter()
            .map(|sh| sh.status().active + sh.status().offered)
            .sum();
        let places: u32 = self.shards.iter().map(|sh| sh.status().places).sum();
        assert!(
            busy <= ACTIVE && places <= ACTIVE,
            "{busy} busy of {places} places"
        );
        let waiting: u64 = self.shards.iter().map(|sh| sh.status().waiting()).sum();
        if std::env::var("DEBUG").is_ok() && now % 5000 == 0 && now >= 60000 && now <= 130000 {
            let act: u32 = self.shards.iter().map(|sh| sh.status().active).sum();
            let off: u32 = self.shards.iter().map(|sh| sh.status().offered).sum();
            let sp: (u64, u64) = self
                .shards
                .iter()
                .map(|sh| sh.spare(now))
                .fold((0, 0), |a, p| (a.0 + p.places, a.1 + p.starts));
            let cap: u32 = self.shards.iter().map(|sh| sh.status().per_minute).sum();
            eprintln!("STATE {} shards {now}: active {act} offered {off} waiting {waiting} spare {sp:?} starts cap {cap}", self.shards.len());
        }
        if waiting > 0 && self.shards.len() > 1 && std::env::var("DEBUG").is_ok() {
            let idle: Vec<(u32, u32, u32, u64, u32)> = self
                .shards
                .iter()
                .map(|sh| {
                    let st = sh.status();
                    let sp = sh.spare(now);
                    (
                        sp.places as u32,
                        sp.starts as u32,
                        st.places,
                        st.waiting(),
                        st.per_minute,
                    )
                })
                .collect();
            let free: u32 = idle.iter().map(|i| i.0).sum();
            let starts: u32 = idle.iter().map(|i| i.1).sum();
            if free > 0 && starts > 0 && now == 2026500 {
                for (i, sh) in self.shards.iter().enumerate() {
                    eprintln!(
                        "shard {i} head {:?} knows {:?}",
                        sh.head(now),
                        sh.heads(now)
                    );
                }
            }
            if free > 0 && starts > 0 {
                eprintln!(
                    "{now} waiting {waiting} free {free} starts {starts} idle {:?}",
                    idle.iter()
                        .enumerate()
                        .filter(|(_, i)| i.0 > 0 || i.1 > 0)
                        .collect::<Vec<_>>()
                );
            }
        }
    }
}

/// When each visitor (in arrival order) was called, and the gifts between
/// shards.
fn run(arrivals: &[u64], stays: &[u64], shards: u32, seed: u64) -> (Vec<u64>, u64) {
    let config = WaitingRoom {
        active: ACTIVE,
        per_minute: PER_MINUTE,
        session_ms: 600_000,
        shards,
        refresh_ms: REFRESH_MS,
        opens_at_ms: None,
        secret: String::new(),
    };
    let mut room = Room {
        shards: (0..shards).map(|s| Shard::new(terms(&config, s))).collect(),
        holder: vec![HashMap::new(); shards as usize],
        visitors: Vec::with_capacity(arrivals.len()),
        starts: Vec::new(),
        gifts: 0,
        calls: 0,
        pulls: 0,
        kinds: [0; 4],
        events: BinaryHeap::new(),
        alarms: vec![None; shards as usize],
    };
    let mut rng = Rng(seed);
    for (id, &at) in arrivals.iter().enumerate() {
        room.events.push(Reverse((at, Event::Arrive(id))));
    }
    room.events.push(Reverse((0, Event::Tick)));
    let mut left = 0;
    while let Some(Reverse((now, event))) = room.events.pop() {
        match event {
            Event::Tick => {
                room.tick(now);
                if left < arrivals.len() {
                    room.events.push(Reverse((now + TICK_MS, Event::Tick)));
                }
            }
            Event::Alarm(s) => {
                if room.alarms[s as usize] == Some(now)
                    || room.alarms[s as usize].is_some_and(|at| at < now)
                {
                    room.alarms[s as usize] = None;
                    let changes = room.shards[s as usize].tick(now, &mut draw());
                    room.note(s, now, changes);
                }
            }
            Event::Arrive(id) => {
                let (a, b) = (
                    rng.next() % u64::from(shards),
                    rng.next() % u64::from(shards),
                );
                let crowd = |s: u64| room.shards[s as usize].status().crowd();
                let roomy = (0..u64::from(shards))
                    .map(|i| (a + i) % u64::from(shards))
                    .find(|&s| !crowd(s).0);
                let shard = roomy.unwrap_or(if crowd(b) < crowd(a) { b } else { a }) as u32;
                room.visitors.push(Visitor {
                    arrive: now,
                    stay: stays[id],
                    shard,
                    holding: Holding::Nothing,
                    called: None,
                });
                let next = match room.visit(id, now) {
                    Turn::Session(_) => (now + stays[id], Event::Leave(id)),
                    _ => (now + REFRESH_MS, Event::Refresh(id)),
                };
                room.events.push(Reverse(next));
            }
            Event::Refresh(id) => {
                let next = match room.visit(id, now) {
                    Turn::Session(_) => (now + room.visitors[id].stay, Event::Leave(id)),
                    _ => (now + REFRESH_MS, Event::Refresh(id)),
                };
                room.events.push(Reverse(next));
            }
            Event::Leave(id) => {
                let v = &room.visitors[id];
                let Holding::Session(session) = v.holding else {
                    unreachable!("only a visitor in leaves")
                };
                let s = v.shard;
                let (_, changes) = room.shards[s as usize].end(now, session, &mut draw());
                room.note(s, now, changes);
                left += 1;
                if left == arrivals.len() {
                    room.events.clear();
                }
            }
        }
    }
    room.starts.sort_unstable();
    for (i, &at) in room.starts.iter().enumerate() {
        let inside = room.starts[i..].partition_point(|&t| t < at + RATE_WINDOW_MS);
        assert!(
            inside <= PER_MINUTE as usize,
            "{inside} starts within 60 s of {at}"
        );
    }
    let called = room
        .visitors
        .iter()
        .map(|v| v.called.unwrap_or(v.arrive))
        .collect();
    if std::env::var("DEBUG").is_ok() {
        eprintln!(
            "COST gifts {} (both, places, starts, none: {:?}) pulls {} calls {} visitors {}",
            room.gifts,
            room.kinds,
            room.pulls,
            room.calls,
            arrivals.len()
        );
    }
    (called, room.calls)
}

/// For each visitor, how many visitors who arrived more than `by` ms
/// later were called strictly before it.
fn overtaken(arrive: &[u64], called: &[u64], by: u64) -> Vec<u64> {
    // Visitors by arrival; a Fenwick tree over call times, filled with the
    // later arrivals as the scan goes from the latest back.
    let mut times: Vec<u64> = called.to_vec();
    times.sort_unstable();
    times.dedup();
    let rank = |t: u64| times.partition_point(|&x| x < t);
    let mut order: Vec<usize> = (0..arrive.len()).collect();
    order.sort_by_key(|&v| Reverse(arrive[v]));
    let mut tree = vec![0u64; times.len() + 1];
    let mut out = vec![0; arrive.len()];
    let mut added = 0;
    for &v in &order {
        while added < order.len() && arrive[order[added]] > arrive[v] + by {
            let mut k = rank(called[order[added]]) + 1;
            while k < tree.len() {
                tree[k] += 1;
                k += k & k.wrapping_neg();
            }
            added += 1;
        }
        let (mut k, mut sum) = (rank(called[v]), 0);
        while k > 0 {
            sum += tree[k];
            k &= k - 1;
        }
        out[v] = sum;
    }
    out
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let mut rng = Rng(42);
    let burst: Vec<u64> = {
        // 20 000 visitors in the first minute of a sale.
        let mut times: Vec<u64> = (0..20_000).map(|_| rng.next() % 60_000).collect();
        times.sort_unstable();
        times
    };
    let steady: Vec<u64> = {
        // 12 a second for 25 minutes: half again what the room lets in.
        let (mut times, mut t) = (Vec::new(), 0.0);
        while t < 1_500_000.0 {
            t += -rng.unit().ln() * 1000.0 / 12.0;
            times.push(t as u64);
        }
        times
    };
    println!("A room of {ACTIVE} places and {PER_MINUTE} a minute; visitors refresh every {} s and stay {SESSION_MEAN_S} s on average.", REFRESH_MS / 1000);
    println!();
    println!("| arrivals | shards | visitors overtaken | by more than 1 s | later arrivals called first: p50 / p99 / max | called later than by one queue: p50 / p99 / max | called earlier: most | gifts per visitor |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for (name, arrivals) in [
        ("20 000 in the first minute", &burst),
        ("12 a second for 25 min", &steady),
    ] {
        let stays: Vec<u64> = arrivals
            .iter()
            .map(|_| ((-rng.unit().ln() * SESSION_MEAN_S).min(500.0) * 1000.0) as u64 + 1)
            .collect();
        let (one, _) = run(arrivals, &stays, 1, 7);
        assert!(
            overtaken(arrivals, &one, 0).iter().all(|&n| n == 0),
            "one shard calls in arrival order"
        );
        let waits: Vec<u64> = one
            .iter()
            .zip(arrivals.iter())
            .map(|(c, a)| c - a)
            .collect();
        notes.push(format!(
            "{name}: {} visitors; one queue for the whole room calls them after {:.0} s on average, {} s at most.",
            arrivals.len(),
            waits.iter().sum::<u64>() as f64 / waits.len() as f64 / 1000.0,
            waits.iter().max().unwrap_or(&0) / 1000
        ));
        for shards in std::env::var("SHARDS")
            .map(|s| vec![s.parse().unwrap()])
            .unwrap_or(vec![2, 8, 32, 64])
        {
            let (called, gifts) = run(arrivals, &stays, shards, 7);
            let share = |by: u64| {
                let passed = overtaken(arrivals, &called, by);
                passed.iter().filter(|&&n| n > 0).count() as f64 / passed.len() as f64 * 100.0
            };
            let mut passed: Vec<i64> = overtaken(arrivals, &called, 0)
                .iter()
                .map(|&n| n as i64)
                .collect();
            passed.sort_unstable();
            let mut late: Vec<i64> = called
                .iter()
                .zip(&one)
                .map(|(&c, &o)| c as i64 - o as i64)
                .collect();
            if std::env::var("DEBUG").is_ok() {
                for t in (0..130_000).step_by(5_000) {
                    eprintln!(
                        "CALLED by {} s: one {} sharded {}",
                        t / 1000,
                        one.iter().filter(|&&c| c <= t).count(),
                        called.iter().filter(|&&c| c <= t).count()
                    );
                }
            }
            if std::env::var("DEBUG").is_ok() {
                for q in [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99] {
                    let i = (late.len() as f64 * q) as usize;
                    eprintln!(
                        "LATE at visitor {i}: {} ms (one queue called at {} s)",
                        late[i],
                        one[i] / 1000
                    );
                }
            }
            late.sort_unstable();
            let s = |ms: i64| format!("{:.1} s", ms as f64 / 1000.0);
            println!(
                "| {name} | {shards} | {:.1} % | {:.2} % | {} / {} / {} | {} / {} / {} | {} | {:.2} |",
                share(0),
                share(1_000),
                percentile(&passed, 0.5),
                percentile(&passed, 0.99),
                passed[passed.len() - 1],
                s(percentile(&late, 0.5)),
                s(percentile(&late, 0.99)),
                s(late[late.len() - 1]),
                s(-late[0]),
                gifts as f64 / arrivals.len() as f64,
            );
        }
    }
    println!();
    for note in notes {
        println!("{note}");
    }
}
