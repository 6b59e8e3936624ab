//! The model check of admission blocks (issues 30, 39 and 40): an event
//! simulation of one key's object and 2 to 5 isolates, the real `Ledger`
//! deciding in the object (as `edge/limiter` serves a call) and the real
//! `LocalBlocks` in each isolate (as `edge/blocks` drives it), over all
//! three algorithms (`sim.rs`).
//!
//! What it throws at them:
//! - per-isolate clocks: any offset, drift of ±500 ppm, ticks of 1 or
//!   3 ms, readings frozen between I/O for up to 5 ms, small steps back
//!   it cannot see (at most one of 4 ms in two seconds) and large ones
//!   it reads across, steps forward;
//! - a latency per message and isolate, with jitter, an object serving
//!   one call at a time (so calls queue), lost and duplicated calls and
//!   answers, and so reordering;
//! - bursts of concurrent requests (reservations among them, settled in
//!   the isolate or at the object), isolates that die holding blocks,
//!   restarts of the object from its rows, its alarm, resets, overrides,
//!   and config changes of the limit (and of a log's window) rolled out
//!   to the isolates one by one, all mid-lease.
//!
//! What it checks, by brute force over every admission's real time (the
//! object's clock; a refunded reservation's unit taken out, an
//! operator's reset starting afresh):
//! - sliding log: no run of units closer together than the shortest
//!   window they were decided under holds more than the highest limit
//!   they were decided under (a block's units are decided under the
//!   policy of its grant: a change applies to blocks out within one
//!   lease);
//! - fixed window: the window open at the object holds no more than that,
//!   and no interval of a window more than twice that;
//! - GCRA: every run of units from the i-th to the j-th spans at least
//!   `(j − i + 1)·T − τ`, τ the highest tolerance they were decided under;
//! - refusals with room left (an exact limiter given the real admissions
//!   would have admitted), per isolate, attributed to the blocks that
//!   made them: none by the refused request's own isolate's blocks, but
//!   for the one exception the sim attributes exactly (`exhausted`: decided
//!   again `AGAIN` times, each refusal racing an ask of its own isolate
//!   that brought a block);
//! - once every isolate has died, the key is whole after the last lease's
//!   end plus a window.

mod sim;

use proptest::prelude::*;
use sim::{Act, Clock, Kind, Setup, Sim};

fn act(isolates: usize) -> impl Strategy<Value = Act> {
    let iso = 0..isolates;
    prop_oneof![
        10 => (iso.clone(), prop_oneof![3 => Just(1u32), 1 => 2u32..9], prop_oneof![6 => Just(1u32), 1 => Just(2u32)], prop::bool::weighted(0.15))
            .prop_map(|(iso, n, cost, reserve)| Act::Arrive { iso, n, cost, reserve }),
        6 => (iso.clone(), prop_oneof![1u64..5, 5u64..40], 5u64..200)
            .prop_map(|(iso, every_ms, count)| Act::Stream { iso, every_ms, count }),
        8 => prop_oneof![Just(0u64), 1u64..10, 10u64..120, 120u64..600].prop_map(|ms| Act::Wait { ms }),
        2 => (iso.clone(), any::<usize>(), any::<bool>()).prop_map(|(iso, pick, keep)| Act::Settle { iso, pick, keep }),
        1 => iso.clone().prop_map(|iso| Act::Die { iso }),
        1 => Just(Act::Restart),
        1 => Just(Act::Sweep),
        1 => Just(Act::Reset),
        1 => (4u64..60, any::<bool>()).prop_map(|(limit, wide)| Act::Config { limit, wide }),
        1 => prop::option::of(4u64..60).prop_map(|limit| Act::Override { limit }),
        1 => (iso, prop_oneof![(-4i64..0), (-3_000i64..-100), (1i64..2_000)]).prop_map(|(iso, ms)| Act::Step { iso, ms }),
    ]
}

fn clock() -> impl Strategy<Value = Clock> {
    (
        -10_000_000i64..10_000_000,
        -500i64..=500,
        prop_oneof![Just(1u64), Just(3u64)],
        0u64..=5,
        prop_oneof![0u64..5, 5u64..100],
    )
        .prop_map(
            |(offset_ms, drift_ppm, tick_ms, stale_ms, latency_ms)| Clock {
                offset_ms,
                drift_ppm,
                tick_ms,
                stale_ms,
                latency_ms,
            },
        )
}

fn scenario() -> impl Strategy<Value = (Setup, Vec<Act>)> {
    (
        prop::sample::select(vec![Kind::Log, Kind::Window, Kind::Cell]),
        4u64..60,
        prop_oneof![Just(200u64), Just(1_000u64)],
        2usize..=5,
        (0u64..4, prop_oneof![Just(0u64), Just(3u64)], any::<u64>()),
    )
        .prop_flat_map(
            |(kind, limit, window_ms, isolates, (service_ms, faults_pct, seed))| {
                (
                    prop::collection::vec(clock(), isolates).prop_map(move |clocks| Setup {
                        kind,
                        limit,
                        window_ms,
                        clocks,
                        service_ms,
                        faults_pct,
                        seed,
                    }),
                    prop::collection::vec(act(isolates), 1..150),
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn real_admissions_keep_the_promise_and_blocks_never_refuse_their_own(
        (setup, acts) in scenario(),
    ) {
        let mut sim = Sim::new(setup);
        for act in acts {
            sim.run(act);
            if let Err(e) = sim.check_open_window() {
                prop_assert!(false, "{}", e);
            }
        }
        sim.settle_down();
        if let Err(e) = sim.check_promise() {
            prop_assert!(false, "{}", e);
        }
        for (iso, stats) in sim.refusals().iter().enumerate() {
            prop_assert_eq!(stats.own, 0, "isolate {}: {:?}", iso, stats);
        }
        if let Err(e) = sim.whole_after_every_isolate_died() {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The counterexamples of issue 39, exactly, on the crate's pure API: the
/// real `Ledger` and an isolate's `BlockHolder`, the object's clock the
/// true one.
mod issue_39 {
    use sluice::isolate::blocks::BlockHolder;
    use sluice::ledger::blocks::BlockAsk;
    use sluice::ledger::{Ask, Ledger};
    use sluice::limit::gcra::GcraPolicy;
    use sluice::limit::{Policy, Spec};

    const T0: u64 = 1_700_000_000_000;

    fn admits(ledger: &mut Ledger, spec: Spec, at: u64) -> bool {
        let specs = [("p".to_string(), spec)];
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        ledger.check(&ask, T0 + at).0.allowed
    }

    fn ask(spec: Spec, holder: &str, rate: u32) -> BlockAsk<'_> {
        BlockAsk {
            policy: "p",
            spec,
            holder,
            rate,
        }
    }

    /// The first: a slow ask (sent at 900, served at 1 000) maps the isolate's
    /// clock 100 ms late, so its report lands in the object's future; the
    /// object must still check the windows that hold `now`, where a block
    /// spent at 80 and never reported counts until 1 085.
    #[test]
    fn a_report_stamped_in_the_objects_future_hides_no_block() {
        let spec = Spec::SlidingLog(Policy::new(100, 1_000).unwrap());
        let mut ledger = Ledger::new();
        for _ in 0..49 {
            assert!(admits(&mut ledger, spec, 60));
        }
        let (c, _) = ledger.grant_block(&ask(spec, "C", 2_000), T0 + 61).unwrap();
        assert_eq!((c.admissions, c.granted_ms), (25, T0 + 61));
        // C spends it at 80 and goes quiet: its block is never reported.
        assert!(admits(&mut ledger, spec, 1_000), "A's call");
        let (a, _) = ledger.grant_block(&ask(spec, "A", 50), T0 + 1_000).unwrap();
        let mut holder = BlockHolder::new("A".into());
        let sent = holder.read(T0 + 900);
        holder.hold("k", &a.grant(), sent);
        assert!(holder.admit("k", &["p"], 1, None, T0 + 1_001).is_some());
        let specs = [("p".to_string(), spec)];
        let taken = ledger.take_reports(&holder.take("k"), &specs, None, T0 + 1_002);
        assert_eq!(taken.refused, 0);
        // [60, 1 060) holds 49 + 25 + A's call and its one admission.
        let more = (1_003..1_060)
            .filter(|&at| admits(&mut ledger, spec, at))
            .count();
        assert!(
            49 + 25 + 2 + more <= 100,
            "{more} more admitted before 1 060"
        );
    }

    /// The second: a reset keeps what outstanding blocks hold, under every
    /// algorithm: a block of 49 spent at once, then the key reset, and the
    /// object asked 200 times within 10 ms.
    #[test]
    fn a_reset_keeps_what_outstanding_blocks_hold() {
        for spec in [
            Spec::SlidingLog(Policy::new(100, 1_000).unwrap()),
            Spec::FixedWindow(Policy::new(100, 1_000).unwrap()),
            Spec::Gcra(GcraPolicy::new(99, 100, 1_000).unwrap()),
        ] {
            let mut ledger = Ledger::new();
            assert!(admits(&mut ledger, spec, 0));
            let (block, _) = ledger.grant_block(&ask(spec, "A", 2_000), T0).unwrap();
            assert_eq!(block.admissions, 49);
            ledger.reset(T0 + 1);
            let direct = (0..200)
                .filter(|&i| admits(&mut ledger, spec, 1 + i / 20))
                .count();
            assert!(
                49 + direct <= 100,
                "{}: {direct} admitted",
                spec.algorithm()
            );
        }
    }

    /// The third: an isolate's reading 5 ms behind the object's at its lease's
    /// end: whatever it admits then falls after the lease in true time,
    /// and a window from there must still hold at most the limit.
    #[test]
    fn a_reading_behind_the_objects_admits_nothing_past_the_lease() {
        let spec = Spec::SlidingLog(Policy::new(10, 1_000).unwrap());
        let specs = [("p".to_string(), spec)];
        let mut ledger = Ledger::new();
        assert!(admits(&mut ledger, spec, 0));
        let (block, _) = ledger.grant_block(&ask(spec, "A", 100), T0).unwrap();
        assert_eq!(block.admissions, 4);
        let end = block.until_ms - T0;
        let mut holder = BlockHolder::new("A".into());
        // No latency: sent and granted at the same moment, both clocks T0.
        let sent = holder.read(T0);
        holder.hold("k", &block.grant(), sent);
        // At true `end + 5` the isolate reads `end`.
        let late = (0..4)
            .filter(|_| holder.admit("k", &["p"], 1, None, T0 + end).is_some())
            .count();
        let taken = ledger.take_reports(&holder.take("k"), &specs, None, T0 + end + 6);
        assert_eq!(taken.refused, 0);
        // [end + 5, end + 1 005) holds those, and what the object admits
        // at end + 1 000.
        let direct = (0..10)
            .filter(|_| admits(&mut ledger, spec, end + 1_000))
            .count();
        assert!(late + direct <= 10, "{late} late and {direct} direct");
    }
}
