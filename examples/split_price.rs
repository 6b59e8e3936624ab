//! The price of splitting a global quota: how often a split quota refuses a
//! request while the whole still had room, against one exact log.
//!
//! Run with `cargo run --release --example split_price`. It replays the same
//! random arrivals (Poisson, seeded, so every run prints the same table)
//! through one log of N and through K parts with shares summing to N,
//! routed as the worker routes them: a random part, then one other when that
//! part is full. A refusal "with room left" is one where the parts together
//! held fewer than N admissions in the window, so one object would have
//! admitted it.
//!
//! A second table is a flash sale: a quota sold once, in a window longer
//! than the sale, so only the order of arrivals matters, not their rate.
//! There every refusal before the last unit is sold is one with room left:
//! the price of K parts at the end of the sale.

use std::collections::VecDeque;

use sluice::limit::split::{route, share};
use sluice::limit::{Policy, SlidingLog};

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

const LIMIT: u64 = 1_000;
const WINDOW_MS: u64 = 1_000;
const WINDOWS: u64 = 30;

/// Arrival times in ms for `load` times the limit's rate.
fn arrivals(load: f64, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed);
    let per_ms = load * LIMIT as f64 / WINDOW_MS as f64;
    let mut t = 0.0;
    let mut times = Vec::new();
    while t < (WINDOWS * WINDOW_MS) as f64 {
        t += -rng.unit().ln() / per_ms;
        times.push(t as u64);
    }
    times
}

#[derive(Default)]
struct Tally {
    admitted: u64,
    refused: u64,
    refused_with_room: u64,
}

fn run(times: &[u64], parts: u32, fallback: bool, seed: u64) -> Tally {
    let mut rng = Rng(seed);
    let mut logs: Vec<SlidingLog> = (0..parts)
        .map(|i| {
            let policy = Policy::new(share(LIMIT, parts, i), WINDOW_MS).expect("a valid share");
            SlidingLog::new(policy)
        })
        .collect();
    let mut window: VecDeque<u64> = VecDeque::new();
    let mut tally = Tally::default();
    for &now in times {
        while window.front().is_some_and(|&t| t + WINDOW_MS <= now) {
            window.pop_front();
        }
        let (one, other) = route(parts, rng.next() as u32, rng.next() as u32);
        let mut allowed = logs[one as usize].check(now, 1).allowed;
        if !allowed && fallback {
            allowed = other.is_some_and(|o| logs[o as usize].check(now, 1).allowed);
        }
        if allowed {
            tally.admitted += 1;
            window.push_back(now);
            assert!(
                window.len() as u64 <= LIMIT,
                "more than the limit in a window"
            );
        } else {
            tally.refused += 1;
            if (window.len() as u64) < LIMIT {
                tally.refused_with_room += 1;
            }
        }
    }
    tally
}

/// One sell-out of `quota` across `parts` parts, routed as the worker
/// routes them, until every unit is sold: the refusals while some part
/// still had room, and the units left when the first buyer was refused.
fn sell_out(quota: u64, parts: u32, seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut left: Vec<u64> = (0..parts).map(|i| share(quota, parts, i)).collect();
    let (mut sold, mut refused, mut left_at_first) = (0, 0, None);
    while sold < quota {
        let (one, other) = route(parts, rng.next() as u32, rng.next() as u32);
        let part = [Some(one), other]
            .into_iter()
            .flatten()
            .find(|&p| left[p as usize] > 0);
        match part {
            Some(p) => {
                left[p as usize] -= 1;
                sold += 1;
            }
            None => {
                refused += 1;
                left_at_first.get_or_insert(quota - sold);
            }
        }
    }
    (refused, left_at_first.unwrap_or(0))
}

fn sale_table() {
    const RUNS: u64 = 50;
    println!("A flash sale: the quota sold once (the window outlasts the sale), a random part and one other; means of {RUNS} seeded runs.");
    println!();
    println!("| quota | K | refused with room left, per sale | as % of the quota | units left at the first refusal |");
    println!("|---|---|---|---|---|");
    for quota in [500, 10_000] {
        for parts in [1, 2, 4, 8, 16, 32] {
            let (mut refused, mut left) = (0, 0);
            for seed in 0..RUNS {
                let (r, l) = sell_out(quota, parts, 100 + seed);
                refused += r;
                left += l;
            }
            let refused = refused as f64 / RUNS as f64;
            println!(
                "| {quota} | {parts} | {refused:.1} | {:.2}% | {:.1} |",
                100.0 * refused / quota as f64,
                left as f64 / RUNS as f64,
            );
        }
    }
}

fn main() {
    println!("Global limit {LIMIT} per {WINDOW_MS} ms, {WINDOWS} windows of Poisson arrivals.");
    println!();
    println!("| load | K | routing | admitted | vs one object | refused with room left (% of requests) |");
    println!("|---|---|---|---|---|---|");
    for (load, seed) in [(0.8, 1), (1.0, 2), (1.5, 3), (3.0, 4)] {
        let times = arrivals(load, seed);
        let single = run(&times, 1, true, 7);
        assert_eq!(single.refused_with_room, 0, "one exact log wastes nothing");
        for parts in [1, 4, 16] {
            for fallback in [false, true] {
                if parts == 1 && fallback {
                    continue;
                }
                let tally = run(&times, parts, fallback, 7);
                let routing = if parts == 1 {
                    "one object"
                } else if fallback {
                    "random + one other"
                } else {
                    "random only"
                };
                println!(
                    "| {load:.1} | {parts} | {routing} | {} | {:.2}% | {} ({:.2}%) |",
                    tally.admitted,
                    100.0 * tally.admitted as f64 / single.admitted as f64,
                    tally.refused_with_room,
                    100.0 * tally.refused_with_room as f64 / times.len() as f64,
                );
                debug_assert_eq!(tally.admitted + tally.refused, times.len() as u64);
            }
        }
    }
    println!();
    sale_table();
}
