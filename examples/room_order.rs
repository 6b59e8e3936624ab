//! How far from global arrival order a sharded waiting room calls its
//! visitors. Each shard is first come, first served; across shards a
//! visitor's turn depends on its own shard's queue, so a later arrival in
//! a short queue can be called before an earlier one in a long queue.
//!
//! Run with `cargo run --release --example room_order`. It replays the
//! same seeded arrivals through rooms of 1 to 64 shards (the shards are
//! `sluice::room::shard::Shard`, the code the Durable Objects run) with
//! the same total places and rate. Visitors land on a random shard, or on
//! the one of two random shards with fewer waiting (what the worker does),
//! refresh every 20 s, stay a random while once in (exponential, mean 60
//! s) and leave through the origin. A visitor is *called* when its shard
//! offers its place (or lets it straight in); with one shard, calls follow
//! arrival order exactly. The table says how many visitors a later arrival
//! was called before, and how much later each visitor was called than one
//! queue for the whole room would have called it.

use std::collections::HashMap;

use sluice::config::room::WaitingRoom;
use sluice::room::shard::{Change, Holding, Number, Shard, Turn};
use sluice::room::visit::terms;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

const ACTIVE: u32 = 500;
const PER_MINUTE: u32 = 600;
const REFRESH_S: u64 = 20;
const SESSION_MEAN_S: f64 = 60.0;

struct Visitor {
    arrive_s: u64,
    shard: u32,
    holding: Holding,
    called_s: Option<u64>,
    leave_s: Option<u64>,
}

/// The second each visitor (in arrival order) was called. A newcomer goes
/// to a random shard or, with `two_choices`, to the one of two random
/// shards with fewer waiting, as the worker places it (by its views of
/// the shards, which here are exact).
fn run(arrivals: &[u64], shards: u32, two_choices: bool, seed: u64) -> Vec<u64> {
    let room = WaitingRoom {
        active: ACTIVE,
        per_minute: PER_MINUTE,
        session_ms: 600_000,
        shards,
        refresh_ms: REFRESH_S * 1000,
        opens_at_ms: None,
        secret: String::new(),
        pass_secret: String::new(),
        work_bits: None,
    };
    let mut rooms: Vec<Shard> = (0..shards).map(|s| Shard::new(terms(&room, s))).collect();
    let mut rng = Rng(seed);
    let mut visitors: Vec<Visitor> = Vec::with_capacity(arrivals.len());
    // Per shard, which visitor holds each place, and when places were called.
    let mut holder: Vec<HashMap<u64, usize>> = vec![HashMap::new(); shards as usize];
    let mut next_arrival = 0;
    let mut in_room = 0usize;
    let mut t = 0u64;
    let mut draw = || 0;
    while next_arrival < arrivals.len() || in_room > 0 {
        let now = t * 1000;
        let mut changes: Vec<(u32, Change)> = Vec::new();
        for (s, shard) in (0u32..).zip(rooms.iter_mut()) {
            changes.extend(shard.tick(now, &mut draw).into_iter().map(|c| (s, c)));
        }
        while next_arrival < arrivals.len() && arrivals[next_arrival] <= t {
            let a = (rng.next() % u64::from(shards)) as u32;
            let b = (rng.next() % u64::from(shards)) as u32;
            let waiting = |s: u32| rooms[s as usize].status().waiting();
            let shard = if two_choices && waiting(b) < waiting(a) {
                b
            } else {
                a
            };
            let (turn, done) = rooms[shard as usize].visit(now, Holding::Nothing, &mut draw);
            changes.extend(done.into_iter().map(|c| (shard, c)));
            let id = visitors.len();
            visitors.push(Visitor {
                arrive_s: t,
                shard,
                holding: Holding::Nothing,
                called_s: None,
                leave_s: None,
            });
            settle(&mut visitors[id], turn, t, &mut rng, true);
            if let Turn::Session(s) = turn {
                visitors[id].called_s = Some(t);
                holder[shard as usize].insert(s.id, id);
            }
            if let Holding::Ticket(Number::Place(p)) = visitors[id].holding {
                holder[shard as usize].insert(p, id);
            }
            in_room += 1;
            next_arrival += 1;
        }
        #[allow(clippy::needless_range_loop)] // `visitors[id]` is changed inside.
        for id in 0..visitors.len() {
            let v = &visitors[id];
            let due = (t + id as u64).is_multiple_of(REFRESH_S);
            let shard = v.shard as usize;
            match (v.holding, v.leave_s) {
                (Holding::Session(sid), Some(leave)) if leave <= t => {
                    let (_, done) = rooms[shard].end(now, sid, &mut draw);
                    changes.extend(done.into_iter().map(|c| (v.shard, c)));
                    visitors[id].holding = Holding::Nothing;
                    visitors[id].leave_s = None;
                    in_room -= 1;
                }
                (Holding::Ticket(number), _) if due => {
                    let (turn, done) = rooms[shard].visit(now, Holding::Ticket(number), &mut draw);
                    changes.extend(done.into_iter().map(|c| (v.shard, c)));
                    settle(&mut visitors[id], turn, t, &mut rng, false);
                }
                _ => {}
            }
        }
        for (shard, change) in changes {
            if let Change::Offer { place, .. } = change {
                if let Some(&id) = holder[shard as usize].get(&place) {
                    visitors[id].called_s.get_or_insert(t);
                }
            }
        }
        t += 1;
    }
    visitors
        .iter()
        .map(|v| v.called_s.unwrap_or(v.arrive_s))
        .collect()
}

/// A visitor's new state after its shard's answer.
fn settle(v: &mut Visitor, turn: Turn, t: u64, rng: &mut Rng, first: bool) {
    match turn {
        Turn::Session(s) => {
            if !matches!(v.holding, Holding::Session(_)) {
                let stay = (-rng.unit().ln() * SESSION_MEAN_S).min(500.0) as u64;
                v.leave_s = Some(t + stay.max(1));
            }
            v.holding = Holding::Session(s.id);
        }
        Turn::Wait { number, fresh } => {
            assert!(
                first || !fresh,
                "a visitor who keeps refreshing never loses its place"
            );
            v.holding = Holding::Ticket(number);
        }
        Turn::Closed | Turn::NotOpen => unreachable!("the simulated room is open, never closed"),
    }
}

/// For each visitor, how many visitors who arrived strictly later were
/// called strictly before it.
fn overtaken(arrive: &[u64], called: &[u64]) -> Vec<u64> {
    let n = arrive.len();
    let mut order: Vec<usize> = (0..n).collect();
    // Latest arrival first: when a visitor is looked at, every later
    // arrival is in the tree.
    order.sort_by(|&a, &b| arrive[b].cmp(&arrive[a]));
    let max_t = called.iter().copied().max().unwrap_or(0) as usize + 2;
    let mut tree = vec![0u64; max_t + 1];
    let mut out = vec![0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j < n && arrive[order[j]] == arrive[order[i]] {
            j += 1;
        }
        for &v in &order[i..j] {
            // Later arrivals called at or before called[v] - 1.
            let mut k = called[v] as usize;
            let mut sum = 0;
            while k > 0 {
                sum += tree[k];
                k &= k - 1;
            }
            out[v] = sum;
        }
        for &v in &order[i..j] {
            let mut k = called[v] as usize + 1;
            while k <= max_t {
                tree[k] += 1;
                k += k & k.wrapping_neg();
            }
        }
        i = j;
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
        let mut times: Vec<u64> = (0..20_000).map(|_| rng.next() % 60).collect();
        times.sort_unstable();
        times
    };
    let steady: Vec<u64> = {
        // 12 a second for 25 minutes: half again what the room lets in.
        let mut times = Vec::new();
        let mut t = 0.0;
        while t < 1_500.0 {
            t += -rng.unit().ln() / 12.0;
            times.push(t as u64);
        }
        times
    };
    println!("A room of {ACTIVE} places and {PER_MINUTE} a minute; visitors refresh every {REFRESH_S} s and stay {SESSION_MEAN_S} s on average.");
    println!();
    println!("| arrivals | shards | placed | visitors overtaken | later arrivals called first: p50 / p99 / max | called later than by one queue: p50 / p99 / max | called earlier: most |");
    println!("|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for (name, arrivals) in [
        ("20 000 in the first minute", &burst),
        ("12 a second for 25 min", &steady),
    ] {
        let one = run(arrivals, 1, false, 7);
        assert!(
            overtaken(arrivals, &one).iter().all(|&n| n == 0),
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
            waits.iter().sum::<u64>() as f64 / waits.len() as f64,
            waits.iter().max().unwrap_or(&0)
        ));
        let runs = [
            (2, false),
            (2, true),
            (8, false),
            (8, true),
            (32, false),
            (32, true),
            (64, false),
            (64, true),
        ];
        for (shards, two_choices) in runs {
            let called = run(arrivals, shards, two_choices, 7);
            let placed = if two_choices {
                "fewer waiting of two"
            } else {
                "at random"
            };
            let mut passed: Vec<i64> = overtaken(arrivals, &called)
                .iter()
                .map(|&n| n as i64)
                .collect();
            let share = passed.iter().filter(|&&n| n > 0).count() as f64 / passed.len() as f64;
            passed.sort_unstable();
            let mut late: Vec<i64> = called
                .iter()
                .zip(&one)
                .map(|(&c, &o)| c as i64 - o as i64)
                .collect();
            late.sort_unstable();
            println!(
                "| {name} | {shards} | {placed} | {:.1} % | {} / {} / {} | {} s / {} s / {} s | {} s |",
                100.0 * share,
                percentile(&passed, 0.5),
                percentile(&passed, 0.99),
                passed[passed.len() - 1],
                percentile(&late, 0.5),
                percentile(&late, 0.99),
                late[late.len() - 1],
                -late[0],
            );
        }
    }
    println!();
    for note in notes {
        println!("{note}");
    }
}
