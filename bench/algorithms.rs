//! Criterion benchmarks of the limiting algorithms on the host, with the
//! `governor` crate's keyed GCRA measured in the same run as the reference
//! for what an in-memory check can cost.
//!
//! Each case runs a key in steady state at limit N, so the figures show what
//! one check costs once a key is busy, and whether that grows with N:
//! - `admit_steady`: requests arrive at exactly the limit's rate (N per
//!   N ms), so the key stays full and every check admits one (for the log,
//!   it also expires one entry);
//! - `refuse_full`: the key is full and time stands still, so every check
//!   is refused (and computes when to retry);
//! - `burst_same_ms` (log only): N checks in one millisecond, from empty.
//!
//! Before the benchmarks it prints each algorithm's state bytes per key.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use sluice::limit::gcra::{Gcra, GcraPolicy};
use sluice::limit::{FixedWindow, Policy, SlidingLog};

const SIZES: [u64; 4] = [10, 1_000, 10_000, 100_000];

/// A log holding N entries one millisecond apart, its window exactly full.
fn full_log(n: u64) -> (SlidingLog, u64) {
    let mut log = SlidingLog::new(Policy::new(n, n).expect("a valid policy"));
    for t in 0..n {
        assert!(log.check(t, 1).allowed);
    }
    (log, n)
}

/// GCRA at N per N ms with a burst of N, its burst spent.
fn full_gcra(n: u64) -> (Gcra, u64) {
    let mut gcra = Gcra::new(GcraPolicy::new(n - 1, n, n).expect("a valid policy"));
    assert!(!gcra.check(0, n).limited);
    (gcra, 0)
}

fn sliding_log(c: &mut Criterion) {
    let mut group = c.benchmark_group("sliding_log");
    for n in SIZES {
        group.bench_with_input(BenchmarkId::new("admit_steady", n), &n, |b, &n| {
            let (mut log, mut now) = full_log(n);
            b.iter(|| {
                let decision = log.check(black_box(now), 1);
                now += 1;
                decision
            });
        });
        group.bench_with_input(BenchmarkId::new("refuse_full", n), &n, |b, &n| {
            let (mut log, now) = full_log(n);
            b.iter(|| log.check(black_box(now - 1), 1));
        });
        group.bench_with_input(BenchmarkId::new("burst_same_ms", n), &n, |b, &n| {
            b.iter(|| {
                let mut log = SlidingLog::new(Policy::new(n, 1000).expect("a valid policy"));
                for _ in 0..n {
                    black_box(log.check(black_box(5), 1));
                }
                log
            });
        });
    }
    group.finish();
}

fn fixed_window(c: &mut Criterion) {
    let mut group = c.benchmark_group("fixed_window");
    for n in SIZES {
        group.bench_with_input(BenchmarkId::new("admit_steady", n), &n, |b, &n| {
            let mut window = FixedWindow::new(Policy::new(n, n).expect("a valid policy"));
            let mut now = 0;
            b.iter(|| {
                let decision = window.check(black_box(now), 1);
                now += 1;
                decision
            });
        });
        group.bench_with_input(BenchmarkId::new("refuse_full", n), &n, |b, &n| {
            let mut window = FixedWindow::new(Policy::new(n, n).expect("a valid policy"));
            assert!(window.check(0, u32::try_from(n).expect("n fits")).allowed);
            b.iter(|| window.check(black_box(1), 1));
        });
    }
    group.finish();
}

fn gcra(c: &mut Criterion) {
    let mut group = c.benchmark_group("gcra");
    for n in SIZES {
        group.bench_with_input(BenchmarkId::new("admit_steady", n), &n, |b, &n| {
            let (mut gcra, mut now) = full_gcra(n);
            b.iter(|| {
                now += 1;
                gcra.check(black_box(now), 1)
            });
        });
        group.bench_with_input(BenchmarkId::new("refuse_full", n), &n, |b, &n| {
            let (mut gcra, now) = full_gcra(n);
            b.iter(|| gcra.check(black_box(now), 1));
        });
    }
    group.finish();
}

/// The reference: governor's keyed GCRA (a DashMap of atomic cells) at the
/// same rate, on one key, with its fake clock so time is ours to move.
fn governor_keyed(c: &mut Criterion) {
    let mut group = c.benchmark_group("governor_keyed");
    for n in SIZES {
        let burst = NonZeroU32::new(u32::try_from(n).expect("n fits")).expect("n > 0");
        let quota = Quota::with_period(Duration::from_millis(1))
            .expect("a period")
            .allow_burst(burst);
        group.bench_with_input(BenchmarkId::new("admit_steady", n), &n, |b, _| {
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::dashmap_with_clock(quota, clock.clone());
            while limiter.check_key(&42u64).is_ok() {}
            b.iter(|| {
                clock.advance(Duration::from_millis(1));
                limiter.check_key(black_box(&42u64))
            });
        });
        group.bench_with_input(BenchmarkId::new("refuse_full", n), &n, |b, _| {
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::dashmap_with_clock(quota, clock.clone());
            while limiter.check_key(&42u64).is_ok() {}
            b.iter(|| limiter.check_key(black_box(&42u64)));
        });
    }
    group.finish();
}

/// Memory one key holds, in this process, and in the key object's SQLite.
fn state_bytes() {
    println!("State bytes per key (the struct, plus heap at a full window of N):");
    for n in [10, 1_000, 100_000] {
        let (spread, _) = full_log(n);
        let mut burst = SlidingLog::new(Policy::new(n, 1000).expect("a valid policy"));
        for _ in 0..n {
            burst.check(5, 1);
        }
        println!(
            "  sliding_log N={n}: {} B (N admissions in N distinct ms), {} B (all in one ms); in SQLite one row per distinct ms plus one",
            std::mem::size_of::<SlidingLog>() + spread.heap_bytes(),
            std::mem::size_of::<SlidingLog>() + burst.heap_bytes(),
        );
    }
    println!(
        "  fixed_window: {} B, 1 row in SQLite",
        std::mem::size_of::<FixedWindow>()
    );
    println!("  gcra: {} B, 1 row in SQLite", std::mem::size_of::<Gcra>());
    println!(
        "  governor keyed: {} B of cell per key, plus the key and the map's overhead",
        std::mem::size_of::<u64>()
    );
}

fn main() {
    state_bytes();
    let mut criterion = Criterion::default().configure_from_args();
    sliding_log(&mut criterion);
    fixed_window(&mut criterion);
    gcra(&mut criterion);
    governor_keyed(&mut criterion);
    criterion.final_summary();
}
