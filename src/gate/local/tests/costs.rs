//! What a hot key's decisions cost its object (issue 30: at most 50 calls
//! and 50 rows written per 1 000 decisions admitted from blocks): one
//! isolate's blocks and the key's ledger, the clock injected, every call
//! (checks and background reports) and every row it writes counted.
//!
//! A block lasts at most one lease (`MAX_LEASE_MS`, 1 s) and costs one
//! call that writes two rows (`ledger::blocks::calls`), so `R` decisions a
//! second cost about `1 000 / R` calls and twice as many rows per 1 000
//! decisions, once the key is hot: 10 and 20 at 100 a second.

use super::*;

/// Calls and rows written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Cost {
    calls: usize,
    rows: usize,
}

/// `n` decisions of `request`'s key at `rate` a second from `from`, each
/// interval drawn around the mean (±50 %, seeded) when `jitter`: their
/// cost, and when they ended.
fn run(
    blocks: &mut LocalBlocks,
    ledger: &mut Ledger,
    (n, rate, jitter): (u64, u64, bool),
    from: u64,
) -> (Cost, u64) {
    let request = CheckRequest::new("k", &specs(1_000_000, 60_000), 1, None);
    let mean_us = 1_000_000 / rate;
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut cost = Cost::default();
    let mut now_us = from * 1_000;
    for _ in 0..n {
        let now = now_us / 1_000;
        let decided = blocks.decide(&request, true, now);
        for due in blocks.due(now, "k") {
            cost.calls += 1;
            let (outcome, rows) = serve_counting(ledger, &due.request, now);
            blocks.answered(&due, Some(&outcome));
            cost.rows += rows;
        }
        if let Local::Call(call) = decided {
            let (outcome, rows) = serve_counting(ledger, &call.request, now);
            assert!(outcome.allowed);
            blocks.answered(&call, Some(&outcome));
            cost.calls += 1;
            cost.rows += rows;
        }
        let step = if jitter {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            mean_us / 2 + rng % (mean_us + 1)
        } else {
            mean_us
        };
        now_us += step;
    }
    (cost, now_us / 1_000)
}

/// 1 000 decisions at `rate` a second once the key is hot (a second of
/// them first, not counted).
fn hot(rate: u64, jitter: bool) -> Cost {
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    let (_, warm) = run(&mut blocks, &mut ledger, (rate, rate, jitter), T0);
    run(&mut blocks, &mut ledger, (1_000, rate, jitter), warm).0
}

#[test]
fn a_hot_key_costs_one_call_and_two_rows_per_block() {
    for (rate, calls) in [(1_000, 2), (500, 3), (200, 6), (100, 11), (50, 21)] {
        for jitter in [false, true] {
            let cost = hot(rate, jitter);
            println!("{rate}/s, jitter {jitter}: {cost:?}");
            assert!(cost.calls <= calls, "{rate}/s, jitter {jitter}: {cost:?}");
            assert!(
                cost.rows <= 2 * cost.calls,
                "{rate}/s, jitter {jitter}: {cost:?}"
            );
        }
    }
}

#[test]
fn a_key_hot_from_cold_costs_a_few_calls_more() {
    // The first four decisions, before the key is hot, are one call each;
    // the fifth asks at the key's pace so far (`isolate::heat`), so the
    // second block is a lease's worth of the rate already.
    for (rate, calls) in [(1_000, 8), (100, 16), (50, 26)] {
        let mut blocks = LocalBlocks::new("iso".into());
        let mut ledger = Ledger::new();
        let (cost, _) = run(&mut blocks, &mut ledger, (1_000, rate, true), T0);
        println!("from cold, {rate}/s: {cost:?}");
        assert!(cost.calls <= calls, "{rate}/s: {cost:?}");
        assert!(cost.rows <= 2 * cost.calls, "{rate}/s: {cost:?}");
    }
}
