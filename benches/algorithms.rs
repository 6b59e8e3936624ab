//! Criterion benchmarks of the limiting algorithms on the host.
//!
//! Each case runs a log in steady state at limit N, so the figures show what
//! one check costs once a key is busy, and whether that grows with N:
//! - `admit_steady`: the window is full and time moves on one millisecond per
//!   check, so every check expires one entry and admits one;
//! - `refuse_full`: the window is full and time stands still, so every check
//!   is refused (and computes when to retry);
//! - `burst_same_ms`: N checks in one millisecond, from an empty log.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice::limit::{Policy, SlidingLog};

const SIZES: [u64; 3] = [10, 1_000, 100_000];

/// A log holding N entries one millisecond apart, its window exactly full.
fn full_log(n: u64) -> (SlidingLog, u64) {
    let mut log = SlidingLog::new(Policy::new(n, n).unwrap());
    for t in 0..n {
        assert!(log.check(t, 1).allowed);
    }
    (log, n)
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
                let mut log = SlidingLog::new(Policy::new(n, 1000).unwrap());
                for _ in 0..n {
                    black_box(log.check(black_box(5), 1));
                }
                log
            });
        });
    }
    group.finish();
}

criterion_group!(benches, sliding_log);
criterion_main!(benches);
